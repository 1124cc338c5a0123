//! The echo tools, and a raw tool of any body.

use dsh_tools::{ContentBlock, ExecContext, ToolDefinition, ToolError, ToolOutput, ValueSchema};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;

/// The `echo` tool: takes a required string `text` (no other field) and returns it; its
/// content is that text.
pub fn echo() -> ToolDefinition {
    ToolDefinition::builder("echo", "Repeat the text back.")
        .parameters(ValueSchema::closed_object().required("text", ValueSchema::string()))
        .output(ToolOutput::new(ValueSchema::string(), |_, v| {
            vec![ContentBlock::text(v.as_str().unwrap_or_default())]
        }))
        .execute(|args, _| async move { Ok(json!(args["text"].as_str().unwrap_or_default())) })
        .build()
        .unwrap()
}

/// A raw tool named `name` that returns its arguments unchanged as its value; its parameters
/// are the raw schema `{"type": "object", "properties": {"x": {"type": "string"}}}` and its
/// content the value's compact JSON.
pub fn raw_echo(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name, "Return the arguments unchanged.")
        .raw_parameters(json!({"type": "object", "properties": {"x": {"type": "string"}}}))
        .raw_output(json!({}), |_, v| vec![ContentBlock::text(v.to_string())])
        .execute(|args, _| async move { Ok((*args).clone()) })
        .build()
        .unwrap()
}

/// A tool named `name` (described as "The `name` tool.") whose body is `body(args, exec)` and
/// whose value is any JSON; `safe` makes it concurrency-safe. Its content is a string value's
/// text, or any other value's compact JSON.
pub fn tool<F, Fut>(name: &str, safe: bool, body: F) -> ToolDefinition
where
    F: Fn(Arc<Value>, ExecContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let mut builder = ToolDefinition::builder(name, format!("The {name} tool."))
        .output(ToolOutput::new(ValueSchema::json(), |_, v| {
            vec![ContentBlock::text(match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })]
        }))
        .execute(body);
    if safe {
        builder = builder.concurrency_safe(|_| true);
    }
    builder.build().unwrap()
}
