//! Programs that are not shell commands (a stdio MCP server) under a sandboxed executor's
//! supervisor (`SandboxedExecutor::spawn_program`): whatever the program starts outside its
//! group (`setsid -f`, a double fork into a group of its own; `support/escaper.py`) is killed
//! when it is stopped and when it is dropped, on both backends. The processes are found by a
//! mark in their environment, since under bubblewrap the pids they write are those of a pid
//! namespace of their own.
//!
//! `supervised_programs_hold_as_a_user` runs the cases (and the confinement check of
//! `spawn_program`) in a child process of this test binary as an ordinary user: as a throwaway
//! user (`setpriv`) when the tests run as root (as in CI), else as the user running them.
//! `program_pass` is that child's entry point, ignored when the tests run.

use super::escapees::{self, Process};
use super::{Dirs, bubblewrap_available, sandboxed};
use std::collections::BTreeSet;
use std::process::Output;
use std::time::{Duration, Instant};
use tool_bash::SupervisedProgram;
use tool_bash::sandbox::{SandboxBackend, SandboxMode};

/// The variable that marks the processes of one case.
const MARK_NAME: &str = "DSH_PROGRAM_TEST_MARK";

/// The throwaway user of the pass as a user.
const THROWAWAY_ID: u32 = 61_235;

/// How long the processes of a stopped program may take to be gone.
const GONE_BOUND: Duration = Duration::from_secs(5);

/// Reads the program's stdout and stderr to their ends, waits for it and stops it: its
/// output as `std::process::Command::output` gives it.
pub(super) async fn output_of(mut program: SupervisedProgram) -> Output {
    use tokio::io::AsyncReadExt;
    drop(program.take_stdin());
    let (mut out, mut err) = (
        program.take_stdout().unwrap(),
        program.take_stderr().unwrap(),
    );
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let read = async {
        let (a, b) = tokio::join!(out.read_to_end(&mut stdout), err.read_to_end(&mut stderr));
        a.unwrap();
        b.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the program's output did not end");
    let status = tokio::time::timeout(Duration::from_secs(20), program.wait())
        .await
        .expect("the program did not end")
        .unwrap();
    program.stop(Duration::ZERO).await.unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Waits (bounded) for `file` in `dir`.
fn wait_for(dir: &std::path::Path, file: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join(file).exists() {
        assert!(Instant::now() < deadline, "{file} was not written");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The escaper, confined on `backend`, answers on its pipes; then, stopped (after a grace it
/// outlives) or dropped, it takes every process it started with it.
pub(super) async fn a_supervised_program_loses_what_it_started_on_stop_and_drop(
    backend: SandboxBackend,
) {
    for dropped in [false, true] {
        let dirs = Dirs::new();
        let executor = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
        let value = format!("{}-{backend}-{dropped}", std::process::id());
        let program =
            escapees::escaper_program(dirs.root(), &["--ignore-eof"], &[(MARK_NAME, &value)]);
        let mut supervised = executor.spawn_program(&program).await.unwrap();
        let answer = escapees::ping(&mut supervised).await;
        assert!(answer.contains(r#""text": "pong""#), "{backend}: {answer}");
        wait_for(dirs.root(), "server.pid");
        let processes: Vec<Process> = escapees::marked(&format!("{MARK_NAME}={value}"));
        let sessions: BTreeSet<i32> = processes.iter().map(|p| p.session).collect();
        let groups: BTreeSet<i32> = processes.iter().map(|p| p.group).collect();
        // The server's and the `setsid` one's sessions; the server's, the `setsid` one's and
        // the double-forked one's groups.
        assert!(
            sessions.len() >= 2 && groups.len() >= 3,
            "{backend}: nothing left the server's group: {processes:?}"
        );
        if dropped {
            drop(supervised);
        } else {
            let started = Instant::now();
            supervised.stop(Duration::from_millis(300)).await.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{backend}: the stop took {:?}",
                started.elapsed()
            );
        }
        escapees::assert_gone(&processes, GONE_BOUND);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the entry point of supervised_programs_hold_as_a_user's child process"]
async fn program_pass() {
    let mut backends = vec![SandboxBackend::Landlock];
    if bubblewrap_available() {
        backends.push(SandboxBackend::Bubblewrap);
    }
    for backend in backends {
        super::a_program_started_through_the_sandbox_is_confined(backend).await;
        a_supervised_program_loses_what_it_started_on_stop_and_drop(backend).await;
    }
}

#[test]
fn supervised_programs_hold_as_a_user() {
    let user = super::as_user::running_as_root().then_some(THROWAWAY_ID);
    super::as_user::pass_as(
        "program::program_pass",
        user,
        &[],
        "the supervised programs",
    );
}
