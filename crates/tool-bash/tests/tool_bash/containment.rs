//! Containment beyond the process group: every process a command starts ends with the call,
//! however it regroups itself (job control, `setsid`, `setpgid` from perl or python, a double
//! fork into a new session, `nohup` + `disown`), in every way a command can end: it exits, it
//! times out, it is cancelled, its job is killed, the executor is torn down, the harness dies.
//!
//! Each escaping process is a `sleep` with a unique duration, so the test finds it in `/proc`
//! by its command line, whatever its group or session.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tool_bash::shell::{ProcessStatus, ShellExecutor, ShellRequest};

/// The ways a command can move a process out of its group or session. `{m}` is the marker.
const ESCAPES: &[(&str, &str)] = &[
    ("job control", "set -m; sleep {m} & echo started"),
    ("setsid", "setsid sleep {m} & echo started"),
    (
        "setsid --fork",
        "setsid -f sleep {m} >/dev/null 2>&1; echo started",
    ),
    (
        "perl setpgrp",
        "perl -e 'setpgrp(0, 0); exec \"sleep\", \"{m}\"' & echo started",
    ),
    (
        "python setsid",
        "python3 -c 'import os; os.setsid(); os.execvp(\"sleep\", [\"sleep\", \"{m}\"])' & echo started",
    ),
    (
        "double fork into a new session",
        "( ( setsid sleep {m} >/dev/null 2>&1 & ) & ); echo started",
    ),
    (
        "nohup and disown",
        "nohup sleep {m} >/dev/null 2>&1 & disown; echo started",
    ),
];

/// A unique `sleep` duration: long enough never to end by itself, and found by its digits.
fn marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("9{:07}{n:04}", std::process::id())
}

fn command(template: &str, marker: &str) -> String {
    template.replace("{m}", marker)
}

/// The live (non-zombie) processes whose command line holds `marker` as a whole argument.
fn processes_with(marker: &str) -> Vec<i32> {
    support::processes_with_argument(marker)
}

/// Waits (at most 10 s) until a process with `marker` runs.
async fn until_running(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the escaping process never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts that no process with `marker` is left, allowing `bound` for the kernel to finish
/// the kills the harness already sent.
fn assert_gone(marker: &str, bound: Duration, what: &str) {
    let deadline = Instant::now() + bound;
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for pid in &left {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            panic!("{what}: processes {left:?} outlived the call");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn executor() -> tool_bash::LocalExecutor {
    support::executor(Duration::from_millis(300))
}

/// Runs every escape route once through `run_case`, concurrently, with a fresh marker each.
async fn for_each_escape<F, Fut>(run_case: F)
where
    F: Fn(&'static str, String, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let cases = ESCAPES.iter().map(|(name, template)| {
        let marker = marker();
        run_case(name, command(template, &marker), marker)
    });
    futures::future::join_all(cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_when_a_foreground_command_exits() {
    let executor = executor();
    for_each_escape(|name, command, marker| {
        let executor = executor.clone();
        async move {
            let spec = executor.resolve(ShellRequest::new(command), None).unwrap();
            let result = executor.run(spec).await.unwrap();
            assert_eq!(result.exit_code, Some(0), "{name}");
            assert_gone(&marker, Duration::from_secs(2), name);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_when_a_foreground_command_times_out() {
    let executor = executor();
    for_each_escape(|name, command, marker| {
        let executor = executor.clone();
        async move {
            let mut request = ShellRequest::new(format!("{command}; sleep 1000"));
            request.timeout = Some(Duration::from_millis(1500));
            let spec = executor.resolve(request, None).unwrap();
            let result = executor.run(spec).await.unwrap();
            assert!(result.timed_out, "{name}");
            assert_gone(&marker, Duration::from_secs(2), name);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_when_a_foreground_command_is_cancelled() {
    let executor = executor();
    for_each_escape(|name, command, marker| {
        let executor = executor.clone();
        async move {
            let token = CancellationToken::new();
            let mut request = ShellRequest::new(format!("{command}; sleep 1000"));
            request.signal = Some(token.clone());
            let spec = executor.resolve(request, None).unwrap();
            let run = tokio::spawn(executor.run(spec));
            until_running(&marker).await;
            token.cancel();
            let result = run.await.unwrap().unwrap();
            assert!(result.aborted, "{name}");
            assert_gone(&marker, Duration::from_secs(2), name);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_when_a_background_job_is_killed() {
    let executor = executor();
    for_each_escape(|name, command, marker| {
        let executor = executor.clone();
        async move {
            let spec = executor
                .resolve(ShellRequest::new(format!("{command}; sleep 1000")), None)
                .unwrap();
            let process = executor.start(spec);
            until_running(&marker).await;
            assert!(process.kill(), "{name}");
            process.done().await;
            assert_eq!(process.status(), ProcessStatus::Killed, "{name}");
            assert_gone(&marker, Duration::from_secs(2), name);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_when_a_background_job_exits() {
    let executor = executor();
    for_each_escape(|name, command, marker| {
        let executor = executor.clone();
        async move {
            let spec = executor.resolve(ShellRequest::new(command), None).unwrap();
            let process = executor.start(spec);
            process.done().await;
            assert_eq!(process.status(), ProcessStatus::Exited, "{name}");
            assert_gone(&marker, Duration::from_secs(2), name);
        }
    })
    .await;
}

#[test]
fn escapes_end_when_the_executor_is_torn_down() {
    let markers: Vec<String> = ESCAPES.iter().map(|_| marker()).collect();
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let executor = executor();
            let mut processes = Vec::new();
            for ((_, template), marker) in ESCAPES.iter().zip(&markers) {
                let spec = executor
                    .resolve(
                        ShellRequest::new(format!("{}; sleep 1000", command(template, marker))),
                        None,
                    )
                    .unwrap();
                processes.push(executor.start(spec));
            }
            for marker in &markers {
                until_running(marker).await;
            }
        });
        // The runtime goes with its tasks, and the executor with it: nothing kills the jobs
        // but teardown itself.
        drop(runtime);
    }
    for ((name, _), marker) in ESCAPES.iter().zip(&markers) {
        assert_gone(marker, Duration::from_secs(3), name);
    }
}

const ROLE: &str = "DSH_CONTAINMENT_HARNESS";

/// The crashing harness: starts every escape as a background job and one foreground command,
/// reports the markers, and waits to be killed.
fn act_as_harness() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = executor();
        let mut markers = Vec::new();
        let mut processes = Vec::new();
        for (_, template) in ESCAPES {
            let marker = marker();
            let spec = executor
                .resolve(
                    ShellRequest::new(format!("{}; sleep 1000", command(template, &marker))),
                    None,
                )
                .unwrap();
            processes.push(executor.start(spec));
            markers.push(marker);
        }
        let foreground = marker();
        let spec = executor
            .resolve(
                ShellRequest::new(format!(
                    "{}; sleep 1000",
                    command(ESCAPES[1].1, &foreground)
                )),
                None,
            )
            .unwrap();
        let run = tokio::spawn(executor.run(spec));
        markers.push(foreground);
        for marker in &markers {
            until_running(marker).await;
        }
        let mut stdout = std::io::stdout();
        writeln!(stdout, "MARKERS {}", markers.join(" ")).unwrap();
        stdout.flush().unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop((run, processes));
    });
}

#[test]
fn escapes_end_when_the_harness_is_killed() {
    if std::env::var_os(ROLE).is_some() {
        act_as_harness();
        return;
    }
    let mut harness = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &support::test_name(module_path!(), "escapes_end_when_the_harness_is_killed"),
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(ROLE, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let harness_pid = harness.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &harness_pid])
            .status();
    });
    let mut lines = BufReader::new(harness.stdout.take().unwrap()).lines();
    let markers: Vec<String> = loop {
        let line = lines.next().expect("the harness exited early").unwrap();
        if let Some((_, markers)) = line.split_once("MARKERS ") {
            break markers.split_whitespace().map(str::to_owned).collect();
        }
    };
    assert_eq!(markers.len(), ESCAPES.len() + 1);
    for marker in &markers {
        assert!(!processes_with(marker).is_empty(), "{marker} should run");
    }
    harness.kill().unwrap();
    harness.wait().unwrap();
    for marker in &markers {
        assert_gone(
            marker,
            Duration::from_secs(5),
            "after the harness was killed",
        );
    }
}

/// An agent that owns jobs and is never told anything.
#[derive(Debug)]
struct Owner(String);

impl dsh_tools::AgentHandle for Owner {
    fn session_id(&self) -> &str {
        &self.0
    }

    fn inject(&self, _: dsh_tools::InjectedContext) -> Result<(), dsh_tools::AgentGone> {
        Ok(())
    }

    fn is_alive(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_when_job_kill_stops_a_job_and_when_its_owner_is_disposed() {
    use dsh_tools::jobs::{JobRuntime, JobsConfig};
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = support::bash_registry(executor(), Some(&jobs));
    let owner: dsh_tools::AgentRef = std::sync::Arc::new(Owner("s-containment".into()));
    let call = |id: &str, tool: &str, args: serde_json::Value| {
        dsh_tools::ToolCall::new(id, tool, args.to_string()).with_agent(owner.clone())
    };
    let (killed, disposed) = (marker(), marker());
    for (id, marker) in [("c1", &killed), ("c2", &disposed)] {
        let args = serde_json::json!({
            "command": format!("setsid sleep {marker} & sleep 1000"),
            "description": "Start a job that escapes its group",
            "run_in_background": true,
        });
        let result = registry.execute(call(id, "bash", args)).await;
        assert!(!result.is_error, "{:?}", result.content);
        until_running(marker).await;
    }
    let result = registry
        .execute(call(
            "c3",
            "job_kill",
            serde_json::json!({"job_id": "bash-1"}),
        ))
        .await;
    assert!(!result.is_error, "{:?}", result.content);
    assert_gone(&killed, Duration::from_secs(2), "job_kill");
    assert!(
        !processes_with(&disposed).is_empty(),
        "the other job runs on"
    );
    jobs.dispose_owner("s-containment").await;
    assert_gone(&disposed, Duration::from_secs(2), "owner disposal");
}

/// A command that stops its supervisor (`kill -STOP` of its parent, which nothing but the
/// sandbox's signal scope forbids) cannot hang its call: it times out, is cancelled, or exits,
/// and in each case the call ends within its bounds, the supervisor is killed rather than
/// waited for, and the command's processes are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_stops_its_supervisor_still_ends_every_way() {
    let executor = executor();
    let bound = Duration::from_secs(10);
    let run = |command: String, timeout: Option<Duration>, token: Option<CancellationToken>| {
        let executor = executor.clone();
        async move {
            let mut request = ShellRequest::new(command);
            request.timeout = timeout;
            request.signal = token;
            let spec = executor.resolve(request, None).unwrap();
            let started = Instant::now();
            let result = tokio::time::timeout(bound, executor.run(spec))
                .await
                .expect("the call hung on its stopped supervisor")
                .unwrap();
            (result, started.elapsed())
        }
    };
    let timed_out = marker();
    let (result, took) = run(
        format!("kill -STOP $PPID; sleep {timed_out}"),
        Some(Duration::from_millis(500)),
        None,
    )
    .await;
    assert!(result.timed_out, "{result:?}");
    assert!(took < bound, "{took:?}");
    assert_gone(&timed_out, Duration::from_secs(2), "timed out");

    let exited = marker();
    let (result, _) = run(
        format!("sleep {exited} & kill -STOP $PPID; echo stopped"),
        None,
        None,
    )
    .await;
    assert_eq!(result.stdout.text, "stopped\n", "{result:?}");
    assert_gone(&exited, Duration::from_secs(2), "exited");

    let cancelled = marker();
    let token = CancellationToken::new();
    let call = tokio::spawn(run(
        format!("kill -STOP $PPID; sleep {cancelled}"),
        None,
        Some(token.clone()),
    ));
    until_running(&cancelled).await;
    token.cancel();
    let (result, _) = call.await.unwrap();
    assert!(result.aborted, "{result:?}");
    assert_gone(&cancelled, Duration::from_secs(2), "cancelled");
}
