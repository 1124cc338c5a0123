//! The display path validates softly: malformed arguments give `None` (the generic card),
//! never an error or a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::card::{GenericCallView, TerminalCallView, TerminalResultView};
use dsh_tools::{
    ContentBlock, ExecContext, Tool, ToolCallView, ToolDefinition, ToolError, ToolOutput,
    ToolRegistry, ToolResultRecord, ToolResultView, ValueSchema,
};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    command: String,
    workdir: Option<String>,
}

struct Run;

impl Tool for Run {
    type Args = RunArgs;
    type Output = String;

    fn name(&self) -> &str {
        "run"
    }

    fn description(&self) -> &str {
        "Run a command."
    }

    async fn execute(&self, args: RunArgs, _: ExecContext) -> Result<String, ToolError> {
        Ok(args.command)
    }

    fn render(&self, _: &RunArgs, value: &String) -> Vec<ContentBlock> {
        vec![ContentBlock::text(value.clone())]
    }

    fn present_call(&self, args: &RunArgs) -> Option<ToolCallView> {
        Some(ToolCallView::Terminal(TerminalCallView {
            title: args.command.clone(),
            description: None,
            cwd: args.workdir.clone(),
        }))
    }

    fn present_result(&self, args: &RunArgs, record: &ToolResultRecord) -> Option<ToolResultView> {
        Some(ToolResultView::Terminal(TerminalResultView {
            title: Some(args.command.clone()),
            output: Some(dsh_tools::content_text(&record.content)),
            ..TerminalResultView::default()
        }))
    }
}

/// A raw tool whose presenter indexes blindly and would panic on odd input.
fn careless() -> ToolDefinition {
    ToolDefinition::builder("careless", "Index without checking.")
        .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
        .present_call(|args| {
            let title = args["items"].as_array().unwrap()[0]
                .as_str()
                .unwrap()
                .to_owned();
            Some(ToolCallView::Generic(GenericCallView {
                title,
                ..GenericCallView::default()
            }))
        })
        .execute(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap()
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,8}".prop_map(Value::String),
        Just(json!("command")),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("command".to_owned()),
                    Just("workdir".to_owned()),
                    ".{0,6}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn record_of(content: &Value) -> ToolResultRecord {
    ToolResultRecord {
        content: vec![ContentBlock::text(content.to_string())],
        is_error: false,
        error: None,
        meta: Some(content.clone()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn presenters_are_total_over_arbitrary_json(args in arbitrary_json(), other in arbitrary_json()) {
        let registry = ToolRegistry::new();
        registry.register_tool(Run).unwrap();
        registry.register(careless()).unwrap();
        let run = registry.get("run", None).unwrap();
        let readable = args.get("command").is_some_and(Value::is_string)
            && args.as_object().is_some_and(|m| m.keys().all(|k| k == "command" || k == "workdir"))
            && args.get("workdir").is_none_or(|w| w.is_string() || w.is_null());
        prop_assert_eq!(run.present_call(&args).is_some(), readable);
        prop_assert_eq!(run.present_result(&args, &record_of(&other)).is_some(), readable);
        // The registry always produces a card: the tool's, or the generic fallback.
        let card = registry.present_call("run", &args, None);
        if !readable {
            prop_assert_eq!(card, ToolCallView::fallback("run", &args));
        }
        let careless = registry.get("careless", None).unwrap();
        let _ = careless.present_call(&args);
        let _ = registry.present_call("careless", &args, None);
        let _ = registry.present_result("careless", &args, &record_of(&other), None);
        let _ = registry.present_call("missing", &args, None);
    }
}

#[test]
fn readable_arguments_get_the_tools_cards() {
    let registry = ToolRegistry::new();
    registry.register_tool(Run).unwrap();
    let args = json!({"command": "ls", "workdir": "/tmp"});
    assert_eq!(
        registry.present_call("run", &args, None),
        ToolCallView::Terminal(TerminalCallView {
            title: "ls".into(),
            description: None,
            cwd: Some("/tmp".into()),
        })
    );
    let record = ToolResultRecord {
        content: vec![ContentBlock::text("a\nb")],
        ..ToolResultRecord::default()
    };
    assert_eq!(
        registry.present_result("run", &args, &record, None),
        ToolResultView::Terminal(TerminalResultView {
            title: Some("ls".into()),
            output: Some("a\nb".into()),
            ..TerminalResultView::default()
        })
    );
}
