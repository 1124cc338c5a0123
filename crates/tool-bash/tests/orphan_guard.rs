//! The orphan guard cannot be silently disabled: when something kills it (a command running as
//! the same user can), the executor notices at once, without waiting for its next command, and
//! starts a new guard told every live group. A binary of its own: the test counts the guard
//! processes of this process, which other tests' executors would add to.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};
use tool_bash::shell::{ShellExecutor, ShellRequest};

/// The live (non-zombie) processes whose command line holds `marker` as a whole argument.
fn processes_with(marker: &str) -> Vec<i32> {
    support::processes_with_argument(marker)
}

/// Guard processes (children of this process running the orphan guard's script).
fn guards_of_this_process() -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains("declare -A live") {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rfind(") ")
            .map(|i| stat[i + 2..].split_whitespace().collect())
            .unwrap_or_default();
        if fields.first() != Some(&"Z") && fields.get(1) == Some(&me.as_str()) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_orphan_guard_is_replaced_at_once() {
    let executor = support::executor(Duration::from_millis(300));
    let marker = format!("9{:07}77", std::process::id());
    let spec = executor
        .resolve(ShellRequest::new(format!("sleep {marker}")), None)
        .unwrap();
    let process = executor.start(spec);
    while processes_with(&marker).is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = guards_of_this_process();
    assert_eq!(before.len(), 1, "one guard per executor: {before:?}");
    // A command (or anyone running as this user) kills the guard.
    let status = std::process::Command::new("kill")
        .args(["-KILL", &before[0].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // No new command is needed for the harness to notice.
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        let now = guards_of_this_process();
        if now.len() == 1 && now != before {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the killed guard was not replaced: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_ne!(after, before);
    process.kill();
    process.done().await;
}
