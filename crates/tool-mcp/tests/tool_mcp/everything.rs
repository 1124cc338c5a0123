//! The client against the reference server `@modelcontextprotocol/server-everything` (pinned,
//! installed by npm into `target/` on first use): schemas, structured content, errors, a
//! long-running call cancelled and timed out, `list_changed`, and no process left behind.

use crate::support;
use dsh_tools::{FailureCode, ToolCall, ToolRegistry};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::time::Duration;
use support::{assert_no_process_left, call, everything_entry, unique_mark, wait_visible};
use tokio_util::sync::CancellationToken;
use tool_mcp::{McpConfig, McpOptions, McpServers, ServerConfig, ServerState, StdioServer};

async fn start(mark: &str, options: McpOptions) -> (ToolRegistry, McpServers) {
    let mut server = StdioServer::new(
        "node",
        [everything_entry().display().to_string(), "stdio".into()],
    );
    server
        .env
        .insert(support::processes::MARK_VAR.into(), mark.into());
    let mut config = McpConfig::default();
    config
        .servers
        .insert("everything".into(), ServerConfig::Stdio(server));
    let registry = ToolRegistry::new();
    let servers = McpServers::start(registry.global_scope(), &config, options)
        .await
        .unwrap();
    let status = servers.server_status("everything").unwrap();
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    (registry, servers)
}

fn value(result: &dsh_tools::ToolResult) -> Value {
    assert!(!result.is_error, "{result:?}");
    (**result.value.as_ref().unwrap()).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_registers_with_its_schemas_and_annotations() {
    let mark = unique_mark("schemas");
    let (registry, servers) = start(&mark, McpOptions::default()).await;
    let status = servers.server_status("everything").unwrap();
    assert_eq!(status.rejected, Vec::<(String, String)>::new());
    for tool in [
        "echo",
        "get-sum",
        "get-structured-content",
        "get-tiny-image",
        "gzip-file-as-resource",
        "trigger-long-running-operation",
    ] {
        let name = format!("mcp__everything__{tool}");
        assert!(status.tools.contains(&name), "{name}: {:?}", status.tools);
    }
    let echo = registry.get("mcp__everything__echo", None).unwrap();
    assert_eq!(echo.description(), "Echoes back the input string");
    let parameters = serde_json::to_value(echo.schema().parameters).unwrap();
    assert_eq!(
        parameters["properties"]["message"],
        json!({"type": "string", "description": "Message to echo"})
    );
    assert_eq!(parameters["required"], json!(["message"]));
    // The `uri` format of gzip's `data` reaches the model as the server declared it.
    let gzip = registry
        .get("mcp__everything__gzip-file-as-resource", None)
        .unwrap();
    let gzip = serde_json::to_value(gzip.schema().parameters).unwrap();
    assert_eq!(gzip["properties"]["data"]["type"], json!("string"));
    // `readOnlyHint` makes a tool concurrency-safe; one without it is not.
    assert!(registry.is_concurrency_safe(
        "mcp__everything__get-sum",
        &json!({"a": 1, "b": 2}),
        None
    ));
    assert!(!registry.is_concurrency_safe(
        "mcp__everything__gzip-file-as-resource",
        &json!({}),
        None
    ));
    servers.shutdown().await;
    assert_eq!(registry.schemas(None), Vec::new());
    assert_no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_return_content_structured_content_and_domain_failures() {
    let mark = unique_mark("calls");
    let (registry, servers) = start(&mark, McpOptions::default()).await;

    let echoed = call(&registry, "mcp__everything__echo", r#"{"message": "hi"}"#).await;
    assert_eq!(
        value(&echoed),
        json!({"text": "Echo: hi", "isError": false})
    );
    assert_eq!(dsh_tools::content_text(&echoed.content), "Echo: hi");

    let sum = call(
        &registry,
        "mcp__everything__get-sum",
        r#"{"a": 2, "b": 40}"#,
    )
    .await;
    assert_eq!(value(&sum)["isError"], json!(false));
    assert!(
        value(&sum)["text"].as_str().unwrap().contains("42"),
        "{sum:?}"
    );

    let weather = call(
        &registry,
        "mcp__everything__get-structured-content",
        r#"{"location": "Chicago"}"#,
    )
    .await;
    assert_eq!(
        value(&weather),
        json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
    );

    let image = call(&registry, "mcp__everything__get-tiny-image", "{}").await;
    let image = value(&image);
    assert_eq!(image["images"][0]["mimeType"], json!("image/png"));
    assert!(!image["images"][0]["data"].as_str().unwrap().is_empty());

    // The tool throws: a domain failure, a value the model reads, not a registry error.
    let failed = call(
        &registry,
        "mcp__everything__gzip-file-as-resource",
        r#"{"name": "x.gz", "data": "ftp://example.com/x", "outputType": "resource"}"#,
    )
    .await;
    let failed = value(&failed);
    assert_eq!(failed["isError"], json!(true));
    assert!(
        failed["text"]
            .as_str()
            .unwrap()
            .contains("Unsupported URL protocol"),
        "{failed}"
    );
    servers.shutdown().await;
    assert_no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_call_is_cancelled_and_a_slow_one_times_out() {
    let mark = unique_mark("cancel");
    let mut options = McpOptions::default();
    options.call_timeout = Some(Duration::from_secs(2));
    let (registry, servers) = start(&mark, options).await;

    let signal = CancellationToken::new();
    let started = std::time::Instant::now();
    let running = registry.execute(
        ToolCall::new(
            "long-1",
            "mcp__everything__trigger-long-running-operation",
            r#"{"duration": 30, "steps": 30}"#,
        )
        .with_signal(signal.clone()),
    );
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        signal.cancel();
    };
    let (result, ()) = tokio::join!(running, cancel);
    assert_eq!(result.code(), Some(FailureCode::Aborted), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(10));

    let timed_out = call(
        &registry,
        "mcp__everything__trigger-long-running-operation",
        r#"{"duration": 30, "steps": 30}"#,
    )
    .await;
    assert_eq!(
        timed_out.code(),
        Some(FailureCode::Timeout),
        "{timed_out:?}"
    );

    // The server still answers: the cancelled calls did not take it down.
    let echoed = call(
        &registry,
        "mcp__everything__echo",
        r#"{"message": "still here"}"#,
    )
    .await;
    assert_eq!(value(&echoed)["text"], json!("Echo: still here"));
    servers.shutdown().await;
    assert_no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_children_are_killed_with_it() {
    let mark = unique_mark("group");
    // The server leaves a child behind in its process group; it exits on its own when its stdin
    // closes, and the child must not outlive it.
    let script = format!(
        "sleep 600 </dev/null >/dev/null 2>&1 & exec node '{}' stdio",
        everything_entry().display()
    );
    let mut server = StdioServer::new("sh", ["-c".to_owned(), script]);
    server
        .env
        .insert(support::processes::MARK_VAR.into(), mark.clone());
    let mut config = McpConfig::default();
    config
        .servers
        .insert("everything".into(), ServerConfig::Stdio(server));
    let registry = ToolRegistry::new();
    let servers = McpServers::start(registry.global_scope(), &config, McpOptions::default())
        .await
        .unwrap();
    let status = servers.server_status("everything").unwrap();
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!(support::processes::marked_processes(&mark).len(), 2);
    servers.shutdown().await;
    assert_no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_added_after_initialisation_arrive_through_list_changed() {
    let mark = unique_mark("changed");
    let (registry, servers) = start(&mark, McpOptions::default()).await;
    // The server registers this tool once initialised and then sends
    // `notifications/tools/list_changed`; it was not in the first `tools/list`.
    wait_visible(&registry, "mcp__everything__simulate-research-query", true).await;
    servers.shutdown().await;
    wait_visible(&registry, "mcp__everything__simulate-research-query", false).await;
    assert_no_process_left(&mark).await;
}
