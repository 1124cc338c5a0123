//! The `bash` tool and the job-control tools, driven through the agent loop by the scripted
//! model, asserting `tool/call` and `tool/result` events and what the next request carries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agent_loop::{Agent, EventRecord, Message, SessionEvent, TurnEndReason};
use dsh_tools::jobs::{JobRuntime, JobStatus, JobsConfig};
use dsh_tools::{FailureCode, ToolFailure, ToolRegistry, ToolResultView};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::live_group_members;
use tool_bash::{BashPlugin, JobToolsPlugin, LocalExecutor};

struct Harness {
    registry: ToolRegistry,
    jobs: JobRuntime,
    executor: LocalExecutor,
}

fn harness(background: bool) -> Harness {
    let jobs = JobRuntime::new(JobsConfig::default());
    let executor = support::executor(Duration::from_millis(500));
    let registry = support::bash_registry(executor.clone(), background.then_some(&jobs));
    Harness {
        registry,
        jobs,
        executor,
    }
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<EventRecord>>>);

impl Events {
    fn all(&self) -> Vec<SessionEvent> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.event.clone())
            .collect()
    }

    /// The `tool/result` events, as `(callId, isError, text, error)`.
    fn results(&self) -> Vec<(String, bool, String, Option<ToolFailure>)> {
        self.all()
            .into_iter()
            .filter_map(|e| match e {
                SessionEvent::ToolResult {
                    call_id,
                    is_error,
                    content,
                    error,
                    ..
                } => Some((call_id, is_error, dsh_tools::content_text(&content), error)),
                _ => None,
            })
            .collect()
    }
}

fn agent(h: &Harness, mock: &MockAdapter) -> (Agent, Events) {
    let events = Events::default();
    let sink = events.clone();
    let agent = Agent::builder(h.registry.clone(), Arc::new(mock.clone()))
        .session_id("s1")
        .jobs(h.jobs.clone())
        .subscriber(move |r| sink.0.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    (agent, events)
}

/// Runs one `bash` call through the loop and returns its result event.
async fn bash(h: &Harness, args: Value) -> (bool, String, Option<ToolFailure>) {
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "bash",
            args.clone(),
        )])),
        Response::text("ok").into(),
    ]);
    let (agent, events) = agent(h, &mock);
    agent.run("run it").await.unwrap();
    agent.dispose().await;
    let calls: Vec<SessionEvent> = events
        .all()
        .into_iter()
        .filter(|e| e.kind() == "tool/call")
        .collect();
    assert_eq!(
        calls,
        vec![SessionEvent::ToolCall {
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: args
        }]
    );
    let (_, is_error, text, error) = events.results().remove(0);
    // The next request carries exactly that result.
    let next = &mock.requests()[1].messages;
    assert!(next.iter().any(|m| matches!(m, Message::Tool { call_id, is_error: e, .. } if call_id == "c1" && *e == is_error)));
    (is_error, text, error)
}

fn cmd(command: &str) -> Value {
    json!({"command": command, "description": "Run a test command"})
}

// ----- Result shaping -----------------------------------------------------------------------

#[tokio::test]
async fn every_foreground_outcome_is_shaped_and_none_looks_like_another() {
    let h = harness(true);
    let check = |args: Value, expected: &'static str| {
        let h = &h;
        async move {
            let (is_error, text, _) = bash(h, args.clone()).await;
            assert!(!is_error, "{args}: {text}");
            assert_eq!(text, expected, "{args}");
        }
    };
    check(cmd("echo hi"), "hi").await;
    check(cmd("echo partial; exit 9"), "partial\n[exit code: 9]").await;
    check(cmd("echo out; echo err >&2"), "out\n[stderr]\nerr").await;
    check(cmd("true"), "(no output)").await;
    check(
        cmd("echo before; kill -KILL $$"),
        "before\n[killed by signal: SIGKILL]",
    )
    .await;
    check(
        json!({"command": "echo begun; sleep 30", "description": "Sleep too long", "timeout_ms": 200}),
        "begun\n[timed out after 200ms]\n[killed by signal: SIGTERM]",
    )
    .await;
    check(
        json!({"command": "trap 'echo caught' TERM; sleep 30 & wait; exit 0", "description": "Trap TERM", "timeout_ms": 200}),
        "caught\n[timed out after 200ms]",
    )
    .await;
}

#[tokio::test]
async fn truncated_output_shows_head_tail_and_the_complete_spill_file() {
    let h = harness(false);
    let (is_error, text, _) = bash(&h, cmd("seq 1 200000")).await;
    assert!(!is_error);
    let expected: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert!(text.starts_with("1\n2\n3\n"));
    let marker = text.lines().last().unwrap();
    assert!(marker.starts_with("[output truncated: "), "{marker}");
    assert!(
        marker.contains(&format!(" of {} bytes; full output: ", expected.len())),
        "{marker}"
    );
    let path = marker
        .rsplit("full output: ")
        .next()
        .unwrap()
        .trim_end_matches(']');
    assert_eq!(std::fs::read_to_string(path).unwrap(), expected);
    assert!(text.contains("199999\n200000"), "the tail is shown");
    assert!(h.executor.spill_dir().is_some());
}

#[tokio::test]
async fn a_missing_workdir_is_a_clear_error() {
    let h = harness(false);
    let (is_error, text, error) = bash(
        &h,
        json!({"command": "pwd", "description": "Print the directory", "workdir": "/definitely/not/here"}),
    )
    .await;
    assert!(is_error);
    assert_eq!(error.unwrap().code, FailureCode::ToolError);
    assert_eq!(
        text,
        "Error: working directory `/definitely/not/here` does not exist"
    );
}

#[tokio::test]
async fn argument_rules_are_each_invalid_args() {
    let h = harness(false);
    for (args, fragment) in [
        (
            json!({"description": "No command"}),
            "/command: required property is missing",
        ),
        (
            json!({"command": "   ", "description": "Blank command"}),
            "/command: must not be empty",
        ),
        (
            json!({"command": "ls"}),
            "/description: required property is missing",
        ),
        (
            json!({"command": "ls", "description": ""}),
            "/description: must not be empty",
        ),
        (
            json!({"command": "ls", "description": "Zero timeout", "timeout_ms": 0}),
            "/timeout_ms: must be a positive",
        ),
        (
            json!({"command": "ls", "description": "Negative timeout", "timeout_ms": -5}),
            "invalid",
        ),
        (
            json!({"command": "ls", "description": "Unknown key", "cwd": "/"}),
            "/cwd: unknown property",
        ),
        (
            json!({"command": "sleep 1", "description": "Background while disabled", "run_in_background": true}),
            "background jobs are not enabled here",
        ),
    ] {
        let (is_error, text, error) = bash(&h, args.clone()).await;
        assert!(is_error, "{args}");
        assert_eq!(error.unwrap().code, FailureCode::InvalidArgs, "{args}");
        assert!(text.contains(fragment), "{args}: {text}");
    }
}

#[tokio::test]
async fn the_schema_offers_run_in_background_only_when_enabled() {
    let with = harness(true).registry.get("bash", None).unwrap().schema();
    let without = harness(false).registry.get("bash", None).unwrap().schema();
    assert!(
        with.parameters["properties"]
            .get("run_in_background")
            .is_some()
    );
    assert!(
        without.parameters["properties"]
            .get("run_in_background")
            .is_none()
    );
    assert_eq!(with.parameters["additionalProperties"], json!(false));
    assert!(with.description.contains("运行命令"));
    assert!(with.description.contains("job_output"));
}

#[tokio::test]
async fn cancelling_a_foreground_call_aborts_it_and_kills_the_group() {
    let h = harness(false);
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pgid");
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "bash",
            cmd(&format!(
                "sleep 1000 & echo $$ > {}; sleep 1000",
                pid_file.display()
            )),
        )])),
        Response::text("next").into(),
    ]);
    let (agent, events) = agent(&h, &mock);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("go").await.unwrap() })
    };
    let pgid = support::read_pgid(&pid_file).await;
    agent.cancel_turn();
    let outcome = running.await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    let (_, is_error, text, error) = events.results().remove(0);
    assert!(is_error);
    assert_eq!(error.unwrap().code, FailureCode::Aborted, "{text}");
    // The result comes only after the whole group is gone.
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
}

// ----- Background jobs ----------------------------------------------------------------------

fn bg(command: &str) -> Value {
    json!({"command": command, "description": "Run in the background", "run_in_background": true})
}

#[tokio::test]
async fn a_background_job_streams_new_output_ends_and_notifies_once() {
    let h = harness(true);
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "bash",
            bg("echo first; sleep 2; echo second"),
        )])),
        // A short wait that times out: the job is still running, but has printed `first`.
        Response::calls([ScriptedCall::json(
            "c2",
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": 400}),
        )])
        .into(),
        Response::calls([ScriptedCall::json(
            "c3",
            "job_output",
            json!({"job_id": "bash-1"}),
        )])
        .into(),
        Response::text("waiting for it").into(),
        Response::text("it finished").into(),
    ]);
    let (agent, events) = agent(&h, &mock);
    agent.run("start it").await.unwrap();
    let results = events.results();
    assert_eq!(results[0].2, "started background job bash-1");
    assert_eq!(results[1].2, "first\n[status: running]");
    assert_eq!(results[2].2, "(no new output)\n[status: running]");
    // The job finishes while the agent is idle: the notice waits for the next request.
    let snapshot = h
        .jobs
        .wait(
            "bash-1",
            Duration::from_secs(5),
            None,
            &tokio_util::sync::CancellationToken::new(),
        )
        .await;
    assert!(snapshot.is_err(), "foreign callers cannot wait on the job");
    tokio::time::timeout(
        Duration::from_secs(10),
        h.jobs.settled("bash-1", Some("s1")),
    )
    .await
    .expect("the job did not finish")
    .unwrap();
    agent.run("anything new?").await.unwrap();
    let notice = "background job bash-1 (bash: echo first; sleep 2; echo second) finished [status: completed, exit code: 0]. Read its output with job_output.";
    let last = mock.requests().last().unwrap().messages.clone();
    let notices = last
        .iter()
        .filter(|m| matches!(m, Message::User { content, source: Some(_) } if content == notice))
        .count();
    assert_eq!(notices, 1, "{last:?}");
    let job_ends: Vec<SessionEvent> = events
        .all()
        .into_iter()
        .filter(|e| e.kind() == "job/end")
        .collect();
    assert_eq!(
        job_ends,
        vec![SessionEvent::JobEnd {
            job_id: "bash-1".into(),
            status: JobStatus::Completed,
            detail: Some("exit code: 0".into())
        }]
    );
}

#[tokio::test]
async fn wait_returns_when_the_job_ends_and_kill_stops_the_whole_group() {
    let h = harness(true);
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::json("c1", "bash", bg("sleep 0.3; echo done")),
            ScriptedCall::json("c2", "bash", bg("echo $$; sleep 1000 & sleep 1000")),
        ])),
        Response::calls([ScriptedCall::json(
            "c3",
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": 5000}),
        )])
        .into(),
        Response::calls([ScriptedCall::json(
            "c4",
            "job_output",
            json!({"job_id": "bash-2"}),
        )])
        .into(),
        Response::calls([ScriptedCall::json(
            "c5",
            "job_kill",
            json!({"job_id": "bash-2"}),
        )])
        .into(),
        Response::calls([ScriptedCall::json("c6", "job_list", json!({}))]).into(),
        Response::text("done").into(),
    ]);
    let (agent, events) = agent(&h, &mock);
    let began = Instant::now();
    agent.run("go").await.unwrap();
    let results = events.results();
    assert_eq!(results[2].2, "done\n[status: completed, exit code: 0]");
    let pgid: i32 = results[3].2.lines().next().unwrap().parse().unwrap();
    assert!(
        results[4]
            .2
            .starts_with("job bash-2 stopped [status: killed, signal: "),
        "{:?}",
        results[4]
    );
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
    assert_eq!(
        results[5].2,
        "bash-1 [status: completed, exit code: 0] sleep 0.3; echo done\nbash-2 [status: killed, signal: SIGTERM] echo $$; sleep 1000 & sleep 1000"
    );
    assert!(began.elapsed() < Duration::from_secs(10));
    // Both ends were observed (a wait and a kill): no notice follows. The script is used up,
    // so this turn's request fails, but the mock still captures what it would have carried.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let outcome = agent.run("anything?").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Error);
    let last = mock.requests().last().unwrap().messages.clone();
    assert!(
        !last.iter().any(|m| matches!(
            m,
            Message::User {
                source: Some(_),
                ..
            }
        )),
        "{last:?}"
    );
}

#[tokio::test]
async fn a_read_that_skips_output_says_so_and_where_it_is() {
    let h = harness(true);
    let started = h
        .registry
        .execute(dsh_tools::ToolCall::new(
            "c1",
            "bash",
            bg("seq 1 200000; echo the-end"),
        ))
        .await;
    assert!(!started.is_error, "{:?}", started.error);
    h.jobs.settled("bash-1", None).await.unwrap();
    let read = h
        .registry
        .execute(dsh_tools::ToolCall::new(
            "c2",
            "job_output",
            json!({"job_id": "bash-1"}),
        ))
        .await;
    let text = dsh_tools::content_text(&read.content);
    assert!(text.len() <= 30_000 + 64, "{}", text.len());
    let note = text
        .lines()
        .find(|l| l.contains("earlier bytes of stdout were skipped"))
        .unwrap_or_else(|| panic!("no skip note in {}", &text[text.len() - 300..]));
    let path = note
        .rsplit("the full stdout is in ")
        .next()
        .unwrap()
        .trim_end_matches(']');
    let expected: String =
        (1..=200_000).map(|n| format!("{n}\n")).collect::<String>() + "the-end\n";
    assert_eq!(std::fs::read_to_string(path).unwrap(), expected);
    assert!(
        text.contains("199999\n200000\nthe-end"),
        "the newest output is shown"
    );
    assert!(
        text.ends_with("[status: completed, exit code: 0]"),
        "{}",
        &text[text.len() - 200..]
    );
}

#[tokio::test]
async fn cancelling_after_the_id_is_published_does_not_kill_the_job() {
    let h = harness(true);
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::json("c1", "bash", bg("sleep 2; echo survived")),
            ScriptedCall::json("c2", "bash", cmd("sleep 30")),
        ])),
        Response::text("next").into(),
    ]);
    let (agent, events) = agent(&h, &mock);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("go").await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.cancel_turn();
    running.await.unwrap();
    assert_eq!(events.results()[0].2, "started background job bash-1");
    assert_eq!(
        h.jobs.get("bash-1", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    let snapshot = h
        .jobs
        .wait(
            "bash-1",
            Duration::from_secs(10),
            Some("s1"),
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(snapshot.status, JobStatus::Completed);
    assert_eq!(
        h.jobs.read("bash-1", Some("s1")).unwrap().text,
        "survived\n"
    );
}

#[tokio::test]
async fn a_pre_cancelled_background_call_fails_and_creates_no_job() {
    let h = harness(true);
    let signal = tokio_util::sync::CancellationToken::new();
    signal.cancel();
    let result = h
        .registry
        .execute(dsh_tools::ToolCall::new("c1", "bash", bg("sleep 1")).with_signal(signal))
        .await;
    assert_eq!(
        result.error.map(|e| e.code),
        Some(FailureCode::AbortedBeforeDispatch)
    );
    assert!(h.jobs.list(None).is_empty());
}

#[tokio::test]
async fn job_output_refuses_a_negative_wait_instead_of_using_the_default() {
    let h = harness(true);
    let result = h
        .registry
        .execute(dsh_tools::ToolCall::new(
            "c1",
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": -5}),
        ))
        .await;
    let text = dsh_tools::content_text(&result.content);
    assert_eq!(
        result.error.map(|e| e.code),
        Some(FailureCode::InvalidArgs),
        "{text}"
    );
    assert!(text.contains("/timeout_ms"), "{text}");
}

// ----- Cards --------------------------------------------------------------------------------

#[tokio::test]
async fn cards_come_from_the_presenters() {
    let h = harness(true);
    let args = cmd("echo card; exit 4");
    let call = h.registry.present_call("bash", &args, None);
    assert_eq!(
        call,
        dsh_tools::ToolCallView::Terminal(dsh_tools::card::TerminalCallView {
            title: "echo card; exit 4".into(),
            description: Some("Run a test command".into()),
            cwd: None,
        })
    );
    let result = h
        .registry
        .execute(dsh_tools::ToolCall::new("c1", "bash", args.clone()))
        .await;
    assert_eq!(result.meta, Some(json!({"exitCode": 4, "signal": null})));
    let card = h
        .registry
        .present_result("bash", &args, &result.record(), None);
    let ToolResultView::Terminal(view) = card else {
        panic!("expected a terminal card: {card:?}");
    };
    assert_eq!(
        (view.output.as_deref(), view.exit_code),
        (Some("card"), Some(4))
    );
}

// ----- Hot reload ---------------------------------------------------------------------------

#[tokio::test]
async fn reloading_the_bash_plugin_swaps_the_tool_and_running_jobs_survive() {
    let registry = ToolRegistry::new();
    let jobs = JobRuntime::new(JobsConfig::default());
    registry
        .global_scope()
        .load(JobToolsPlugin::new(jobs.clone()))
        .unwrap();
    let v1 = BashPlugin::new(Arc::new(LocalExecutor::default())).with_jobs(jobs.clone());
    let handle = registry.global_scope().load(v1).unwrap();
    let started = registry
        .execute(dsh_tools::ToolCall::new(
            "c1",
            "bash",
            bg("sleep 1; echo still here"),
        ))
        .await;
    assert_eq!(
        dsh_tools::content_text(&started.content),
        "started background job bash-1"
    );
    assert_eq!(
        started.value.as_deref(),
        Some(&json!({"kind": "background", "jobId": "bash-1"}))
    );
    // v2: a new executor, foreground only.
    handle
        .reload(BashPlugin::new(Arc::new(LocalExecutor::default())))
        .unwrap();
    let schema = registry.get("bash", None).unwrap().schema();
    assert!(
        schema.parameters["properties"]
            .get("run_in_background")
            .is_none()
    );
    let refused = registry
        .execute(dsh_tools::ToolCall::new("c2", "bash", bg("true")))
        .await;
    assert_eq!(refused.code(), Some(FailureCode::InvalidArgs));
    // The job belongs to the jobs runtime, not to the plugin: it runs on and finishes.
    let snapshot = jobs
        .wait(
            "bash-1",
            Duration::from_secs(10),
            None,
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(snapshot.status, JobStatus::Completed);
    assert_eq!(jobs.read("bash-1", None).unwrap().text, "still here\n");
    handle.dispose();
    assert!(registry.get("bash", None).is_none());
}
