//! The client against `@modelcontextprotocol/server-filesystem` (pinned, installed by npm into
//! `target/` on first use), through the registry: structured content, a domain failure, a
//! destructive tool that asks first, and no process left behind.

use crate::support;
use dsh_tools::{FailureCode, ToolRegistry};
use pretty_assertions::assert_eq;
use serde_json::json;
use support::{assert_no_process_left, call, filesystem_entry, unique_mark};
use tool_mcp::{McpConfig, McpOptions, McpServers, ServerConfig, ServerState, StdioServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_listed_and_read_and_writes_ask_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "first line\n").unwrap();
    let mark = unique_mark("fs");
    let mut server = StdioServer::new(
        "node",
        [
            filesystem_entry().display().to_string(),
            root.display().to_string(),
        ],
    );
    server
        .env
        .insert(support::processes::MARK_VAR.into(), mark.clone());
    let mut config = McpConfig::default();
    config
        .servers
        .insert("fs".into(), ServerConfig::Stdio(server));
    let registry = ToolRegistry::new();
    let servers = McpServers::start(registry.global_scope(), &config, McpOptions::default())
        .await
        .unwrap();
    let status = servers.server_status("fs").unwrap();
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!(status.rejected, Vec::<(String, String)>::new());

    let listed = call(
        &registry,
        "mcp__fs__list_directory",
        &json!({"path": root}).to_string(),
    )
    .await;
    assert!(!listed.is_error, "{listed:?}");
    assert_eq!(
        **listed.value.as_ref().unwrap(),
        json!({"content": "[FILE] notes.txt"})
    );
    let read = call(
        &registry,
        "mcp__fs__read_text_file",
        &json!({"path": root.join("notes.txt")}).to_string(),
    )
    .await;
    assert_eq!(
        **read.value.as_ref().unwrap(),
        json!({"content": "first line\n"})
    );

    // Outside the allowed directory: the server reports a failure, a value the model reads.
    let outside = call(
        &registry,
        "mcp__fs__read_text_file",
        r#"{"path": "/etc/hostname"}"#,
    )
    .await;
    let value = outside.value.as_ref().unwrap();
    assert_eq!(value["isError"], json!(true), "{outside:?}");

    // `write_file` is marked destructive: without an agent to ask, it is denied.
    let write = call(
        &registry,
        "mcp__fs__write_file",
        &json!({"path": root.join("new.txt"), "content": "x"}).to_string(),
    )
    .await;
    assert_eq!(write.code(), Some(FailureCode::Denied), "{write:?}");
    assert!(!root.join("new.txt").exists());
    servers.shutdown().await;
    assert_no_process_left(&mark).await;
}
