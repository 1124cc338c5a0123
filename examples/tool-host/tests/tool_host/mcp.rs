//! `tool-host mcp` driven over its stdio as an MCP client drives it: `initialize`, the
//! `initialized` notice, `tools/list` and a `tools/call` of the host's own tool.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn an_mcp_client_lists_and_calls_the_hosts_tool() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tool-host"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    assert_eq!(answer()["result"]["serverInfo"]["name"], "tool-host");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = answer();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["word_count"]);
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "word_count", "arguments": {"text": "one two three"}}}),
    );
    let called = answer();
    assert_eq!(called["id"], 3);
    assert_eq!(
        called["result"]["content"][0]["text"], "3 words",
        "{called}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
