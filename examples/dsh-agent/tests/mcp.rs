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

#[path = "../../../crates/dsh-tools/tests/support/npm.rs"]
mod npm;

#[test]
fn run_with_a_script_calls_a_tool_of_a_server_from_mcp_json() {
    let entry = npm::install(
        "@modelcontextprotocol/server-filesystem@2026.8.31",
        "mcp-filesystem",
        "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("marker-file.txt"), "x").unwrap();
    let config = json!({"mcpServers": {"fs": {
        "command": "node",
        "args": [entry, "${MCP_ROOT}"],
        "env": {"DSH_MCP_TEST_MARK": format!("run-{}", std::process::id())}
    }}});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    let script = json!({"steps": [
        {"toolCalls": [{"id": "call-1", "name": "mcp__fs__list_directory",
                        "arguments": {"path": root}}]},
        {"text": "Listed."}
    ]});
    let script_path = root.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let output = support::run_with(
        &[
            "run",
            "--json",
            "--cwd",
            root.to_str().unwrap(),
            "--script",
            script_path.to_str().unwrap(),
        ],
        &[("MCP_ROOT", root.to_str().unwrap())],
    );
    let stdout = support::stdout(&output);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["type"] == json!("tool/result"))
        .unwrap_or_else(|| panic!("no tool/result in {stdout}"));
    let text = result.to_string();
    assert!(text.contains("[FILE] marker-file.txt"), "{text}");
    assert!(!text.contains("\"isError\":true"), "{text}");
    assert!(marked_processes(&format!("run-{}", std::process::id())).is_empty());
}
