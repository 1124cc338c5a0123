//! Code Mode: programmatic dispatch through the full pipeline, and TypeScript declarations
//! that the TypeScript compiler accepts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
#[path = "../support/typescript.rs"]
mod typescript;

use dsh_tools::{
    ContentBlock, ExecContext, PostDecision, Tool, ToolDefinition, ToolError, ToolOutput,
    ToolRegistry, ValueSchema,
};
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use support::{expect_value, run};

fn meta_tool(name: &str, value: Value) -> ToolDefinition {
    ToolDefinition::builder(name, "Return a value with presentation meta.")
        .output(
            ToolOutput::new(ValueSchema::json(), |_, v| {
                vec![ContentBlock::text(v.to_string())]
            })
            .with_presentation_meta(|_, _| Some(json!({"ui": true}))),
        )
        .execute(move |_, _| {
            let value = value.clone();
            async move { Ok(value) }
        })
        .build()
        .unwrap()
}

/// A tool whose body dispatches two sub-calls, as a Code Mode program would.
fn program(registry: &ToolRegistry) -> ToolDefinition {
    let registry = registry.clone();
    ToolDefinition::builder("program", "Run two tool calls.")
        .output(ToolOutput::new(ValueSchema::json(), |_, v| vec![ContentBlock::text(v.to_string())]))
        .execute(move |_, exec: ExecContext| {
            let registry = registry.clone();
            async move {
                let first = registry.call_value("source", json!({}), &exec).await;
                let second = registry.call_value("failing", json!({}), &exec).await;
                Ok(json!({
                    "first": first.map(|v| (*v).clone()).map_err(|e| serde_json::to_value(e).unwrap()),
                    "second": second.map(|v| (*v).clone()).map_err(|e| serde_json::to_value(e).unwrap()),
                }))
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn call_value_returns_post_policy_values_and_tool_call_errors() {
    let registry = ToolRegistry::new();
    registry
        .register(meta_tool("source", json!({"n": 1})))
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("failing", "Fail.")
                .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
                .execute(|_, _| async { Err(ToolError::failed("disk on fire")) })
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.register(program(&registry)).unwrap();
    registry
        .global_scope()
        .on_post_execute(|exec, result| async move {
            if exec.name() == "source" {
                PostDecision::replace_value(json!({"n": 2, "policy": "applied"}))
            } else {
                let _ = result;
                PostDecision::accept()
            }
        })
        .unwrap();
    let observed = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&observed);
    registry
        .global_scope()
        .on_result(move |exec, result| {
            sink.lock().unwrap().push((
                exec.call_id().to_owned(),
                exec.root_call_id().to_owned(),
                exec.parent().is_some(),
                result.meta.clone(),
            ));
        })
        .unwrap();

    let call = support::call("program", json!({}));
    let parent_id = call.call_id.clone();
    let result = registry.execute(call).await;
    assert_eq!(
        expect_value(&result),
        json!({
            "first": {"Ok": {"n": 2, "policy": "applied"}},
            "second": {"Err": {"name": "ToolCallError", "toolName": "failing", "code": "TOOL_ERROR", "message": "disk on fire"}},
        })
    );
    let observed = observed.lock().unwrap().clone();
    assert_eq!(
        observed,
        vec![
            (format!("{parent_id}:code:1"), parent_id.clone(), true, None),
            (format!("{parent_id}:code:2"), parent_id.clone(), true, None),
            (parent_id.clone(), parent_id.clone(), false, None),
        ]
    );
    // A top-level call of the same tool does compute its meta.
    let direct = run(&registry, "source", json!({})).await;
    assert_eq!(direct.meta, Some(json!({"ui": true})));
}

// ----- TypeScript declarations --------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SearchArgs {
    /// What to look for. Ends with */ on purpose.
    pattern: String,
    /// Where to look.
    paths: Vec<String>,
    limit: Option<u32>,
    mode: SearchMode,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum SearchMode {
    Literal,
    Regex,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct SearchHit {
    path: String,
    line: u64,
}

#[allow(dead_code)]
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum SearchOutput {
    Hits {
        hits: Vec<SearchHit>,
        truncated: bool,
    },
    Background {
        #[serde(rename = "jobId")]
        job_id: String,
    },
}

struct Search;

impl Tool for Search {
    type Args = SearchArgs;
    type Output = SearchOutput;
    fn name(&self) -> &str {
        "search"
    }
    fn description(&self) -> &str {
        "Search files.\nTrigger words: \"grep\", \"搜索\"."
    }
    async fn execute(&self, _: SearchArgs, _: ExecContext) -> Result<SearchOutput, ToolError> {
        Ok(SearchOutput::Hits {
            hits: Vec::new(),
            truncated: false,
        })
    }
    fn render(&self, _: &SearchArgs, _: &SearchOutput) -> Vec<ContentBlock> {
        Vec::new()
    }
}

fn sdk_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register_tool(Search).unwrap();
    let scalar = |name: &str, schema: ValueSchema| {
        ToolDefinition::builder(name, format!("The {name} tool."))
            .parameters(ValueSchema::open_object())
            .output(ToolOutput::new(schema, |_, _| Vec::new()))
            .execute(|_, _| async { Ok(Value::Null) })
            .build()
            .unwrap()
    };
    registry
        .register(scalar("count-lines", ValueSchema::integer()))
        .unwrap();
    registry
        .register(scalar("noop", ValueSchema::null()))
        .unwrap();
    registry
        .register(scalar(
            "maybe_text",
            ValueSchema::nullable(ValueSchema::string().description("Some text.")),
        ))
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("configure", "Set options.")
                .parameters(
                    ValueSchema::closed_object()
                        .required("level", ValueSchema::integer().allowed([1, 2, 3]))
                        .property(
                            "tags",
                            ValueSchema::array(ValueSchema::one_of([
                                ValueSchema::string(),
                                ValueSchema::closed_object()
                                    .required("k", ValueSchema::string().constant("v")),
                            ])),
                        )
                        .property("extra", ValueSchema::json())
                        .property("empty", ValueSchema::closed_object()),
                )
                .output(ToolOutput::new(ValueSchema::any_array(), |_, _| Vec::new()))
                .execute(|_, _| async { Ok(json!([])) })
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
}

#[test]
fn sdk_declarations_are_stable_and_sorted() {
    let registry = sdk_registry();
    let sdk = registry.code_mode_sdk(None);
    assert_eq!(sdk, sdk_registry().code_mode_sdk(None));
    insta::assert_snapshot!("code_mode_sdk", sdk);
}

fn type_check(sdk: &str, program: &str) -> (bool, String) {
    let dir = tempfile_dir();
    std::fs::write(dir.join("sdk.d.ts"), sdk).unwrap();
    std::fs::write(dir.join("program.ts"), program).unwrap();
    let outcome = typescript::check(&[&dir.join("sdk.d.ts"), &dir.join("program.ts")]);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

fn tempfile_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "dsh-ts-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn sdk_declarations_type_check_with_the_typescript_compiler() {
    let sdk = sdk_registry().code_mode_sdk(None);
    let program = r#"
async function main(): Promise<void> {
  const found = await tools.search({ pattern: "x", paths: ["/a"], limit: null, mode: "regex" });
  if (found.kind === "hits") {
    const line: number = found.hits[0].line;
    const truncated: boolean = found.truncated;
    void line; void truncated;
  } else {
    const id: string = found.jobId;
    void id;
  }
  const lines: number = await tools["count-lines"]({ anything: 1 });
  const nothing: null = await tools.noop({});
  const text: string | null = await tools.maybe_text({});
  const configured: JsonValue[] = await tools.configure({ level: 2, tags: ["a", { k: "v" }], extra: { deep: [1] }, empty: {} });
  void lines; void nothing; void text; void configured;
  try {
    await tools.noop({});
  } catch (error) {
    if (error instanceof ToolCallError) {
      const failed: ToolName = error.toolName;
      const message: string = error.message;
      void failed; void message;
    }
  }
}
void main;
"#;
    let (ok, log) = type_check(&sdk, program);
    assert!(
        ok,
        "the generated declarations did not type-check:\n{log}\n{sdk}"
    );

    // The compiler really checks: a wrong argument type and an unknown enum member fail.
    for wrong in [
        "void tools.search({ pattern: 1, paths: [], mode: \"regex\" });",
        "void tools.search({ pattern: \"x\", paths: [], mode: \"fuzzy\" });",
        "void tools.configure({ level: 4 });",
        "void tools.nonexistent({});",
    ] {
        let (ok, _) = type_check(&sdk, wrong);
        assert!(!ok, "tsc accepted an ill-typed program: {wrong}");
    }
}

// ----- The Code Mode transport ----------------------------------------------------------------

fn transport(name: &str, opt_in: bool) -> Result<ToolDefinition, dsh_tools::RegistrationError> {
    let builder = ToolDefinition::builder(name, "Run a program.")
        .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
        .execute(|_, _| async { Ok(Value::Null) });
    if opt_in {
        builder.code_mode_transport().build()
    } else {
        builder.build()
    }
}

#[test]
fn only_the_code_mode_transport_takes_the_reserved_name_and_the_sdk_leaves_it_out() {
    assert!(matches!(
        transport("run_code", false),
        Err(dsh_tools::RegistrationError::ReservedName { .. })
    ));
    let registry = sdk_registry();
    let before = registry.code_mode_sdk(None);
    registry
        .register(transport("run_code", true).unwrap())
        .unwrap();
    assert!(registry.get("run_code", None).is_some());
    // A program cannot call the transport, so its declarations do not name it.
    assert_eq!(registry.code_mode_sdk(None), before);
}
