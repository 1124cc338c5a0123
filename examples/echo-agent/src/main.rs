//! The minimal tool, end to end: an `echo` tool, registered in a registry, called by a
//! scripted model through the agent loop, with every session event printed. The tool is one
//! function with the `#[tool]` macro; the crate needs neither `serde` nor `schemars`.
//!
//! Run it with `cargo run -p echo-agent`.

#![allow(clippy::print_stdout)]

use agent_loop::{Agent, EventRecord, SessionEvent};
use dsh_tools::prelude::*;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use std::sync::Arc;

/// The most repetitions one call may ask for: the reply is built in memory.
const MAX_TIMES: u32 = 100;

/// Repeat the given text back. Use it when the user says "echo", "repeat after me" or "复述".
//
// `#[tool]` generates the `Echo` tool from this function: the doc comment above is the
// description, the parameters are the arguments (unknown keys are refused), and the output is
// the returned text, which is also what the model reads.
#[tool]
async fn echo(
    /// The text to send back.
    text: String,
    /// How many times to repeat it, from 1 to 100 (default 1).
    times: Option<u32>,
) -> Result<String, ToolError> {
    let times = times.unwrap_or(1);
    if !(1..=MAX_TIMES).contains(&times) {
        // A range the schema subset cannot express: checked by hand, reported as
        // INVALID_ARGS, the message starting with the field's pointer.
        return Err(ToolError::invalid_args(format!(
            "/times: must be from 1 to {MAX_TIMES}"
        )));
    }
    Ok(vec![text; times as usize].join(" "))
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
    use dsh_tools::ToolFailure;
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

    // An argument type of this crate's own, which depends on neither `schemars` nor `serde`:
    // the prelude's `JsonSchema` derive finds `schemars` through the prelude, and serde's
    // derives are pointed at ours. (A doc comment here would describe the parameter object.)
    #[derive(Deserialize, JsonSchema)]
    #[serde(crate = "dsh_tools::prelude::serde", deny_unknown_fields)]
    struct Shout {
        /// What to shout.
        text: String,
    }

    /// Shout the text back.
    #[tool(struct_name = ShoutTool)]
    async fn shout(#[args] args: Shout) -> String {
        args.text.to_uppercase()
    }

    #[tokio::test]
    async fn the_prelude_derives_work_without_their_crates() {
        let registry = ToolRegistry::new();
        registry.register_tool(ShoutTool).unwrap();
        let result = registry
            .execute(ToolCall::new("c1", "shout", json!({"text": "hi"})))
            .await;
        assert_eq!(result.content, vec![ContentBlock::text("HI")]);
        assert_eq!(
            registry.schemas(None)[0].parameters,
            json!({
                "type": "object",
                "properties": {"text": {"description": "What to shout.", "type": "string"}},
                "required": ["text"],
                "additionalProperties": false
            })
        );
    }
}
