//! `dsh-agent acp` spoken to by hand, one JSON-RPC line at a time: malformed input and the
//! answers it gets, the `initialize` rule, the message size limit and the memory it costs, a
//! `$/cancel_request`, a prompt sent while a background job's notice has its turn, and the
//! calls a `run_code` program makes.

use crate::support;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

/// `dsh-agent acp` with a model scripted by `steps`, spoken to one line at a time. Its output
/// is read by a thread of its own, so a message that never comes fails the test in
/// [`ANSWER_WITHIN`] instead of hanging it.
struct Connection {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    messages: std::sync::mpsc::Receiver<Value>,
    dir: tempfile::TempDir,
}

/// How long a test waits for one message from the agent.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Connection {
    /// `dsh-agent acp --sandbox off` with `args` on top, not yet initialized.
    fn open_with(steps: Value, args: &[&str]) -> Connection {
        let dir = support::scratch();
        let script = support::write_script(dir.path(), steps);
        let mut command_line = vec![
            "acp",
            "--sandbox",
            "off",
            "--script",
            script.to_str().unwrap(),
        ];
        command_line.extend_from_slice(args);
        let mut child = support::command(&command_line, &[])
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let messages = support::json_lines(child.stdout.take().unwrap());
        Connection {
            stdin: child.stdin.take().unwrap(),
            messages,
            child,
            dir,
        }
    }

    fn open(steps: Value) -> Connection {
        Connection::open_with(steps, &[])
    }

    /// An open connection, initialized, with `args` on the command line.
    fn initialized(steps: Value, args: &[&str]) -> Connection {
        let mut connection = Connection::open_with(steps, args);
        let answer = connection.ask(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
        );
        assert_eq!(answer["result"]["protocolVersion"], json!(1), "{answer}");
        connection
    }

    /// Opens a session in the connection's directory; its id.
    fn new_session(&mut self, id: u64) -> String {
        let new = json!({"jsonrpc": "2.0", "id": id, "method": "session/new",
            "params": {"cwd": self.dir.path().canonicalize().unwrap(), "mcpServers": []}});
        let answer = self.ask(&new.to_string());
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned()
    }

    /// Sends `line` and reads the next message back that is not a session update. One line
    /// at a time, each answered before the next is sent: the agent answers requests in tasks
    /// of their own, so the order of answers to lines sent at once is not fixed.
    fn ask(&mut self, line: &str) -> Value {
        self.send(line);
        self.receive()
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message, whatever it is.
    fn next(&mut self) -> Value {
        self.messages
            .recv_timeout(ANSWER_WITHIN)
            .unwrap_or_else(|e| panic!("no message from the agent within {ANSWER_WITHIN:?}: {e}"))
    }

    /// The next message that is not a session update.
    fn receive(&mut self) -> Value {
        loop {
            let message = self.next();
            // Updates of a session come before the answer to its prompt.
            if message["method"] != json!("session/update") {
                return message;
            }
        }
    }

    /// Closes the agent's input: it exits, successfully.
    fn close(self) {
        let Connection {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

/// The answers of a connection, initialized first, to `lines` sent one at a time.
fn exchange(lines: &[&str]) -> Vec<Value> {
    let mut connection = Connection::initialized(json!([]), &[]);
    let answers = lines.iter().map(|line| connection.ask(line)).collect();
    connection.close();
    answers
}

fn error(code: i64, message: &str, id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The answers without the `data` of their errors, which quotes parsers' wording.
fn without_data(mut answers: Vec<Value>) -> Vec<Value> {
    for answer in &mut answers {
        if let Some(error) = answer.get_mut("error").and_then(Value::as_object_mut) {
            error.remove("data");
        }
    }
    answers
}

#[test]
fn bad_input_gets_protocol_errors_and_the_connection_goes_on() {
    let answers = exchange(&[
        "{not json",
        "[]",
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/fly","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"relative/dir"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"no-such-session","cwd":"/","mcpServers":[]}}"#,
        r#"{"jsonrpc":"2.0","id":"six","method":7}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}"#,
    ]);
    let initialized = answers[8].clone();
    assert_eq!(
        without_data(answers),
        vec![
            error(-32700, "Parse error", Value::Null),
            error(-32600, "Invalid Request", Value::Null),
            error(-32600, "Invalid Request", Value::Null),
            error(-32601, "Method not found", json!(1)),
            error(-32002, "Resource not found", json!(2)),
            error(-32602, "Invalid params", json!(3)),
            error(-32002, "Resource not found", json!(4)),
            error(-32600, "Invalid Request", json!("six")),
            initialized.clone(),
        ]
    );
    assert_eq!(initialized["result"]["protocolVersion"], json!(1));

    // JSON is UTF-8: a line that is not is a parse error, not a message with its bytes
    // replaced.
    let mut connection = Connection::initialized(json!([]), &[]);
    connection
        .stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/fly\xff\"}\n")
        .unwrap();
    connection.stdin.flush().unwrap();
    assert_eq!(
        connection.receive(),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error",
            "data": "a message is UTF-8 text"}})
    );
    connection.close();
}

#[test]
fn every_request_before_initialize_is_refused_naming_the_rule() {
    let mut connection = Connection::open(json!([]));
    let cwd = std::env::temp_dir();
    let refused = |id: u64, method: &str| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "Invalid Request",
            "data": format!("`initialize` must be the first request of a connection; `{method}` came before it")}})
    };
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    assert_eq!(connection.ask(&new.to_string()), refused(1, "session/new"));
    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}});
    assert_eq!(
        connection.ask(&prompt.to_string()),
        refused(2, "session/prompt")
    );
    let initialize = connection
        .ask(r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(
        initialize["result"]["protocolVersion"],
        json!(1),
        "{initialize}"
    );
    // Sent right behind `initialize`, without waiting for its answer: the rule holds in the
    // order the lines came, not in the order tasks run.
    let new = json!({"jsonrpc": "2.0", "id": 4, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    let answer = connection.ask(&new.to_string());
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
    connection.close();

    let mut connection = Connection::open(json!([]));
    connection
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    connection.send(&new.to_string());
    let answers = [connection.receive(), connection.receive()];
    assert!(
        answers.iter().all(|answer| answer.get("result").is_some()),
        "{answers:?}"
    );
    connection.close();
}

#[test]
fn a_message_over_16_mib_is_discarded_as_it_is_read_and_answered() {
    const MIB: usize = 1024 * 1024;
    let mut connection = Connection::initialized(json!([support::text_step("still here")]), &[]);
    let session = connection.new_session(1);
    let before = support::peak_rss(connection.child.id());
    // One 60 MB prompt, written in pieces as a client streams it.
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":""#
    );
    connection.stdin.write_all(head.as_bytes()).unwrap();
    let piece = vec![b'a'; MIB];
    for _ in 0..60 {
        connection.stdin.write_all(&piece).unwrap();
    }
    connection.send(r#""}]}}"#);
    let answer = connection.receive();
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request",
            "data": format!("a message longer than {} bytes (16 MiB) was discarded", 16 * MIB)}})
    );
    // At most the limit is held before the line is known to be too long, plus stdin's
    // buffers: never the 60 MB, let alone their parse.
    let peak = support::peak_rss(connection.child.id());
    assert!(
        peak < before + 24 * MIB as u64,
        "reading a discarded message raised the peak RSS from {before} to {peak} bytes"
    );
    // The connection goes on: the next prompt gets its answer.
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}});
    assert_eq!(
        connection.ask(&prompt.to_string()),
        json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    );
    connection.close();
}

#[test]
fn cancel_request_for_a_running_prompt_cancels_it() {
    let mut connection = Connection::initialized(
        json!([support::bash_step(
            "call-1",
            "touch started; sleep 600",
            "Wait a long time"
        )]),
        &["--no-ask"],
    );
    let session = connection.new_session(1);
    let started = connection.dir.path().join("started");
    let prompt = json!({"jsonrpc": "2.0", "id": "turn", "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Wait"}]}});
    connection.send(&prompt.to_string());
    let deadline = std::time::Instant::now() + ANSWER_WITHIN;
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    connection
        .send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"turn"}}"#);
    assert_eq!(
        connection.receive(),
        json!({"jsonrpc": "2.0", "id": "turn", "result": {"stopReason": "cancelled"}})
    );
    connection.close();
}

#[test]
fn a_prompt_sent_while_a_jobs_notice_has_its_turn_waits_and_is_answered() {
    let (mut connection, session) = during_a_notices_turn(2);
    let prompt = |id: u64, text: &str| prompt_line(&session, id, text);
    connection.send(&prompt(3, "And now?"));
    let mut said = String::new();
    let answer = loop {
        let message = connection.next();
        if message["method"] == json!("session/update") {
            let update = &message["params"]["update"];
            if update["sessionUpdate"] == json!("agent_message_chunk") {
                said.push_str(update["content"]["text"].as_str().unwrap());
            }
            continue;
        }
        break message;
    };
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    );
    // The notice's turn ended first, then the user's prompt had its own.
    assert!(said.ends_with("The job finished.Your answer."), "{said}");
    connection.close();
}

#[test]
fn a_bash_call_inside_run_code_is_announced_asked_under_its_id_and_completed() {
    let mut connection = Connection::initialized(
        json!([
            {"toolCalls": [{"id": "call-1", "name": "run_code", "arguments": {
                "code": "const r = await tools.bash({ command: \"echo nested\", description: \"Say nested\" });\nreturn r.stdout.text.trim();"
            }}]},
            {"text": "Done."}
        ]),
        &[],
    );
    let session = connection.new_session(1);
    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Run code"}]}});
    connection.send(&prompt.to_string());
    let mut seen = Vec::new();
    let answer = loop {
        let message = connection.next();
        if message["method"] == json!("session/request_permission") {
            let reply = json!({"jsonrpc": "2.0", "id": message["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}});
            connection.send(&reply.to_string());
            seen.push((
                "ask".to_owned(),
                message["params"]["toolCall"]["toolCallId"].clone(),
                Value::Null,
            ));
            continue;
        }
        if message["method"] == json!("session/update") {
            let update = &message["params"]["update"];
            if let Some(kind @ ("tool_call" | "tool_call_update")) =
                update["sessionUpdate"].as_str()
            {
                seen.push((
                    kind.to_owned(),
                    update["toolCallId"].clone(),
                    update["status"].clone(),
                ));
            }
            continue;
        }
        break message;
    };
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})
    );
    let nested = json!("call-1:code:1");
    let step = |kind: &str, id: &Value, status: Value| (kind.to_owned(), id.clone(), status);
    assert_eq!(
        seen,
        vec![
            step("tool_call", &json!("call-1"), json!("pending")),
            step("tool_call", &nested, json!("pending")),
            step("ask", &nested, Value::Null),
            step("tool_call_update", &nested, json!("completed")),
            step("tool_call_update", &json!("call-1"), json!("completed")),
        ]
    );
    connection.close();
}

#[test]
fn loading_a_session_open_on_the_connection_says_so_and_the_session_goes_on() {
    let mut connection = Connection::initialized(json!([support::text_step("still here")]), &[]);
    let cwd = std::env::temp_dir();
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    let answer = connection.ask(&new.to_string());
    let id = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    let load = json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": {"sessionId": id, "cwd": cwd, "mcpServers": []}});
    assert_eq!(
        connection.ask(&load.to_string()),
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Invalid params",
            "data": format!("session {id} is already open on this connection")}})
    );
    // The open session still takes prompts.
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]}});
    assert_eq!(
        connection.ask(&prompt.to_string()),
        json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    );

    // Two loads of one closed session sent at once: one opens it, the other is told it is
    // open, whichever comes second (the first may still be opening it).
    let closed = {
        use agent_loop::SessionStore as _;
        let store = agent_loop::FsSessionStore::new(support::SESSION_DIR);
        store.create(&cwd).unwrap().id().to_owned()
    };
    for id in [4, 5] {
        let load = json!({"jsonrpc": "2.0", "id": id, "method": "session/load",
            "params": {"sessionId": closed, "cwd": cwd, "mcpServers": []}});
        writeln!(connection.stdin, "{load}").unwrap();
    }
    connection.stdin.flush().unwrap();
    let mut answers = [connection.receive(), connection.receive()];
    answers.sort_by_key(|answer| answer.get("error").is_some());
    assert_eq!(answers[0]["result"], json!({}), "{answers:?}");
    assert_eq!(
        answers[1]["error"]["data"],
        json!(format!(
            "session {closed} is already open on this connection"
        )),
        "{answers:?}"
    );
    connection.close();
}

/// `dsh-agent acp` whose stdout nobody reads until the test says so.
fn unread_agent(dir: &std::path::Path) -> std::process::Child {
    support::command(&["acp", "--sandbox", "off"], &[])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn replies_a_peer_does_not_read_hold_the_input_back_and_none_is_lost() {
    const LINES: usize = 500_000;
    const MIB: u64 = 1024 * 1024;
    let dir = support::scratch();
    let mut child = unread_agent(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    // Each `{}` gets an error reply; written from a thread, which the agent's backpressure
    // may block for as long as the replies are not read.
    let writer = std::thread::spawn(move || {
        let mut input = String::from(
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n",
        );
        input.push_str(&"{}\n".repeat(LINES));
        stdin.write_all(input.as_bytes()).unwrap();
    });
    let mut peak = 0;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        peak = support::peak_rss(child.id());
        if peak > 100 * MIB || writer.is_finished() {
            break;
        }
    }
    assert!(
        peak < 100 * MIB,
        "with its replies unread the agent's peak RSS reached {peak} bytes"
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["id"], json!(0), "{first}");
    let mut replies = 0;
    for line in lines {
        let reply: Value = serde_json::from_str(&line.unwrap()).unwrap();
        assert_eq!(reply["error"]["code"], json!(-32600), "{reply}");
        assert_eq!(reply["id"], Value::Null, "{reply}");
        replies += 1;
    }
    writer.join().unwrap();
    assert_eq!(replies, LINES, "every bad line is answered, none lost");
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_message_of_too_many_values_is_refused_before_it_is_parsed() {
    const MIB: u64 = 1024 * 1024;
    let mut connection = Connection::initialized(json!([]), &[]);
    let before = support::peak_rss(connection.child.id());
    // 16 MB of `[0,0,…]`, under the size limit: eight million values.
    let mut line = String::from(
        r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[0"#,
    );
    line.push_str(&",0".repeat(7_999_999));
    line.push_str("]}}");
    let answer = connection.ask(&line);
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": "Invalid Request",
            "data": "too many values: a message holds at most 100000 JSON values"}})
    );
    let peak = support::peak_rss(connection.child.id());
    assert!(
        peak < before + 40 * MIB,
        "refusing the message raised the peak RSS from {before} to {peak} bytes"
    );
    let listed = connection.ask(r#"{"jsonrpc":"2.0","id":3,"method":"session/list"}"#);
    assert_eq!(listed["error"]["code"], json!(-32601), "{listed}");
    connection.close();
}

#[test]
fn a_prompt_under_the_id_of_one_still_running_is_refused_naming_the_id() {
    let mut connection = Connection::initialized(
        json!([support::bash_step(
            "call-1",
            "touch started; sleep 600",
            "Wait"
        )]),
        &["--no-ask"],
    );
    let first = connection.new_session(1);
    let second = connection.new_session(2);
    let prompt = |session: &str| {
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}})
        .to_string()
    };
    connection.send(&prompt(&first));
    let marker = connection.dir.path().join("started");
    let deadline = std::time::Instant::now() + ANSWER_WITHIN;
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the prompt ran no call"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        connection.ask(&prompt(&second)),
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32600, "message": "Invalid Request",
            "data": "request id 5 is already in use by a request still being answered"}})
    );
    // The first prompt's cancel entry is intact: `$/cancel_request` still stops it.
    connection.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}"#);
    assert_eq!(
        connection.receive(),
        json!({"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "cancelled"}})
    );
    connection.close();
}

#[test]
fn a_session_still_opening_at_the_end_of_input_is_answered_and_ended() {
    let dir = support::scratch();
    let mut child = unread_agent(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": dir.path().canonicalize().unwrap(), "mcpServers": []}});
    write!(
        stdin,
        "{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":1}}}}\n{new}\n"
    )
    .unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let answers: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    let session = answers[1]["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answers:?}"));
    let events = super::events(session);
    assert!(
        matches!(
            events.last().map(|record| &record.event),
            Some(agent_loop::SessionEvent::SessionEnd { .. })
        ),
        "the session was ended: {events:?}"
    );
}

#[test]
fn a_prompt_waiting_for_a_notices_turn_when_input_ends_is_cancelled_and_never_run() {
    let (mut connection, session) = during_a_notices_turn(5);
    let prompt = |id: u64, text: &str| prompt_line(&session, id, text);
    connection.send(&prompt(3, "Too late"));
    // Give the prompt time to be read and to wait for the notice's turn, then end the input.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let Connection {
        mut child,
        stdin,
        messages,
        ..
    } = connection;
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let answers: Vec<Value> = messages
        .iter()
        .filter(|message| message["method"] != json!("session/update"))
        .collect();
    assert_eq!(
        answers,
        vec![json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}})]
    );
    let events = super::events(&session);
    let prompted = events.iter().any(|record| {
        matches!(&record.event, agent_loop::SessionEvent::UserMessage { content } if content == "Too late")
    });
    assert!(
        !prompted,
        "the prompt began a turn after the input ended: {events:?}"
    );
    assert!(matches!(
        events.last().map(|record| &record.event),
        Some(agent_loop::SessionEvent::SessionEnd { .. })
    ));
}

/// A session whose background job's completion notice has opened a turn of its own, which runs
/// a command for `seconds`: the connection and the session's id, once that turn has begun.
fn during_a_notices_turn(seconds: u64) -> (Connection, String) {
    let mut connection = Connection::initialized(
        json!([
            {"toolCalls": [{"id": "call-1", "name": "bash",
                            "arguments": {"command": "echo job-output", "description": "Later",
                                          "run_in_background": true}}]},
            {"text": "Started."},
            // The turn the job's notice opens: long enough for the user's prompt to come
            // while it runs.
            {"toolCalls": [{"id": "call-2", "name": "bash",
                            "arguments": {"command": format!("touch notice-turn; sleep {seconds}"),
                                          "description": "Look at the job"}}]},
            {"text": "The job finished."},
            {"text": "Your answer."}
        ]),
        &["--no-ask"],
    );
    let session = connection.new_session(1);
    assert_eq!(
        connection.ask(&prompt_line(&session, 2, "Start a job")),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})
    );
    let marker = connection.dir.path().join("notice-turn");
    let deadline = std::time::Instant::now() + ANSWER_WITHIN;
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the notice opened no turn"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (connection, session)
}

/// A `session/prompt` of `text` for `session`, as a line.
fn prompt_line(session: &str, id: u64, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    .to_string()
}
