//! MCP both ways through the built binary: `dsh-agent mcp` driven by the MCP client of
//! `tool-mcp` (rmcp), with a background job started, read and killed and no process left
//! behind; and `dsh-agent run --script` calling a tool of an MCP server from `.mcp.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_tools::{ToolCall, ToolRegistry, ToolResult};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tool_mcp::{McpConfig, McpOptions, McpServers, ServerConfig, ServerState, StdioServer};

/// The processes whose environment holds `DSH_MCP_TEST_MARK=<mark>`.
fn marked_processes(mark: &str) -> Vec<u32> {
    let needle = format!("DSH_MCP_TEST_MARK={mark}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|stat| stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')))
            .unwrap_or(false);
        if !zombie
            && environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> ToolResult {
    registry
        .execute(ToolCall::new("c", name, args.to_string()))
        .await
}

fn text(result: &ToolResult) -> String {
    assert!(!result.is_error, "{result:?}");
    dsh_tools::content_text(&result.content)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_runs_bash_and_background_jobs_for_an_mcp_client_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mark = format!("serve-{}", std::process::id());
    let mut server = StdioServer::new(env!("CARGO_BIN_EXE_dsh-agent"), ["mcp"]);
    server.env.insert("DSH_MCP_TEST_MARK".into(), mark.clone());
    server.cwd = Some(dir.path().to_owned());
    let mut config = McpConfig::default();
    config
        .servers
        .insert("dsh".into(), ServerConfig::Stdio(server));
    let registry = ToolRegistry::new();
    let servers = McpServers::start(registry.global_scope(), &config, McpOptions::default())
        .await
        .unwrap();
    let status = servers.server_status("dsh").unwrap();
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!(
        status.tools,
        [
            "mcp__dsh__bash",
            "mcp__dsh__job_kill",
            "mcp__dsh__job_list",
            "mcp__dsh__job_output"
        ]
    );
    // The tools' schemas came over `tools/list`.
    let bash = registry.get("mcp__dsh__bash", None).unwrap();
    let parameters = serde_json::to_value(bash.schema().parameters).unwrap();
    assert_eq!(parameters["properties"]["command"]["type"], json!("string"));

    let ran = call(
        &registry,
        "mcp__dsh__bash",
        json!({"command": "echo hello; pwd", "description": "Say hello"}),
    )
    .await;
    let ran = text(&ran);
    assert!(ran.contains("hello"), "{ran}");
    assert!(
        ran.contains(&dir.path().canonicalize().unwrap().display().to_string()),
        "{ran}"
    );

    let started = call(
        &registry,
        "mcp__dsh__bash",
        json!({"command": "echo started; sleep 600", "description": "Wait a long time",
               "run_in_background": true}),
    )
    .await;
    assert!(text(&started).contains("bash-1"), "{started:?}");
    let listed = call(&registry, "mcp__dsh__job_list", json!({})).await;
    assert!(text(&listed).contains("bash-1"), "{listed:?}");
    let read = call(
        &registry,
        "mcp__dsh__job_output",
        json!({"job_id": "bash-1"}),
    )
    .await;
    assert!(text(&read).contains("started"), "{read:?}");
    let killed = call(&registry, "mcp__dsh__job_kill", json!({"job_id": "bash-1"})).await;
    assert!(!killed.is_error, "{killed:?}");

    // A second job left running: disconnecting must stop it too.
    let left = call(
        &registry,
        "mcp__dsh__bash",
        json!({"command": "sleep 600", "description": "Outlive the client",
               "run_in_background": true}),
    )
    .await;
    assert!(!left.is_error, "{left:?}");
    assert!(!marked_processes(&mark).is_empty());
    servers.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marked_processes(&mark).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            marked_processes(&mark)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
