//! A host that drops a running `run_code` call without cancelling it must not leave the engine
//! thread spinning. The check counts its process's engine threads, so it runs in a process of
//! its own: the test binary again, with only that test selected.

use dsh_tools::{ToolCall, ToolRegistry};
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use tool_code::{CodeModeLimits, register_run_code};

/// The test the other process runs, by its full name in this binary.
const ALONE: &str = "abandoned::dropping_a_running_call_stops_its_engine_alone";

#[test]
fn dropping_a_running_call_stops_its_engine() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            ALONE,
            "--exact",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{ALONE} failed in its own process:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The threads of this process named `code-mode` (the engine threads).
fn engine_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim() == "code-mode")
        })
        .count()
}

/// Polls `condition` every 10 ms for at most 10 s.
async fn eventually(condition: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
#[ignore = "counts its process's engine threads; run alone by dropping_a_running_call_stops_its_engine"]
async fn dropping_a_running_call_stops_its_engine_alone() {
    let registry = ToolRegistry::new();
    register_run_code(&registry, CodeModeLimits::default()).unwrap();
    let call = ToolCall::new(
        "c1",
        "run_code",
        json!({"code": "while (true) {}", "timeout_ms": 600000}),
    );
    let running = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.execute(call).await })
    };
    assert!(
        eventually(|| engine_threads() == 1).await,
        "the engine never started"
    );
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert!(
        eventually(|| engine_threads() == 0).await,
        "the engine thread still runs after its call was dropped"
    );
}
