//! A crashed harness leaves no command running: when the process that owns the executor dies
//! (SIGKILL, no cleanup), every process group it started is killed.
//!
//! The test re-runs its own binary as the "harness": with `DSH_CRASH_HARNESS` set, the same test
//! function starts a background command, prints its process group and waits to be killed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::live_group_members;
use tool_bash::LocalExecutor;
use tool_bash::shell::{ShellExecutor, ShellRequest, Stream};

const ROLE: &str = "DSH_CRASH_HARNESS";

fn act_as_harness() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = LocalExecutor::default();
        let spec = executor
            .resolve(ShellRequest::new("echo $$; sleep 1000 & sleep 1000"), None)
            .unwrap();
        let process = executor.start(spec);
        let mut pgid = String::new();
        while !pgid.ends_with('\n') {
            pgid.push_str(
                &process
                    .read_from(Stream::Stdout, pgid.len() as u64, 64)
                    .text,
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut stdout = std::io::stdout();
        writeln!(stdout, "PGID {}", pgid.trim()).unwrap();
        stdout.flush().unwrap();
        // Wait to be killed.
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
}

#[test]
fn a_killed_harness_leaves_no_command_running() {
    if std::env::var_os(ROLE).is_some() {
        act_as_harness();
        return;
    }
    let mut harness = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &support::test_name(module_path!(), "a_killed_harness_leaves_no_command_running"),
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(ROLE, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A harness that never reports must fail the test, not hang it: kill it after a minute,
    // which ends its output and so the wait below.
    let harness_pid = harness.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = Command::new("kill").args(["-KILL", &harness_pid]).status();
    });
    let mut lines = BufReader::new(harness.stdout.take().unwrap()).lines();
    let pgid: i32 = loop {
        let line = lines.next().expect("the harness exited early").unwrap();
        // libtest prints `test <name> ... ` first, on the same line.
        if let Some((_, pgid)) = line.split_once("PGID ") {
            break pgid.trim().parse().unwrap();
        }
    };
    assert!(
        !live_group_members(pgid).is_empty(),
        "the command should be running"
    );
    harness.kill().unwrap();
    harness.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_group_members(pgid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "the command outlived its harness"
    );
}
