//! A downstream executor: built outside the crate on the public contract alone, it plugs into
//! the `bash` tool unchanged. This file compiles as its own crate, so the contract cannot grow
//! something only the local executor can build.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::{ToolCall, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tool_bash::BashPlugin;
use tool_bash::shell::{
    Collected, ProcessStatus, ShellError, ShellExecutor, ShellLimits, ShellProcess, ShellRequest,
    ShellRunResult, ShellSpec, Stream, StreamRead,
};

/// Pretends to run every command in `/sandbox`, answering with a canned result.
#[derive(Debug, Default)]
struct Sandbox {
    specs: Mutex<Vec<ShellSpec>>,
}

impl ShellExecutor for Sandbox {
    fn resolve(
        &self,
        request: ShellRequest,
        _session_cwd: Option<&Path>,
    ) -> Result<ShellSpec, ShellError> {
        let mut limits = ShellLimits::default();
        limits.max_timeout = Duration::from_secs(5);
        Ok(ShellSpec::from_request(
            request,
            PathBuf::from("/sandbox"),
            &limits,
        ))
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'static, Result<ShellRunResult, ShellError>> {
        let result = ShellRunResult {
            exit_code: Some(2),
            signal: None,
            timed_out: false,
            aborted: false,
            timeout: spec.timeout,
            stdout: Collected {
                text: format!("ran `{}` in {}\n", spec.command, spec.workdir.display()),
                total_bytes: 1,
                shown_bytes: 1,
                ..Collected::default()
            },
            stderr: Collected::default(),
            duration: Duration::ZERO,
            notes: Vec::new(),
        };
        self.specs.lock().unwrap().push(spec);
        Box::pin(async move { Ok(result) })
    }

    fn start(&self, _spec: ShellSpec) -> Arc<dyn ShellProcess> {
        Arc::new(NeverStarted)
    }
}

/// The background side, which this foreground-only sandbox never reaches.
#[derive(Debug)]
struct NeverStarted;

impl ShellProcess for NeverStarted {
    fn status(&self) -> ProcessStatus {
        ProcessStatus::Killed
    }

    fn exit_code(&self) -> Option<i32> {
        None
    }

    fn signal(&self) -> Option<String> {
        None
    }

    fn done(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    fn read_from(&self, _stream: Stream, offset: u64, _max_bytes: usize) -> StreamRead {
        StreamRead {
            next_offset: offset,
            ..StreamRead::default()
        }
    }

    fn kill(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn a_downstream_executor_plugs_into_the_bash_tool() {
    let sandbox = Arc::new(Sandbox::default());
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(BashPlugin::new(sandbox.clone()))
        .unwrap();
    let result = registry
        .execute(ToolCall::new(
            "c1",
            "bash",
            json!({"command": "make test", "description": "Run the tests", "timeout_ms": 600000}),
        ))
        .await;
    assert_eq!(
        dsh_tools::content_text(&result.content),
        "ran `make test` in /sandbox\n[exit code: 2]"
    );
    let specs = sandbox.specs.lock().unwrap();
    assert_eq!(specs.len(), 1);
    // The sandbox's own cap applied to the model's ten minutes.
    assert_eq!(specs[0].timeout, Duration::from_secs(5));
    assert_eq!(specs[0].stdout_max_bytes, 30_000);
}
