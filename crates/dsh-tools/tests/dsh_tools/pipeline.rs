//! The execute path without hooks: materialisation, validation, body, output, registration
//! rules and the model-facing projections (cancellation is in `cancellation.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_tools::json::JsonValue;
use dsh_tools::{
    ArgsValidation, ContentBlock, ExecContext, FailureCode, RegistrationError, Tool,
    ToolDefinition, ToolError, ToolOutput, ToolRegistry, ToolSchema, ValueSchema,
};
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::{constant_tool, expect_failure, expect_value, run, text};

// ----- A typed tool exercising every normalised shape ------------------------------------------

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Target {
    /// File to act on.
    path: String,
    line: Option<u32>,
}

#[derive(Deserialize, JsonSchema, Serialize, Clone, Copy, Debug)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Careful,
}

#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Action {
    Replace { with: String },
    Delete,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    targets: Vec<Target>,
    note: Option<String>,
    mode: Mode,
    action: Action,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct EditOutput {
    count: usize,
    mode: Mode,
    replaced: Option<String>,
}

struct Edit;

impl Tool for Edit {
    type Args = EditArgs;
    type Output = EditOutput;

    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Edit files."
    }

    async fn execute(&self, args: EditArgs, _exec: ExecContext) -> Result<EditOutput, ToolError> {
        if args.note.as_deref() == Some("") {
            return Err(ToolError::invalid_args("note must not be empty when given"));
        }
        Ok(EditOutput {
            count: args.targets.len(),
            mode: args.mode,
            replaced: match args.action {
                Action::Replace { with } => Some(with),
                Action::Delete => None,
            },
        })
    }

    fn render(&self, _args: &EditArgs, value: &EditOutput) -> Vec<ContentBlock> {
        vec![ContentBlock::text(format!(
            "edited {} targets",
            value.count
        ))]
    }

    fn present_call(&self, args: &EditArgs) -> Option<dsh_tools::ToolCallView> {
        Some(dsh_tools::ToolCallView::fallback(
            "edit",
            &json!(args.targets.len()),
        ))
    }
}

fn valid_edit() -> Value {
    json!({
        "targets": [{"path": "/a", "line": 3}, {"path": "/b"}],
        "note": null,
        "mode": "careful",
        "action": {"kind": "replace", "with": "x"}
    })
}

#[tokio::test]
async fn typed_tool_runs_valid_calls() {
    let registry = ToolRegistry::new();
    registry.register_tool(Edit).unwrap();
    let result = run(&registry, "edit", valid_edit()).await;
    assert_eq!(
        expect_value(&result),
        json!({"count": 2, "mode": "careful", "replaced": "x"})
    );
    assert_eq!(text(&result), "edited 2 targets");
}

#[tokio::test]
async fn typed_tool_rejects_each_invalid_shape_with_its_pointer() {
    let registry = ToolRegistry::new();
    registry.register_tool(Edit).unwrap();
    let check = |mutate: fn(&mut Value), pointer: &'static str| {
        let registry = registry.clone();
        async move {
            let mut args = valid_edit();
            mutate(&mut args);
            let result = run(&registry, "edit", args.clone()).await;
            let message = expect_failure(&result, FailureCode::InvalidArgs);
            assert!(
                message.contains(&format!("{pointer}: ")),
                "{args} should be refused at {pointer}: {message}"
            );
        }
    };
    check(|a| a["targets"] = json!("/a"), "/targets").await;
    check(
        |a| a["targets"][0]["line"] = json!("three"),
        "/targets/0/line",
    )
    .await;
    check(|a| a["targets"][1]["extra"] = json!(1), "/targets/1/extra").await;
    check(
        |a| a["targets"][0].as_object_mut().unwrap().clear(),
        "/targets/0/path",
    )
    .await;
    check(|a| a["mode"] = json!("reckless"), "/mode").await;
    check(
        |a| a["action"] = json!({"kind": "replace", "with": 7}),
        "/action/with",
    )
    .await;
    check(|a| a["action"] = json!({"kind": "rename"}), "/action").await;
    check(|a| a["note"] = json!(5), "/note").await;
    check(|a| a["surprise"] = json!(true), "/surprise").await;
    check(
        |a| a.as_object_mut().unwrap().remove("mode").map(drop).unwrap(),
        "/mode",
    )
    .await;
}

#[tokio::test]
async fn hand_checked_rules_and_non_json_text_are_invalid_args() {
    let registry = ToolRegistry::new();
    registry.register_tool(Edit).unwrap();
    let mut args = valid_edit();
    args["note"] = json!("");
    let message = expect_failure(
        &run(&registry, "edit", args).await,
        FailureCode::InvalidArgs,
    );
    assert!(message.contains("note must not be empty"), "{message}");

    let result = run(&registry, "edit", "{not json").await;
    let message = expect_failure(&result, FailureCode::InvalidArgs);
    assert!(message.contains("not JSON"), "{message}");
    assert!(text(&result).starts_with("Error: "), "{}", text(&result));
}

#[tokio::test]
async fn typed_tools_accept_any_number_spelling_in_tagged_enums() {
    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Shape {
        Circle { r: f64 },
    }
    #[derive(Deserialize, JsonSchema)]
    struct Args {
        shape: Shape,
        count: u8,
    }
    struct Area;
    impl Tool for Area {
        type Args = Args;
        type Output = f64;
        fn name(&self) -> &str {
            "area"
        }
        fn description(&self) -> &str {
            "Area of a shape."
        }
        async fn execute(&self, args: Args, _: ExecContext) -> Result<f64, ToolError> {
            let Shape::Circle { r } = args.shape;
            Ok(r * r * f64::from(args.count))
        }
        fn render(&self, _: &Args, value: &f64) -> Vec<ContentBlock> {
            vec![ContentBlock::text(value.to_string())]
        }
    }
    let registry = ToolRegistry::new();
    registry.register_tool(Area).unwrap();
    let result = run(
        &registry,
        "area",
        r#"{"shape": {"kind": "circle", "r": 2.0e0}, "count": 1.0}"#,
    )
    .await;
    assert_eq!(expect_value(&result), json!(4.0));
}

#[tokio::test]
async fn typed_tools_get_exact_integers_and_their_declared_property_order() {
    #[derive(Deserialize, JsonSchema)]
    struct Wide {
        zeta: u64,
        big: u128,
        alpha: i128,
    }
    struct WideTool;
    impl Tool for WideTool {
        type Args = Wide;
        type Output = String;
        fn name(&self) -> &str {
            "wide"
        }
        fn description(&self) -> &str {
            "Echo wide integers."
        }
        async fn execute(&self, args: Wide, _: ExecContext) -> Result<String, ToolError> {
            Ok(format!("{} {} {}", args.zeta, args.big, args.alpha))
        }
        fn render(&self, _: &Wide, value: &String) -> Vec<ContentBlock> {
            vec![ContentBlock::text(format!("{value:?}"))]
        }
    }
    let registry = ToolRegistry::new();
    registry.register_tool(WideTool).unwrap();
    let result = run(
        &registry,
        "wide",
        r#"{"zeta": 18446744073709551615, "big": 18446744073709551617, "alpha": -170141183460469231731687303715884105728}"#,
    )
    .await;
    assert_eq!(
        expect_value(&result),
        json!("18446744073709551615 18446744073709551617 -170141183460469231731687303715884105728")
    );
    // What a model request carries, read back exactly: the struct's order, not schemars'.
    let sent = serde_json::to_string(&registry.schemas(None)).unwrap();
    let sent = JsonValue::parse(&sent).unwrap();
    let properties: Vec<&String> = sent[0]["parameters"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(properties, ["zeta", "big", "alpha"]);
}

#[test]
fn dsl_and_exact_raw_schemas_reach_the_model_in_declared_order() {
    let registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("dsl", "Declared with the DSL.")
                .parameters(
                    ValueSchema::closed_object()
                        .required("zeta", ValueSchema::string())
                        .property("alpha", ValueSchema::integer()),
                )
                .raw_output(json!({}), |_, _| Vec::new())
                .execute(|args, _| async move { Ok((*args).clone()) })
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("raw", "Declared as raw JSON Schema text.")
                .raw_parameters_exact(
                    JsonValue::parse(
                        r#"{"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer", "enum": [18446744073709551617, 1e400]}}}"#,
                    )
                    .unwrap(),
                )
                .raw_output(json!({}), |_, _| Vec::new())
                .execute(|args, _| async move { Ok((*args).clone()) })
                .build()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(
        serde_json::to_string(&registry.schemas(None)).unwrap(),
        concat!(
            r#"[{"name":"dsl","description":"Declared with the DSL.","parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},"required":["zeta"],"additionalProperties":false}},"#,
            r#"{"name":"raw","description":"Declared as raw JSON Schema text.","parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer","enum":[18446744073709551617,1e400]}}}}]"#,
        )
    );
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PageArgs {
    /// How many entries to return.
    limit: u32,
}

struct Page;

impl Tool for Page {
    type Args = PageArgs;
    type Output = u32;

    fn name(&self) -> &str {
        "page"
    }

    fn description(&self) -> &str {
        "Return the limit."
    }

    async fn execute(&self, args: PageArgs, _: ExecContext) -> Result<u32, ToolError> {
        Ok(args.limit)
    }

    fn render(&self, _: &PageArgs, value: &u32) -> Vec<ContentBlock> {
        vec![ContentBlock::text(value.to_string())]
    }
}

#[tokio::test]
async fn a_value_only_serde_refuses_is_invalid_args_at_its_pointer() {
    // The schema says `integer` (widths are serde's to enforce), so `-1` passes validation and
    // the typed deserialisation must name where it failed.
    let registry = ToolRegistry::new();
    registry.register_tool(Page).unwrap();
    let result = run(&registry, "page", json!({"limit": -1})).await;
    assert_eq!(
        expect_failure(&result, FailureCode::InvalidArgs),
        "invalid arguments: /limit: -1 is out of range for this field"
    );
    assert_eq!(
        expect_value(&run(&registry, "page", json!({"limit": 7})).await),
        json!(7)
    );
}

// ----- Raw tools ----------------------------------------------------------------------------

#[tokio::test]
async fn raw_tools_receive_lossless_unvalidated_arguments() {
    let registry = ToolRegistry::new();
    let seen = ToolDefinition::builder("seen", "Report the arguments as the body sees them.")
        .raw_parameters(json!({"type": "object", "properties": {"x": {"type": "string"}}}))
        .args_validation(ArgsValidation::Unvalidated)
        .raw_output(json!({}), |_, v| vec![ContentBlock::text(v.to_string())])
        .execute(|args, exec| async move {
            Ok(json!({
                "text": exec.args_text(),
                "exact": exec.exact_args().to_string(),
                "big": exec.exact_args()["big"].as_number().map(|n| n.as_str().to_owned()),
                "value": *args,
            }))
        })
        .build()
        .unwrap();
    registry.register(seen).unwrap();
    let text_args =
        r#"{"zero": -0, "big": 18446744073709551617, "tenth": 0.10, "huge": 1e400, "x": 5}"#;
    let result = run(&registry, "seen", text_args).await;
    // `x` breaks the declared schema (string), but this tool validates its own input.
    assert_eq!(
        expect_value(&result),
        json!({
            "text": text_args,
            "exact": r#"{"zero":-0,"big":18446744073709551617,"tenth":0.10,"huge":1e400,"x":5}"#,
            "big": "18446744073709551617",
            // The convenient `serde_json::Value`: keys sorted, numbers as it can hold them.
            "value": {"big": 18446744073709551617.0, "huge": "1e400", "tenth": 0.1, "x": 5, "zero": 0},
        })
    );
}

// ----- Body failures and outputs ------------------------------------------------------------

fn panicky(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name, "Panic when asked.")
        .parameters(ValueSchema::open_object().property("panic", ValueSchema::boolean()))
        .output(ToolOutput::new(ValueSchema::string(), |_, v| {
            vec![ContentBlock::text(v.as_str().unwrap_or_default())]
        }))
        .execute(|args, _| async move {
            if args["panic"] == json!(true) {
                panic!("boom");
            }
            Ok(json!("fine"))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_panicking_body_is_contained() {
    let registry = ToolRegistry::new();
    registry.register(panicky("p")).unwrap();
    let message = expect_failure(
        &run(&registry, "p", json!({"panic": true})).await,
        FailureCode::ToolPanic,
    );
    assert!(message.contains("boom"), "{message}");
    assert_eq!(
        expect_value(&run(&registry, "p", json!({})).await),
        json!("fine")
    );
}

#[tokio::test]
async fn a_call_concludes_the_turn_only_when_its_body_asked_and_it_succeeded() {
    let def = ToolDefinition::builder("finish", "Maybe end the turn, maybe fail.")
        .parameters(
            ValueSchema::closed_object()
                .property("conclude", ValueSchema::boolean())
                .property("fail", ValueSchema::boolean()),
        )
        .output(ToolOutput::new(ValueSchema::string(), |_, v| {
            vec![ContentBlock::text(v.as_str().unwrap_or_default())]
        }))
        .execute(|args, exec| async move {
            if args["conclude"] == json!(true) {
                exec.conclude_turn();
            }
            if args["fail"] == json!(true) {
                Err(ToolError::failed("no"))
            } else {
                Ok(json!("done"))
            }
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(def).unwrap();
    let mut seen = Vec::new();
    for (conclude, fail) in [(true, false), (true, true), (false, false), (false, true)] {
        let result = run(
            &registry,
            "finish",
            json!({"conclude": conclude, "fail": fail}),
        )
        .await;
        seen.push((conclude, fail, result.is_error, result.concludes_turn));
    }
    assert_eq!(
        seen,
        vec![
            (true, false, false, true),
            (true, true, true, false),
            (false, false, false, false),
            (false, true, true, false),
        ]
    );
}

fn exit_tool(value: Value) -> ToolDefinition {
    ToolDefinition::builder("exit", "Report an exit code.")
        .output(ToolOutput::new(
            ValueSchema::closed_object().required("exitCode", ValueSchema::integer()),
            |_, v| {
                vec![ContentBlock::text(format!(
                    "[exit code: {}]",
                    v["exitCode"]
                ))]
            },
        ))
        .execute(move |_, _| {
            let value = value.clone();
            async move { Ok(value) }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn outputs_are_validated_and_domain_failures_are_values() {
    let registry = ToolRegistry::new();
    registry
        .register(exit_tool(json!({"exitCode": 9})))
        .unwrap();
    let result = run(&registry, "exit", json!({})).await;
    assert_eq!(expect_value(&result), json!({"exitCode": 9}));
    assert_eq!(text(&result), "[exit code: 9]");

    let registry = ToolRegistry::new();
    registry
        .register(exit_tool(json!({"exitCode": "nine"})))
        .unwrap();
    let message = expect_failure(
        &run(&registry, "exit", json!({})).await,
        FailureCode::InvalidToolOutput,
    );
    assert!(
        message.contains("/exitCode: expected integer, got string"),
        "{message}"
    );
}

#[tokio::test]
async fn a_presentation_meta_of_none_records_no_meta() {
    let registry = ToolRegistry::new();
    let def = ToolDefinition::builder("echo", "Return the arguments.")
        .raw_parameters(json!({"type": "object"}))
        .output(
            ToolOutput::new(ValueSchema::json(), |_, _| Vec::new())
                .with_presentation_meta(|_, value| value.get("ui").cloned()),
        )
        .execute(|args, _| async move { Ok((*args).clone()) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let with_ui = run(&registry, "echo", json!({"ui": {"badge": 1}})).await;
    assert_eq!(with_ui.meta, Some(json!({"badge": 1})));
    let without = run(&registry, "echo", json!({"other": true})).await;
    assert_eq!(
        (without.is_error, without.meta),
        (false, None),
        "a projection that gives nothing records nothing"
    );
}

#[tokio::test]
async fn tool_errors_are_tool_error_results() {
    let registry = ToolRegistry::new();
    let def = ToolDefinition::builder("fail", "Always fails.")
        .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
        .execute(|_, _| async move { Err(ToolError::failed("cannot spawn: no such file")) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let result = run(&registry, "fail", json!({})).await;
    assert_eq!(
        expect_failure(&result, FailureCode::ToolError),
        "cannot spawn: no such file"
    );
    assert_eq!(text(&result), "Error: cannot spawn: no such file");
}

// ----- Unknown tools and registration rules -------------------------------------------------

#[tokio::test]
async fn unknown_tools_name_the_available_ones() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("alpha", "a")).unwrap();
    let message = expect_failure(
        &run(&registry, "beta", json!({})).await,
        FailureCode::UnknownTool,
    );
    assert_eq!(message, "unknown tool `beta`; available tools: alpha");
}

#[test]
fn registration_refuses_bad_names_the_reserved_name_and_duplicates() {
    let check = |name: &str, expected: &str| {
        let err = ToolDefinition::builder(name, "x")
            .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
            .execute(|_, _| async { Ok(Value::Null) })
            .build()
            .unwrap_err();
        assert_eq!(err.to_string(), expected, "{name:?}");
    };
    check(
        "",
        "invalid tool name \"\": names must match ^[A-Za-z0-9_-]{1,64}$",
    );
    check(
        "has space",
        "invalid tool name \"has space\": names must match ^[A-Za-z0-9_-]{1,64}$",
    );
    check(
        &"x".repeat(65),
        &format!(
            "invalid tool name \"{}\": names must match ^[A-Za-z0-9_-]{{1,64}}$",
            "x".repeat(65)
        ),
    );
    check(
        "ünïcode",
        "invalid tool name \"ünïcode\": names must match ^[A-Za-z0-9_-]{1,64}$",
    );
    check(
        "run_code",
        "tool name `run_code` is reserved for the Code Mode transport",
    );

    let registry = ToolRegistry::new();
    registry.register(constant_tool("same", "1")).unwrap();
    let err = registry.register(constant_tool("same", "2")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a tool named `same` is already registered in this layer; dispose it before registering a replacement"
    );
    let missing = ToolDefinition::builder("x", "x")
        .execute(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "tool `x`: the definition has no output"
    );
}

#[test]
fn a_tool_without_a_description_cannot_register_on_any_path() {
    struct Mute(&'static str);

    impl Tool for Mute {
        type Args = NoArgs;
        type Output = bool;

        fn name(&self) -> &str {
            "mute"
        }

        fn description(&self) -> &str {
            self.0
        }

        async fn execute(&self, _: NoArgs, _exec: ExecContext) -> Result<bool, ToolError> {
            Ok(true)
        }

        fn render(&self, _args: &NoArgs, _value: &bool) -> Vec<ContentBlock> {
            Vec::new()
        }
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct NoArgs {}

    let builder = |description: &str| {
        ToolDefinition::builder("mute", description)
            .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
            .execute(|_, _| async { Ok(Value::Null) })
    };
    for description in ["", " ", "\n\t  \u{3000}"] {
        let refusals = [
            ("typed", ToolDefinition::from_tool(Mute(description))),
            (
                "DSL",
                builder(description)
                    .parameters(ValueSchema::closed_object())
                    .build(),
            ),
            (
                "raw",
                builder(description)
                    .raw_parameters(json!({"type": "object", "properties": {}}))
                    .build(),
            ),
            ("default parameters", builder(description).build()),
        ]
        .map(|(path, built)| (path, built.map(|_| ()).map_err(|e| e.to_string())));
        let expected = Err(String::from(
            "tool `mute`: the description is empty; say what the tool does and when to use it, \
             in the words users say",
        ));
        assert_eq!(
            refusals,
            [
                ("typed", expected.clone()),
                ("DSL", expected.clone()),
                ("raw", expected.clone()),
                ("default parameters", expected.clone()),
            ],
            "{description:?}"
        );
        let registry = ToolRegistry::new();
        assert!(matches!(
            registry.register_tool(Mute(description)),
            Err(RegistrationError::EmptyDescription { name }) if name == "mute"
        ));
        assert!(registry.schemas(None).is_empty());
    }
    assert!(ToolDefinition::from_tool(Mute("Say nothing.")).is_ok());
}

// ----- Projections --------------------------------------------------------------------------

#[test]
fn schemas_are_deterministic_and_carry_only_model_fields() {
    let names = ["zeta", "alpha", "mid-dle", "beta_2"];
    let build = |order: &[&str]| {
        let registry = ToolRegistry::new();
        for name in order {
            registry.register(constant_tool(name, name)).unwrap();
        }
        registry.register_tool(Edit).unwrap();
        serde_json::to_string(&registry.schemas(None)).unwrap()
    };
    let forward = build(&names);
    let mut reversed = names;
    reversed.reverse();
    assert_eq!(forward, build(&reversed));
    // Parsed exactly: a `serde_json::Value` would sort the keys it is asked about.
    let parsed = JsonValue::parse(&forward).unwrap();
    let parsed = parsed.as_array().unwrap();
    let listed: Vec<&str> = parsed.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(listed, vec!["alpha", "beta_2", "edit", "mid-dle", "zeta"]);
    for schema in parsed {
        let keys: Vec<&String> = schema.as_object().unwrap().keys().collect();
        assert_eq!(keys, vec!["name", "description", "parameters"]);
    }
    let _: Vec<ToolSchema> = serde_json::from_str(&forward).unwrap();
}

#[test]
fn strict_projection_closes_objects_and_requires_everything() {
    let schema = ValueSchema::for_type_in_field_order::<EditArgs>().unwrap();
    insta::assert_snapshot!(
        "strict_edit_args",
        serde_json::to_string_pretty(&schema.to_strict_json()).unwrap()
    );
    let builder = ValueSchema::open_object()
        .required("command", ValueSchema::string().description("What to run."))
        .property("timeout_ms", ValueSchema::integer())
        .property("mode", ValueSchema::string().allowed(["a", "b"]))
        .property(
            "inner",
            ValueSchema::open_object().property("x", ValueSchema::boolean()),
        );
    insta::assert_snapshot!(
        "strict_builder",
        serde_json::to_string_pretty(&builder.to_strict_json()).unwrap()
    );
}

#[test]
fn finalize_content_runs_once_for_every_outcome() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let def = ToolDefinition::builder("f", "Maybe fail.")
        .parameters(ValueSchema::closed_object().property("fail", ValueSchema::boolean()))
        .output(ToolOutput::new(ValueSchema::string(), |_, v| {
            vec![ContentBlock::text(v.as_str().unwrap_or_default())]
        }))
        .finalize_content(move |_, result| {
            counter.fetch_add(1, Ordering::SeqCst);
            Some(vec![ContentBlock::text(format!(
                "final:{}",
                result.is_error
            ))])
        })
        .execute(|args, _| async move {
            if args["fail"] == json!(true) {
                Err(ToolError::failed("no"))
            } else {
                Ok(json!("ok"))
            }
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(def).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (args, expected) in [
        (json!({}), "final:false"),
        (json!({"fail": true}), "final:true"),
        (json!({"bogus": 1}), "final:true"),
    ] {
        let result = rt.block_on(run(&registry, "f", args));
        assert_eq!(text(&result), expected);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}
