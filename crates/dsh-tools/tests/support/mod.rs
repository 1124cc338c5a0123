//! Shared helpers for the dsh-tools integration tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::{
    AgentRef, Arguments, ContentBlock, FailureCode, ToolCall, ToolDefinition, ToolOutput,
    ToolRegistry, ToolResult, ValueSchema,
};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// A call with a fresh id and signal.
pub fn call(name: &str, arguments: impl Into<Arguments>) -> ToolCall {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    ToolCall::new(format!("call-{id}"), name, arguments)
}

/// Executes a call without an agent.
pub async fn run(
    registry: &ToolRegistry,
    name: &str,
    arguments: impl Into<Arguments>,
) -> ToolResult {
    registry.execute(call(name, arguments)).await
}

/// Executes a call on behalf of an agent.
pub async fn run_as(
    registry: &ToolRegistry,
    agent: &AgentRef,
    name: &str,
    arguments: impl Into<Arguments>,
) -> ToolResult {
    registry
        .execute(call(name, arguments).with_agent(agent.clone()))
        .await
}

/// The content text of a result.
pub fn text(result: &ToolResult) -> String {
    dsh_tools::content_text(&result.content)
}

/// Asserts a failure code and returns the message.
pub fn expect_failure(result: &ToolResult, code: FailureCode) -> String {
    assert!(result.is_error, "expected {code}, got success: {result:?}");
    assert_eq!(result.code(), Some(code), "{result:?}");
    assert!(result.value.is_none());
    result.error.as_ref().unwrap().message.clone()
}

/// Asserts success and returns the value.
pub fn expect_value(result: &ToolResult) -> Value {
    assert!(!result.is_error, "expected success, got {result:?}");
    (**result.value.as_ref().unwrap()).clone()
}

/// A validated DSL tool that returns a constant string.
pub fn constant_tool(name: &str, value: &str) -> ToolDefinition {
    let value = value.to_owned();
    ToolDefinition::builder(name, format!("Return {value}."))
        .output(ToolOutput::new(ValueSchema::string(), |_, v| {
            vec![ContentBlock::text(v.as_str().unwrap_or_default())]
        }))
        .execute(move |_, _| {
            let value = value.clone();
            async move { Ok(json!(value)) }
        })
        .build()
        .unwrap()
}
