//! Code Mode: programmatic dispatch (`call_value`) and the TypeScript declarations a model
//! programs against.
//!
//! In Code Mode a model writes a program in which every visible tool is
//! `await tools.<name>(args)`. A successful call resolves to the tool's canonical value after
//! policy (not its rendered content); a failure rejects with a [`ToolCallError`] that exposes
//! only `name`, `toolName`, `code` and `message`. Output schemas are therefore programmatic
//! APIs. The runtime that executes such programs, the `run_code` tool, lives in the
//! `tool-code` crate.

use crate::call::{Arguments, ToolCall};
use crate::definition::{RESERVED_TOOL_NAME, ToolDefinition};
use crate::error::FailureCode;
use crate::exec::ExecContext;
use crate::json::JsonValue;
use crate::registry::ToolRegistry;
use crate::schema::{SchemaKind, ValueSchema};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A failed sub-dispatch, as a Code Mode program sees it: the tool, the failure code and a
/// message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{tool_name}: {message}")]
pub struct ToolCallError {
    /// Always `"ToolCallError"`.
    pub name: &'static str,
    /// The tool that failed.
    pub tool_name: String,
    /// The failure class, so a program can tell a denial from a timeout.
    pub code: FailureCode,
    /// What went wrong.
    pub message: String,
}

impl ToolRegistry {
    /// Dispatches `name` from inside another tool's execution (a Code Mode program's
    /// `tools.<name>(args)`), through the full pipeline, and returns the canonical value after
    /// policy.
    ///
    /// The sub-dispatch carries the parent's token, agent, root call and signal; its call id is
    /// `<parent call id>:code:<n>` (n = 1, 2, … per parent); it has no cards and skips
    /// `presentation_meta`.
    pub async fn call_value(
        &self,
        name: &str,
        args: Value,
        parent: &ExecContext,
    ) -> Result<Arc<Value>, ToolCallError> {
        let n = parent
            .execution
            .sink
            .sub_calls
            .fetch_add(1, Ordering::SeqCst)
            + 1;
        let call = ToolCall {
            call_id: format!("{}:code:{n}", parent.call_id()),
            root_call_id: Some(parent.root_call_id().to_owned()),
            name: name.to_owned(),
            arguments: Arguments::Value(args),
            agent: parent.agent().cloned(),
            parent: Some(parent.token()),
            signal: parent.signal().clone(),
        };
        let result = self.execute(call).await;
        let failure = |code: FailureCode, message: String| ToolCallError {
            name: "ToolCallError",
            tool_name: name.to_owned(),
            code,
            message,
        };
        if result.is_error {
            let (code, message) = result.error.map_or_else(
                || (FailureCode::ToolError, crate::content_text(&result.content)),
                |e| (e.code, e.message),
            );
            return Err(failure(code, message));
        }
        result.value.ok_or_else(|| {
            failure(
                FailureCode::ToolError,
                String::from("the tool produced no value"),
            )
        })
    }

    /// The Code Mode TypeScript declarations for the tools the agent of `session` sees, less
    /// the Code Mode transport (`run_code`) itself, which a program cannot call.
    pub fn code_mode_sdk(&self, session: Option<&str>) -> String {
        let mut tools = self.visible(session);
        tools.retain(|tool| tool.name != RESERVED_TOOL_NAME);
        typescript_declarations(&tools)
    }
}

/// Renders the Code Mode TypeScript declarations for a set of tools: `ToolArgsMap`,
/// `ToolOutputMap`, `ToolName`, `ToolCallError` and `tools`, sorted by tool name, with
/// descriptions as JSDoc. Deterministic: the same tools give byte-identical text.
pub fn typescript_declarations(tools: &[Arc<ToolDefinition>]) -> String {
    let mut sorted: Vec<&Arc<ToolDefinition>> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut args = String::new();
    let mut outputs = String::new();
    for tool in &sorted {
        doc(&mut args, &tool.description, 1);
        let _ = writeln!(
            args,
            "  {}: {};",
            key(&tool.name),
            tool.parameters.as_subset().map_or_else(
                || String::from("{ [key: string]: JsonValue }"),
                |schema| ts_type(schema, 1)
            )
        );
        let _ = writeln!(
            outputs,
            "  {}: {};",
            key(&tool.name),
            tool.output
                .schema
                .as_subset()
                .map_or_else(|| String::from("JsonValue"), |schema| ts_type(schema, 1))
        );
    }
    let mut out = String::new();
    out.push_str("// Code Mode SDK: every visible tool is `await tools.<name>(args)`.\n");
    out.push_str("// Generated from the tool schemas; do not edit.\n\n");
    out.push_str(
        "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };\n\n",
    );
    let _ = write!(out, "interface ToolArgsMap {{\n{args}}}\n\n");
    let _ = write!(out, "interface ToolOutputMap {{\n{outputs}}}\n\n");
    out.push_str("type ToolName = keyof ToolArgsMap;\n\n");
    out.push_str(
        "/** A failed tool call: programs see only the tool's name, a failure code and a message. */\n",
    );
    out.push_str("declare class ToolCallError extends Error {\n");
    out.push_str("  readonly name: \"ToolCallError\";\n");
    out.push_str("  readonly toolName: ToolName;\n");
    let codes = FailureCode::ALL
        .iter()
        .map(|code| format!("\"{code}\""))
        .collect::<Vec<_>>()
        .join(" | ");
    let _ = writeln!(out, "  readonly code: {codes};");
    out.push_str("}\n\n");
    out.push_str(
        "/** Each tool resolves to its canonical value, or rejects with ToolCallError. */\n",
    );
    out.push_str("declare const tools: {\n");
    out.push_str("  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;\n");
    out.push_str("};\n");
    out
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn key(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

fn doc(out: &mut String, text: &str, indent: usize) {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}/** {} */",
        "  ".repeat(indent),
        collapsed.replace("*/", "*\\/")
    );
}

fn literal_union(values: &[JsonValue]) -> String {
    values
        .iter()
        .map(JsonValue::to_string)
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The TypeScript type of a schema, as the Code Mode declarations spell it (multi-line objects
/// indented by `indent` levels of two spaces).
pub fn typescript_type(schema: &ValueSchema, indent: usize) -> String {
    ts_type(schema, indent)
}

fn ts_type(schema: &ValueSchema, indent: usize) -> String {
    match schema.kind() {
        SchemaKind::Json => String::from("JsonValue"),
        SchemaKind::Scalar {
            ty,
            allowed,
            constant,
        } => {
            if let Some(constant) = constant {
                constant.to_string()
            } else if let Some(allowed) = allowed {
                literal_union(allowed)
            } else {
                match ty {
                    crate::schema::ScalarType::Integer => String::from("number"),
                    other => other.as_str().to_owned(),
                }
            }
        }
        SchemaKind::Array { items } => match items {
            Some(items) => format!("Array<{}>", ts_type(items, indent)),
            None => String::from("JsonValue[]"),
        },
        SchemaKind::OneOf(branches) => branches
            .iter()
            .map(|b| {
                let inner = ts_type(b, indent);
                if matches!(b.kind(), SchemaKind::OneOf(_)) {
                    format!("({inner})")
                } else {
                    inner
                }
            })
            .collect::<Vec<_>>()
            .join(" | "),
        SchemaKind::Object(object) => {
            let mut props: Vec<_> = object.properties().peekable().collect();
            if props.is_empty() {
                return String::from(if object.additional_properties() {
                    "{ [key: string]: JsonValue }"
                } else {
                    "Record<string, never>"
                });
            }
            let pad = "  ".repeat(indent + 1);
            let mut out = String::from("{\n");
            for (name, property) in props.drain(..) {
                if let Some(description) = &property.annotations().description {
                    doc(&mut out, description, indent + 1);
                }
                let optional = if object.is_required(name) { "" } else { "?" };
                let _ = writeln!(
                    out,
                    "{pad}{}{optional}: {};",
                    key(name),
                    ts_type(property, indent + 1)
                );
            }
            let _ = write!(out, "{}}}", "  ".repeat(indent));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_quoted_only_when_needed() {
        assert_eq!(key("job_output"), "job_output");
        assert_eq!(key("my-tool"), "\"my-tool\"");
        assert_eq!(key("1st"), "\"1st\"");
    }

    #[test]
    fn doc_comments_cannot_close_early() {
        let mut out = String::new();
        doc(&mut out, "ends */ here\n  and   wraps", 0);
        assert_eq!(out, "/** ends *\\/ here and wraps */\n");
    }
}
