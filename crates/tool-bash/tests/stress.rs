//! The heavy reliability checks, run by `cargo xtask stress` (release mode, feature `stress`):
//! many cancellations and timeouts with grandchildren, a 1 GiB stream, 1 000 real background
//! jobs and their notices, and kills racing natural exits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_test_support::RecordingAgent;
use dsh_tools::jobs::{JobRuntime, JobsConfig};
use dsh_tools::{AgentRef, ToolCall};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::{live_group_members, resident_kib};
use tokio_util::sync::CancellationToken;
use tool_bash::LocalExecutor;
use tool_bash::shell::{ShellExecutor, ShellRequest};

fn executor() -> LocalExecutor {
    support::executor(Duration::from_millis(300))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_cancellations_and_timeouts_leak_no_process() {
    let executor = executor();
    let mut groups = Vec::new();
    for round in 0..25 {
        let mut batch = Vec::new();
        for i in 0..8 {
            let mut request =
                ShellRequest::new("echo $$; sleep 1000 & sleep 1000 | cat & sleep 1000");
            if i % 2 == 0 {
                request.timeout = Some(Duration::from_millis(100 + (round * 7 + i) % 50));
            } else {
                let signal = CancellationToken::new();
                let trigger = signal.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(80)).await;
                    trigger.cancel();
                });
                request.signal = Some(signal);
            }
            let spec = executor.resolve(request, None).unwrap();
            batch.push(executor.run(spec));
        }
        for result in futures::future::join_all(batch).await {
            let result = result.unwrap();
            assert!(result.timed_out || result.aborted);
            if let Ok(pgid) = result.stdout.text.trim().parse::<i32>() {
                groups.push(pgid);
            }
        }
    }
    assert!(
        groups.len() >= 190,
        "only {} groups reported their id",
        groups.len()
    );
    for pgid in groups {
        assert_eq!(
            live_group_members(pgid),
            Vec::<i32>::new(),
            "group {pgid} leaked"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gibibyte_through_the_tool_spills_byte_for_byte_in_bounded_memory() {
    let source = support::random_file(1 << 30);
    let registry = support::bash_registry(executor(), None);
    let before = resident_kib();
    let args = json!({"command": format!("cat {}", source.path().display()), "description": "Stream a gibibyte", "timeout_ms": 600000});
    let result = registry.execute(ToolCall::new("c", "bash", args)).await;
    let growth = resident_kib().saturating_sub(before);
    let value = result.value.unwrap();
    assert_eq!(value["stdout"]["totalBytes"], json!(1u64 << 30));
    let spill = value["stdout"]["spillPath"].as_str().unwrap();
    assert!(
        support::same_contents(source.path(), spill.as_ref()),
        "the spill file differs"
    );
    assert!(growth < 32 * 1024, "resident memory grew by {growth} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_real_jobs_give_a_thousand_notices() {
    let jobs = JobRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: 2_000,
        ..JobsConfig::default()
    });
    let registry = support::bash_registry(executor(), Some(&jobs));
    let owner = RecordingAgent::new("s1");
    let handle: AgentRef = owner.clone();
    for i in 0..1_000 {
        let args = json!({"command": format!("sleep 0.$((RANDOM % 3)); echo {i}"), "description": "A tiny job", "run_in_background": true});
        let call = ToolCall::new(format!("c{i}"), "bash", args).with_agent(handle.clone());
        let result = registry.execute(call).await;
        assert!(!result.is_error, "{:?}", result.error);
    }
    for i in 1..=1_000 {
        jobs.settled(&format!("bash-{i}"), Some("s1"))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let notices = owner.injected();
    assert_eq!(notices.len(), 1_000);
    let mut ids: Vec<&str> = notices
        .iter()
        .map(|n| n.content.split_whitespace().nth(2).unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 1_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_racing_natural_exits_settle_each_job_once() {
    let jobs = JobRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: 500,
        ..JobsConfig::default()
    });
    let settlements = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&settlements);
    let _listener = jobs.on_done(move |_, _| {
        count.fetch_add(1, Ordering::SeqCst);
    });
    let registry = support::bash_registry(executor(), Some(&jobs));
    for i in 0..200 {
        let args = json!({"command": format!("sleep 0.0{}", i % 10), "description": "Race a kill", "run_in_background": true});
        registry
            .execute(ToolCall::new(format!("c{i}"), "bash", args))
            .await;
    }
    for i in 1..=200 {
        tokio::time::sleep(Duration::from_micros(500)).await;
        let _ = jobs.kill(&format!("bash-{i}"), None, "race");
    }
    for i in 1..=200 {
        let snapshot = jobs.settled(&format!("bash-{i}"), None).await.unwrap();
        assert!(snapshot.status.is_terminal());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(settlements.load(Ordering::SeqCst), 200);
}
