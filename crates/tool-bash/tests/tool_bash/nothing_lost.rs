//! Nothing the model needs is lost at the edges: a cancelled foreground call still names the
//! spill file of what it collected, a cancellation that lands once a background job exists
//! still reports the job's id, past the session's spill budget results say so while the
//! in-memory window keeps working, and a background read past a stream's spill cap names the
//! file and the bytes no file holds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agent_loop::{Agent, EventRecord, Message, SessionEvent, TurnEndReason};
use dsh_tools::jobs::{JobRuntime, JobStatus, JobsConfig};
use dsh_tools::{FailureCode, ToolCall, ToolFailure, ToolRegistry};
use futures::future::BoxFuture;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tool_bash::shell::{ShellError, ShellProcess, ShellRunResult, ShellSpec};
use tool_bash::{
    BashPlugin, JobToolsPlugin, LocalConfig, LocalExecutor, ShellExecutor, ShellRequest,
};

const ABORTED_WITH: &str =
    "the call was cancelled while it ran; what it reported before it stopped:\n";

fn cmd(command: &str) -> Value {
    json!({"command": command, "description": "Run a test command"})
}

fn bg(command: &str) -> Value {
    json!({"command": command, "description": "Run in the background", "run_in_background": true})
}

fn seq(to: u32) -> String {
    (1..=to).map(|n| format!("{n}\n")).collect()
}

/// An agent over `registry` whose model is `mock`, recording its session events.
fn agent(
    registry: &ToolRegistry,
    jobs: &JobRuntime,
    mock: &MockAdapter,
) -> (Agent, Arc<Mutex<Vec<EventRecord>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let agent = Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .session_id("s1")
        .jobs(jobs.clone())
        .subscriber(move |r| sink.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    (agent, events)
}

/// The `tool/result` events as `(callId, failure, text)`.
fn results(events: &Mutex<Vec<EventRecord>>) -> Vec<(String, Option<ToolFailure>, String)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::ToolResult {
                call_id,
                content,
                error,
                ..
            } => Some((
                call_id.clone(),
                error.clone(),
                dsh_tools::content_text(content),
            )),
            _ => None,
        })
        .collect()
}

/// The path named by the one `[output truncated: …; full output: <path>…]` line of `text`.
fn spill_path_in(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("[output truncated: "))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let rest = lines[0].split("full output: ").nth(1).unwrap();
    rest.trim_end_matches(']')
        .split(' ')
        .next()
        .unwrap()
        .to_owned()
}

async fn wait_for_file(path: &Path) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the command never signalled it was ready");
}

// ----- A cancelled foreground call ----------------------------------------------------------

#[tokio::test]
async fn a_cancelled_foreground_call_names_the_spill_file_of_what_it_collected() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = support::bash_registry(support::executor(Duration::from_millis(300)), None);
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mock = MockAdapter::new([Step::from(Response::calls([ScriptedCall::json(
        "c1",
        "bash",
        cmd(&format!(
            "seq 1 100000; touch {}; sleep 1000",
            ready.display()
        )),
    )]))]);
    let (agent, events) = agent(&registry, &jobs, &mock);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("go").await.unwrap() })
    };
    wait_for_file(&ready).await;
    agent.cancel_turn();
    assert_eq!(running.await.unwrap().reason, TurnEndReason::Cancelled);
    let (call_id, error, text) = results(&events).remove(0);
    assert_eq!(call_id, "c1");
    let error = error.unwrap();
    assert_eq!(error.code, FailureCode::Aborted);
    assert_eq!(text, format!("Error: {}", error.message));
    let expected = seq(100_000);
    assert!(
        text.starts_with(&format!("Error: {ABORTED_WITH}1\n2\n3\n")),
        "{}",
        text.get(..200).unwrap_or(&text)
    );
    assert!(
        text.contains("99999\n100000\n[output truncated: ")
            && text.ends_with("]\n[killed by signal: SIGTERM]"),
        "{}",
        text.get(text.len().saturating_sub(300)..).unwrap_or(&text)
    );
    let path = spill_path_in(&text);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert!(
        text.contains(&format!(
            " of {} bytes; full output: {path}]",
            expected.len()
        )),
        "{text}"
    );
}

// ----- A cancellation once the background job exists ---------------------------------------

/// A local executor that cancels the agent's turn from inside `start`, that is after the job
/// runtime accepted the job and before the `bash` call returns: a deterministic place for a
/// cancellation to land.
struct CancelOnStart {
    inner: LocalExecutor,
    agent: Arc<OnceLock<Agent>>,
}

impl std::fmt::Debug for CancelOnStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CancelOnStart")
    }
}

impl ShellExecutor for CancelOnStart {
    fn resolve(
        &self,
        request: ShellRequest,
        session_cwd: Option<&Path>,
    ) -> Result<ShellSpec, ShellError> {
        self.inner.resolve(request, session_cwd)
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'static, Result<ShellRunResult, ShellError>> {
        self.inner.run(spec)
    }

    fn start(&self, spec: ShellSpec) -> Arc<dyn ShellProcess> {
        self.agent.get().unwrap().cancel_turn();
        self.inner.start(spec)
    }
}

/// After `first_turn`, whose `c1` started `bash-1` and was aborted, the model can still find
/// the job and stop it.
async fn the_job_is_reachable(
    agent: &Agent,
    mock: &MockAdapter,
    events: &Mutex<Vec<EventRecord>>,
    jobs: &JobRuntime,
) {
    let (call_id, error, text) = results(events).remove(0);
    assert_eq!(call_id, "c1");
    assert_eq!(
        (error.map(|e| e.code), text),
        (
            Some(FailureCode::Aborted),
            format!("Error: {ABORTED_WITH}started background job bash-1")
        )
    );
    assert_eq!(
        jobs.get("bash-1", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    mock.push(Response::calls([
        ScriptedCall::json("c2", "job_list", json!({})),
        ScriptedCall::json("c3", "job_kill", json!({"job_id": "bash-1"})),
    ]));
    mock.push(Response::text("stopped it"));
    agent.run("is anything running?").await.unwrap();
    let later: Vec<(String, Option<FailureCode>, String)> = results(events)
        .into_iter()
        .skip(1)
        .map(|(id, error, text)| (id, error.map(|e| e.code), text))
        .collect();
    assert_eq!(
        later,
        vec![
            (
                "c2".into(),
                None,
                "bash-1 [status: running] sleep 1000".into()
            ),
            (
                "c3".into(),
                None,
                "job bash-1 stopped [status: killed, signal: SIGTERM]".into()
            ),
        ]
    );
}

fn background_registry(executor: Arc<dyn ShellExecutor>, jobs: &JobRuntime) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(JobToolsPlugin::new(jobs.clone()))
        .unwrap();
    registry
        .global_scope()
        .load(BashPlugin::new(executor).with_jobs(jobs.clone()))
        .unwrap();
    registry
}

#[tokio::test]
async fn a_cancellation_inside_the_job_start_still_reports_the_job_id() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let slot = Arc::new(OnceLock::new());
    let executor = CancelOnStart {
        inner: support::executor(Duration::from_millis(300)),
        agent: Arc::clone(&slot),
    };
    let registry = background_registry(Arc::new(executor), &jobs);
    let mock = MockAdapter::new([Step::from(Response::calls([ScriptedCall::json(
        "c1",
        "bash",
        bg("sleep 1000"),
    )]))]);
    let (agent, events) = agent(&registry, &jobs, &mock);
    slot.set(agent.clone()).unwrap();
    let outcome = agent.run("start it").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    the_job_is_reachable(&agent, &mock, &events, &jobs).await;
    // The next request carried the aborted result with the id.
    let carried = mock.requests()[1].messages.iter().any(|m| {
        matches!(m, Message::Tool { call_id, content, is_error: true }
            if call_id == "c1" && dsh_tools::content_text(content).ends_with("started background job bash-1"))
    });
    assert!(carried);
}

#[tokio::test]
async fn a_cancellation_after_the_body_returned_still_reports_the_job_id() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let executor = Arc::new(support::executor(Duration::from_millis(300)));
    let registry = background_registry(executor, &jobs);
    // A wrapper cancels the call's signal once the body has returned: the last moment before
    // the registry decides the call was aborted.
    registry
        .global_scope()
        .wrap_execute(|stage, next| async move {
            let result = next.run().await;
            if stage.execution.name() == "bash" {
                stage.signal.cancel();
            }
            result
        })
        .unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "bash",
            bg("sleep 1000"),
        )])),
        Response::text("it was aborted").into(),
    ]);
    let (agent, events) = agent(&registry, &jobs, &mock);
    // Only the call's own signal fired, so the turn goes on and completes.
    let outcome = agent.run("start it").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    the_job_is_reachable(&agent, &mock, &events, &jobs).await;
}

// ----- The spill budget ---------------------------------------------------------------------

fn budgeted(budget: u64) -> (ToolRegistry, JobRuntime, LocalExecutor) {
    let mut config = LocalConfig::default();
    config.grace = Duration::from_millis(300);
    config.spill_budget_bytes = budget;
    let executor = LocalExecutor::new(config);
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = support::bash_registry(executor.clone(), Some(&jobs));
    (registry, jobs, executor)
}

async fn execute(registry: &ToolRegistry, args: Value) -> (String, Value) {
    let result = registry.execute(ToolCall::new("c", "bash", args)).await;
    assert!(!result.is_error, "{:?}", result.error);
    (
        dsh_tools::content_text(&result.content),
        result.value.as_deref().cloned().unwrap(),
    )
}

#[tokio::test]
async fn past_the_spill_budget_results_say_so_and_the_window_still_works() {
    let budget = 100_000;
    let (registry, jobs, executor) = budgeted(budget);
    let used_up = format!("the session's spill budget of {budget} bytes is used up");
    let expected = seq(100_000);
    let total = expected.len();

    // The first stream takes the whole budget: its file holds its first 100 000 bytes, and the
    // value and the text both say why it stops there.
    let (text, value) = execute(&registry, cmd("seq 1 100000")).await;
    let stdout = &value["stdout"];
    let path = stdout["spillPath"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            &stdout["totalBytes"],
            &stdout["spillLimitBytes"],
            &stdout["spillError"]
        ),
        (&json!(total), &json!(budget), &json!(used_up))
    );
    assert!(std::fs::read(&path).unwrap() == expected.as_bytes()[..budget as usize]);
    let shown = stdout["shownBytes"].as_u64().unwrap();
    assert_eq!(
        text.lines().last().unwrap(),
        format!(
            "[output truncated: {shown} of {total} bytes; full output: {path} (only its first {budget} bytes were kept: {used_up})]"
        )
    );
    assert!(
        text.starts_with("1\n2\n3\n"),
        "{}",
        text.get(..100).unwrap_or(&text)
    );
    assert!(
        text.contains("99999\n100000\n[output truncated"),
        "the tail is shown"
    );

    // Nothing is left for the next stream: no file, and the window still shows head and tail.
    let (text, value) = execute(&registry, cmd("seq 1 100000")).await;
    let stdout = &value["stdout"];
    assert_eq!(stdout.get("spillPath"), None);
    assert_eq!(stdout["spillError"], json!(used_up));
    let shown = stdout["shownBytes"].as_u64().unwrap();
    assert_eq!(
        text.lines().last().unwrap(),
        format!(
            "[output truncated: {shown} of {total} bytes; full output: (unavailable: {used_up})]"
        )
    );
    assert!(
        text.starts_with("1\n2\n3\n"),
        "{}",
        text.get(..100).unwrap_or(&text)
    );
    assert!(
        text.contains("99999\n100000\n[output truncated"),
        "the tail is shown"
    );

    // Output that fits its window needs no file and is whole.
    assert_eq!(execute(&registry, cmd("echo small")).await.0, "small");

    // A background job past the budget still reads its newest output, and says the skipped
    // bytes could not be kept.
    let (body, note) = read_past_its_cap(&registry, &jobs, &expected).await;
    assert_eq!(
        note,
        format!(
            "{} earlier bytes of stdout were skipped; they could not be kept ({used_up})]",
            total - body.len()
        )
    );
    // The budget caps the files of the whole executor.
    let spilled: u64 = std::fs::read_dir(executor.spill_dir().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(spilled, budget);
}

// ----- The spill cap ------------------------------------------------------------------------

/// Starts `seq 1 100000` in the background, waits for it, and reads it: the body shown (a
/// tail of `expected`) and the note after it.
async fn read_past_its_cap(
    registry: &dsh_tools::ToolRegistry,
    jobs: &JobRuntime,
    expected: &str,
) -> (String, String) {
    let (text, _) = execute(registry, bg("seq 1 100000")).await;
    assert_eq!(text, "started background job bash-1");
    jobs.settled("bash-1", None).await.unwrap();
    let read = jobs.read("bash-1", None).unwrap().text;
    let (body, note) = read.rsplit_once("\n[").unwrap();
    let body = format!("{body}\n");
    assert!(
        expected.ends_with(&body),
        "{}",
        body.get(..100).unwrap_or(&body)
    );
    (body, note.to_owned())
}

/// A background read past a stream's spill cap names the file that holds the stream's first
/// bytes and says exactly which of the skipped bytes no file holds (a small cap stands in for
/// the default 1 GiB).
#[tokio::test]
async fn a_background_read_past_the_spill_cap_names_the_file_and_the_bytes_it_lost() {
    let cap: usize = 50_000;
    let mut config = LocalConfig::default();
    config.grace = Duration::from_millis(300);
    config.spill_cap_bytes = cap as u64;
    let executor = LocalExecutor::new(config);
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = support::bash_registry(executor.clone(), Some(&jobs));
    let expected = seq(100_000);

    let (body, note) = read_past_its_cap(&registry, &jobs, &expected).await;
    // The stream's only file holds its first `cap` bytes.
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(executor.spill_dir().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    let [path] = files.as_slice() else {
        panic!("one spill file, not {files:?}");
    };
    assert!(std::fs::read(path).unwrap() == expected.as_bytes()[..cap]);
    let skipped = expected.len() - body.len();
    assert_eq!(
        note,
        format!(
            "{skipped} earlier bytes of stdout were skipped; {} holds only the first {cap} bytes of stdout, so bytes {cap} to {} ({} bytes) could not be kept]",
            path.display(),
            skipped - 1,
            skipped - cap
        )
    );
}
