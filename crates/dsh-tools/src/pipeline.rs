//! The execution pipeline (`docs/subsystems/tools.md`): materialise → pre-execute → guards → execute stage
//! (wrappers, timeout, body) → cancellation → post-execute → finalize → observers.

use crate::call::{
    Arguments, CallArguments, CallSink, ExecToken, ParsedArguments, Services, ToolCall,
    ToolExecution, ToolResult,
};
use crate::definition::{ArgsValidation, ToolDefinition, contain};
use crate::error::{FailureCode, panic_message};
use crate::exec::{ApproverSlot, ExecContext};
use crate::hooks::{ExecuteNext, PostAction, PreDecision, PreNext, ask};
use crate::layers::CallHooks;
use crate::registry::ToolRegistry;
use crate::violation::Violation;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

impl ToolRegistry {
    /// Executes one call through the whole pipeline. Never fails: every outcome, including an
    /// unknown tool, bad arguments, a denial, a panic or a cancellation, is a [`ToolResult`].
    ///
    /// The body's future is always driven to completion, even after cancellation; bodies must
    /// honour `exec.signal()` to stop early.
    pub async fn execute(&self, call: ToolCall) -> ToolResult {
        let span = tracing::info_span!(
            "tool.call",
            tool = %call.name,
            call_id = %call.call_id,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        // Timing is only worth its clock reads when someone records the span.
        let started = (!span.is_disabled()).then(Instant::now);
        let registry = self.clone();
        async move {
            let (_, result) = registry.execute_call(call).await;
            let span = tracing::Span::current();
            if let Some(started) = started {
                span.record("outcome", result.code().map_or("OK", |c| c.as_str()));
                span.record("duration_ms", started.elapsed().as_millis() as u64);
            }
            match result.code() {
                None => tracing::debug!("tool call succeeded"),
                Some(FailureCode::Denied) => tracing::debug!("tool call denied"),
                Some(code @ (FailureCode::ToolPanic | FailureCode::ToolError)) => {
                    tracing::warn!(%code, "tool call failed")
                }
                Some(code) => tracing::debug!(%code, "tool call failed"),
            }
            result
        }
        .instrument(span)
        .await
    }

    /// Runs a call and also returns its execution (Code Mode needs the token of nothing but
    /// the parent; tests and hosts may want the frozen execution).
    pub(crate) async fn execute_call(&self, call: ToolCall) -> (Arc<ToolExecution>, ToolResult) {
        let session = call.agent.as_ref().map(|a| a.session_id().to_owned());
        let (definition, hooks) = {
            let state = self.inner.read();
            (
                state.resolve(session.as_deref(), &call.name),
                state.hooks(session.as_deref()),
            )
        };
        let execution = Arc::new(ToolExecution {
            root_call_id: call.root_call_id,
            call_id: call.call_id,
            arguments: materialize(call.arguments, self.inner.config.max_argument_bytes),
            name: call.name,
            token: ExecToken::next(),
            parent: call.parent,
            agent: call.agent,
            signal: call.signal,
            sink: CallSink::default(),
        });
        let result = match definition {
            None => {
                let visible: Vec<String> = self
                    .inner
                    .read()
                    .visible(session.as_deref())
                    .into_keys()
                    .collect();
                let known = if visible.is_empty() {
                    String::from("no tools are available")
                } else {
                    format!("available tools: {}", visible.join(", "))
                };
                ToolResult::failure(
                    FailureCode::UnknownTool,
                    format!("unknown tool `{}`; {known}", execution.name),
                )
            }
            Some(definition) => {
                let result = run_pipeline(self, &definition, &execution, &hooks).await;
                finalize(&definition, &execution, result)
            }
        };
        for observer in &hooks.observers {
            if let Err(message) = contain("tools/result observer", || observer(&execution, &result))
            {
                tracing::warn!(tool = %execution.name, "{message}; ignored");
            }
        }
        (execution, result)
    }
}

/// Parses the model's argument text once into detached, exact JSON and freezes it with the text.
///
/// Text longer than `limit` bytes is dropped unread: parsed, a few megabytes of small numbers
/// become a `Value` tens of times larger, so only the length check keeps memory bounded.
/// Values (in-process callers, Code Mode) were built by the host and are not measured.
fn materialize(arguments: Arguments, limit: usize) -> CallArguments {
    match arguments {
        Arguments::Value(value) => {
            CallArguments::Json(Arc::new(ParsedArguments::from_value(value)))
        }
        Arguments::Text(text) if text.len() > limit => CallArguments::Oversized {
            bytes: text.len(),
            limit,
        },
        Arguments::Text(text) => match ParsedArguments::from_text(text) {
            Ok(parsed) => CallArguments::Json(Arc::new(parsed)),
            Err((text, error)) => CallArguments::Unparsable {
                text: Arc::from(text),
                error: error.to_string(),
            },
        },
    }
}

fn denied(reason: String) -> ToolResult {
    ToolResult::failure(FailureCode::Denied, reason)
}

async fn run_pipeline(
    registry: &ToolRegistry,
    definition: &Arc<ToolDefinition>,
    execution: &Arc<ToolExecution>,
    hooks: &CallHooks,
) -> ToolResult {
    let args = match &execution.arguments {
        CallArguments::Json(args) => Arc::clone(args),
        CallArguments::Unparsable { error, .. } => {
            let result = ToolResult::failure(
                FailureCode::InvalidArgs,
                format!("invalid arguments: the argument text is not JSON ({error})"),
            );
            return post_execute(definition, execution, hooks, &NO_ARGUMENTS, result).await;
        }
        CallArguments::Oversized { bytes, limit } => {
            let result =
                ToolResult::failure(FailureCode::InvalidArgs, oversized_message(*bytes, *limit));
            return post_execute(definition, execution, hooks, &NO_ARGUMENTS, result).await;
        }
    };
    let result = 'dispatch: {
        if execution.signal.is_cancelled() {
            break 'dispatch aborted_before_dispatch();
        }
        if let Some(reason) = pre_execute(execution, hooks).await {
            break 'dispatch denied(reason);
        }
        if let Some(reason) = guards(execution, hooks) {
            break 'dispatch denied(reason);
        }
        if execution.signal.is_cancelled() {
            break 'dispatch aborted_before_dispatch();
        }
        let result = execute_stage(registry, definition, execution, &args, hooks).await;
        // The caller cancelled while the body ran: whatever the body made of it (a value, the
        // error it returned on seeing the signal, a timeout racing the cancellation), the call
        // was aborted. Panics and refusals keep their own codes: they say something else.
        let cancellation_outcome = matches!(
            result.code(),
            None | Some(
                FailureCode::ToolError | FailureCode::Timeout | FailureCode::InvalidToolOutput
            )
        );
        if execution.signal.is_cancelled() && cancellation_outcome {
            break 'dispatch aborted_while_running(&result);
        }
        result
    };
    let mut result = post_execute(definition, execution, hooks, &args, result).await;
    let sink = &execution.sink;
    let mut contexts = sink
        .deferred
        .lock()
        .map(|mut d| std::mem::take(&mut *d))
        .unwrap_or_default();
    contexts.append(&mut result.additional_contexts);
    result.additional_contexts = contexts;
    result.concludes_turn = !result.is_error && sink.concludes_turn.load(Ordering::SeqCst);
    result
}

/// The refusal of an argument text over the limit: both sizes, so the model knows by how much
/// to shorten it.
fn oversized_message(bytes: usize, limit: usize) -> String {
    format!(
        "invalid arguments: the argument text is {bytes} bytes, over the limit of {limit} bytes \
         per call; it was not read. Send shorter arguments (large content belongs in a file)"
    )
}

/// What a listener's replacement value is rendered with when the argument text could not be
/// read: `null`.
static NO_ARGUMENTS: ParsedArguments = ParsedArguments::null();

/// The `ABORTED` result of a body that ran while its caller cancelled. A body that still
/// finished with a value may have done something the model must be able to find (a background
/// job it started, output it saved to a file), so that value's text follows the abort message.
fn aborted_while_running(result: &ToolResult) -> ToolResult {
    const ABORTED: &str = "the call was cancelled while it ran";
    let reported = if result.is_error {
        String::new()
    } else {
        crate::content_text(&result.content)
    };
    if reported.trim().is_empty() {
        ToolResult::failure(FailureCode::Aborted, ABORTED)
    } else {
        ToolResult::failure(
            FailureCode::Aborted,
            format!("{ABORTED}; what it reported before it stopped:\n{reported}"),
        )
    }
}

fn aborted_before_dispatch() -> ToolResult {
    ToolResult::failure(
        FailureCode::AbortedBeforeDispatch,
        "the call was cancelled before it started",
    )
}

/// Runs the pre-execute waterfall; `Some(reason)` denies. `Ask` goes to the approver.
async fn pre_execute(execution: &Arc<ToolExecution>, hooks: &CallHooks) -> Option<String> {
    let Some(chain) = &hooks.pre_execute else {
        return None;
    };
    let failure = Arc::new(Mutex::new(None));
    let decision = PreNext {
        chain: Arc::clone(chain),
        index: 0,
        execution: Arc::clone(execution),
        failure: Arc::clone(&failure),
    }
    .run()
    .await;
    // A listener that panicked fails the call closed, whatever the listeners around it said.
    if let Some(message) = failure.lock().ok().and_then(|f| f.clone()) {
        return Some(message);
    }
    match decision {
        PreDecision::Allow => None,
        PreDecision::Deny { reason } => Some(reason),
        PreDecision::Ask { reason } => ask(execution, hooks.approver.clone(), reason).await,
    }
}

/// Runs the guards; the first reason denies. A panicking guard denies too.
fn guards(execution: &ToolExecution, hooks: &CallHooks) -> Option<String> {
    hooks.guards.iter().find_map(|guard| {
        contain("guard", || guard(execution)).unwrap_or_else(|message| {
            tracing::warn!(tool = %execution.name, "{message}");
            Some(format!("{message}; the call is denied"))
        })
    })
}

async fn execute_stage(
    registry: &ToolRegistry,
    definition: &Arc<ToolDefinition>,
    execution: &Arc<ToolExecution>,
    args: &Arc<ParsedArguments>,
    hooks: &CallHooks,
) -> ToolResult {
    let dispatch = Dispatch {
        definition: Arc::clone(definition),
        execution: Arc::clone(execution),
        args: Arc::clone(args),
        services: registry.inner.services.clone(),
        approver: ApproverSlot(hooks.approver.clone()),
    };
    let Some(chain) = &hooks.wrappers else {
        // Without wrappers the body is called directly: no boxed chain, no shared dispatch
        // closure.
        return dispatch.run(None).await;
    };
    let dispatch = Arc::new(dispatch);
    let next: Arc<dyn Fn(CancellationToken) -> BoxFuture<'static, ToolResult> + Send + Sync> =
        Arc::new(move |signal| {
            let dispatch = Arc::clone(&dispatch);
            Box::pin(async move { dispatch.run(Some(signal)).await })
        });
    ExecuteNext {
        chain: Arc::clone(chain),
        index: 0,
        execution: Arc::clone(execution),
        signal: execution.signal.clone(),
        dispatch: next,
    }
    .run()
    .await
}

/// Everything one call's dispatches share; each dispatch differs only in its signal (a wrapper
/// may replace it, and may dispatch more than once).
struct Dispatch {
    definition: Arc<ToolDefinition>,
    execution: Arc<ToolExecution>,
    args: Arc<ParsedArguments>,
    services: Services,
    approver: ApproverSlot,
}

impl Dispatch {
    /// `None` runs the body under the caller's signal.
    async fn run(&self, signal: Option<CancellationToken>) -> ToolResult {
        let ctx = ExecContext {
            execution: Arc::clone(&self.execution),
            args: Arc::clone(&self.args),
            signal,
            services: self.services.clone(),
            approver: self.approver.clone(),
        };
        timed_body(&self.definition, &self.execution, ctx).await
    }
}

/// The definition's own timeout: the innermost execute-stage wrapper.
async fn timed_body(
    definition: &ToolDefinition,
    execution: &ToolExecution,
    ctx: ExecContext,
) -> ToolResult {
    let Some(timeout) = definition.timeout else {
        return body(definition, execution, ctx).await;
    };
    // Without a time driver the timer below would panic outside the body's containment.
    if let Err(error) = crate::runtime::require(&[crate::runtime::RuntimeDriver::Time]) {
        return ToolResult::failure(error.code(), error.to_string());
    }
    let deadline = ctx.signal().child_token();
    let ctx = ExecContext {
        signal: Some(deadline.clone()),
        ..ctx
    };
    let run = body(definition, execution, ctx);
    tokio::pin!(run);
    let result = tokio::select! {
        result = &mut run => return result,
        () = tokio::time::sleep(timeout) => {
            deadline.cancel();
            run.await
        }
    };
    // The deadline fired; whatever the body made of it, the call timed out.
    drop(result);
    ToolResult::failure(
        FailureCode::Timeout,
        format!("the call timed out after {}ms", timeout.as_millis()),
    )
}

/// Validates arguments (unless the definition leaves that to its body), runs the body with panic containment, and
/// accepts its value.
async fn body(
    definition: &ToolDefinition,
    execution: &ToolExecution,
    ctx: ExecContext,
) -> ToolResult {
    let args = Arc::clone(&ctx.args);
    if definition.args_validation == ArgsValidation::Validated
        && let Err(violations) = definition.parameters.validate_args(&ctx.args)
    {
        return ToolResult::failure(FailureCode::InvalidArgs, invalid_args_message(&violations));
    }
    let started = AssertUnwindSafe(|| (definition.body)(ctx));
    let future = match std::panic::catch_unwind(started) {
        Ok(future) => future,
        Err(payload) => return panicked(&payload),
    };
    match AssertUnwindSafe(future).catch_unwind().await {
        Err(payload) => panicked(&payload),
        Ok(Err(error)) => {
            let code = error.code();
            let message = match code {
                FailureCode::InvalidArgs => format!("invalid arguments: {error}"),
                _ => error.to_string(),
            };
            ToolResult::failure(code, message)
        }
        Ok(Ok(value)) => accept_value(definition, execution, &args, value),
    }
}

fn panicked(payload: &Box<dyn std::any::Any + Send>) -> ToolResult {
    ToolResult::failure(
        FailureCode::ToolPanic,
        format!("the tool panicked: {}", panic_message(payload.as_ref())),
    )
}

pub(crate) fn invalid_args_message(violations: &[Violation]) -> String {
    let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
    format!("invalid arguments: {}", listed.join("; "))
}

/// Validates a canonical value against the output schema, freezes it, renders it, and (for
/// top-level calls) projects its presentation meta. The arguments' `Value` is built here only
/// for a renderer that reads it (a builder or raw definition's); a typed tool's renderer reads
/// its `Args` from the text.
fn accept_value(
    definition: &ToolDefinition,
    execution: &ToolExecution,
    args: &ParsedArguments,
    value: Value,
) -> ToolResult {
    if let Err(violations) = definition.output.schema.validate_value(&value) {
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return ToolResult::failure(
            FailureCode::InvalidToolOutput,
            format!(
                "the tool produced a value its output schema rejects: {}",
                listed.join("; ")
            ),
        );
    }
    let value = Arc::new(value);
    let content = match contain("render", || (definition.output.render)(args, &value)) {
        Ok(content) => content,
        Err(message) => return ToolResult::failure(FailureCode::ToolPanic, message),
    };
    let mut result = ToolResult::success(Arc::clone(&value), content);
    if execution.parent.is_none()
        && let Some(meta) = &definition.output.presentation_meta
    {
        match contain("presentation_meta", || meta(args, &value)) {
            Ok(meta) => result.meta = meta,
            Err(message) => return ToolResult::failure(FailureCode::ToolPanic, message),
        }
    }
    result
}

/// Runs the post-execute listeners in order; each sees the result as the previous left it.
async fn post_execute(
    definition: &ToolDefinition,
    execution: &Arc<ToolExecution>,
    hooks: &CallHooks,
    args: &ParsedArguments,
    mut result: ToolResult,
) -> ToolResult {
    for listener in &hooks.post_execute {
        let seen = result.clone();
        let exec = Arc::clone(execution);
        // Calling the listener is inside the guarded future too: a listener may panic before
        // it returns its future.
        let outcome = AssertUnwindSafe(async move { listener(exec, seen).await })
            .catch_unwind()
            .await;
        let decision = match outcome {
            Ok(decision) => decision,
            Err(payload) => {
                let message = format!(
                    "a post-execute listener failed ({}); the result was withheld",
                    panic_message(payload.as_ref())
                );
                tracing::warn!(tool = %execution.name, "{message}");
                let mut failed = ToolResult::failure(FailureCode::Denied, message);
                failed.additional_contexts = result.additional_contexts;
                return failed;
            }
        };
        let mut contexts = decision.additional_contexts;
        match decision.action {
            PostAction::Keep => {}
            PostAction::Content(content) => result.content = content,
            PostAction::Value(value) if result.is_error => {
                tracing::warn!(
                    tool = %execution.name,
                    "a post-execute listener tried to replace the value of a failed result; refused"
                );
                drop(value);
            }
            PostAction::Value(value) => {
                let kept = std::mem::take(&mut result.additional_contexts);
                result = accept_value(definition, execution, args, value);
                result.additional_contexts = kept;
            }
            PostAction::Block(feedback) => {
                let kept = std::mem::take(&mut result.additional_contexts);
                result = ToolResult::failure(FailureCode::Denied, feedback);
                result.additional_contexts = kept;
                result.additional_contexts.append(&mut contexts);
                return result;
            }
        }
        result.additional_contexts.append(&mut contexts);
    }
    result
}

/// Runs the definition's `finalize_content` exactly once; a panic keeps the content.
fn finalize(
    definition: &ToolDefinition,
    execution: &ToolExecution,
    mut result: ToolResult,
) -> ToolResult {
    if let Some(finalize) = &definition.finalize_content {
        match contain("finalize_content", || finalize(execution, &result)) {
            Ok(Some(content)) => result.content = content,
            Ok(None) => {}
            Err(message) => tracing::warn!(tool = %execution.name, "{message}; content kept"),
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentBlock, Tool, ToolError};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct HalfArgs {
        n: i64,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Half {
        half: i64,
    }

    /// Halves even numbers, refuses odd ones, and renders the arguments it was given.
    struct Halve;

    impl Tool for Halve {
        type Args = HalfArgs;
        type Output = Half;

        fn name(&self) -> &str {
            "halve"
        }

        fn description(&self) -> &str {
            "Halve an even number."
        }

        async fn execute(&self, args: HalfArgs, _exec: ExecContext) -> Result<Half, ToolError> {
            if args.n % 2 != 0 {
                return Err(ToolError::failed("odd"));
            }
            Ok(Half { half: args.n / 2 })
        }

        fn render(&self, args: &HalfArgs, value: &Half) -> Vec<ContentBlock> {
            let args = serde_json::to_value(args).unwrap_or_default();
            let value = serde_json::to_value(value).unwrap_or_default();
            vec![ContentBlock::text(format!("{args} -> {value}"))]
        }
    }

    fn built(execution: &ToolExecution) -> bool {
        execution
            .parsed()
            .expect("the arguments parse")
            .value_built()
    }

    #[tokio::test]
    async fn the_arguments_value_is_built_only_when_something_asks_for_it() {
        let registry = ToolRegistry::new();
        registry.register_tool(Halve).unwrap();

        // Validation reads the exact arguments.
        let (execution, result) = registry
            .execute_call(ToolCall::new("c1", "halve", r#"{"n": "two"}"#))
            .await;
        assert_eq!(result.code(), Some(FailureCode::InvalidArgs));
        assert!(!built(&execution));

        // A typed body reads the text.
        let (execution, result) = registry
            .execute_call(ToolCall::new("c2", "halve", r#"{"n": 3}"#))
            .await;
        assert_eq!(result.code(), Some(FailureCode::ToolError));
        assert!(!built(&execution));

        // The typed renderer reads its arguments from the text too: nothing builds the `Value`
        // until a caller asks for it.
        let (execution, result) = registry
            .execute_call(ToolCall::new("c3", "halve", r#"{"n": 4}"#))
            .await;
        assert_eq!(
            crate::content_text(&result.content),
            r#"{"n":4} -> {"half":2}"#
        );
        assert!(!built(&execution));
        assert_eq!(**execution.args().unwrap(), json!({"n": 4}));
    }
}
