//! Raw definitions with any JSON Schema (draft 2020-12 or draft-07): registered as declared,
//! sent to the model unchanged, and enforced before the body runs by a validator compiled once.
//! Schemas outside the subset need the default `jsonschema` feature; without it they are refused
//! at registration (`a_schema_outside_the_subset_compiles_only_with_the_jsonschema_feature`).
#![cfg(feature = "jsonschema")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_tools::json::JsonValue;
use dsh_tools::{
    ArgsValidation, CompileOptions, CompiledSchema, ContentBlock, FailureCode, RegistrationError,
    ToolDefinition, ToolRegistry,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{expect_failure, expect_value, run};

/// A tool with these raw parameters whose value is the arguments it received, exactly.
fn echo(name: &str, parameters: &str) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder(name, "Return the exact arguments.")
        .raw_parameters_exact(JsonValue::parse(parameters).unwrap())
        .raw_output(json!({}), |_, v| vec![ContentBlock::text(v.to_string())])
        .execute(|_, exec| async move { Ok(json!(exec.exact_args().to_string())) })
        .build()
}

/// The kind of schema a filesystem MCP server publishes: `$ref` into `$defs`, `anyOf`,
/// `format`, `minimum`, a type array and a nested object without `additionalProperties`.
const FILES_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"path":{"type":"string","format":"uri-reference","minLength":1},"edits":{"type":"array","items":{"$ref":"#/$defs/edit"}},"limit":{"type":["integer","null"],"minimum":1},"mode":{"anyOf":[{"const":"text"},{"const":"binary"}]},"options":{"type":"object","properties":{"dryRun":{"type":"boolean"}}}},"required":["path"],"$defs":{"edit":{"type":"object","properties":{"oldText":{"type":"string"},"newText":{"type":"string"}},"required":["oldText","newText"],"additionalProperties":false}}}"##;

/// The draft-07 spelling: `definitions`, and `$schema` naming draft-07.
const SEARCH_DRAFT_07: &str = r##"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"query":{"$ref":"#/definitions/query"},"email":{"type":"string","format":"email"},"page":{"type":"integer","minimum":0,"exclusiveMinimum":-1}},"required":["query"],"definitions":{"query":{"type":"string","maxLength":8}}}"##;

#[test]
fn real_world_schemas_register_and_reach_the_model_unchanged() {
    let registry = ToolRegistry::new();
    registry
        .register(echo("files", FILES_2020_12).unwrap())
        .unwrap();
    registry
        .register(echo("search", SEARCH_DRAFT_07).unwrap())
        .unwrap();
    let sent: Vec<JsonValue> = registry
        .schemas(None)
        .into_iter()
        .map(|schema| schema.parameters)
        .collect();
    // Compared as whole values, and as text: the model receives the schema byte for byte.
    assert_eq!(
        sent,
        vec![
            JsonValue::parse(FILES_2020_12).unwrap(),
            JsonValue::parse(SEARCH_DRAFT_07).unwrap()
        ]
    );
    assert_eq!(
        sent.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![FILES_2020_12, SEARCH_DRAFT_07]
    );
    let files = registry.get("files", None).unwrap();
    assert!(files.parameters().as_subset().is_none());
    // Strict function calling has no `$ref` or `format`: the schema is sent non-strict.
    assert_eq!(files.parameters().to_strict_json(), None);
}

/// Runs `tool` with argument text and returns its failure message, or the exact arguments the
/// body received.
async fn call(registry: &ToolRegistry, tool: &str, args: &str) -> Result<String, String> {
    let result = run(registry, tool, args).await;
    if result.is_error {
        Err(expect_failure(&result, FailureCode::InvalidArgs))
    } else {
        Ok(expect_value(&result).as_str().unwrap().to_owned())
    }
}

#[tokio::test]
async fn arguments_are_validated_against_the_full_schema_before_the_body() {
    let registry = ToolRegistry::new();
    registry
        .register(echo("files", FILES_2020_12).unwrap())
        .unwrap();
    registry
        .register(echo("search", SEARCH_DRAFT_07).unwrap())
        .unwrap();

    // Valid calls reach the body with their exact text; a format is an annotation, not a check.
    let valid = r#"{"path":"not a uri at all \\","edits":[{"oldText":"a","newText":"b"}],"limit":null,"mode":"text","options":{"dryRun":true,"extra":1}}"#;
    assert_eq!(call(&registry, "files", valid).await, Ok(valid.to_owned()));
    let valid = r#"{"query":"rust","email":"not an email","page":0}"#;
    assert_eq!(call(&registry, "search", valid).await, Ok(valid.to_owned()));

    // Every violation is listed, each with its JSON pointer, as `INVALID_ARGS`.
    assert_eq!(
        call(
            &registry,
            "files",
            r#"{"path":"","edits":[{"oldText":"a"},{"oldText":"a","newText":"b","x":1}],"limit":0,"mode":"hex","options":{"dryRun":"yes"}}"#,
        )
        .await,
        Err(String::from(
            // In the order of the schema's properties, which `jsonschema` holds sorted.
            "invalid arguments: /edits/0: \"newText\" is a required property; \
             /edits/1: Additional properties are not allowed ('x' was unexpected); \
             /limit: 0 is less than the minimum of 1; \
             /mode: \"hex\" is not valid under any of the schemas listed in the 'anyOf' keyword; \
             /options/dryRun: \"yes\" is not of type \"boolean\"; \
             /path: \"\" is shorter than 1 character"
        ))
    );
    assert_eq!(
        call(&registry, "search", r#"{"query":"far too long","page":-1}"#).await,
        Err(String::from(
            "invalid arguments: /page: -1 is less than the minimum of 0; \
             /page: -1 is less than or equal to the minimum of -1; \
             /query: \"far too long\" is longer than 8 characters"
        ))
    );
    assert_eq!(
        call(&registry, "files", r#"{"limit":1.5}"#).await,
        Err(String::from(
            "invalid arguments: (root): \"path\" is a required property; \
             /limit: 1.5 is not of types \"null\", \"integer\""
        ))
    );
}

#[tokio::test]
async fn numbers_reach_the_tool_exactly_and_those_beyond_f64_are_refused_clearly() {
    let registry = ToolRegistry::new();
    registry
        .register(
            echo(
                "count",
                r#"{"type":"object","properties":{"n":{"type":"integer","minimum":0},"any":{}}}"#,
            )
            .unwrap(),
        )
        .unwrap();
    // The validator judges `2^64 + 1` as the nearest `f64` (an integer above 0); the body still
    // gets every digit.
    let big = r#"{"n":18446744073709551617,"any":0.10}"#;
    assert_eq!(call(&registry, "count", big).await, Ok(big.to_owned()));
    // A `serde_json::Value` cannot hold `1e400`: refused with its pointer rather than judged as
    // the string the lossy view would make of it.
    assert_eq!(
        call(&registry, "count", r#"{"n":1,"any":[1e400,-1e400]}"#).await,
        Err(String::from(
            "invalid arguments: /any/0: the number 1e400 is beyond the range this schema's \
             validator can judge (about ±1.8e308); /any/1: the number -1e400 is beyond the range \
             this schema's validator can judge (about ±1.8e308)"
        ))
    );
}

#[tokio::test]
async fn formats_are_asserted_only_when_asked() {
    let registry = ToolRegistry::new();
    let strict_formats = ToolDefinition::builder("mail", "Send mail.")
        .raw_parameters_exact(JsonValue::parse(SEARCH_DRAFT_07).unwrap())
        .compile_options(CompileOptions::new().assert_formats(true))
        .raw_output(json!({}), |_, _| Vec::new())
        .execute(|_, _| async move { Ok(json!(null)) })
        .build()
        .unwrap();
    registry.register(strict_formats).unwrap();
    assert_eq!(
        call(&registry, "mail", r#"{"query":"q","email":"nobody"}"#).await,
        Err(String::from(
            "invalid arguments: /email: \"nobody\" is not a \"email\""
        ))
    );
}

#[test]
fn a_schema_that_does_not_compile_fails_registration_with_the_validators_message() {
    let cases = [
        (
            "a keyword of the wrong type",
            r#"{"type":"object","properties":{"n":{"type":"integer","minimum":"zero"}}}"#,
            "\"zero\" is not of type \"number\"",
        ),
        (
            "a reference to nothing",
            r##"{"type":"object","properties":{"n":{"$ref":"#/$defs/missing"}}}"##,
            "Pointer '/$defs/missing' does not exist",
        ),
        (
            "a remote reference (nothing is fetched)",
            r#"{"type":"object","properties":{"n":{"$ref":"https://example.com/n.json"}}}"#,
            "example.com",
        ),
    ];
    for (what, schema, says) in cases {
        let outcome = echo("bad", schema);
        let Err(RegistrationError::SchemaCompile {
            name,
            which,
            source,
        }) = outcome
        else {
            panic!("{what}: expected a compile error, got {outcome:?}");
        };
        assert_eq!((name.as_str(), which), ("bad", "parameters"), "{what}");
        assert!(source.message.contains(says), "{what}: {}", source.message);
    }
}

#[test]
fn a_parameter_schema_must_have_an_object_root() {
    let outcome = echo("list", r#"{"type":"array","items":{"format":"uri"}}"#);
    assert!(
        matches!(outcome, Err(RegistrationError::ParametersNotObject { ref name }) if name == "list"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_raw_output_schema_checks_the_canonical_value() {
    let output = r##"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"matches":{"type":"array","items":{"$ref":"#/definitions/match"}}},"required":["matches"],"definitions":{"match":{"type":"object","properties":{"line":{"type":"integer","minimum":1}},"required":["line"]}}}"##;
    let definition = ToolDefinition::builder("grep", "Search.")
        .raw_parameters(json!({"type": "object", "properties": {"line": {"type": ["integer"]}}}))
        .raw_output_exact(JsonValue::parse(output).unwrap(), |_, v| {
            vec![ContentBlock::text(v.to_string())]
        })
        .execute(|args, _| async move {
            Ok(json!({"matches": [{"line": args.get("line").cloned().unwrap_or(Value::Null)}]}))
        })
        .build()
        .unwrap();
    // The registry exposes the output schema as declared (what an MCP server publishes).
    assert_eq!(
        definition.output().schema().json(),
        &JsonValue::parse(output).unwrap()
    );
    let registry = ToolRegistry::new();
    registry.register(definition).unwrap();
    assert_eq!(
        expect_value(&run(&registry, "grep", json!({"line": 3})).await),
        json!({"matches": [{"line": 3}]})
    );
    let result = run(&registry, "grep", json!({"line": 0})).await;
    assert_eq!(
        expect_failure(&result, FailureCode::InvalidToolOutput),
        "the tool produced a value its output schema rejects: /matches/0/line: 0 is less than \
         the minimum of 1"
    );
}

#[tokio::test]
async fn a_raw_schema_inside_the_subset_keeps_the_subset_validator_and_strict_projection() {
    let declared = r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#;
    let definition = echo("n", declared).unwrap();
    assert_eq!(
        definition.parameters().json(),
        &JsonValue::parse(declared).unwrap()
    );
    assert_eq!(
        definition
            .parameters()
            .to_strict_json()
            .map(|schema| schema.to_value()),
        Some(json!({
            "type": "object",
            "properties": {"n": {"type": ["integer", "null"]}},
            "required": ["n"],
            "additionalProperties": false
        }))
    );
    let registry = ToolRegistry::new();
    registry.register(definition).unwrap();
    // The subset's validator judges `2^64 + 0.5` exactly: not an integer.
    assert_eq!(
        call(&registry, "n", r#"{"n":18446744073709551616.5}"#).await,
        Err(String::from(
            "invalid arguments: /n: expected a whole number, got 18446744073709551616.5"
        ))
    );
}

#[tokio::test]
async fn a_raw_tool_may_leave_validation_to_its_body() {
    let registry = ToolRegistry::new();
    let definition = ToolDefinition::builder("own", "Check the arguments by hand.")
        .raw_parameters(
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}),
        )
        .args_validation(ArgsValidation::Unvalidated)
        .raw_output(json!({}), |_, _| Vec::new())
        .execute(|_, exec| async move { Ok(json!(exec.exact_args().to_string())) })
        .build()
        .unwrap();
    registry.register(definition).unwrap();
    assert_eq!(
        call(&registry, "own", r#"{"n":0}"#).await,
        Ok(String::from(r#"{"n":0}"#))
    );
}

#[test]
fn compiled_schemas_validate_exact_values_for_hosts() {
    let schema = CompiledSchema::compile(
        &JsonValue::parse(r#"{"type":"array","items":{"type":"number","maximum":1}}"#).unwrap(),
    )
    .unwrap();
    assert!(schema.as_subset().is_none());
    assert_eq!(
        schema.validate(&JsonValue::parse("[0.5, 1]").unwrap()),
        Ok(())
    );
    assert_eq!(
        schema
            .validate(&JsonValue::parse(r#"[2, "x"]"#).unwrap())
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "/0: 2 is greater than the maximum of 1",
            "/1: \"x\" is not of type \"number\""
        ]
    );
}
