//! MCP both ways through the built binary: `dsh-agent mcp` driven by the MCP client of
//! `tool-mcp` (rmcp), with a background job started, read and killed and no process left
//! behind; and `dsh-agent run --script` calling a tool of an MCP server from `.mcp.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use crate::processes;

use processes::{MARK_VAR, marked_processes, wait_gone};

use dsh_tools::{ToolCall, ToolRegistry, ToolResult};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tool_mcp::{McpConfig, McpOptions, McpServers, ServerConfig, ServerState, StdioServer};

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
    server.env.insert(MARK_VAR.into(), mark.clone());
    server.cwd = Some(dir.path().to_owned());
    let mut config = McpConfig::default();
    config
        .servers
        .insert("dsh".into(), ServerConfig::Stdio(server));
    let registry = ToolRegistry::new();
    // This client has no one to ask: the server's tools, unmarked and so counted destructive,
    // run without approval.
    let mut options = McpOptions::default();
    options.approve_destructive = false;
    let servers = McpServers::start(registry.global_scope(), &config, options)
        .await
        .unwrap();
    let status = servers.server_status("dsh").unwrap();
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!(
        status.tools,
        [
            "mcp__dsh__bash",
            "mcp__dsh__edit",
            "mcp__dsh__glob",
            "mcp__dsh__grep",
            "mcp__dsh__job_kill",
            "mcp__dsh__job_list",
            "mcp__dsh__job_output",
            "mcp__dsh__read",
            "mcp__dsh__write"
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
    // The job's first line may not be written yet: read until it is (at most 5 s).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let read = call(
            &registry,
            "mcp__dsh__job_output",
            json!({"job_id": "bash-1"}),
        )
        .await;
        if text(&read).contains("started") {
            break;
        }
        assert!(Instant::now() < deadline, "{read:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    tokio::task::block_in_place(|| wait_gone(&mark));
}

use crate::npm;

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
        "env": {MARK_VAR: format!("run-{}", std::process::id())}
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

/// Runs `node <args>` to the end, with `DSH_MCP_TEST_MARK=<mark>` for the processes it starts.
fn node(args: &[&std::ffi::OsStr], cwd: &std::path::Path, mark: &str) -> std::process::Output {
    std::process::Command::new("node")
        .args(args)
        .current_dir(cwd)
        .env(MARK_VAR, mark)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn json_stdout(output: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_official_inspector_lists_the_tools_and_calls_bash() {
    let inspector = npm::install(
        "@modelcontextprotocol/inspector@2.12.0",
        "mcp-inspector",
        "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    );
    let dir = tempfile::tempdir().unwrap();
    let mark = format!("inspector-{}", std::process::id());
    let agent = std::ffi::OsStr::new(env!("CARGO_BIN_EXE_dsh-agent"));
    let cli = |extra: &[&str]| -> Value {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            inspector.as_os_str(),
            "--cli".as_ref(),
            agent,
            "mcp".as_ref(),
        ];
        args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
        json_stdout(&node(&args, dir.path(), &mark))
    };
    let listed = cli(&["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bash",
            "edit",
            "glob",
            "grep",
            "job_kill",
            "job_list",
            "job_output",
            "read",
            "write"
        ]
    );
    let bash = &listed["tools"][0];
    assert_eq!(
        bash["inputSchema"]["required"],
        json!(["command", "description"])
    );
    assert_eq!(listed["tools"][2]["outputSchema"]["type"], json!("object"));

    let called = cli(&[
        "--method",
        "tools/call",
        "--tool-name",
        "bash",
        "--tool-arg",
        "command=echo hi-from-inspector",
        "--tool-arg",
        "description=say hi",
    ]);
    assert_eq!(
        called["content"],
        json!([{"type": "text", "text": "hi-from-inspector"}])
    );
    assert_eq!(called["isError"], json!(false));
    assert_eq!(called["structuredContent"]["exitCode"], json!(0));
    assert_eq!(
        called["structuredContent"]["stdout"]["text"],
        json!("hi-from-inspector\n")
    );
    wait_gone(&mark);
}

/// The official TypeScript SDK's client: a background job started, read and killed.
const SDK_CLIENT: &str = r#"
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const [agent, cwd] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: agent, args: ["mcp"], cwd, env: process.env });
const client = new Client({ name: "dsh-test", version: "1.0.0" });
await client.connect(transport);
const call = (name, args) => client.callTool({ name, arguments: args });
const started = await call("bash", { command: "echo started; sleep 600", description: "Wait", run_in_background: true });
// The job's first line may not be written yet: read until it is (at most 5 s).
let read;
for (let i = 0; i < 100; i++) {
  read = await call("job_output", { job_id: "bash-1" });
  if (read.content[0].text.includes("started")) break;
  await new Promise((resolve) => setTimeout(resolve, 50));
}
const killed = await call("job_kill", { job_id: "bash-1" });
const after = await call("job_list", {});
await client.close();
console.log(JSON.stringify({ started, read, killed, after }));
"#;

#[test]
fn the_official_typescript_client_starts_reads_and_kills_a_background_job() {
    let sdk_package = npm::install(
        "@modelcontextprotocol/sdk@1.32.2",
        "mcp-sdk",
        "node_modules/@modelcontextprotocol/sdk/package.json",
    );
    // The script sits beside the install's node_modules, where `import` resolves the SDK.
    let prefix = sdk_package.ancestors().nth(3).unwrap();
    let script = prefix.join(format!("client-{}.mjs", std::process::id()));
    std::fs::write(&script, SDK_CLIENT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mark = format!("sdk-{}", std::process::id());
    let output = node(
        &[
            script.as_os_str(),
            env!("CARGO_BIN_EXE_dsh-agent").as_ref(),
            dir.path().as_os_str(),
        ],
        dir.path(),
        &mark,
    );
    let _ = std::fs::remove_file(&script);
    let outcome = json_stdout(&output);
    let text = |key: &str| {
        outcome[key]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(outcome["started"]["isError"], json!(false), "{outcome}");
    assert!(text("started").contains("bash-1"), "{outcome}");
    assert!(text("read").contains("started"), "{outcome}");
    assert_eq!(outcome["killed"]["isError"], json!(false), "{outcome}");
    assert!(text("after").contains("killed"), "{outcome}");
    wait_gone(&mark);
}

/// `dsh-agent mcp` spoken to by hand, one line at a time; its output is read by a thread of its
/// own, so an answer that never comes fails the test instead of hanging it.
struct Peer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    messages: std::sync::mpsc::Receiver<Value>,
}

impl Peer {
    fn start() -> Peer {
        let mut child = support::command(&["mcp"], &[])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let messages = support::json_lines(child.stdout.take().unwrap());
        Peer {
            stdin: child.stdin.take().unwrap(),
            messages,
            child,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(bytes).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends `line` and reads the answer (within 30 s).
    fn ask(&mut self, line: &str) -> Value {
        self.send(line.as_bytes());
        self.messages
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no answer to {line:.200}: {e}"))
    }

    /// Closes the server's input: it exits, successfully.
    fn close(mut self) {
        drop(self.stdin);
        assert!(self.child.wait().unwrap().success());
    }
}

/// A JSON-RPC error answer without its `data`, which quotes parsers' wording.
fn code_and_id(mut answer: Value) -> Value {
    if let Some(error) = answer.get_mut("error").and_then(Value::as_object_mut) {
        assert!(
            error.remove("data").is_some(),
            "an error says what was wrong: {error:?}"
        );
    }
    answer
}

fn rpc_error(code: i64, message: &str, id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[test]
fn the_server_answers_bad_input_by_json_rpc_and_goes_on() {
    let mut peer = Peer::start();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "hand", "version": "1"}}});
    let initialized = peer.ask(&initialize.to_string());
    assert_eq!(initialized["id"], json!(1), "{initialized}");
    assert!(
        initialized["result"]["serverInfo"].is_object(),
        "{initialized}"
    );
    peer.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (line, expected) in [
        ("{not json", rpc_error(-32700, "Parse error", Value::Null)),
        ("[]", rpc_error(-32600, "Invalid Request", Value::Null)),
        ("42", rpc_error(-32600, "Invalid Request", Value::Null)),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":3}"#,
            rpc_error(-32600, "Invalid Request", json!(7)),
        ),
        (
            r#"{"jsonrpc":"1.0","id":"eight","method":"tools/list"}"#,
            rpc_error(-32600, "Invalid Request", json!("eight")),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}"#,
            rpc_error(-32602, "Invalid params", json!(9)),
        ),
    ] {
        assert_eq!(code_and_id(peer.ask(line)), expected, "{line}");
    }
    // JSON is UTF-8: a line that is not is a parse error.
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/list\xff\"}");
    let answer = peer
        .messages
        .recv_timeout(Duration::from_secs(30))
        .expect("an answer to the line that is not UTF-8");
    assert_eq!(
        code_and_id(answer),
        rpc_error(-32700, "Parse error", Value::Null)
    );
    // A line over the limit is read through, not kept, and answered.
    let mut long = br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"bash","arguments":{"command":""#.to_vec();
    long.resize(17 * 1024 * 1024, b'a');
    long.extend_from_slice(br#""}}}"#);
    peer.send(&long);
    let answer = peer
        .messages
        .recv_timeout(Duration::from_secs(30))
        .expect("an answer to the long line");
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request",
            "data": "a message longer than 16777216 bytes (16 MiB) was discarded"}})
    );
    // The connection goes on.
    let listed = peer.ask(r#"{"jsonrpc":"2.0","id":11,"method":"tools/list"}"#);
    assert_eq!(listed["id"], json!(11), "{listed}");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    peer.close();
}

const MIB: u64 = 1024 * 1024;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hand","version":"1"}}}"#;

#[test]
fn a_message_of_too_many_values_is_refused_with_its_id_before_it_is_parsed() {
    let mut peer = Peer::start();
    assert_eq!(peer.ask(INITIALIZE)["id"], json!(0));
    let before = support::peak_rss(peer.child.id());
    // 16 MB of `[0,0,…]`, under the size limit: eight million values.
    for (head, tail) in [
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"bash","arguments":{"command":[0"#,
            "]}}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"capabilities":[0"#,
            "]}}",
        ),
    ] {
        let mut line = head.to_owned();
        line.push_str(&",0".repeat(7_999_999));
        line.push_str(tail);
        assert_eq!(
            peer.ask(&line),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32600, "message": "Invalid Request",
                "data": "too many values: a message holds at most 100000 JSON values"}})
        );
    }
    let peak = support::peak_rss(peer.child.id());
    assert!(
        peak < before + 40 * MIB,
        "refusing the messages raised the peak RSS from {before} to {peak} bytes"
    );
    let listed = peer.ask(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#);
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    peer.close();
}

#[test]
fn requests_a_client_does_not_read_the_answers_of_hold_the_input_back_and_none_is_lost() {
    const PINGS: usize = 300_000;
    let mut child = support::command(&["mcp"], &[])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut input = format!("{INITIALIZE}\n");
        for id in 1..=PINGS {
            input.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
            input.push('\n');
        }
        stdin.write_all(input.as_bytes()).unwrap();
    });
    let mut peak = 0;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        peak = support::peak_rss(child.id());
        if peak > 100 * MIB || writer.is_finished() {
            break;
        }
    }
    assert!(
        peak < 100 * MIB,
        "with its answers unread the server's peak RSS reached {peak} bytes"
    );
    use std::io::BufRead;
    let mut answered = std::collections::BTreeSet::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let answer: Value = serde_json::from_str(&line.unwrap()).unwrap();
        assert!(answer.get("result").is_some(), "{answer}");
        answered.insert(answer["id"].as_u64().unwrap());
    }
    writer.join().unwrap();
    assert_eq!(
        answered.len(),
        PINGS + 1,
        "every ping is answered, none lost"
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_request_under_the_id_of_one_unanswered_is_refused_naming_the_id() {
    let mut peer = Peer::start();
    assert_eq!(peer.ask(INITIALIZE)["id"], json!(0));
    peer.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": "sleep 2; echo first", "description": "Wait"}}})
    .to_string();
    peer.send(call.as_bytes());
    assert_eq!(
        peer.ask(&call),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "Invalid Request",
            "data": "request id 7 is already in use by a request still being answered"}})
    );
    let first = peer
        .messages
        .recv_timeout(Duration::from_secs(30))
        .expect("the first call's answer");
    assert_eq!(first["id"], json!(7), "{first}");
    assert!(
        first["result"]["content"].to_string().contains("first"),
        "{first}"
    );
    // Answered, the id is free again.
    let again = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    assert_eq!(
        peer.ask(&again),
        json!({"jsonrpc": "2.0", "id": 7, "result": {}})
    );
    peer.close();
}
