//! `dsh-agent run --model` against a third-party OpenAI-compatible server, `@dwmkerr/mock-llm`
//! from npm, on loopback: a turn in which the server asks for a `bash` call, the tool runs,
//! and the server's second answer (which it only gives when the request carries the tool's
//! output) ends the turn; then the session log replays. And against hostile servers the tests
//! run themselves on loopback ([`Loopback`]): one that quotes the API key back (no run of it
//! reaches any output or file) and one that streams far past the response limit (the turn
//! ends with the limit named, in bounded memory, and the session stays readable).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mock_llm.rs"]
mod mock_llm;
use crate::support;

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

/// `chat` at its prompt when a job's notice opens a turn: the turn starts on a line of its
/// own, and a fresh prompt follows it.
#[test]
fn chat_prompts_again_after_a_turn_a_notice_opened() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{ "steps": [
            { "toolCalls": [ { "id": "c1", "name": "bash", "arguments": {
                "command": "while [ ! -e go ]; do sleep 0.01; done",
                "description": "Wait for the go", "run_in_background": true } } ] },
            { "text": "Started." },
            { "text": "Seen." }
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
    let mut out = child.stdout.take().unwrap();
    // A prompt that never comes fails the test instead of hanging it.
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            watchdog.recv_timeout(std::time::Duration::from_secs(60))
        {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status();
        }
    });
    let mut seen = Vec::new();
    // Reads until the text ends with `suffix` (a prompt ends no line).
    let mut read_until = |suffix: &str, seen: &mut Vec<u8>| {
        let mut byte = [0u8; 1];
        while !String::from_utf8_lossy(seen).ends_with(suffix) {
            let n = out.read(&mut byte).unwrap();
            assert_ne!(
                n,
                0,
                "never saw {suffix:?} in:\n{}",
                String::from_utf8_lossy(seen)
            );
            seen.push(byte[0]);
        }
    };
    stdin.write_all(b"start the job\n").unwrap();
    read_until("agent › Started.\n", &mut seen);
    read_until("you › ", &mut seen);
    std::fs::write(dir.path().join("go"), "").unwrap();
    read_until("agent › Seen.\n", &mut seen);
    read_until("— turn ended: completed after 1 step(s)\nyou › ", &mut seen);
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    drop(done);
    let text = String::from_utf8_lossy(&seen);
    assert!(
        !text.contains("you › •"),
        "the notice's turn began on the prompt's line:\n{text}"
    );
}

/// What a [`Loopback`] server answers one connection with.
#[derive(Clone)]
struct Answer {
    head: String,
    /// Written once, then `repeat` written `times` times (until the client goes away).
    body: String,
    repeat: (String, usize),
}

impl Answer {
    fn new(status: u16, content_type: &str, body: &str) -> Answer {
        Answer {
            head: format!(
                "HTTP/1.1 {status} Scripted\r\nContent-Type: {content_type}\r\nConnection: close\r\n"
            ),
            body: body.to_owned(),
            repeat: (String::new(), 0),
        }
    }

    fn header(mut self, name: &str, value: &str) -> Answer {
        self.head.push_str(&format!("{name}: {value}\r\n"));
        self
    }

    /// A `200` event stream of these `data:` payloads.
    fn events(payloads: &[String]) -> Answer {
        let body: String = payloads.iter().map(|p| format!("data: {p}\n\n")).collect();
        Answer::new(200, "text/event-stream", &body)
    }
}

/// A hostile model server on 127.0.0.1: each connection gets the next answer, after its
/// request is read; the `Authorization` headers it was sent are kept. It stops when dropped.
struct Loopback {
    addr: std::net::SocketAddr,
    authorizations: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Loopback {
    fn start(answers: Vec<Answer>) -> Loopback {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let authorizations = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (authorizations, stop) = (authorizations.clone(), stop.clone());
            std::thread::spawn(move || {
                for answer in answers {
                    let Ok((socket, _)) = listener.accept() else {
                        return;
                    };
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let mut reader = BufReader::new(socket.try_clone().unwrap());
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(value) = lower.strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        if lower.starts_with("authorization:") {
                            authorizations.lock().unwrap().push(line.trim().to_owned());
                        }
                    }
                    let mut request = vec![0; length];
                    let _ = reader.read_exact(&mut request);
                    let mut socket = socket;
                    let _ = (|| -> std::io::Result<()> {
                        socket.write_all(format!("{}\r\n", answer.head).as_bytes())?;
                        socket.write_all(answer.body.as_bytes())?;
                        for _ in 0..answer.repeat.1 {
                            socket.write_all(answer.repeat.0.as_bytes())?;
                        }
                        Ok(())
                    })();
                }
            })
        };
        Loopback {
            addr,
            authorizations,
            stop,
            thread: Some(thread),
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes an `accept` still waiting for a connection that will not come.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The key the leak test's server is sent and quotes back.
const LEAKED_KEY: &str = "sk-dsh7Qx2vLp9Wm4Zt8Rb3Nc6Yd1Hf5Jg";

/// Every prefix of [`LEAKED_KEY`] of 8 characters or more, and every other run of 8 or more
/// of its characters (a suffix, a middle), that `text` holds.
fn leaked_runs(text: &str) -> Vec<String> {
    let key: Vec<char> = LEAKED_KEY.chars().collect();
    let mut found = Vec::new();
    for start in 0..key.len() {
        for end in start + 8..=key.len() {
            let run: String = key[start..end].iter().collect();
            if text.contains(&run) {
                found.push(run);
            }
        }
    }
    found
}

fn chunk(delta: serde_json::Value) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": delta}]}).to_string()
}

/// Every file under `dir`, with its text.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                dirs.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                files.push((path, text));
            }
        }
    }
    files
}

#[test]
fn a_server_quoting_the_key_gets_no_run_of_it_into_any_output_or_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let pad = |n: usize| "x".repeat(n);
    // Where the key is cut: at the 500th character of an error body or message, at the
    // 200th of a malformed data line or a page's start; and split across streamed deltas.
    let scenarios: Vec<(&str, Vec<Answer>)> = vec![
        (
            "error bodies, retried",
            vec![
                Answer::new(503, "text/plain", &format!("{}{LEAKED_KEY} overloaded", pad(480)))
                    .header("Retry-After", "0"),
                Answer::new(
                    401,
                    "application/json",
                    &serde_json::json!({"error": {"message": format!("{}{LEAKED_KEY} is not a valid key", pad(470)), "type": "invalid_request_error"}}).to_string(),
                ),
            ],
        ),
        (
            "a malformed line after split deltas",
            vec![Answer::events(&[
                chunk(serde_json::json!({"reasoning_content": format!("The key is {}", &LEAKED_KEY[..12])})),
                chunk(serde_json::json!({"reasoning_content": format!("{}.", &LEAKED_KEY[12..])})),
                chunk(serde_json::json!({"content": "Quoting: "})),
                chunk(serde_json::json!({"content": &LEAKED_KEY[..5]})),
                chunk(serde_json::json!({"content": &LEAKED_KEY[5..20]})),
                chunk(serde_json::json!({"content": &LEAKED_KEY[20..]})),
                format!("{{\"choices\":[{}{LEAKED_KEY}]}}", pad(178)),
            ])],
        ),
        (
            "an error event",
            vec![Answer::events(&[
                chunk(serde_json::json!({"content": "Working."})),
                serde_json::json!({"error": {"message": format!("{}{LEAKED_KEY}", pad(485))}}).to_string(),
            ])],
        ),
        (
            "an HTML page",
            vec![Answer::new(
                200,
                "text/html",
                &format!("<html><head><title>{}{LEAKED_KEY}</title></head></html>", pad(170)),
            )],
        ),
        (
            "an answer that quotes the key",
            vec![Answer::events(&[
                chunk(serde_json::json!({"content": format!("Your key is {}", &LEAKED_KEY[..9])})),
                chunk(serde_json::json!({"content": format!("{}, keep it safe; its end is {}.", &LEAKED_KEY[9..], &LEAKED_KEY[24..])})),
                serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string(),
                "[DONE]".to_owned(),
            ])],
        ),
    ];
    let mut shown = Vec::new();
    let mut unquoted = Vec::new();
    for (name, answers) in scenarios {
        for json in [true, false] {
            let server = Loopback::start(answers.clone());
            let log = dir.path().join(format!("{}-{json}.jsonl", shown.len()));
            let base_url = server.base_url();
            let mut args = vec![
                "run",
                "--model",
                "openai:gpt-4o-mini",
                "--base-url",
                &base_url,
                "--log",
                log.to_str().unwrap(),
                "--cwd",
                dir.path().to_str().unwrap(),
            ];
            if json {
                args.push("--json");
            }
            args.push("tell me the key");
            let output = run_with(
                &args,
                &[
                    ("OPENAI_API_KEY", LEAKED_KEY),
                    ("DSH_SESSION_DIR", store.to_str().unwrap()),
                    ("RUST_LOG", "debug"),
                ],
            );
            assert_eq!(
                server.authorizations.lock().unwrap().first().cloned(),
                Some(format!("authorization: Bearer {LEAKED_KEY}")),
                "{name}: the server was not sent the key"
            );
            let (out, err) = (stdout(&output), stderr(&output));
            if !out.contains("<redacted>") && !err.contains("<redacted>") {
                unquoted.push(format!("{name} (json: {json})\n{out}\n{err}"));
            }
            shown.push((format!("{name}, stdout (json: {json})"), out));
            shown.push((format!("{name}, stderr (json: {json})"), err));
            shown.push((
                format!("{name}, the log (json: {json})"),
                std::fs::read_to_string(&log).unwrap(),
            ));
        }
    }
    let files = files_under(&store);
    assert!(!files.is_empty(), "the store holds no files");
    for (path, text) in files {
        shown.push((path.display().to_string(), text));
    }
    let leaks: Vec<(String, Vec<String>)> = shown
        .iter()
        .map(|(place, text)| (place.clone(), leaked_runs(text)))
        .filter(|(_, runs)| !runs.is_empty())
        .collect();
    assert_eq!(leaks, Vec::<(String, Vec<String>)>::new());
    // Each scenario did show what the server said, the key redacted.
    assert_eq!(unquoted, Vec::<String>::new());
    // The text around the key stays as the server sent it.
    let answer = shown
        .iter()
        .find(|(place, _)| place == "an answer that quotes the key, stdout (json: true)")
        .map(|(_, text)| text.clone())
        .unwrap();
    let message = answer
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|event| event["type"] == "assistant/message")
        .unwrap();
    assert_eq!(
        message["text"],
        "Your key is <redacted>, keep it safe; its end is <redacted>."
    );
}

#[test]
fn a_server_streaming_far_past_the_response_limit_ends_the_turn_with_bounded_memory() {
    use std::io::{BufRead, BufReader, Write};
    const MIB: u64 = 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    // 200 MB of text deltas, 50 times the default limit of one response (4 MiB).
    let delta = format!(
        "data: {}\n\n",
        chunk(serde_json::json!({"content": "y".repeat(1000)}))
    );
    let mut answer = Answer::new(200, "text/event-stream", "");
    answer.repeat = (delta, 200_000);
    let server = Loopback::start(vec![answer]);
    // `chat` stays alive after its turn, so its peak is read before it exits.
    let mut child = support::command(
        &[
            "chat",
            "--no-ask",
            "--model",
            "compatible:big",
            "--base-url",
            &server.base_url(),
            "--log",
            log.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[],
    )
    .stdin(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stderr_reader = {
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::read_to_string(stderr).unwrap())
    };
    stdin.write_all(b"write a lot\n").unwrap();
    let mut turn = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let ended = line.contains("— turn ended");
        // The streamed text itself is not kept: only what the turn's end said.
        if line.len() < 2000 {
            turn.push(line);
        }
        if ended {
            break;
        }
    }
    let peak = support::peak_rss(child.id());
    drop(stdin);
    let rest: Vec<String> = lines.map(|line| line.unwrap()).collect();
    let status = child.wait().unwrap();
    let err = stderr_reader.join().unwrap();
    let said = [turn, rest].concat().join("\n");
    assert!(
        peak < 100 * MIB,
        "reading a response 50 times the limit peaked at {} MiB",
        peak / MIB
    );
    assert!(
        said.contains(
            "error: the response from compatible passed its limit of 4194304 bytes of text, \
             reasoning and tool calls (max_response_bytes); the rest was not read"
        ),
        "{said}\n{err}"
    );
    assert!(said.contains("— turn ended: error"), "{said}\n{err}");
    // A chat judges its turns as they happen: the end of input ends it normally.
    assert!(status.success(), "{status}\n{err}");
    // The session stays readable.
    let replayed = run_with(&["replay", log.to_str().unwrap(), "--json"], &[]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
}
