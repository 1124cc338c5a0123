//! The job-control tools over a producer that is not `bash`, with `tool-bash` built without its
//! local executor.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::jobs::{JobRuntime, JobsConfig};
use dsh_tools::{ToolCall, ToolRegistry, content_text};
use job_producer_check::start_download;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tool_bash::JobToolsPlugin;

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> (String, Value) {
    let result = registry
        .execute(ToolCall::new("c", name, args.to_string()))
        .await;
    assert!(!result.is_error, "{name}: {:?}", result.content);
    let value = result
        .value
        .clone()
        .map(|v| (*v).clone())
        .unwrap_or(Value::Null);
    (content_text(&result.content), value)
}

#[tokio::test]
async fn job_tools_read_list_and_kill_a_download() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(JobToolsPlugin::new(jobs.clone()))
        .unwrap();
    let names: Vec<String> = registry.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["job_kill", "job_list", "job_output"]);

    let (id, download) = start_download(&jobs, "https://example.com/a.iso").unwrap();
    assert_eq!(id.as_str(), "download-1");
    download.progress("10%");

    let (text, _) = call(&registry, "job_output", json!({"job_id": "download-1"})).await;
    assert_eq!(text, "10%\n[status: running]");

    let (text, _) = call(&registry, "job_list", json!({})).await;
    assert_eq!(
        text,
        "download-1 [status: running] download https://example.com/a.iso"
    );

    let (text, value) = call(&registry, "job_kill", json!({"job_id": "download-1"})).await;
    assert_eq!(text, "job download-1 stopped [status: killed]");
    assert_eq!(value["outcome"], json!("stopped"));
}

#[tokio::test]
async fn a_completed_download_reports_its_last_output() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(JobToolsPlugin::new(jobs.clone()))
        .unwrap();
    let (_, download) = start_download(&jobs, "https://example.com/b.iso").unwrap();
    download.progress("100%");
    download.complete();

    let (text, value) = call(
        &registry,
        "job_output",
        json!({"job_id": "download-1", "wait": true, "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(text, "100%\n[status: completed]");
    assert_eq!(value["job"]["kind"], json!("download"));
}
