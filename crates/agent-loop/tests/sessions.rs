//! Session logs, replay to cards, resume, job wake-ups, and the pairing property.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use agent_loop::{
    Agent, AgentDirectory, CardTracker, Message, SessionLog, TurnEndReason, replay_cards,
};
use dsh_tools::jobs::{
    JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart, JobStatus, JobsConfig, NoticeDelivery,
};
use dsh_tools::{InjectedContext, ToolError, ToolRegistry};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{assert_paired, echo, tool};

/// A registry with `echo`, a tool that injects context, and one that fails.
fn session_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    registry
        .register(tool("remind", false, |_, exec| async move {
            let agent = exec.agent().unwrap();
            agent
                .inject(InjectedContext::from_plugin(
                    "reminders",
                    "remember to water the plants",
                ))
                .unwrap();
            Ok(json!("reminder set"))
        }))
        .unwrap();
    registry
        .register(tool("break", false, |_, _| async {
            Err(ToolError::failed("the disk is on fire"))
        }))
        .unwrap();
    registry
}

fn session_script() -> MockAdapter {
    MockAdapter::new([
        Step::from(
            Response::calls([
                ScriptedCall::json("c1", "echo", json!({"text": "hello"})),
                ScriptedCall::json("c2", "remind", json!({})),
            ])
            .with_text("Let me do two things.")
            .with_reasoning("Echo, then remind."),
        ),
        Response::calls([ScriptedCall::json("c3", "break", json!({}))]).into(),
        Response::text("All done, except the broken part.").into(),
    ])
}

/// Runs the reference session, logging to `path` and computing cards live.
async fn reference_session(
    path: &std::path::Path,
) -> (Agent, MockAdapter, Vec<agent_loop::CallCards>) {
    let registry = session_registry();
    let mock = session_script();
    let tracker = Arc::new(Mutex::new(CardTracker::new(registry.clone(), None)));
    let live = Arc::clone(&tracker);
    let agent = Agent::builder(registry, Arc::new(mock.clone()))
        .session_id("s1")
        .cwd("/work")
        .log(path)
        .subscriber(move |record| live.lock().unwrap().observe(&record.event))
        .build()
        .unwrap();
    let outcome = agent
        .run("Please say hello and set a reminder.")
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let cards = tracker.lock().unwrap().cards().to_vec();
    (agent, mock, cards)
}

fn redacted(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            assert!(
                humantime::parse_rfc3339(value["ts"].as_str().unwrap()).is_ok(),
                "ts is not RFC 3339: {}",
                value["ts"]
            );
            value["ts"] = json!("[ts]");
            value
        })
        .collect()
}

#[tokio::test]
async fn a_full_session_log_has_the_documented_events_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    reference_session(&path).await;
    let text = std::fs::read_to_string(&path).unwrap();
    // Pretty JSON text, not `assert_json_snapshot!`: insta's own serialiser does not know
    // serde_json's arbitrary-precision numbers.
    let pretty = serde_json::to_string_pretty(&redacted(&text)).unwrap();
    insta::assert_snapshot!("session_log", pretty);
}

#[tokio::test]
async fn replay_gives_the_live_cards_and_tolerates_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let (_agent, _mock, live) = reference_session(&path).await;
    assert_eq!(live.len(), 3);
    let log = SessionLog::read(&path).unwrap();
    assert!(log.skipped.is_empty());
    assert_eq!(replay_cards(&session_registry(), &log.events), live);

    // Garbage in the middle and a last line cut short (as after a crash).
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let last = lines.pop().unwrap();
    let cut = &last[..last.len() / 2];
    lines.insert(3, "this is not json at all");
    let damaged = format!("{}\n{cut}", lines.join("\n"));
    let damaged_log = SessionLog::parse(&damaged);
    assert_eq!(damaged_log.skipped.len(), 2, "{:?}", damaged_log.skipped);
    assert_eq!(damaged_log.skipped[0].line, 4);
    assert_eq!(damaged_log.events.len(), log.events.len() - 1);
    assert_eq!(replay_cards(&session_registry(), &damaged_log.events), live);
}

#[tokio::test]
async fn resuming_a_log_continues_with_the_same_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let (agent, _mock, _) = reference_session(&path).await;
    let history = agent.history();
    agent.dispose().await;

    let registry = session_registry();
    let mock = MockAdapter::new([Response::text("Welcome back.")]);
    let resumed = Agent::builder(registry, Arc::new(mock.clone()))
        .resume(SessionLog::read(&path).unwrap())
        .log(&path)
        .build()
        .unwrap();
    assert_eq!(resumed.session_id(), "s1");
    assert_eq!(resumed.cwd(), std::path::Path::new("/work"));
    assert_eq!(resumed.history(), history);
    resumed.run("And now?").await.unwrap();
    let request = &mock.requests()[0];
    assert_eq!(request.messages[..history.len()], history[..]);
    assert_eq!(request.messages[history.len()], Message::user("And now?"));
    // The resumed log carries on: sequence numbers keep increasing, one session/start.
    let log = SessionLog::read(&path).unwrap();
    let seqs: Vec<u64> = log.events.iter().map(|r| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(
        log.events
            .iter()
            .filter(|r| r.event.kind() == "session/start")
            .count(),
        1
    );
}

#[tokio::test]
async fn context_injected_after_the_last_request_is_pending_after_resume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let registry = ToolRegistry::new();
    let agent = Agent::builder(
        registry.clone(),
        Arc::new(MockAdapter::new([Response::text("ok")])),
    )
    .session_id("s9")
    .log(&path)
    .build()
    .unwrap();
    agent.run("hi").await.unwrap();
    agent
        .inject(InjectedContext::from_plugin("bash", "late notice"))
        .unwrap();
    agent.dispose().await;
    let mock = MockAdapter::new([Response::text("seen")]);
    let resumed = Agent::builder(registry, Arc::new(mock.clone()))
        .resume(SessionLog::read(&path).unwrap())
        .build()
        .unwrap();
    resumed.run("next").await.unwrap();
    let messages = &mock.requests()[0].messages;
    assert_eq!(
        messages.last().unwrap(),
        &Message::User {
            content: "late notice".into(),
            source: Some(dsh_tools::ContextSource::plugin("bash"))
        }
    );
}

// ----- Jobs ---------------------------------------------------------------------------------

/// A `spawn` tool that starts a job finishing when `release` is notified.
fn job_registry(jobs: &JobRuntime, release: &Arc<tokio::sync::Notify>) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .provide(Arc::new(jobs.clone()))
        .unwrap();
    std::mem::forget(jobs.attach_controller());
    let release = Arc::clone(release);
    registry
        .register(tool("spawn", false, move |_, exec| {
            let release = Arc::clone(&release);
            async move {
                let jobs = exec.service::<JobRuntime>().unwrap();
                let cancelled = Arc::new(tokio::sync::Notify::new());
                let on_cancel = Arc::clone(&cancelled);
                let id = jobs
                    .start(
                        JobStart::new("task", "long task", move || {
                            Ok(JobHooks::new(
                                move |_| on_cancel.notify_one(),
                                async move {
                                    tokio::select! {
                                        () = release.notified() => Ok(JobOutcome::new(JobEnd::Completed).with_detail("exit code: 0")),
                                        () = cancelled.notified() => Ok(JobOutcome::new(JobEnd::Killed)),
                                    }
                                },
                            ))
                        })
                        .owner(exec.agent().unwrap().clone()),
                    )
                    .map_err(ToolError::from_error)?;
                Ok(json!({"kind": "background", "jobId": id}))
            }
        }))
        .unwrap();
    registry
}

#[tokio::test]
async fn a_finished_job_wakes_an_idle_agent_for_its_notice() {
    let jobs = JobRuntime::new(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let directory = AgentDirectory::new();
    jobs.set_turn_opener(Arc::new(directory.clone()));
    let release = Arc::new(tokio::sync::Notify::new());
    let registry = job_registry(&jobs, &release);
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "spawn",
            json!({}),
        )])),
        Response::text("Started it.").into(),
        Response::text("The task finished.").into(),
    ]);
    let recorder = support::Recorder::default();
    let sink = recorder.clone();
    let agent = Agent::builder(registry, Arc::new(mock.clone()))
        .session_id("s1")
        .jobs(jobs.clone())
        .subscriber(move |r| sink.0.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    directory.insert(&agent);
    agent.run("start the task").await.unwrap();
    assert_eq!(mock.requests().len(), 2);
    release.notify_one();
    tokio::time::timeout(Duration::from_secs(5), async {
        while mock.requests().len() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the idle agent was not woken");
    directory.wait_woken().await;
    let woken = &mock.requests()[2];
    let notice = "background job task-1 (task: long task) finished [status: completed, exit code: 0]. Read its output with job_output.";
    assert!(
        woken
            .messages
            .iter()
            .any(|m| matches!(m, Message::User { content, source: Some(_) } if content == notice)),
        "{:?}",
        woken.messages
    );
    let kinds = recorder.kinds();
    let job_end = kinds.iter().position(|k| *k == "job/end").unwrap();
    let inject = kinds.iter().rposition(|k| *k == "context/inject").unwrap();
    assert!(job_end < inject, "{kinds:?}");
    assert_eq!(recorder.turn_ends().len(), 2);
    mock.assert_exhausted();
}

#[tokio::test]
async fn disposing_an_agent_cancels_its_jobs() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let release = Arc::new(tokio::sync::Notify::new());
    let registry = job_registry(&jobs, &release);
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "spawn",
            json!({}),
        )])),
        Response::text("Started.").into(),
    ]);
    let agent = Agent::builder(registry, Arc::new(mock))
        .session_id("s1")
        .jobs(jobs.clone())
        .build()
        .unwrap();
    agent.run("start").await.unwrap();
    assert_eq!(
        jobs.get("task-1", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    agent.dispose().await;
    let snapshot = jobs.get("task-1", Some("s1")).unwrap();
    assert_eq!(snapshot.status, JobStatus::Killed);
    assert!(snapshot.reported);
}

// ----- The pairing property -----------------------------------------------------------------

#[derive(Clone, Debug)]
enum CallKind {
    Ok,
    Fail,
    Panic,
    Unknown,
    Malformed,
    CancelTurn,
    SafeOk,
}

fn call_kind() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        Just(CallKind::Ok),
        Just(CallKind::Fail),
        Just(CallKind::Panic),
        Just(CallKind::Unknown),
        Just(CallKind::Malformed),
        Just(CallKind::CancelTurn),
        Just(CallKind::SafeOk),
    ]
}

fn script() -> impl Strategy<Value = Vec<Vec<CallKind>>> {
    prop::collection::vec(prop::collection::vec(call_kind(), 0..4), 1..5)
}

fn run_script(steps: Vec<Vec<CallKind>>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let registry = ToolRegistry::new();
        let slot: Arc<Mutex<Option<Agent>>> = Arc::new(Mutex::new(None));
        registry
            .register(tool("ok", false, |_, _| async { Ok(json!("fine")) }))
            .unwrap();
        registry
            .register(tool("safe", true, |_, _| async { Ok(json!("fine")) }))
            .unwrap();
        registry
            .register(tool("fail", false, |_, _| async {
                Err(ToolError::failed("no"))
            }))
            .unwrap();
        registry
            .register(tool("panic", true, |_, _| async {
                panic!("tool exploded")
            }))
            .unwrap();
        {
            let slot = Arc::clone(&slot);
            registry
                .register(tool("cancel", false, move |_, _| {
                    let slot = Arc::clone(&slot);
                    async move {
                        if let Some(agent) = slot.lock().unwrap().as_ref() {
                            agent.cancel_turn();
                        }
                        Ok(json!("cancelled the turn"))
                    }
                }))
                .unwrap();
        }
        let mut scripted: Vec<Step> = Vec::new();
        for (s, calls) in steps.iter().enumerate() {
            if calls.is_empty() {
                scripted.push(Response::text(format!("step {s}")).into());
                continue;
            }
            let calls = calls.iter().enumerate().map(|(c, kind)| {
                let id = format!("c{s}-{c}");
                match kind {
                    CallKind::Ok => ScriptedCall::json(id, "ok", json!({})),
                    CallKind::SafeOk => ScriptedCall::json(id, "safe", json!({})),
                    CallKind::Fail => ScriptedCall::json(id, "fail", json!({})),
                    CallKind::Panic => ScriptedCall::json(id, "panic", json!({})),
                    CallKind::Unknown => ScriptedCall::json(id, "nope", json!({})),
                    CallKind::Malformed => ScriptedCall::raw(id, "ok", "{oops"),
                    CallKind::CancelTurn => ScriptedCall::json(id, "cancel", json!({})),
                }
            });
            scripted.push(Response::calls(calls).into());
        }
        let mock = MockAdapter::with_function({
            let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(scripted)));
            move |_| {
                queue
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or_else(|| Response::text("the end").into())
            }
        })
        .chunk_bytes(3);
        let agent = Agent::builder(registry, Arc::new(mock.clone()))
            .max_steps(6)
            .build()
            .unwrap();
        *slot.lock().unwrap() = Some(agent.clone());
        agent.run("go").await.unwrap();
        agent.run("check").await.unwrap();
        for request in mock.requests() {
            assert_paired(&request.messages);
        }
        *slot.lock().unwrap() = None;
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_tool_call_in_every_history_has_exactly_one_result(steps in script()) {
        run_script(steps);
    }
}
