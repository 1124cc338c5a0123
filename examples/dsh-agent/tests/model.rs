//! `dsh-agent run --model` against a third-party OpenAI-compatible server, `@dwmkerr/mock-llm`
//! from npm, on loopback: a turn in which the server asks for a `bash` call, the tool runs,
//! and the server's second answer (which it only gives when the request carries the tool's
//! output) ends the turn; then the session log replays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/mock_llm.rs"]
mod mock_llm;
#[path = "../../../crates/dsh-tools/tests/support/npm.rs"]
mod npm;
mod support;

use mock_llm::MockLlm;
use pretty_assertions::assert_eq;
use support::{run_with, stderr, stdout};

/// First request: a `bash` call. Second request: matched only if the last message is the
/// tool's result holding the command's output and the one before is the call, so a turn that
/// did not run the tool, or sent the history wrong, gets a 404 and fails.
const TOOL_TURN: &str = r#"
rules:
  - path: "/v1/chat/completions"
    sequence: 0
    response:
      status: 200
      content: |
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "mock",
         "choices": [{"index": 0, "finish_reason": "tool_calls",
           "message": {"role": "assistant", "content": "Let me run it.",
             "tool_calls": [{"id": "call_mock_1", "type": "function",
               "function": {"name": "bash", "arguments": "{\"command\": \"echo ran-by-mock-llm\", \"description\": \"Print a marker\"}"}}]}}],
         "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}}
  - path: "/v1/chat/completions"
    sequence: 1
    match: "body.messages[-1].role == 'tool' && body.messages[-1].tool_call_id == 'call_mock_1' && contains(body.messages[-1].content, 'ran-by-mock-llm') && body.messages[-2].tool_calls[0].function.name == 'bash' && body.messages[0].role == 'system'"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-2", "object": "chat.completion", "model": "mock",
         "choices": [{"index": 0, "finish_reason": "stop",
           "message": {"role": "assistant", "content": "The command printed ran-by-mock-llm."}}],
         "usage": {"prompt_tokens": 70, "completion_tokens": 8, "total_tokens": 78}}
"#;

#[test]
fn a_model_turn_runs_a_bash_call_the_server_asked_for_and_ends_on_its_second_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockLlm::start(dir.path(), TOOL_TURN);
    let log = dir.path().join("session.jsonl");
    let base_url = server.base_url();
    let output = run_with(
        &[
            "run",
            "--model",
            "compatible:mock",
            "--base-url",
            &base_url,
            "--no-stream",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
            "say what echo prints",
        ],
        &[],
    );
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let events: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "session/start",
            "user/message",
            "model/request",
            "assistant/message",
            "tool/call",
            "tool/result",
            "model/request",
            "assistant/message",
            "turn/end",
            "session/end",
        ]
    );
    let call = &events[4];
    assert_eq!(
        (&call["callId"], &call["name"]),
        (
            &serde_json::json!("call_mock_1"),
            &serde_json::json!("bash")
        )
    );
    assert_eq!(events[7]["text"], "The command printed ran-by-mock-llm.");
    assert_eq!(events[8]["reason"], "completed");

    let replayed = run_with(&["replay", log.to_str().unwrap(), "--json"], &[]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let cards: Vec<serde_json::Value> = stdout(&replayed)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(cards.len(), 1, "{cards:?}");
    assert_eq!(cards[0]["callId"], "call_mock_1");
    assert_eq!(cards[0]["result"]["exitCode"], 0);
}

/// mock-llm streams text in pieces of `chunkSize` characters, ending with `[DONE]`.
const STREAMED_TEXT: &str = r#"
streaming:
  chunkSize: 7
  chunkIntervalMs: 5
rules:
  - path: "/v1/chat/completions"
    match: "body.stream == `true` && body.stream_options.include_usage == `true`"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-3", "object": "chat.completion", "model": "mock", "created": 1,
         "choices": [{"index": 0, "finish_reason": "stop",
           "message": {"role": "assistant", "content": "Streamed to you in seven-character pieces."}}]}
"#;

#[test]
fn a_streamed_answer_from_the_server_is_assembled_into_the_assistant_message() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockLlm::start(dir.path(), STREAMED_TEXT);
    let base_url = server.base_url();
    let output = run_with(
        &[
            "run",
            "--json",
            "--cwd",
            dir.path().to_str().unwrap(),
            "hello",
        ],
        &[
            ("DSH_MODEL", "compatible:mock"),
            ("DSH_TEST_UNUSED", &base_url),
        ],
    );
    // DSH_MODEL alone names a compatible model without a base URL: a usage error.
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "dsh-agent: invalid model configuration: provider `compatible` needs a base URL\n"
    );
    let output = run_with(
        &[
            "run",
            "--base-url",
            &base_url,
            "--json",
            "--cwd",
            dir.path().to_str().unwrap(),
            "hello",
        ],
        &[("DSH_MODEL", "compatible:mock")],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let messages: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["type"] == "assistant/message")
        .collect();
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["text"],
        "Streamed to you in seven-character pieces."
    );
}

#[test]
fn endpoint_options_without_a_model_are_a_usage_error() {
    let output = run_with(&["run", "--base-url", "http://127.0.0.1:1/v1"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "dsh-agent: --base-url needs a model (--model PROVIDER:MODEL or DSH_MODEL)\n"
    );
}

#[test]
fn with_ask_and_no_terminal_a_bash_call_is_denied_and_the_model_reads_why() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{ "steps": [
            { "toolCalls": [ { "id": "c1", "name": "bash",
                "arguments": { "command": "touch created-without-asking", "description": "Make a file" } } ] },
            { "text": "It was denied." }
        ] }"#,
    )
    .unwrap();
    let output = run_with(
        &[
            "run",
            "--ask",
            "--json",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let result = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|event| event["type"] == "tool/result")
        .unwrap();
    assert_eq!(
        (&result["isError"], &result["content"]),
        (
            &serde_json::json!(true),
            &serde_json::json!([{"type": "text", "text": "Error: approval refused: --ask needs a terminal to ask on (stdin and stderr), and there is none; the call was denied"}])
        )
    );
    assert!(!dir.path().join("created-without-asking").exists());
}

/// `chat` with a script: a turn per line typed, Ctrl-C cancelling only the running turn, and
/// the end of input ending the session.
#[test]
fn chat_runs_a_turn_per_line_and_ctrl_c_cancels_only_the_running_turn() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{ "steps": [
            { "text": "Hello there.", "reasoning": "Greet back." },
            { "toolCalls": [ { "id": "c1", "name": "bash",
                "arguments": { "command": "sleep 30", "description": "Wait a long time" } } ] },
            { "text": "Still here after the cancel." }
        ] }"#,
    )
    .unwrap();
    let mut child = support::command(
        &[
            "chat",
            "--no-ask",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[],
    )
    .stdin(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str, seen: &mut Vec<String>| {
        for line in lines.by_ref() {
            let line = line.unwrap();
            seen.push(line.clone());
            if line.contains(needle) {
                return;
            }
        }
        panic!("never saw {needle:?} in:\n{}", seen.join("\n"));
    };
    stdin.write_all(b"hi\n").unwrap();
    wait_for("agent › Hello there.", &mut seen);
    stdin.write_all(b"wait for something\n").unwrap();
    wait_for("▶ $ sleep 30", &mut seen);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for("— turn ended: cancelled", &mut seen);
    stdin.write_all(b"are you there?\n").unwrap();
    wait_for("agent › Still here after the cancel.", &mut seen);
    drop(stdin);
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{status}\n{}\n{}",
        seen.join("\n"),
        rest.join("\n")
    );
    let all = [seen, rest].concat().join("\n");
    assert!(all.contains("(thinking) Greet back."), "{all}");
    assert_eq!(all.matches("— turn ended: completed").count(), 2, "{all}");
}
