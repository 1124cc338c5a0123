//! Reliability checks cheap enough for every CI run: the bad-input catalog and teardown under
//! load. (The heavier ones are in `tests/stress.rs`, run by `cargo xtask stress`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_tools::jobs::{JobRuntime, JobsConfig};
use dsh_tools::{FailureCode, ToolCall, ToolRegistry, ToolResult};
use serde_json::json;
use std::time::{Duration, Instant};
use support::live_group_members;

fn registry(jobs: &JobRuntime) -> ToolRegistry {
    support::bash_registry(support::executor(Duration::from_millis(500)), Some(jobs))
}

async fn call(
    registry: &ToolRegistry,
    name: &str,
    arguments: impl Into<dsh_tools::Arguments>,
) -> ToolResult {
    registry.execute(ToolCall::new("c", name, arguments)).await
}

#[tokio::test]
async fn every_bad_input_is_a_clear_error_and_the_next_call_works() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = registry(&jobs);
    let deep = format!(
        "{{\"command\": {}\"x\"{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let huge = json!({"command": "x".repeat(10 << 20), "description": "A very long command"});
    let huge_description = json!({"command": "echo ok", "description": "d".repeat(10 << 20)});
    let catalog: Vec<(&str, &str, dsh_tools::Arguments, FailureCode, &str)> = vec![
        (
            "non-JSON arguments",
            "bash",
            "{not json".into(),
            FailureCode::InvalidArgs,
            "not JSON",
        ),
        (
            "a wrong type",
            "bash",
            json!({"command": 5, "description": "Wrong type"}).into(),
            FailureCode::InvalidArgs,
            "/command: expected string, got integer",
        ),
        (
            "a missing required field",
            "bash",
            json!({"command": "ls"}).into(),
            FailureCode::InvalidArgs,
            "/description: required property is missing",
        ),
        (
            "an unknown key on a closed object",
            "job_kill",
            json!({"job_id": "bash-1", "force": true}).into(),
            FailureCode::InvalidArgs,
            "/force: unknown property",
        ),
        (
            "a 10 MB command",
            "bash",
            huge.into(),
            FailureCode::InvalidArgs,
            "/command: 10485760 bytes, over the limit of 1048576 bytes",
        ),
        (
            "argument text over the registry's 1 MiB limit",
            "bash",
            format!(
                r#"{{"command": "{}", "description": "Too long"}}"#,
                "x".repeat(1 << 20)
            )
            .into(),
            FailureCode::InvalidArgs,
            "over the limit of 1048576 bytes per call",
        ),
        (
            "10 000-deep nesting",
            "bash",
            deep.into(),
            FailureCode::InvalidArgs,
            "recursion limit",
        ),
        (
            "an unknown tool",
            "teleport",
            json!({}).into(),
            FailureCode::UnknownTool,
            "unknown tool `teleport`",
        ),
        (
            "the reserved Code Mode name",
            "run_code",
            json!({"code": "1"}).into(),
            FailureCode::UnknownTool,
            "unknown tool `run_code`",
        ),
        (
            "an empty command",
            "bash",
            json!({"command": "", "description": "Nothing"}).into(),
            FailureCode::InvalidArgs,
            "/command: must not be empty",
        ),
    ];
    for (what, tool, arguments, code, fragment) in catalog {
        let result = call(&registry, tool, arguments).await;
        assert!(result.is_error, "{what}: not an error");
        assert_eq!(result.code(), Some(code), "{what}: {:?}", result.error);
        let message = &result.error.as_ref().unwrap().message;
        assert!(message.contains(fragment), "{what}: {message}");
        assert!(
            message.len() < 4_096,
            "{what}: the message repeats the input ({} bytes)",
            message.len()
        );
        let next = call(
            &registry,
            "bash",
            json!({"command": "echo still fine", "description": "Check the registry"}),
        )
        .await;
        assert_eq!(
            dsh_tools::content_text(&next.content),
            "still fine",
            "after {what}"
        );
    }
    // A 10 MB description is just long text: the command runs.
    let result = call(&registry, "bash", huge_description).await;
    assert_eq!(dsh_tools::content_text(&result.content), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_under_load_stops_fifty_jobs_within_the_grace() {
    let jobs = JobRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: 100,
        ..JobsConfig::default()
    });
    let registry = registry(&jobs);
    for i in 0..50 {
        let args = json!({"command": format!("echo $$; sleep 1000 & sleep 1000 # {i}"), "description": "Wait forever", "run_in_background": true});
        let started = call(&registry, "bash", args).await;
        assert!(!started.is_error, "{:?}", started.error);
    }
    // Collect every job's process group before tearing down.
    let mut groups = Vec::new();
    for i in 1..=50 {
        let id = format!("bash-{i}");
        let mut text = String::new();
        for _ in 0..200 {
            text.push_str(&jobs.read(&id, None).unwrap().text);
            if text.contains('\n') {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        groups.push(
            text.trim()
                .parse::<i32>()
                .unwrap_or_else(|_| panic!("{id} printed {text:?}")),
        );
    }
    let began = Instant::now();
    jobs.teardown().await;
    let took = began.elapsed();
    // The executor's grace here is 500 ms; the bound of "teardown under load" in
    // docs/reliability.md#checks-in-every-test-run is the grace plus one second.
    assert!(
        took < Duration::from_millis(1_500),
        "teardown took {took:?}"
    );
    for snapshot in jobs.list(None) {
        assert!(
            snapshot.status.is_terminal() && snapshot.reported,
            "{snapshot:?}"
        );
    }
    for pgid in groups {
        assert_eq!(
            live_group_members(pgid),
            Vec::<i32>::new(),
            "group {pgid} survived teardown"
        );
    }
}
