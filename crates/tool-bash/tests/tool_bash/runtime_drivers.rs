//! The `bash` tool and the job tools on a Tokio runtime without the drivers the local executor
//! needs (IO for processes, time for timeouts): each call fails with a `TOOL_ERROR` naming the
//! missing drivers, and no process starts, instead of a contained panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_tools::jobs::{JobRuntime, JobsConfig};
use dsh_tools::{FailureCode, ToolCall, ToolFailure};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;
use tokio::runtime::Builder;

const NO_IO: &str = "this tool needs the Tokio IO driver, and the runtime running the call has none: build the runtime with `enable_io()` (or `enable_all()`)";
const NO_TIME: &str = "this tool needs the Tokio time driver, and the runtime running the call has none: build the runtime with `enable_time()` (or `enable_all()`)";
const NO_IO_NOR_TIME: &str = "this tool needs the Tokio IO and time drivers, and the runtime running the call has none of them: build the runtime with `enable_io()` and `enable_time()` (or `enable_all()`)";

fn failure(message: &str) -> Option<ToolFailure> {
    Some(ToolFailure {
        message: message.to_owned(),
        code: FailureCode::ToolError,
    })
}

#[test]
fn bash_names_the_drivers_its_runtime_lacks() {
    let marker = format!("drivers-{}", std::process::id());
    for (io, time, expected) in [
        (false, true, failure(NO_IO)),
        (true, false, failure(NO_TIME)),
        (false, false, failure(NO_IO_NOR_TIME)),
        (true, true, None),
    ] {
        let mut builder = Builder::new_current_thread();
        if io {
            builder.enable_io();
        }
        if time {
            builder.enable_time();
        }
        let runtime = builder.build().unwrap();
        let jobs = JobRuntime::new(JobsConfig::default());
        let expected_none = expected.is_none();
        let results = runtime.block_on(async {
            let registry = support::bash_registry(
                support::executor(Duration::from_millis(200)),
                Some(&jobs),
            );
            let command = format!("echo {marker}");
            let mut results = Vec::new();
            for (name, args) in [
                ("bash", json!({"command": command, "description": "Print a marker"})),
                (
                    "bash",
                    json!({"command": command, "description": "Print a marker", "run_in_background": true}),
                ),
            ] {
                let result = registry.execute(ToolCall::new("c1", name, args)).await;
                results.push(result.error);
            }
            if expected_none {
                // The background job started: let it finish before the runtime goes.
                let args = json!({"job_id": "bash-1", "wait": true});
                let waited = registry.execute(ToolCall::new("c2", "job_output", args)).await;
                assert_eq!(waited.error, None);
            }
            results
        });
        assert_eq!(
            results,
            vec![expected.clone(), expected],
            "io: {io}, time: {time}"
        );
    }
}
