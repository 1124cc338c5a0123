//! The minimal tool, end to end: an `echo` tool, registered in a registry, called by a
//! scripted model through the agent loop, with every session event printed.
//!
//! Run it with `cargo run -p echo-agent`.

#![allow(clippy::print_stdout)]

use agent_loop::{Agent, EventRecord, SessionEvent};
use dsh_tools::{ContentBlock, ExecContext, Tool, ToolError, ToolRegistry};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// The arguments: unknown keys are refused.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// The text to send back.
    text: String,
    /// How many times to repeat it, from 1 to 100 (default 1).
    times: Option<u32>,
}

/// The most repetitions one call may ask for: the reply is built in memory.
const MAX_TIMES: u32 = 100;

/// The canonical value: a programmatic result, not prose.
#[derive(Serialize, JsonSchema)]
struct Echoed {
    text: String,
}

struct Echo;

impl Tool for Echo {
    type Args = EchoArgs;
    type Output = Echoed;

    fn name(&self) -> &str {
        "echo"
    }

    fn description(&self) -> &str {
        "Repeat the given text back. Use it when the user says \"echo\", \"repeat after me\" or \"复述\"."
    }

    async fn execute(&self, args: EchoArgs, _exec: ExecContext) -> Result<Echoed, ToolError> {
        let times = args.times.unwrap_or(1);
        if !(1..=MAX_TIMES).contains(&times) {
            // A range the schema subset cannot express: checked by hand, reported as
            // INVALID_ARGS, the message starting with the field's pointer.
            return Err(ToolError::invalid_args(format!(
                "/times: must be from 1 to {MAX_TIMES}"
            )));
        }
        Ok(Echoed {
            text: vec![args.text; times as usize].join(" "),
        })
    }

    fn render(&self, _args: &Value, value: &Value) -> Vec<ContentBlock> {
        vec![ContentBlock::text(
            value["text"].as_str().unwrap_or_default(),
        )]
    }
}

fn print_event(record: &EventRecord) {
    let line = match &record.event {
        SessionEvent::SessionStart {
            session_id, tools, ..
        } => {
            format!("session {session_id} started; tools: {}", tools.join(", "))
        }
        SessionEvent::UserMessage { content } => format!("user: {content}"),
        SessionEvent::ModelRequest { step, .. } => format!("(model request, step {step})"),
        SessionEvent::AssistantMessage {
            text, tool_calls, ..
        } => {
            let mut line = format!("assistant: {text}");
            for call in tool_calls {
                line.push_str(&format!("\n  calls {}({})", call.name, call.arguments));
            }
            line
        }
        SessionEvent::ToolCall { name, .. } => format!("  running {name}…"),
        SessionEvent::ToolResult {
            name,
            is_error,
            content,
            ..
        } => {
            let status = if *is_error { "failed" } else { "returned" };
            format!("  {name} {status}: {}", dsh_tools::content_text(content))
        }
        SessionEvent::TurnEnd { reason, steps } => {
            format!("turn ended: {} after {steps} step(s)", reason.as_str())
        }
        other => other.kind().to_string(),
    };
    println!("{line}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let registry = ToolRegistry::new();
    registry.register_tool(Echo)?;

    let model = MockAdapter::new([
        Step::from(
            Response::calls([
                ScriptedCall::json("call-1", "echo", json!({"text": "hello", "times": 2})),
                ScriptedCall::json("call-2", "echo", json!({"text": "bye", "times": 0})),
            ])
            .with_text("I will echo twice."),
        ),
        Response::text("Echoed \"hello\" twice; `times: 0` was refused, as it should be.").into(),
    ]);
    let agent = Agent::builder(registry, Arc::new(model.clone()))
        .session_id("echo-demo")
        .subscriber(print_event)
        .build()?;
    agent.run("Echo hello twice, then bye zero times.").await?;
    model.check_exhausted()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::{FailureCode, ToolFailure};
    use std::sync::Mutex;

    /// Calls `echo` once per argument object through the agent loop; returns each call's
    /// error, or `None` when it succeeded.
    async fn failures(calls: &[Value]) -> Vec<Option<ToolFailure>> {
        let registry = ToolRegistry::new();
        registry.register_tool(Echo).unwrap();
        let model = MockAdapter::new([
            Step::from(Response::calls(calls.iter().enumerate().map(
                |(i, args)| ScriptedCall::json(format!("call-{i}"), "echo", args.clone()),
            ))),
            Response::text("done").into(),
        ]);
        let seen: Arc<Mutex<Vec<Option<ToolFailure>>>> = Arc::default();
        let sink = Arc::clone(&seen);
        let agent = Agent::builder(registry, Arc::new(model))
            .subscriber(move |record| {
                if let SessionEvent::ToolResult { error, .. } = &record.event {
                    sink.lock().unwrap().push(error.clone());
                }
            })
            .build()
            .unwrap();
        agent.run("echo").await.unwrap();
        agent.dispose().await;
        seen.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn times_is_bounded_before_anything_is_built() {
        let out_of_range = Some(ToolFailure {
            message: "invalid arguments: /times: must be from 1 to 100".into(),
            code: FailureCode::InvalidArgs,
        });
        assert_eq!(
            failures(&[
                json!({"text": "x", "times": 100}),
                json!({"text": "x", "times": 101}),
                json!({"text": "x", "times": 0}),
                json!({"text": "x", "times": 4_000_000_000_u32}),
            ])
            .await,
            vec![
                None,
                out_of_range.clone(),
                out_of_range.clone(),
                out_of_range
            ]
        );
    }
}
