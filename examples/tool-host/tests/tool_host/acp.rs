//! `tool-host acp` driven over its stdio as an editor drives it: `initialize`, `session/new`,
//! and a prompt whose scripted model calls the host's tool, which the editor allows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn an_editor_prompts_the_host_whose_tool_runs_once_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"steps": [
            {"toolCalls": [{"id": "c1", "name": "word_count",
                            "arguments": {"text": "one two three"}}]},
            {"text": "Three words."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tool-host"))
        .args(["acp", "--script"])
        .arg(&script)
        .arg("--sessions")
        .arg(dir.path().join("sessions"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(serde_json::from_str::<Value>(&line).unwrap());
        }
    });
    // Owns stdin: dropping it ends the agent's input.
    let mut send = move |message: Value| writeln!(stdin, "{message}").unwrap();
    let next = || received.recv_timeout(Duration::from_secs(30)).unwrap();

    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1}}));
    let init = next();
    assert_eq!(init["result"]["agentInfo"]["name"], json!("tool-host"));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": dir.path(), "mcpServers": []}}));
    let session = next()["result"]["sessionId"].clone();
    assert!(session.is_string(), "{session}");
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": session,
                           "prompt": [{"type": "text", "text": "count one two three"}]}}),
    );
    let mut asked = 0;
    let mut results = Vec::new();
    let answer = loop {
        let message = next();
        if message["id"] == json!(3) {
            break message;
        }
        if message["method"] == json!("session/request_permission") {
            asked += 1;
            assert_eq!(message["params"]["toolCall"]["toolCallId"], json!("c1"));
            send(json!({"jsonrpc": "2.0", "id": message["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}));
        }
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == json!("tool_call_update") {
            results.push(update.clone());
        }
    };
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(asked, 1);
    let last = results.last().unwrap();
    assert_eq!(last["status"], json!("completed"));
    assert!(last["content"].to_string().contains("3 words"), "{last}");
    drop(send);
    assert!(child.wait().unwrap().success());
}
