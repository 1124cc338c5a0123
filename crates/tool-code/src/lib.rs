//! Code Mode for dsh-rs: the `run_code` tool.
//!
//! A model that needs several tool calls can write one program instead of making many round
//! trips. `run_code` takes that program, TypeScript or plain JavaScript written as the body of
//! an async function (top-level `await` and `return` work), erases its types with oxc and runs
//! it on an embedded QuickJS engine. Inside the program every tool the calling agent sees,
//! except `run_code` itself, is `await tools.<name>(args)`:
//!
//! - a call goes through the registry's [`call_value`](dsh_tools::ToolRegistry::call_value),
//!   so guards, approvals, `restrict` and post-execute hooks apply to it as to a model's call,
//!   and it resolves to the tool's canonical value after policy;
//! - a failed call rejects with a `ToolCallError` (`name`, `toolName`, `code`, `message`),
//!   which the program may catch;
//! - nested calls produce no cards and no presentation meta, but each is recorded (tool,
//!   arguments, outcome) in the result's value.
//!
//! The engine has no file system, network, process or clock of its own (no `Date`, no
//! `performance`): everything the program does outside itself goes through tools.
//!
//! Limits ([`CodeModeLimits`]): wall time (30 s by default; the `timeout_ms` argument changes
//! it per call, up to a maximum), engine memory (64 MiB), nested calls per run (100), and
//! captured `console` output (16 KiB, head and tail kept with a note between). Each limit ends
//! the run with an `error` whose `kind` names it. Cancelling the call interrupts the engine
//! and cancels the nested calls in flight. Values crossing between the program and the host
//! nest at most [`MAX_VALUE_DEPTH`] (100) levels, both ways: a deeper returned value is a
//! `not_json` error, deeper arguments reject the call with `INVALID_ARGS`, and a tool's deeper
//! value rejects it with `INVALID_TOOL_OUTPUT`, each naming the limit.
//!
//! The host reads what the program leaves (its returned value, what it threw) itself, through
//! the engine, never through the program's globals: a program that replaces `JSON.stringify`
//! or `Promise.prototype.then` changes nothing of its result, and describing a thrown proxy or
//! an Error with looping getters runs none of the program's code.
//!
//! The canonical value is `{ value, error, logs, omitted_log_lines, calls }`: the program's
//! returned JSON (`null` on failure), the failure if any (`kind`, `message`, and where known
//! `line`, `column`, `stack`), the captured log lines, and the recorded nested calls.
//!
//! ```no_run
//! use dsh_tools::ToolRegistry;
//! use tool_code::{CodeModeLimits, register_run_code};
//!
//! # fn main() -> Result<(), dsh_tools::RegistrationError> {
//! let registry = ToolRegistry::new();
//! // Register the other tools first: the description lists the declarations of the tools
//! // registered at this point.
//! let _run_code = register_run_code(&registry, CodeModeLimits::default())?;
//! # Ok(())
//! # }
//! ```
//!
//! Unsafe budget: 12 — QuickJS's C API, where rquickjs has no safe call for it.
//! `engine` loads the prelude's own bytecode (one block); `plain` reads plain values through
//! class ids and property descriptors, so that no program code runs (eleven), each block with
//! its `SAFETY` argument.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod convert;
mod engine;
mod nested;
mod outcome;
mod plain;
mod run;
mod shape;
mod thrown;
mod transpile;

pub use outcome::ProgramErrorKind;

use dsh_tools::{
    ContentBlock, Disposer, RESERVED_TOOL_NAME, RegistrationError, ToolDefinition, ToolRegistry,
};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::time::Duration;

/// How many levels of arrays and objects a value crossing between a program and the host may
/// nest: the program's returned value, a nested call's arguments, and a tool's value handed to
/// the program. A scalar is 0 levels deep, `{}` and `[]` one, `[[1]]` two. A value one level
/// deeper is refused, naming this limit. It leaves room under serde_json's recursion limit of
/// 128 for the envelopes that carry a value (the run's result, its call records, a session log
/// line), so that whatever a run holds can be written and read back.
pub const MAX_VALUE_DEPTH: usize = 100;

/// The limits of a run, each with a documented default.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodeModeLimits {
    /// Wall time of a run when the call gives no `timeout_ms` (default 30 s).
    pub timeout: Duration,
    /// The largest `timeout_ms` a call may ask for (default 10 minutes).
    pub max_timeout: Duration,
    /// The engine's memory limit in bytes (default 64 MiB).
    pub memory_bytes: usize,
    /// Nested tool calls per run (default 100).
    pub nested_calls: usize,
    /// Captured `console` output in bytes (default 16 KiB): half for the first lines, half for
    /// the last, with a note counting what was left out between them.
    pub log_bytes: usize,
}

impl Default for CodeModeLimits {
    fn default() -> CodeModeLimits {
        CodeModeLimits {
            timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            memory_bytes: 64 * 1024 * 1024,
            nested_calls: 100,
            log_bytes: 16 * 1024,
        }
    }
}

/// Builds the `run_code` definition. Its description carries the Code Mode declarations of
/// the tools in `registry`'s global scope at this moment, so build it after the tools it
/// should describe. The definition keeps a weak handle on `registry` to dispatch nested
/// calls: a strong one would keep the registry, and every tool in it, alive forever.
pub fn run_code_definition(
    registry: &ToolRegistry,
    limits: CodeModeLimits,
) -> Result<ToolDefinition, RegistrationError> {
    let description = description(&registry.code_mode_sdk(None), &limits);
    let max_timeout_ms = u64::try_from(limits.max_timeout.as_millis()).unwrap_or(u64::MAX);
    let handle = registry.downgrade();
    ToolDefinition::builder(RESERVED_TOOL_NAME, description)
        .code_mode_transport()
        .raw_parameters(json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The program: TypeScript or JavaScript, the body of an async function. Call tools with `await tools.<name>(args)`, `return` a JSON value."
                },
                "timeout_ms": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": max_timeout_ms,
                    "description": "Wall-time limit of this run in milliseconds."
                }
            },
            "required": ["code"],
            "additionalProperties": false
        }))
        .raw_output(output_schema(), |_, value| {
            vec![ContentBlock::text(render(value))]
        })
        .execute(move |args, ctx| run::run_code(handle.upgrade(), limits.clone(), args, ctx))
        .build()
}

/// Registers `run_code` in `registry`'s global scope ([`run_code_definition`]).
pub fn register_run_code(
    registry: &ToolRegistry,
    limits: CodeModeLimits,
) -> Result<Disposer, RegistrationError> {
    registry.register(run_code_definition(registry, limits)?)
}

fn description(sdk: &str, limits: &CodeModeLimits) -> String {
    format!(
        "Run a TypeScript or JavaScript program that calls tools. Use it to chain or combine \
         several tool calls in one step. The program is the body of an async function: \
         `await tools.<name>(args)` resolves to the tool's value or rejects with a \
         ToolCallError (name, toolName, code, message); `return` a JSON value; `console.log` \
         is captured. There is no file system, network, process or clock except through \
         tools. Limits: {} s wall time (`timeout_ms`), {} MiB memory, {} tool calls per run, \
         values (arguments, tool values, the returned value) nested at most {} levels deep.\n\n\
         The tools available inside the program:\n\n```ts\n{sdk}```",
        limits.timeout.as_secs(),
        limits.memory_bytes / (1024 * 1024),
        limits.nested_calls,
        MAX_VALUE_DEPTH,
    )
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "value": {},
            "error": {
                "anyOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"enum": [
                                "syntax", "exception", "not_json", "time_limit",
                                "memory_limit", "nested_call_limit", "cancelled", "stalled",
                                "engine"
                            ]},
                            "message": {"type": "string"},
                            "name": {"type": "string"},
                            "line": {"type": "integer"},
                            "column": {"type": "integer"},
                            "stack": {"type": "string"},
                            "toolName": {"type": "string"},
                            "code": {"type": "string"}
                        },
                        "required": ["kind", "message"]
                    }
                ]
            },
            "logs": {"type": "array", "items": {"type": "string"}},
            "omitted_log_lines": {"type": "integer", "minimum": 0},
            "calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string"},
                        "arguments": {},
                        "ok": {"type": "boolean"},
                        "value": {},
                        "error": {"type": "object"}
                    },
                    "required": ["tool", "arguments", "ok"]
                }
            }
        },
        "required": ["value", "error", "logs", "omitted_log_lines", "calls"]
    })
}

/// The text a model reads: the failure first (it decides what to do next), then the
/// returned value, the logs and a one-line account of the nested calls.
fn render(value: &Value) -> String {
    let mut out = String::new();
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        let kind = error.get("kind").and_then(Value::as_str).unwrap_or("error");
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        let _ = writeln!(out, "The program failed ({kind}): {message}");
        if let Some(stack) = error
            .get("stack")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            let _ = writeln!(out, "Stack:\n{}", stack.trim_end());
        }
    } else {
        let returned = value.get("value").unwrap_or(&Value::Null);
        let text = serde_json::to_string_pretty(returned).unwrap_or_default();
        let _ = writeln!(out, "Returned:\n{text}");
    }
    if let Some(logs) = value
        .get("logs")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    {
        let _ = writeln!(out, "Logs:");
        for line in logs {
            let _ = writeln!(out, "{}", line.as_str().unwrap_or_default());
        }
    }
    if let Some(calls) = value
        .get("calls")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    {
        let _ = writeln!(out, "Tool calls ({}): {}", calls.len(), call_summary(calls));
    }
    out.trim_end().to_owned()
}

/// The nested calls by tool, in the order each tool was first called: `bash ×2 (1 failed), read`.
fn call_summary(calls: &[Value]) -> String {
    // (tool, calls, failed); a program calls few distinct tools.
    let mut tools: Vec<(&str, usize, usize)> = Vec::new();
    for call in calls {
        let tool = call.get("tool").and_then(Value::as_str).unwrap_or("?");
        let failed = usize::from(!call.get("ok").and_then(Value::as_bool).unwrap_or(false));
        match tools.iter_mut().find(|(name, _, _)| *name == tool) {
            Some((_, count, failures)) => {
                *count += 1;
                *failures += failed;
            }
            None => tools.push((tool, 1, failed)),
        }
    }
    let mut out = String::new();
    for (index, (tool, count, failed)) in tools.into_iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        out.push_str(tool);
        if count > 1 {
            let _ = write!(out, " ×{count}");
        }
        match failed {
            0 => {}
            _ if count == 1 => out.push_str(" (failed)"),
            _ => {
                let _ = write!(out, " ({failed} failed)");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_calls_are_summed_up_by_tool_in_the_order_first_called() {
        let call = |tool: &str, ok: bool| json!({"tool": tool, "arguments": {}, "ok": ok});
        let calls = [
            call("bash", true),
            call("read", false),
            call("bash", false),
            call("bash", true),
            call("write", true),
        ];
        assert_eq!(
            call_summary(&calls),
            "bash ×3 (1 failed), read (failed), write"
        );
        assert_eq!(call_summary(&calls[..1]), "bash");
        assert_eq!(call_summary(&[]), "");
    }
}
