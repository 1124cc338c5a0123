//! The job tools (`job_output`, `job_list`, `job_kill`) tested like `bash`: every outcome is
//! driven through the agent loop by the scripted model, and each test compares what the model
//! reads (text and failure code) and, where it matters, the session events.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agent_loop::{Agent, EventRecord, SessionEvent};
use dsh_tools::jobs::{JobRuntime, JobStatus, JobsConfig};
use dsh_tools::{FailureCode, PluginHandle, ToolRegistry};
use futures::future::BoxFuture;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tool_bash::shell::{ShellError, ShellProcess, ShellRunResult, ShellSpec, Stream};
use tool_bash::{
    BashPlugin, JobToolsConfig, JobToolsPlugin, LocalExecutor, ShellExecutor, ShellRequest,
};

/// What the model reads of one call: the failure code (`None` for a success) and the text.
type Outcome = (Option<FailureCode>, String);

fn ok(text: &str) -> Outcome {
    (None, text.to_owned())
}

fn failed(code: FailureCode, message: &str) -> Outcome {
    (Some(code), format!("Error: {message}"))
}

/// A registry with `bash` (background jobs on) and the job tools, over an executor whose kill
/// grace is `grace`; `kill_wait` is how long `job_kill` waits for the job to settle.
struct Harness {
    registry: ToolRegistry,
    jobs: JobRuntime,
    job_tools: PluginHandle,
    started: Started,
}

type Started = Arc<Mutex<Vec<Arc<dyn ShellProcess>>>>;

/// The local executor, keeping every background process it starts so a test can wait until
/// output reached the job (without reading it for the model) before the model reads it.
struct Recording {
    inner: LocalExecutor,
    started: Started,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recording")
    }
}

impl ShellExecutor for Recording {
    fn resolve(
        &self,
        request: ShellRequest,
        session_cwd: Option<&std::path::Path>,
    ) -> Result<ShellSpec, ShellError> {
        self.inner.resolve(request, session_cwd)
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'static, Result<ShellRunResult, ShellError>> {
        self.inner.run(spec)
    }

    fn start(&self, spec: ShellSpec) -> Arc<dyn ShellProcess> {
        let process = self.inner.start(spec);
        self.started.lock().unwrap().push(Arc::clone(&process));
        process
    }
}

impl Harness {
    /// Waits (at most 10 s) until the `n`th background process's stdout holds `text`.
    async fn wait_for_stdout(&self, n: usize, text: &str) {
        let process = Arc::clone(&self.started.lock().unwrap()[n]);
        tokio::time::timeout(Duration::from_secs(10), async {
            while process.read_from(Stream::Stdout, 0, 1 << 20).text != text {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the job never printed what was expected");
    }
}

fn harness(grace: Duration, kill_wait: Duration) -> Harness {
    harness_with(JobsConfig::default(), grace, kill_wait)
}

fn harness_with(config: JobsConfig, grace: Duration, kill_wait: Duration) -> Harness {
    let jobs = JobRuntime::new(config);
    let registry = ToolRegistry::new();
    let job_tools = registry
        .global_scope()
        .load(job_tools_plugin(&jobs, kill_wait))
        .unwrap();
    let started = Started::default();
    let executor = Arc::new(Recording {
        inner: support::executor(grace),
        started: Arc::clone(&started),
    });
    registry
        .global_scope()
        .load(BashPlugin::new(executor).with_jobs(jobs.clone()))
        .unwrap();
    Harness {
        registry,
        jobs,
        job_tools,
        started,
    }
}

fn job_tools_plugin(jobs: &JobRuntime, kill_wait: Duration) -> JobToolsPlugin {
    let mut config = JobToolsConfig::default();
    config.kill_wait = kill_wait;
    JobToolsPlugin::new(jobs.clone()).with_config(config)
}

fn quick() -> Harness {
    harness(Duration::from_millis(300), Duration::from_secs(5))
}

/// One agent session over a harness: each [`Session::turn`] scripts one model message of calls
/// and a closing answer, and returns what each call's result showed the model.
struct Session {
    agent: Agent,
    mock: MockAdapter,
    events: Arc<Mutex<Vec<EventRecord>>>,
    calls: usize,
}

impl Session {
    fn new(h: &Harness, session_id: &str) -> Session {
        let mock = MockAdapter::new(Vec::<Step>::new());
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let agent = Agent::builder(h.registry.clone(), Arc::new(mock.clone()))
            .session_id(session_id)
            .jobs(h.jobs.clone())
            .subscriber(move |r| sink.lock().unwrap().push(r.clone()))
            .build()
            .unwrap();
        Session {
            agent,
            mock,
            events,
            calls: 0,
        }
    }

    /// The model makes `calls` in one message; returns each call's outcome, in call order,
    /// after checking that each ran with the arguments it was given and that the next request
    /// carried its result.
    async fn turn(&mut self, calls: &[(&str, Value)]) -> Vec<Outcome> {
        let scripted: Vec<ScriptedCall> = calls
            .iter()
            .map(|(tool, args)| {
                self.calls += 1;
                ScriptedCall::json(format!("c{}", self.calls), *tool, args.clone())
            })
            .collect();
        let ids: Vec<String> = scripted.iter().map(|c| c.id.clone()).collect();
        self.mock.push(Response::calls(scripted.clone()));
        self.mock.push(Response::text("noted"));
        self.agent.run("go on").await.unwrap();
        let ran: Vec<SessionEvent> = self
            .events()
            .into_iter()
            .filter(
                |e| matches!(e, SessionEvent::ToolCall { call_id, .. } if ids.contains(call_id)),
            )
            .collect();
        let expected: Vec<SessionEvent> = scripted
            .iter()
            .zip(calls)
            .map(|(call, (tool, args))| SessionEvent::ToolCall {
                call_id: call.id.clone(),
                name: (*tool).to_owned(),
                arguments: args.clone(),
            })
            .collect();
        assert_eq!(ran, expected);
        let outcomes: Vec<(String, Outcome)> = self
            .events()
            .into_iter()
            .filter_map(|e| match e {
                SessionEvent::ToolResult {
                    call_id,
                    content,
                    error,
                    is_error,
                    ..
                } if ids.contains(&call_id) => {
                    assert_eq!(is_error, error.is_some(), "{call_id}");
                    Some((
                        call_id,
                        (error.map(|e| e.code), dsh_tools::content_text(&content)),
                    ))
                }
                _ => None,
            })
            .collect();
        // The next request carried exactly these results.
        let next = self.mock.requests().last().unwrap().messages.clone();
        for (id, (code, text)) in &outcomes {
            assert!(
                next.iter().any(|m| matches!(m, agent_loop::Message::Tool { call_id, content, is_error }
                    if call_id == id && dsh_tools::content_text(content) == *text && *is_error == code.is_some())),
                "{id} is not in the next request"
            );
        }
        assert_eq!(
            outcomes
                .iter()
                .map(|(id, _)| id.clone())
                .collect::<Vec<_>>(),
            ids
        );
        outcomes.into_iter().map(|(_, outcome)| outcome).collect()
    }

    /// One call in its own turn.
    async fn call(&mut self, tool: &str, args: Value) -> Outcome {
        self.turn(&[(tool, args)]).await.remove(0)
    }

    fn events(&self) -> Vec<SessionEvent> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.event.clone())
            .collect()
    }

    fn of_kind(&self, kind: &str) -> Vec<SessionEvent> {
        self.events()
            .into_iter()
            .filter(|e| e.kind() == kind)
            .collect()
    }
}

/// Runs each `(tool, args)` as one call of a single model message and compares every outcome
/// at once, so a table states the contract of a situation.
async fn expect(session: &mut Session, table: &[(&str, Value, Outcome)]) {
    let calls: Vec<(&str, Value)> = table
        .iter()
        .map(|(tool, args, _)| (*tool, args.clone()))
        .collect();
    let expected: Vec<(&str, Value, Outcome)> = table.to_vec();
    let outcomes = session.turn(&calls).await;
    let got: Vec<(&str, Value, Outcome)> = table
        .iter()
        .zip(outcomes)
        .map(|((tool, args, _), outcome)| (*tool, args.clone(), outcome))
        .collect();
    assert_eq!(got, expected);
}

fn bg(command: &str) -> Value {
    json!({"command": command, "description": "Run in the background", "run_in_background": true})
}

fn id(job: &str) -> Value {
    json!({"job_id": job})
}

async fn settled(h: &Harness, job: &str, session: &str) -> JobStatus {
    tokio::time::timeout(Duration::from_secs(20), h.jobs.settled(job, Some(session)))
        .await
        .expect("the job did not settle")
        .unwrap()
        .status
}

// ----- Ids that name no job -------------------------------------------------------------------

#[tokio::test]
async fn empty_and_unknown_job_ids_are_refused_by_every_job_tool() {
    let h = quick();
    let mut s = Session::new(&h, "s1");
    let unknown = "no job `bash-7` is visible to this session";
    expect(
        &mut s,
        &[
            (
                "job_output",
                id(""),
                failed(
                    FailureCode::InvalidArgs,
                    "invalid arguments: /job_id: must not be empty",
                ),
            ),
            (
                "job_output",
                id("   "),
                failed(
                    FailureCode::InvalidArgs,
                    "invalid arguments: /job_id: must not be empty",
                ),
            ),
            (
                "job_output",
                id("bash-7"),
                failed(FailureCode::ToolError, unknown),
            ),
            (
                "job_output",
                json!({"job_id": "bash-7", "wait": true, "timeout_ms": 50}),
                failed(FailureCode::ToolError, unknown),
            ),
            (
                "job_kill",
                id(""),
                failed(
                    FailureCode::InvalidArgs,
                    "invalid arguments: /job_id: must not be empty",
                ),
            ),
            (
                "job_kill",
                id("bash-7"),
                failed(FailureCode::ToolError, unknown),
            ),
            ("job_list", json!({}), ok("no background jobs")),
        ],
    )
    .await;
    assert_eq!(s.of_kind("job/end"), Vec::<SessionEvent>::new());
}

#[tokio::test]
async fn an_evicted_job_reads_as_expired_not_unknown() {
    let h = harness_with(
        JobsConfig {
            settled_retention: Duration::ZERO,
            ..JobsConfig::default()
        },
        Duration::from_millis(300),
        Duration::from_secs(5),
    );
    let mut s = Session::new(&h, "s1");
    assert_eq!(
        s.call("bash", bg("sleep 30")).await,
        ok("started background job bash-1")
    );
    // The kill reports the end to the model, so with no retention the record goes next.
    let stopped = s.call("job_kill", id("bash-1")).await;
    assert!(
        stopped.1.starts_with("job bash-1 stopped [status: killed"),
        "{stopped:?}"
    );
    let expired = "job `bash-1` has expired: it finished, its end was reported, and its record was removed after the retention of 0ms; its output is no longer available";
    expect(
        &mut s,
        &[
            (
                "job_output",
                id("bash-1"),
                failed(FailureCode::ToolError, expired),
            ),
            (
                "job_kill",
                id("bash-1"),
                failed(FailureCode::ToolError, expired),
            ),
            (
                "job_output",
                id("bash-2"),
                failed(
                    FailureCode::ToolError,
                    "no job `bash-2` is visible to this session",
                ),
            ),
            ("job_list", json!({}), ok("no background jobs")),
        ],
    )
    .await;
}

#[tokio::test]
async fn another_session_can_neither_read_list_nor_kill_a_job() {
    let h = quick();
    let mut owner = Session::new(&h, "s1");
    let mut other = Session::new(&h, "s2");
    assert_eq!(
        owner.call("bash", bg("sleep 30")).await,
        ok("started background job bash-1")
    );
    let hidden = "no job `bash-1` is visible to this session";
    expect(
        &mut other,
        &[
            (
                "job_output",
                id("bash-1"),
                failed(FailureCode::ToolError, hidden),
            ),
            (
                "job_kill",
                id("bash-1"),
                failed(FailureCode::ToolError, hidden),
            ),
            ("job_list", json!({}), ok("no background jobs")),
        ],
    )
    .await;
    assert_eq!(
        h.jobs.get("bash-1", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    owner.agent.dispose().await;
    assert_eq!(
        h.jobs.get("bash-1", Some("s1")).unwrap().status,
        JobStatus::Killed
    );
}

// ----- A finished, a killed and a stopping job ------------------------------------------------

#[tokio::test]
async fn a_finished_job_reads_lists_and_kills_as_finished_and_is_noticed_once() {
    let h = quick();
    let mut s = Session::new(&h, "s1");
    assert_eq!(
        s.call("bash", bg("echo out; echo err >&2; exit 3")).await,
        ok("started background job bash-1")
    );
    // Waited for by the host, which does not count as seeing the end.
    assert_eq!(settled(&h, "bash-1", "s1").await, JobStatus::Completed);
    expect(
        &mut s,
        &[
            (
                "job_output",
                id("bash-1"),
                ok("out\n[stderr]\nerr\n[status: completed, exit code: 3]"),
            ),
            (
                "job_output",
                json!({"job_id": "bash-1", "wait": true}),
                ok("(no new output)\n[status: completed, exit code: 3]"),
            ),
            (
                "job_kill",
                id("bash-1"),
                ok("job bash-1 had already finished [status: completed, exit code: 3]"),
            ),
            (
                "job_list",
                json!({}),
                ok("bash-1 [status: completed, exit code: 3] echo out; echo err >&2; exit 3"),
            ),
        ],
    )
    .await;
    assert_eq!(
        s.of_kind("job/end"),
        vec![SessionEvent::JobEnd {
            job_id: "bash-1".into(),
            status: JobStatus::Completed,
            detail: Some("exit code: 3".into())
        }]
    );
    // It ended while nobody read it, so its notice rode the next request, once; the reads
    // after it add none.
    let notice = "background job bash-1 (bash: echo out; echo err >&2; exit 3) finished [status: completed, exit code: 3]. Read its output with job_output.";
    let last = s.mock.requests().last().unwrap().messages.clone();
    let notices: Vec<&agent_loop::Message> = last
        .iter()
        .filter(|m| {
            matches!(
                m,
                agent_loop::Message::User {
                    source: Some(_),
                    ..
                }
            )
        })
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        matches!(notices[0], agent_loop::Message::User { content, .. } if content == notice),
        "{notices:?}"
    );
}

#[tokio::test]
async fn a_killed_job_reports_stopped_then_already_finished() {
    let h = quick();
    let mut s = Session::new(&h, "s1");
    let command = "echo begun; sleep 1000";
    assert_eq!(
        s.call("bash", bg(command)).await,
        ok("started background job bash-1")
    );
    h.wait_for_stdout(0, "begun\n").await;
    expect(
        &mut s,
        &[
            ("job_output", id("bash-1"), ok("begun\n[status: running]")),
            (
                "job_list",
                json!({}),
                ok(&format!("bash-1 [status: running] {command}")),
            ),
            (
                "job_kill",
                id("bash-1"),
                ok("job bash-1 stopped [status: killed, signal: SIGTERM]"),
            ),
            (
                "job_kill",
                id("bash-1"),
                ok("job bash-1 had already finished [status: killed, signal: SIGTERM]"),
            ),
            (
                "job_output",
                id("bash-1"),
                ok("(no new output)\n[status: killed, signal: SIGTERM]"),
            ),
            (
                "job_list",
                json!({}),
                ok(&format!(
                    "bash-1 [status: killed, signal: SIGTERM] {command}"
                )),
            ),
        ],
    )
    .await;
    assert_eq!(
        s.of_kind("job/end"),
        vec![SessionEvent::JobEnd {
            job_id: "bash-1".into(),
            status: JobStatus::Killed,
            detail: Some("signal: SIGTERM".into())
        }]
    );
}

#[tokio::test]
async fn a_job_that_outlives_the_kill_wait_is_reported_stopping_until_it_is_gone() {
    // It ignores SIGTERM, so it ends only at SIGKILL after the executor's 2 s grace, well
    // after job_kill's 100 ms wait.
    let h = harness(Duration::from_secs(2), Duration::from_millis(100));
    let mut s = Session::new(&h, "s1");
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let command = format!("trap '' TERM; touch {}; sleep 1000", ready.display());
    assert_eq!(
        s.call("bash", bg(&command)).await,
        ok("started background job bash-1")
    );
    wait_for_file(&ready).await;
    expect(
        &mut s,
        &[
            (
                "job_kill",
                id("bash-1"),
                ok("job bash-1 is stopping [status: stopping]"),
            ),
            (
                "job_kill",
                id("bash-1"),
                ok("job bash-1 is stopping [status: stopping]"),
            ),
            (
                "job_output",
                id("bash-1"),
                ok("(no new output)\n[status: stopping]"),
            ),
            (
                "job_list",
                json!({}),
                ok(&format!("bash-1 [status: stopping] {command}")),
            ),
        ],
    )
    .await;
    assert_eq!(settled(&h, "bash-1", "s1").await, JobStatus::Killed);
    expect(
        &mut s,
        &[
            (
                "job_output",
                json!({"job_id": "bash-1", "wait": true}),
                ok("(no new output)\n[status: killed, signal: SIGKILL]"),
            ),
            (
                "job_kill",
                id("bash-1"),
                ok("job bash-1 had already finished [status: killed, signal: SIGKILL]"),
            ),
        ],
    )
    .await;
    assert_eq!(
        s.of_kind("job/end"),
        vec![SessionEvent::JobEnd {
            job_id: "bash-1".into(),
            status: JobStatus::Killed,
            detail: Some("signal: SIGKILL".into())
        }]
    );
}

async fn wait_for_file(path: &std::path::Path) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the command never signalled it was ready");
}

// ----- Reloading the job tools while jobs run -------------------------------------------------

#[tokio::test]
async fn reloading_the_job_tools_keeps_running_jobs_reachable_and_unloading_them_stops_new_jobs() {
    let h = quick();
    let mut s = Session::new(&h, "s1");
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let command = format!(
        "echo one; while [ ! -e {} ]; do sleep 0.02; done; echo two",
        go.display()
    );
    assert_eq!(
        s.call("bash", bg(&command)).await,
        ok("started background job bash-1")
    );
    h.wait_for_stdout(0, "one\n").await;
    // A new version of the job tools (another kill wait) replaces the old one mid-job.
    h.job_tools
        .reload(job_tools_plugin(&h.jobs, Duration::from_secs(3)))
        .unwrap();
    expect(
        &mut s,
        &[
            ("job_output", id("bash-1"), ok("one\n[status: running]")),
            (
                "job_list",
                json!({}),
                ok(&format!("bash-1 [status: running] {command}")),
            ),
            ("bash", bg("sleep 30"), ok("started background job bash-2")),
        ],
    )
    .await;
    std::fs::write(&go, "").unwrap();
    assert_eq!(settled(&h, "bash-1", "s1").await, JobStatus::Completed);
    // Unloaded: the tools are gone, and without a controller no new job can start (nobody
    // could read or stop it); the jobs already running are the runtime's, not the plugin's.
    h.job_tools.dispose();
    let no_controller = "no job controller is attached: background jobs need the job tools (job_output, job_kill) to be loaded";
    let outcomes = s
        .turn(&[("job_output", id("bash-1")), ("bash", bg("sleep 30"))])
        .await;
    assert_eq!(outcomes[0].0, Some(FailureCode::UnknownTool));
    assert!(outcomes[0].1.contains("job_output"), "{}", outcomes[0].1);
    assert_eq!(outcomes[1], failed(FailureCode::ToolError, no_controller));
    assert_eq!(
        h.jobs.get("bash-2", Some("s1")).unwrap().status,
        JobStatus::Running
    );
    // Loaded again, the tools reach both jobs; the first one's rest is still unread.
    let _again = h
        .registry
        .global_scope()
        .load(job_tools_plugin(&h.jobs, Duration::from_secs(5)))
        .unwrap();
    expect(
        &mut s,
        &[
            (
                "job_output",
                id("bash-1"),
                ok("two\n[status: completed, exit code: 0]"),
            ),
            (
                "job_kill",
                id("bash-2"),
                ok("job bash-2 stopped [status: killed, signal: SIGTERM]"),
            ),
        ],
    )
    .await;
}

// ----- Concurrent readers -------------------------------------------------------------------

#[tokio::test]
async fn two_callers_reading_one_job_at_once_share_its_output_without_loss_or_repeat() {
    let h = quick();
    // An unowned job (started by the host, not an agent) is visible to every session. Each
    // `seq` writes its lines in one write below the pipe's atomic size, so every read ends on
    // a line: the reads' texts can be joined back into lines.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let command = format!(
        "seq 1 600; while [ ! -e {} ]; do sleep 0.02; done; seq 601 1000",
        go.display()
    );
    let started = h
        .registry
        .execute(dsh_tools::ToolCall::new("c0", "bash", bg(&command)))
        .await;
    assert_eq!(
        dsh_tools::content_text(&started.content),
        "started background job bash-1"
    );
    let mut first = Session::new(&h, "s1");
    let mut second = Session::new(&h, "s2");
    // Each session makes three reads in one message: two while the job may still run, one
    // waiting for its end. Whenever the job is let go, the outcome below holds.
    let reads = vec![
        ("job_output", id("bash-1")),
        ("job_output", id("bash-1")),
        (
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": 20000}),
        ),
    ];
    let release = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        std::fs::write(&go, "").unwrap();
    };
    let (a, b, ()) = tokio::join!(first.turn(&reads), second.turn(&reads), release);
    let mut seen = String::new();
    for (code, text) in a.iter().chain(&b) {
        assert_eq!(*code, None, "{text}");
        let (body, status) = text.rsplit_once('\n').unwrap();
        assert!(
            status == "[status: running]" || status == "[status: completed, exit code: 0]",
            "{status}"
        );
        if body != "(no new output)" {
            seen.push_str(body);
            seen.push('\n');
        }
    }
    // Every line once: the reads of both sessions split the output; none repeats or drops any.
    let mut lines: Vec<u32> = seen.lines().map(|l| l.parse().unwrap()).collect();
    lines.sort_unstable();
    assert_eq!(lines, (1..=1000).collect::<Vec<u32>>());
    // Both waits ended with the job's end.
    for outcome in [&a[2], &b[2]] {
        assert!(
            outcome.1.ends_with("[status: completed, exit code: 0]"),
            "{}",
            outcome.1
        );
    }
}
