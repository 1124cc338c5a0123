//! The output schemas of `bash` and the job tools are generated from their value types; these
//! tests pin them to the schemas the tools published when they were written by hand, so the
//! wire form (an MCP server's `outputSchema`) stays exactly the same, key order included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::ValueSchema;
use dsh_tools::jobs::{JobRuntime, JobsConfig};
use pretty_assertions::assert_eq;
use std::sync::Arc;
use tool_bash::{BashPlugin, JobToolsPlugin, LocalExecutor};

fn stream_schema() -> ValueSchema {
    ValueSchema::closed_object()
        .required("text", ValueSchema::string())
        .required("truncated", ValueSchema::boolean())
        .required("totalBytes", ValueSchema::integer())
        .required("shownBytes", ValueSchema::integer())
        .property("spillPath", ValueSchema::string())
        .property("spillLimitBytes", ValueSchema::integer())
        .property("spillError", ValueSchema::string())
}

/// The schema `bash` published when it was written by hand.
fn hand_written_bash_schema() -> ValueSchema {
    ValueSchema::one_of([
        ValueSchema::closed_object()
            .required("kind", ValueSchema::string().constant("background"))
            .required("jobId", ValueSchema::string()),
        ValueSchema::closed_object()
            .required("kind", ValueSchema::string().constant("foreground"))
            .required("exitCode", ValueSchema::nullable(ValueSchema::integer()))
            .required("signal", ValueSchema::nullable(ValueSchema::string()))
            .required("timedOut", ValueSchema::boolean())
            .required("aborted", ValueSchema::boolean())
            .required("timeoutMs", ValueSchema::integer())
            .required("durationMs", ValueSchema::integer())
            .required("stdout", stream_schema())
            .required("stderr", stream_schema())
            .property("notes", ValueSchema::array(ValueSchema::string())),
    ])
}

fn text(schema: &dsh_tools::json::JsonValue) -> String {
    schema.to_string()
}

#[test]
fn bash_output_schema_is_generated_and_unchanged() {
    let definition = BashPlugin::new(Arc::new(LocalExecutor::default()))
        .definition()
        .unwrap();
    assert_eq!(
        text(definition.output().schema().json()),
        text(&hand_written_bash_schema().to_json())
    );
}

fn public_snapshot_schema() -> ValueSchema {
    ValueSchema::closed_object()
        .required("id", ValueSchema::string())
        .required("kind", ValueSchema::string())
        .required("label", ValueSchema::string())
        .required(
            "status",
            ValueSchema::string().allowed(["running", "stopping", "completed", "killed", "failed"]),
        )
        .property("detail", ValueSchema::string())
        .required("startedAt", ValueSchema::integer())
        .property("finishedAt", ValueSchema::integer())
}

/// The schemas the job tools published when they were written by hand, by tool name.
fn hand_written_job_schemas() -> Vec<(&'static str, ValueSchema)> {
    vec![
        (
            "job_output",
            ValueSchema::closed_object()
                .required("text", ValueSchema::string())
                .required("job", public_snapshot_schema()),
        ),
        (
            "job_list",
            ValueSchema::closed_object()
                .required("jobs", ValueSchema::array(public_snapshot_schema())),
        ),
        (
            "job_kill",
            ValueSchema::closed_object()
                .required("job", public_snapshot_schema())
                .required(
                    "outcome",
                    ValueSchema::string().allowed(["stopped", "already-finished", "stopping"]),
                ),
        ),
    ]
}

#[test]
fn job_tool_output_schemas_are_generated_and_unchanged() {
    let definitions = JobToolsPlugin::new(JobRuntime::new(JobsConfig::default()))
        .definitions()
        .unwrap();
    let published: Vec<(String, String)> = definitions
        .iter()
        .map(|d| (d.name().to_owned(), text(d.output().schema().json())))
        .collect();
    let expected: Vec<(String, String)> = hand_written_job_schemas()
        .into_iter()
        .map(|(name, schema)| (name.to_owned(), text(&schema.to_json())))
        .collect();
    assert_eq!(published, expected);
}

/// The parameter schema `bash` published when it was written by hand with the builder DSL
/// (with the default limits), which the schema derived from `BashArgs` must equal.
fn hand_written_bash_parameters(background: bool, sandboxed: bool) -> ValueSchema {
    let mut schema = ValueSchema::closed_object()
        .required(
            "command",
            ValueSchema::string().description("The command to run with `bash -c`."),
        )
        .required(
            "description",
            ValueSchema::string().description(
                "What the command does, in 5-10 words, shown to the user (e.g. \"Run the unit tests\").",
            ),
        )
        .property(
            "timeout_ms",
            ValueSchema::integer()
                .description("Timeout in milliseconds (default 120000, at most 600000)."),
        )
        .property(
            "workdir",
            ValueSchema::string().description(
                "Directory to run in; a relative path is resolved against the session's directory.",
            ),
        );
    if background {
        schema = schema.property(
            "run_in_background",
            ValueSchema::boolean()
                .description("Start the command as a background job and return its id at once."),
        );
    }
    if sandboxed {
        schema = schema
            .property(
                "sandbox",
                ValueSchema::string().constant("escalate").description(
                    "Ask to run this command outside the sandbox; the user must approve. Only when the sandbox blocks work the user asked for.",
                ),
            )
            .property(
                "justification",
                ValueSchema::string().description(
                    "With `sandbox: \"escalate\"`: why the command must run outside the sandbox, shown to the user who approves.",
                ),
            );
    }
    schema
}

#[test]
fn bash_parameter_schema_is_derived_and_unchanged() {
    let limits = tool_bash::shell::ShellLimits::default();
    let mut derived = Vec::new();
    let mut by_hand = Vec::new();
    for background in [false, true] {
        for sandboxed in [false, true] {
            let case = format!("background {background}, sandboxed {sandboxed}");
            let schema =
                tool_bash::tool::bash_parameters_for(background, sandboxed, &limits).unwrap();
            derived.push((case.clone(), text(&schema.to_json())));
            let expected = hand_written_bash_parameters(background, sandboxed);
            by_hand.push((case, text(&expected.to_json())));
        }
    }
    assert_eq!(derived, by_hand);
    // The registered tool sends the same schema, and the registry validates calls against it.
    let definition = BashPlugin::new(Arc::new(LocalExecutor::default()))
        .definition()
        .unwrap();
    assert_eq!(
        definition.args_validation(),
        dsh_tools::ArgsValidation::Validated
    );
    assert_eq!(
        text(definition.parameters().json()),
        text(&hand_written_bash_parameters(false, false).to_json())
    );
}

/// A host that configures shorter timeouts sees them in what the model reads: the description
/// and `timeout_ms`'s own, written from the executor's limits, never the defaults.
#[test]
fn bash_states_the_executors_own_timeouts() {
    let mut config = tool_bash::LocalConfig::default();
    config.default_timeout = std::time::Duration::from_secs(30);
    config.max_timeout = std::time::Duration::from_secs(90);
    let definition = BashPlugin::new(Arc::new(LocalExecutor::new(config)))
        .definition()
        .unwrap();
    let timeout = definition
        .parameters()
        .as_subset()
        .and_then(|schema| schema.as_object())
        .and_then(|object| object.property("timeout_ms"))
        .and_then(|property| property.annotations().description.clone());
    assert_eq!(
        timeout.as_deref(),
        Some("Timeout in milliseconds (default 30000, at most 90000).")
    );
    assert!(
        definition
            .description()
            .contains("Commands time out after `timeout_ms` (default 30000, at most 90000)."),
        "{}",
        definition.description()
    );
    assert!(!definition.description().contains("600000"));
}
