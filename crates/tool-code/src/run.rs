//! The host side of a run: it starts the engine thread, dispatches the program's nested calls
//! through the registry (`call_value`, the full policy pipeline), enforces the wall-time
//! limit and the caller's cancellation, and assembles the canonical value.

use crate::CodeModeLimits;
use crate::engine::{self, EngineEvent, EngineJob, EngineReport, HostReply};
use crate::outcome::{ProgramError, ProgramErrorKind, StopReason};
use crate::transpile;
use dsh_tools::{ExecContext, RESERVED_TOOL_NAME, ToolCallError, ToolError, ToolRegistry};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// One nested call, as the result records it for replay and audit.
#[derive(Debug, Serialize)]
struct RecordedCall {
    tool: String,
    arguments: Value,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(serialize_with = "shared_value")]
    value: Option<Arc<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ToolCallError>,
}

/// Serialises a shared canonical value without copying it (serde's `rc` feature is off).
fn shared_value<S: serde::Serializer>(
    value: &Option<Arc<Value>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => value.as_ref().serialize(serializer),
        None => serializer.serialize_none(),
    }
}

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

    let javascript = match transpile::to_javascript(&source) {
        Ok(javascript) => javascript,
        Err(error) => return Ok(result_value(Err(error), Vec::new(), 0, Vec::new())),
    };
    let session = ctx.agent().map(|agent| agent.session_id().to_owned());
    let tool_names: Vec<String> = registry
        .visible(session.as_deref())
        .iter()
        .map(|tool| tool.name().to_owned())
        .filter(|name| name != RESERVED_TOOL_NAME)
        .collect();

    let stop = Arc::new(AtomicU8::new(0));
    let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (replies, replies_rx) = std::sync::mpsc::channel();
    let job = EngineJob {
        javascript,
        tool_names,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        memory_bytes: limits.memory_bytes,
        nested_calls: limits.nested_calls,
        log_bytes: limits.log_bytes,
        stop: Arc::clone(&stop),
        events: events_tx.clone(),
        replies: replies_rx,
    };
    std::thread::Builder::new()
        .name(String::from("code-mode"))
        .stack_size(8 * 1024 * 1024)
        .spawn(move || {
            let report = engine::run(job);
            let _ = events_tx.send(EngineEvent::Finished(report));
        })
        .map_err(|e| ToolError::failed(format!("could not start the JavaScript engine: {e}")))?;

    // Nested calls carry a child of the call's signal: the caller's cancellation reaches them,
    // and so does the end of the run (a time limit, or a program that returned without
    // awaiting them).
    let nested_signal = ctx.signal().child_token();
    let nested = ctx.with_signal(nested_signal.clone());
    let raise = |reason: StopReason| {
        let raised = stop
            .compare_exchange(0, reason.flag(), Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        nested_signal.cancel();
        let _ = replies.send(HostReply::Wake);
        raised
    };

    let mut calls: Vec<RecordedCall> = Vec::new();
    let mut in_flight = FuturesUnordered::new();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut stopping = false;
    let report: EngineReport = loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(EngineEvent::Call { id, name, args }) => {
                    tracing::debug!(tool = %name, id, "code mode nested call");
                    calls.push(RecordedCall {
                        tool: name.clone(),
                        arguments: args.clone(),
                        ok: false,
                        value: None,
                        error: None,
                    });
                    let registry = registry.clone();
                    let nested = nested.clone();
                    in_flight.push(async move {
                        let outcome = if name == RESERVED_TOOL_NAME {
                            Err(refused(&name))
                        } else {
                            registry.call_value(&name, args, &nested).await
                        };
                        (id, outcome)
                    });
                }
                Some(EngineEvent::Finished(report)) => break report,
                None => {
                    break EngineReport {
                        result: Err(ProgramError::new(
                            ProgramErrorKind::Engine,
                            "the JavaScript engine stopped without a report",
                        )),
                        logs: Vec::new(),
                        omitted_log_lines: 0,
                    };
                }
            },
            Some((id, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                let reply = settle(&mut calls, id, outcome);
                let _ = replies.send(reply);
            }
            () = &mut deadline, if !stopping => {
                stopping = true;
                raise(StopReason::TimeLimit);
            }
            () = ctx.signal().cancelled(), if !stopping => {
                stopping = true;
                raise(StopReason::Cancelled);
            }
        }
    };
    // Calls the program did not wait for are cancelled, and awaited so that nothing they
    // started outlives the run.
    nested_signal.cancel();
    while let Some((id, outcome)) = in_flight.next().await {
        let _ = settle(&mut calls, id, outcome);
    }
    Ok(result_value(
        report.result,
        report.logs,
        report.omitted_log_lines,
        calls,
    ))
}

/// Raises the stop flag when the run's future is dropped before the engine finished (a host
/// that gives up on the call without cancelling it), so the engine thread never spins on.
struct StopOnDrop(Arc<AtomicU8>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.compare_exchange(
            0,
            StopReason::Cancelled.flag(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

fn refused(name: &str) -> ToolCallError {
    ToolCallError {
        name: "ToolCallError",
        tool_name: name.to_owned(),
        code: dsh_tools::FailureCode::UnknownTool,
        message: String::from("`run_code` cannot be called from inside a program"),
    }
}

/// Records a nested call's outcome and builds the engine's settlement.
fn settle(
    calls: &mut [RecordedCall],
    id: u32,
    outcome: Result<Arc<Value>, ToolCallError>,
) -> HostReply {
    let record = calls.get_mut((id as usize).saturating_sub(1));
    let (ok, payload) = match &outcome {
        Ok(value) => (true, value.to_string()),
        Err(error) => (
            false,
            serde_json::to_string(error).unwrap_or_else(|_| String::from("{}")),
        ),
    };
    if let Some(record) = record {
        record.ok = ok;
        match outcome {
            Ok(value) => record.value = Some(value),
            Err(error) => record.error = Some(error),
        }
    }
    HostReply::Settled { id, ok, payload }
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
    json!({
        "value": value,
        "error": error,
        "logs": logs,
        "omitted_log_lines": omitted_log_lines,
        "calls": serde_json::to_value(calls).unwrap_or_else(|_| json!([])),
    })
}
