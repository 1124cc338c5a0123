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
