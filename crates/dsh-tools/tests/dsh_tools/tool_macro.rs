//! The `#[tool]` macro: the definitions it generates (name, description, schemas, options) and
//! the calls they run, compared with what a hand-written `Tool` gives. Its compile errors are
//! in `tests/ui/` (run by `tool_macro_errors`).

// The `#[tool]` macro is the default `macros` feature.
#![cfg(feature = "macros")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::prelude::*;
use dsh_tools::{ToolFailure, ToolSchema};
use pretty_assertions::assert_eq;
use std::time::Duration;

/// Repeat the given text back.
///
/// Use it when the user says "echo".
#[tool]
async fn echo(
    /// The text to send back.
    text: String,
    /// How many times, 1 when left out.
    #[serde(default)]
    times: Option<u32>,
) -> String {
    vec![text; times.unwrap_or(1) as usize].join(" ")
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DivideArgs {
    /// The dividend.
    dividend: i64,
    /// The divisor, not zero.
    divisor: i64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Quotient {
    quotient: i64,
    remainder: i64,
}

fn render_quotient(args: &DivideArgs, value: &Quotient) -> Vec<ContentBlock> {
    vec![ContentBlock::text(format!(
        "{} / {} = {} rest {}",
        args.dividend, args.divisor, value.quotient, value.remainder
    ))]
}

/// Divide two integers.
#[tool(
    name = "int_div",
    timeout_ms = 2500,
    concurrency_safe,
    render = render_quotient,
    struct_name = IntegerDivision
)]
async fn divide(#[args] args: DivideArgs, exec: &ExecContext) -> Result<Quotient, ToolError> {
    if args.divisor == 0 {
        return Err(ToolError::invalid_args("/divisor: must not be zero"));
    }
    assert_eq!(exec.name(), "int_div");
    Ok(Quotient {
        quotient: args.dividend / args.divisor,
        remainder: args.dividend % args.divisor,
    })
}

/// Says which call this is.
#[tool(description = "Report the call id.")]
pub(crate) async fn whoami(exec: ExecContext) -> std::io::Result<String> {
    if exec.call_id() == "refused" {
        return Err(std::io::Error::other("no id today"));
    }
    Ok(exec.call_id().to_owned())
}

/// Answers nothing useful.
#[tool]
async fn r#type() -> Option<bool> {
    None
}

/// The crate under another path, as a renamed dependency or a re-export would put it.
mod renamed {
    pub(crate) use dsh_tools::*;
}

/// Answers 42.
#[tool(crate = crate::tool_macro::renamed, name = "answer")]
async fn answer_through_a_renamed_crate() -> u8 {
    42
}

async fn run(registry: &ToolRegistry, id: &str, name: &str, args: Value) -> ToolResult {
    registry.execute(ToolCall::new(id, name, args)).await
}

fn schema(registry: &ToolRegistry, name: &str) -> ToolSchema {
    registry
        .schemas(None)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

#[tokio::test]
async fn plain_parameters_become_a_closed_arguments_object() {
    let registry = ToolRegistry::new();
    registry.register_tool(Echo).unwrap();
    assert_eq!(
        schema(&registry, "echo"),
        ToolSchema {
            name: "echo".into(),
            description: "Repeat the given text back.\n\nUse it when the user says \"echo\"."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"description": "The text to send back.", "type": "string"},
                    "times": {
                        "description": "How many times, 1 when left out.",
                        "oneOf": [{"type": "integer"}, {"type": "null"}],
                        "default": null
                    }
                },
                "required": ["text"],
                "additionalProperties": false
            })
            .into(),
        }
    );
    let definition = registry.get("echo", None).unwrap();
    assert_eq!(definition.timeout(), None);
    assert!(!definition.is_concurrency_safe(&json!({"text": "a"})));

    let twice = run(&registry, "c1", "echo", json!({"text": "hi", "times": 2})).await;
    assert_eq!(twice.content, vec![ContentBlock::text("hi hi")]);
    assert_eq!(twice.value.as_deref(), Some(&json!("hi hi")));
    let unknown = run(&registry, "c2", "echo", json!({"text": "hi", "loud": true})).await;
    assert_eq!(unknown.code(), Some(FailureCode::InvalidArgs));
}

#[tokio::test]
async fn an_args_struct_and_every_option_reach_the_definition() {
    let registry = ToolRegistry::new();
    registry.register_tool(IntegerDivision).unwrap();
    assert_eq!(
        schema(&registry, "int_div").parameters,
        json!({
            "type": "object",
            "properties": {
                "dividend": {"description": "The dividend.", "type": "integer"},
                "divisor": {"description": "The divisor, not zero.", "type": "integer"}
            },
            "required": ["dividend", "divisor"],
            "additionalProperties": false
        })
    );
    let definition = registry.get("int_div", None).unwrap();
    assert_eq!(definition.description(), "Divide two integers.");
    assert_eq!(definition.timeout(), Some(Duration::from_millis(2500)));
    assert!(definition.is_concurrency_safe(&json!({"dividend": 1, "divisor": 2})));

    let divided = run(
        &registry,
        "c1",
        "int_div",
        json!({"dividend": 7, "divisor": 2}),
    )
    .await;
    assert_eq!(
        divided.content,
        vec![ContentBlock::text("7 / 2 = 3 rest 1")]
    );
    let by_zero = run(
        &registry,
        "c2",
        "int_div",
        json!({"dividend": 7, "divisor": 0}),
    )
    .await;
    assert_eq!(
        by_zero.error,
        Some(ToolFailure {
            message: "invalid arguments: /divisor: must not be zero".into(),
            code: FailureCode::InvalidArgs,
        })
    );
}

#[tokio::test]
async fn the_context_is_no_argument_and_any_error_that_converts_is_a_tool_error() {
    let registry = ToolRegistry::new();
    registry.register_tool(Whoami).unwrap();
    assert_eq!(
        schema(&registry, "whoami"),
        ToolSchema {
            name: "whoami".into(),
            description: "Report the call id.".into(),
            parameters: json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            })
            .into(),
        }
    );
    let ok = run(&registry, "call-7", "whoami", json!({})).await;
    assert_eq!(ok.content, vec![ContentBlock::text("call-7")]);
    let refused = run(&registry, "refused", "whoami", json!({})).await;
    assert_eq!(
        refused.error,
        Some(ToolFailure {
            message: "no id today".into(),
            code: FailureCode::ToolError,
        })
    );
}

#[tokio::test]
async fn a_raw_identifier_names_the_tool_without_its_prefix_and_values_render_as_json() {
    let registry = ToolRegistry::new();
    registry.register_tool(Type).unwrap();
    let result = run(&registry, "c1", "type", json!({})).await;
    assert_eq!(result.content, vec![ContentBlock::text("null")]);
    assert_eq!(result.value.as_deref(), Some(&Value::Null));
}

#[tokio::test]
async fn the_crate_option_names_dsh_tools_by_another_path() {
    let registry = ToolRegistry::new();
    registry.register_tool(AnswerThroughARenamedCrate).unwrap();
    let result = run(&registry, "c1", "answer", json!({})).await;
    assert_eq!(result.value.as_deref(), Some(&json!(42)));
}

#[tokio::test]
async fn the_function_stays_callable() {
    assert_eq!(echo("a".into(), Some(3)).await, "a a a");
    let quotient = divide(
        DivideArgs {
            dividend: -7,
            divisor: 2,
        },
        &context_free_exec().await,
    )
    .await;
    assert!(quotient.is_ok());
}

/// An `ExecContext` from a real call, to call `divide` directly.
async fn context_free_exec() -> ExecContext {
    let registry = ToolRegistry::new();
    let (sender, receiver) = std::sync::mpsc::channel();
    let capture = ToolDefinition::builder("int_div", "Capture the context.")
        .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
        .execute(move |_, exec| {
            sender.send(exec).unwrap();
            async { Ok(Value::Null) }
        })
        .build()
        .unwrap();
    registry.register(capture).unwrap();
    run(&registry, "c1", "int_div", json!({})).await;
    receiver.recv().unwrap()
}
