//! What starting each command under its supervisor costs and leaves behind: supervisors are
//! reaped (no zombie piles up), a supervisor killed by its own command
//! neither hangs the call nor breaks the next one, and the orphan guard is not woken by each
//! command. And a long-running program under the same supervisor
//! (`LocalExecutor::spawn_program`): its streams are pipes, and whatever it starts outside its
//! group is killed when it is stopped or dropped.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use crate::escapees;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tool_bash::local::{LocalConfig, LocalExecutor};
use tool_bash::shell::{ShellExecutor, ShellRequest, ShellRunResult};

fn executor() -> LocalExecutor {
    support::executor(Duration::from_millis(300))
}

async fn run(executor: &LocalExecutor, command: &str) -> ShellRunResult {
    let spec = executor.resolve(ShellRequest::new(command), None).unwrap();
    tokio::time::timeout(Duration::from_secs(20), executor.run(spec))
        .await
        .expect("the call hung")
        .unwrap()
}

/// `(pid, state, parent pid)` of every process, from `/proc/PID/stat`.
fn processes() -> Vec<(i32, char, i32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(") ").map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let state = fields[0].chars().next().unwrap();
        found.push((pid, state, fields[1].parse().unwrap()));
    }
    found
}

fn zombie_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|&(_, state, parent)| state == 'Z' && parent == me)
        .map(|(pid, ..)| pid)
        .collect()
}

/// Counts this process's zombie children, so it runs in a process of its own: the other tests
/// of the binary have children of their own.
#[test]
fn supervisors_are_reaped_and_no_zombie_piles_up() {
    support::in_own_process(
        module_path!(),
        "supervisors_are_reaped_and_no_zombie_piles_up",
        || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
                .block_on(reaped_with_no_zombies());
        },
    );
}

async fn reaped_with_no_zombies() {
    let executor = executor();
    for round in 0..40 {
        let result = run(&executor, &format!("exit {}", round % 3)).await;
        assert_eq!(result.exit_code, Some(round % 3));
    }
    // A supervisor that said it was exiting is reaped by the next spawn, so at most the last
    // ones (this test's and a concurrent test's) can still be zombies; without reaping there
    // would be forty.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        run(&executor, "true").await;
        let zombies = zombie_children();
        if zombies.len() <= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "supervisors were not reaped: zombies {zombies:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_kills_its_supervisor_is_reported_killed_and_the_next_one_runs() {
    let executor = executor();
    // Three times: a killed supervisor's memory is given up, and the next ones start on other
    // memory, fresh or pooled.
    for _ in 0..3 {
        let started = Instant::now();
        let result = run(&executor, "kill -KILL $PPID; sleep 30").await;
        assert_eq!(
            (result.exit_code, result.signal.as_deref()),
            (None, Some("SIGKILL"))
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the call waited for the sleep: {:?}",
            started.elapsed()
        );
        let next = run(&executor, "echo next").await;
        assert_eq!(next.stdout.text, "next\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_supervisor_is_named_in_ps() {
    let result = run(&executor(), "cat /proc/$PPID/comm").await;
    assert_eq!(result.stdout.text, "dsh-supervisor\n");
}

/// A `bash` of this test's own (a symbolic link), so the guard of this test's executor is the
/// process running it.
fn own_bash(dir: &Path) -> PathBuf {
    let bash = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("bash"))
        .find(|candidate| candidate.is_file())
        .unwrap();
    let link = dir.join("guarded-bash");
    std::os::unix::fs::symlink(bash, &link).unwrap();
    link
}

/// The context switches of the process whose `argv[0]` is `program` (its only one).
fn context_switches_of(program: &Path) -> (i32, u64) {
    let wanted = program.as_os_str().as_encoded_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline.split(|&b| b == 0).next() != Some(wanted) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let switches: u64 = status
            .lines()
            .filter(|line| line.contains("ctxt_switches:"))
            .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        found.push((pid, switches));
    }
    assert_eq!(found.len(), 1, "one guard expected: {found:?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_orphan_guard_is_not_woken_by_each_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LocalConfig::default();
    config.bash = own_bash(dir.path());
    let executor = LocalExecutor::new(config);
    run(&executor, "true").await;
    let program = dir.path().join("guarded-bash");
    // The guard has started and settled into its wait.
    let mut before = context_switches_of(&program);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = context_switches_of(&program);
        if now == before {
            break;
        }
        assert!(Instant::now() < deadline, "the guard never settled");
        before = now;
    }
    for _ in 0..20 {
        run(&executor, "true").await;
    }
    // Each command registered and unregistered its group; the guard slept through all of it.
    assert_eq!(context_switches_of(&program), before);
}

use escapees::SYSTEM_PATH;

/// The escaping server as a program in `dir`, with `extra` arguments.
fn escaper(dir: &Path, extra: &[&str]) -> tool_bash::ConfinedProgram {
    escapees::escaper_program(dir, extra, &[])
}

/// How long the processes of a stopped program may take to be gone.
const GONE_BOUND: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_program_takes_what_it_started_with_it_however_it_regrouped() {
    let dir = tempfile::tempdir().unwrap();
    let executor = executor();
    let mut program = executor
        .spawn_program(&escaper(dir.path(), &[]))
        .await
        .unwrap();
    assert_eq!(program.program(), escapees::system_python());
    let answer = escapees::ping(&mut program).await;
    assert!(answer.contains(r#""text": "pong""#), "{answer}");
    let processes = escapees::escaped(dir.path(), Duration::from_secs(20));
    escapees::assert_escaped(&processes);
    assert_eq!(processes[2].pid, program.pid() as i32);
    // Its stdin closed, the server exits on its own within the grace: its status is its own.
    let status = program.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(status.code(), Some(0));
    escapees::assert_gone(&processes, GONE_BOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_outlives_its_grace_is_killed_with_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let executor = executor();
    let mut program = executor
        .spawn_program(&escaper(dir.path(), &["--ignore-eof"]))
        .await
        .unwrap();
    escapees::ping(&mut program).await;
    let processes = escapees::escaped(dir.path(), Duration::from_secs(20));
    escapees::assert_escaped(&processes);
    let started = Instant::now();
    let status = program.stop(Duration::from_millis(300)).await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{status:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    escapees::assert_gone(&processes, GONE_BOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_dropped_without_a_stop_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let executor = executor();
    let program = executor
        .spawn_program(&escaper(dir.path(), &["--ignore-eof"]))
        .await
        .unwrap();
    let processes = escapees::escaped(dir.path(), Duration::from_secs(20));
    escapees::assert_escaped(&processes);
    drop(program);
    escapees::assert_gone(&processes, GONE_BOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_is_found_on_the_path_of_its_own_environment_or_named_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    let executor = executor();
    // Found on its own `PATH`, wherever the host's points; `wait` gives its status.
    let sh = tool_bash::ConfinedProgram::new("sh", dir.path())
        .with_args(["-c", "exit 3"])
        .with_env([("PATH", SYSTEM_PATH)]);
    let mut program = executor.spawn_program(&sh).await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), program.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    assert_eq!(program.stop(Duration::ZERO).await.unwrap().code(), Some(3));

    let missing = |env: Vec<(&str, &str)>| {
        tool_bash::ConfinedProgram::new("no-such-program-here", dir.path()).with_env(env)
    };
    let errors = [
        executor
            .spawn_program(&missing(vec![("PATH", "/nonexistent:/also-not")]))
            .await
            .unwrap_err()
            .to_string(),
        executor
            .spawn_program(&missing(vec![]))
            .await
            .unwrap_err()
            .to_string(),
        executor
            .spawn_program(&tool_bash::ConfinedProgram::new(
                "/nonexistent/server",
                dir.path(),
            ))
            .await
            .unwrap_err()
            .to_string(),
    ];
    assert_eq!(
        errors,
        [
            "`no-such-program-here` was not found on PATH (/nonexistent:/also-not)",
            "`no-such-program-here` was not found on PATH: its environment has no PATH",
            "cannot start `/nonexistent/server`: No such file or directory (os error 2)",
        ]
    );
}
