//! Session logs, replay to cards, resume, job wake-ups, and the pairing property.

use crate::support;

use agent_loop::{
    Agent, AgentDirectory, AgentError, AssistantToolCall, CardTracker, Message, SessionEvent,
    SessionLog, TurnEndReason, replay_cards,
};
use dsh_test_support::{echo, tool};
use dsh_tools::jobs::{
    JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart, JobStatus, JobsConfig, NoticeDelivery,
    TurnOpener,
};
use dsh_tools::json::JsonValue;
use dsh_tools::{ContentBlock, InjectedContext, ToolError, ToolRegistry};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{assert_paired, recorded};
use tokio_util::sync::CancellationToken;

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

/// The log's lines held exactly (fields in the order they were written), timestamps redacted.
fn redacted(text: &str) -> Vec<JsonValue> {
    text.lines()
        .map(|line| {
            let JsonValue::Object(mut object) = JsonValue::parse(line).unwrap() else {
                panic!("a log line is an object: {line}");
            };
            let ts = object.get("ts").and_then(JsonValue::as_str).unwrap();
            assert!(
                humantime::parse_rfc3339(ts).is_ok(),
                "ts is not RFC 3339: {ts}"
            );
            object.insert("ts", "[ts]");
            JsonValue::Object(object)
        })
        .collect()
}

#[tokio::test]
async fn a_full_session_log_has_the_documented_events_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    reference_session(&path).await;
    let text = std::fs::read_to_string(&path).unwrap();
    // Pretty JSON text, not `assert_json_snapshot!`: insta's own serialiser would sort the
    // fields and could not write exact numbers.
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
async fn resuming_a_log_cut_mid_turn_answers_the_calls_left_open() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("session.jsonl");
    let (agent, _mock, _) = reference_session(&full).await;
    agent.dispose().await;
    // Cut after the first result (seq 7): `c2` was called and never answered.
    let text = std::fs::read_to_string(&full).unwrap();
    let kept: Vec<&str> = text.lines().take(7).collect();
    assert!(
        kept[6].contains(r#""type":"tool/result","callId":"c1""#),
        "{}",
        kept[6]
    );
    let path = dir.path().join("cut.jsonl");
    std::fs::write(&path, format!("{}\n", kept.join("\n"))).unwrap();

    let mock = MockAdapter::new([Response::text("Picking up again.")]);
    let resumed = Agent::builder(session_registry(), Arc::new(mock.clone()))
        .resume(SessionLog::read(&path).unwrap())
        .log(&path)
        .build()
        .unwrap();
    resumed.run("Where were we?").await.unwrap();
    let messages = mock.requests()[0].messages.clone();
    assert_paired(&messages);
    let call = |id: &str, name: &str, arguments: &str| AssistantToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    };
    assert_eq!(
        messages,
        vec![
            Message::user("Please say hello and set a reminder."),
            Message::Assistant {
                text: "Let me do two things.".into(),
                reasoning: Some("Echo, then remind.".into()),
                tool_calls: vec![
                    call("c1", "echo", r#"{"text":"hello"}"#),
                    call("c2", "remind", "{}"),
                ],
            },
            Message::Tool {
                call_id: "c1".into(),
                content: vec![ContentBlock::text("hello")],
                is_error: false,
            },
            Message::Tool {
                call_id: "c2".into(),
                content: vec![ContentBlock::text(
                    "Error: the session ended before this call returned"
                )],
                is_error: true,
            },
            Message::user("Where were we?"),
        ]
    );
    resumed.dispose().await;

    // The continued log resumes again into a paired history: the missing result goes where
    // the call was made, not after everything the resumed session added.
    let again = Agent::builder(
        session_registry(),
        Arc::new(MockAdapter::new(Vec::<Step>::new())),
    )
    .resume(SessionLog::read(&path).unwrap())
    .build()
    .unwrap();
    let history = again.history();
    assert_paired(&history);
    assert_eq!(history[..messages.len()], messages[..]);
    assert_eq!(history.len(), messages.len() + 1);
}

#[tokio::test]
async fn a_log_that_cannot_be_opened_fails_the_build_and_leaves_the_session_free() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("session.jsonl");
    let registry = ToolRegistry::new();
    let mock = Arc::new(MockAdapter::new(Vec::<Step>::new()));
    let error = Agent::builder(registry.clone(), mock.clone())
        .session_id("s1")
        .log(&missing)
        .build()
        .unwrap_err();
    let AgentError::Log { path, source } = &error else {
        panic!("expected a log error, got {error:?}");
    };
    assert_eq!(path, &missing);
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(
        error.to_string(),
        format!(
            "cannot open the session log {}: {source}",
            missing.display()
        )
    );
    // Nothing of the failed agent is left registered under its session id.
    assert!(registry.existing_agent_scope("s1").is_none());
    Agent::builder(registry, mock)
        .session_id("s1")
        .build()
        .unwrap();
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

/// A script that calls `spawn` once, then answers with each of `texts`.
fn spawn_then(texts: &[&str]) -> MockAdapter {
    let mut steps = vec![Step::from(Response::calls([ScriptedCall::json(
        "c1",
        "spawn",
        json!({}),
    )]))];
    steps.extend(texts.iter().map(|text| Step::from(Response::text(*text))));
    MockAdapter::new(steps)
}

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
    let mock = spawn_then(&["Started it.", "The task finished."]);
    let (turn_ended, mut turn_ends) = tokio::sync::mpsc::unbounded_channel();
    let (agent, recorder) = recorded(
        support::builder(&registry, &mock)
            .jobs(jobs.clone())
            .subscriber(move |record| {
                if let SessionEvent::TurnEnd { .. } = record.event {
                    let _ = turn_ended.send(record.event.clone());
                }
            }),
    );
    directory.insert(&agent);
    agent.run("start the task").await.unwrap();
    assert_eq!(mock.requests().len(), 2);
    turn_ends.recv().await.unwrap();
    release.notify_one();
    let woken = tokio::time::timeout(Duration::from_secs(10), turn_ends.recv())
        .await
        .expect("the idle agent was not woken");
    assert_eq!(
        woken,
        Some(SessionEvent::TurnEnd {
            reason: TurnEndReason::Completed,
            steps: 1
        })
    );
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
    let mock = spawn_then(&["Started."]);
    let (agent, recorder) = recorded(support::builder(&registry, &mock).jobs(jobs.clone()));
    agent.run("start").await.unwrap();
    assert_eq!(
        jobs.get("task-1", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    agent.dispose().await;
    let snapshot = jobs.get("task-1", Some("s1")).unwrap();
    assert_eq!(snapshot.status, JobStatus::Killed);
    assert!(snapshot.reported);
    // The job killed by the disposal is still recorded.
    assert_eq!(
        recorder.of_kind("job/end"),
        vec![SessionEvent::JobEnd {
            job_id: "task-1".into(),
            status: JobStatus::Killed,
            detail: None,
        }]
    );
}

#[tokio::test]
async fn dropping_an_agent_undisposed_frees_its_session_and_cancels_its_jobs() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let release = Arc::new(tokio::sync::Notify::new());
    let registry = job_registry(&jobs, &release);
    let mock = spawn_then(&["Started."]);
    let (agent, _) = recorded(support::builder(&registry, &mock).jobs(jobs.clone()));
    agent.scope().register(echo()).unwrap();
    agent.run("start").await.unwrap();
    assert_eq!(
        jobs.get("task-1", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    drop(agent);
    assert!(registry.existing_agent_scope("s1").is_none());
    assert!(registry.get("echo", Some("s1")).is_none());
    let again = Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .session_id("s1")
        .build();
    assert!(again.is_ok(), "{again:?}");
    let settled = jobs
        .wait(
            "task-1",
            Duration::from_secs(10),
            Some("s1"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(settled.status, JobStatus::Killed);
}

#[tokio::test]
async fn a_notice_arriving_as_a_turn_ends_finds_the_agent_idle() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Response::text("done")]);
    let (agent, _) = support::agent(&registry, &mock);
    let directory = AgentDirectory::new();
    directory.insert(&agent);
    // `turn/end` is recorded once the turn has decided it is complete: a notice injected from
    // then on must be able to open a turn. The subscriber asks for one right there, as the
    // jobs runtime does after injecting a notice.
    let opened: Arc<Mutex<Vec<bool>>> = Arc::default();
    let _subscription = agent.subscribe({
        let (directory, opened, owner) = (directory.clone(), Arc::clone(&opened), agent.handle());
        move |record| {
            if let SessionEvent::TurnEnd { .. } = record.event {
                opened.lock().unwrap().push(directory.open_turn(&owner));
            }
        }
    });
    agent.run("hi").await.unwrap();
    directory.wait_woken().await;
    assert_eq!(*opened.lock().unwrap(), vec![true]);
}

#[tokio::test(start_paused = true)]
async fn the_end_of_a_turn_never_releases_the_turn_opened_after_it() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Response::text("done")]);
    let (agent, _) = support::agent(&registry, &mock);
    let directory = AgentDirectory::new();
    directory.insert(&agent);
    // A woken turn opens right at `turn/end`, while the first turn's future still holds its
    // guard; dropping that guard afterwards must leave the woken turn running.
    let _subscription = agent.subscribe({
        let (directory, owner) = (directory.clone(), agent.handle());
        move |record| {
            if let SessionEvent::TurnEnd { .. } = record.event {
                assert!(directory.open_turn(&owner));
            }
        }
    });
    agent.run("hi").await.unwrap();
    // The woken turn is gathering notices (in paused time): the agent is busy.
    assert!(agent.is_busy());
    assert!(matches!(agent.run("again").await, Err(AgentError::Busy(_))));
    directory.wait_woken().await;
    assert!(!agent.is_busy());
}

#[tokio::test]
async fn a_disposed_subscription_hears_nothing_more_and_the_others_go_on() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([
        Step::from(Response::text("first")),
        Response::text("second").into(),
    ]);
    let (agent, everything) = support::agent(&registry, &mock);
    let (first, second) = (support::Recorder::default(), support::Recorder::default());
    let first_subscription = agent.subscribe(first.sink());
    let _second_subscription = agent.subscribe(second.sink());
    let subscribed_at = everything.events().len();
    agent.run("one").await.unwrap();
    let first_turn_ended_at = everything.events().len();
    first_subscription.dispose();
    agent.run("two").await.unwrap();
    let all = everything.events();
    assert_eq!(first.events(), all[subscribed_at..first_turn_ended_at]);
    assert_eq!(second.events(), all[subscribed_at..]);
}

#[tokio::test]
async fn an_agent_debugs_as_its_session() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Response::text("unused")]);
    let (agent, _) = support::agent(&registry, &mock);
    assert_eq!(format!("{agent:?}"), r#"Agent { session_id: "s1", .. }"#);
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
        assert_paired(&agent.history());
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

#[tokio::test]
async fn an_event_too_long_for_a_log_line_is_cut_to_fit_and_the_log_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    // An answer of 24 MiB, half of it quotes (each escaped to two bytes, so 36 MiB in JSON),
    // and a tool result of the same: each alone is longer than a log line may be.
    let huge: String = "a\"".repeat(12 * 1024 * 1024);
    let registry = ToolRegistry::new();
    let big = huge.clone();
    registry
        .register(tool("big", false, move |_, _| {
            let big = big.clone();
            async move { Ok(json!(big)) }
        }))
        .unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "big",
            json!({}),
        )])),
        Step::from(Response::text(huge.clone())),
    ]);
    let (agent, recorder) = recorded(
        Agent::builder(registry.clone(), Arc::new(mock.clone()))
            .session_id("s1")
            .cwd("/work")
            .log(&path),
    );
    let outcome = agent.run("go").await.unwrap();
    assert_eq!(outcome.text, huge, "the live answer is whole");
    agent.dispose().await;

    let text = std::fs::read(&path).unwrap();
    for line in text.split(|&b| b == b'\n') {
        assert!(line.len() <= agent_loop::MAX_LINE_BYTES, "{}", line.len());
    }
    let log = SessionLog::read(&path).unwrap();
    assert_eq!(log.skipped, vec![]);
    let kinds: Vec<&str> = log.events.iter().map(|r| r.event.kind()).collect();
    assert_eq!(kinds, recorder.kinds(), "every event was written");
    let marker = CUT_MARKER;
    let answer = log
        .events
        .iter()
        .find_map(|r| match &r.event {
            SessionEvent::AssistantMessage { text, .. } if !text.is_empty() => Some(text.clone()),
            _ => None,
        })
        .unwrap();
    let (kept, note) = answer.split_at(answer.find(marker).unwrap());
    assert!(
        huge.starts_with(kept),
        "the cut keeps the start of the text"
    );
    let dropped: usize = note[marker.len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(kept.len() + dropped, huge.len(), "{note}");
    assert_eq!(
        note,
        format!(
            "{marker}{dropped} bytes cut here: a session log line holds at most {} bytes]",
            agent_loop::MAX_LINE_BYTES
        )
    );
    // The log resumes: the history holds the cut texts.
    let resumed = Agent::builder(registry, Arc::new(MockAdapter::new([Response::text("ok")])))
        .resume(log)
        .build()
        .unwrap();
    assert_eq!(resumed.history().len(), 4);
    resumed.dispose().await;
}

/// How the note that ends a cut text begins.
const CUT_MARKER: &str = "… [";
