//! The host side of a run: it starts the engine thread (which makes the program's nested
//! calls through the registry's `call_value`, the full policy pipeline, see
//! [`crate::nested`]), enforces the wall-time limit and the caller's cancellation, and
//! assembles the canonical value.

use crate::CodeModeLimits;
use crate::engine::{self, EngineJob, EngineReport};
use crate::nested::{Bell, NestedCalls, RecordedCall};
use crate::outcome::{ProgramError, ProgramErrorKind, StopReason};
use crate::transpile;
use dsh_tools::{ExecContext, RESERVED_TOOL_NAME, ToolError, ToolRegistry};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Runs one `run_code` call and returns its canonical value.
pub(crate) async fn run_code(
    registry: Option<ToolRegistry>,
    limits: CodeModeLimits,
    args: Arc<Value>,
    ctx: ExecContext,
) -> Result<Value, ToolError> {
    let Some(registry) = registry else {
        return Err(ToolError::failed("the tool registry is gone"));
    };
    let source = args
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let timeout = args
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .map_or(limits.timeout, Duration::from_millis)
        .min(limits.max_timeout);

    let program = match transpile::to_javascript(&source) {
        Ok(program) => program,
        Err(error) => return Ok(result_value(Err(error), Vec::new(), 0, Vec::new())),
    };
    let session = ctx.agent().map(|agent| agent.session_id().to_owned());
    let tool_names: Vec<String> = registry
        .visible(session.as_deref())
        .iter()
        .map(|tool| tool.name().to_owned())
        .filter(|name| name != RESERVED_TOOL_NAME)
        .collect();
    // Nested calls run on the engine thread, inside this runtime.
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| ToolError::failed(format!("run_code needs a tokio runtime: {e}")))?;

    // Nested calls carry a child of the call's signal: the caller's cancellation reaches them,
    // and so does the end of the run (a time limit, or a program that returned without
    // awaiting them).
    let nested_signal = ctx.signal().child_token();
    let stop = Stop {
        flag: Arc::new(AtomicU8::new(0)),
        bell: Arc::new(Bell::default()),
        nested: nested_signal.clone(),
    };
    let nested_ctx = ctx.with_signal(nested_signal);
    let bell = Arc::clone(&stop.bell);
    let job = EngineJob {
        javascript: program.javascript,
        positions: program.positions,
        tool_names,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        memory_bytes: limits.memory_bytes,
        nested_calls: limits.nested_calls,
        log_bytes: limits.log_bytes,
        stop: Arc::clone(&stop.flag),
        bell: Arc::clone(&stop.bell),
    };
    let (report_tx, mut report_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name(String::from("code-mode"))
        .stack_size(8 * 1024 * 1024)
        .spawn(move || {
            let _entered = runtime.enter();
            let nested = NestedCalls::new(registry, nested_ctx, bell, job.nested_calls);
            let _ = report_tx.send(engine::run(job, nested));
        })
        .map_err(|e| ToolError::failed(format!("could not start the JavaScript engine: {e}")))?;
    // From here on, a dropped run stops its engine.
    let stop = StopOnDrop(stop);

    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut stopping = false;
    let report: EngineReport = loop {
        tokio::select! {
            report = &mut report_rx => match report {
                Ok(report) => break report,
                Err(_) => break EngineReport {
                    result: Err(ProgramError::new(
                        ProgramErrorKind::Engine,
                        "the JavaScript engine stopped without a report",
                    )),
                    logs: Vec::new(),
                    omitted_log_lines: 0,
                    calls: Vec::new(),
                },
            },
            () = &mut deadline, if !stopping => {
                stopping = true;
                stop.0.raise(StopReason::TimeLimit);
            }
            () = ctx.signal().cancelled(), if !stopping => {
                stopping = true;
                stop.0.raise(StopReason::Cancelled);
            }
        }
    };
    Ok(result_value(
        report.result,
        report.logs,
        report.omitted_log_lines,
        report.calls,
    ))
}

/// How the host stops a running engine: the flag it reads (between JavaScript instructions,
/// through the interrupt handler), the bell that wakes it when it waits on nested calls, and
/// the signal of the nested calls.
struct Stop {
    flag: Arc<AtomicU8>,
    bell: Arc<Bell>,
    nested: CancellationToken,
}

impl Stop {
    /// Raises the flag for `reason` (the first reason raised wins), cancels the nested calls
    /// and wakes the engine.
    fn raise(&self, reason: StopReason) {
        let _ = self
            .flag
            .compare_exchange(0, reason.flag(), Ordering::SeqCst, Ordering::SeqCst);
        self.nested.cancel();
        self.bell.ring();
    }
}

/// Stops the engine when the run's future is dropped before the engine finished (a host that
/// gives up on the call without cancelling it), so the engine thread never spins on. After a
/// finished run the flag is no longer read.
struct StopOnDrop(Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.raise(StopReason::Cancelled);
    }
}

fn result_value(
    result: Result<Value, ProgramError>,
    logs: Vec<String>,
    omitted_log_lines: usize,
    calls: Vec<RecordedCall>,
) -> Value {
    let (value, error) = match result {
        Ok(value) => (value, Value::Null),
        Err(error) => (
            Value::Null,
            serde_json::to_value(error).unwrap_or(Value::Null),
        ),
    };
    // Built by moving each part in: `json!` would copy them through the serialiser, which for a
    // run of many nested calls costs more than the calls.
    let mut result = serde_json::Map::with_capacity(5);
    result.insert(String::from("value"), value);
    result.insert(String::from("error"), error);
    result.insert(
        String::from("logs"),
        Value::Array(logs.into_iter().map(Value::String).collect()),
    );
    result.insert(
        String::from("omitted_log_lines"),
        Value::from(omitted_log_lines),
    );
    result.insert(
        String::from("calls"),
        Value::Array(calls.into_iter().map(RecordedCall::into_value).collect()),
    );
    Value::Object(result)
}
