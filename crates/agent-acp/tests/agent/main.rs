//! The library driven as an editor drives it, over an in-memory duplex, with a scripted model
//! and one custom tool: `initialize`, `session/new`, a prompt whose tool call the editor is
//! asked about (allowed, then rejected), and a cancelled prompt.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_acp::{AcpAgent, EditorFileError, EditorFiles, SessionSetup, SessionTools};
use agent_loop::FsSessionStore;
use dsh_tools::prelude::*;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf};

/// Greet someone by name.
#[tool]
async fn greet(
    /// Who to greet.
    name: String,
) -> String {
    format!("Hello, {name}!")
}

/// The editor's end of the connection.
struct Editor {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: tokio::io::WriteHalf<DuplexStream>,
    next_id: u64,
    /// Everything the agent sent, in order.
    seen: Vec<Value>,
    _store: tempfile::TempDir,
    cwd: tempfile::TempDir,
    agent: tokio::task::JoinHandle<()>,
    /// The editor files the last session opened was given.
    files: Arc<Mutex<Option<EditorFiles>>>,
}

impl Editor {
    /// Serves `model` with the `greet` tool asked about, to a new editor.
    fn start(model: MockAdapter) -> Editor {
        let store = tempfile::tempdir().unwrap();
        let files = Arc::new(Mutex::new(None));
        let given = Arc::clone(&files);
        let sessions = move |setup: SessionSetup| {
            *given.lock().unwrap() = setup.editor_files;
            async move {
                let registry = ToolRegistry::new();
                registry
                    .register_tool(Greet)
                    .map_err(|e| agent_acp::OpenError::Internal(e.to_string()))?;
                Ok(SessionTools::new(registry))
            }
        };
        let agent = AcpAgent::new(
            Arc::new(model),
            Arc::new(FsSessionStore::new(store.path())),
            sessions,
        )
        .agent_info("greeter", "9.9.9")
        .ask_before("greet", "greeting is a big step");
        let (editor, served) = tokio::io::duplex(1 << 16);
        let (input, output) = tokio::io::split(served);
        let agent = tokio::spawn(agent.serve(input, output));
        let (reader, writer) = tokio::io::split(editor);
        Editor {
            lines: BufReader::new(reader).lines(),
            writer,
            next_id: 0,
            seen: Vec::new(),
            _store: store,
            cwd: tempfile::tempdir().unwrap(),
            agent,
            files,
        }
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends a request; its id.
    async fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The agent's next message.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("the agent said nothing for 20 s")
            .unwrap()
            .expect("the agent closed the connection");
        let message: Value = serde_json::from_str(&line).unwrap();
        self.seen.push(message.clone());
        message
    }

    /// Reads until the response to `id`, answering each permission request with the next of
    /// `answers`; the response.
    async fn response(&mut self, id: u64, answers: &mut Vec<&str>) -> Value {
        loop {
            let message = self.next().await;
            if message["id"] == json!(id) && message.get("method").is_none() {
                return message;
            }
            if message["method"] == json!("session/request_permission") {
                let option = answers.remove(0);
                self.send(json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}}}))
                    .await;
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id, &mut Vec::new()).await
    }

    async fn initialize(&mut self) -> Value {
        self.call("initialize", json!({"protocolVersion": 1})).await
    }

    async fn new_session(&mut self) -> String {
        let cwd = self.cwd.path().to_str().unwrap().to_owned();
        let opened = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        opened["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// Ends the input and waits for the agent to end its sessions.
    async fn close(mut self) {
        // The end of the agent's input (the stream's reading half stays open).
        self.writer.shutdown().await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), self.agent)
            .await
            .unwrap()
            .unwrap();
    }

    /// The messages seen of `method`.
    fn sent(&self, method: &str) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == json!(method))
            .collect()
    }
}

fn greet_call(id: &str) -> Step {
    Response::calls([ScriptedCall::json(id, "greet", json!({"name": "Ada"}))]).into()
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn initialize_comes_first_and_says_what_the_agent_does() {
    let mut editor = Editor::start(MockAdapter::new(Vec::<Step>::new()));
    let early = editor.call("session/new", json!({})).await;
    assert_eq!(
        early["error"]["code"],
        json!(agent_acp::rpc::INVALID_REQUEST)
    );
    let init = editor.initialize().await;
    assert_eq!(
        init["result"],
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "sessionCapabilities": {},
                "auth": {},
            },
            "authMethods": [],
            "agentInfo": {"name": "greeter", "title": "greeter", "version": "9.9.9"},
        })
    );
    let session = editor.new_session().await;
    assert!(!session.is_empty());
    editor.close().await;
}

#[tokio::test]
async fn a_tool_call_asks_the_editor_and_runs_only_when_allowed() {
    let model = MockAdapter::new([
        greet_call("c1"),
        Response::text("Greeted.").into(),
        greet_call("c2"),
        Response::text("Not greeted.").into(),
    ]);
    let mut editor = Editor::start(model);
    editor.initialize().await;
    let session = editor.new_session().await;

    let id = editor
        .request("session/prompt", prompt(&session, "greet Ada"))
        .await;
    let answer = editor.response(id, &mut vec!["allow-once"]).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let asked = editor.sent("session/request_permission");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["params"]["sessionId"], json!(session));
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], json!("c1"));
    let kinds: Vec<&Value> = asked[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["kind"])
        .collect();
    assert_eq!(
        kinds,
        [
            &json!("allow_once"),
            &json!("allow_always"),
            &json!("reject_once")
        ]
    );
    let completed = updates_of(&editor, "c1");
    assert_eq!(completed.last().unwrap()["status"], json!("completed"));
    assert!(
        completed.last().unwrap()["content"]
            .to_string()
            .contains("Hello, Ada!")
    );

    let id = editor
        .request("session/prompt", prompt(&session, "greet Ada again"))
        .await;
    let answer = editor.response(id, &mut vec!["reject"]).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let rejected = updates_of(&editor, "c2");
    let last = rejected.last().unwrap();
    assert_eq!(last["status"], json!("failed"));
    assert!(
        last["content"]
            .to_string()
            .contains("the user rejected this call")
    );
    editor.close().await;
}

/// The `session/update`s about call `id`.
fn updates_of<'a>(editor: &'a Editor, id: &str) -> Vec<&'a Value> {
    editor
        .sent("session/update")
        .into_iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == json!(id))
        .collect()
}

#[tokio::test]
async fn a_session_grant_stops_the_questions_about_its_tool() {
    let model = MockAdapter::new([
        greet_call("c1"),
        greet_call("c2"),
        Response::text("Twice.").into(),
    ]);
    let mut editor = Editor::start(model);
    editor.initialize().await;
    let session = editor.new_session().await;
    let id = editor
        .request("session/prompt", prompt(&session, "greet twice"))
        .await;
    let answer = editor.response(id, &mut vec!["allow-always"]).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(editor.sent("session/request_permission").len(), 1);
    assert_eq!(
        updates_of(&editor, "c2").last().unwrap()["status"],
        json!("completed")
    );
    editor.close().await;
}

#[tokio::test]
async fn session_cancel_and_cancel_request_stop_a_running_prompt() {
    let model = MockAdapter::new([Step::Hang, Step::Hang]);
    let mut editor = Editor::start(model);
    editor.initialize().await;
    let session = editor.new_session().await;
    for cancel in [
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 4}}),
    ] {
        let id = editor
            .request("session/prompt", prompt(&session, "wait"))
            .await;
        if cancel["method"] == json!("$/cancel_request") {
            assert_eq!(id, 4, "the cancel names this prompt");
        }
        // The model is asked (the turn runs) before the cancel is sent.
        tokio::time::sleep(Duration::from_millis(100)).await;
        editor.send(cancel).await;
        let answer = editor.response(id, &mut Vec::new()).await;
        assert_eq!(answer["result"], json!({"stopReason": "cancelled"}));
    }
    editor.close().await;
}

/// `initialize` with the client's `fs` capabilities.
fn initialize_with_fs(read: bool, write: bool) -> Value {
    json!({"protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": read, "writeTextFile": write}}})
}

#[tokio::test]
async fn the_editors_files_are_read_and_written_through_it_when_it_offers_them() {
    let mut editor = Editor::start(MockAdapter::new(Vec::<Step>::new()));
    editor
        .call("initialize", initialize_with_fs(true, true))
        .await;
    let session = editor.new_session().await;
    let files = editor.files.lock().unwrap().clone().expect("offered");
    assert!(files.can_read() && files.can_write());
    let path = editor.cwd.path().join("notes.txt");
    let wire_path = json!(path.to_str().unwrap());

    let reading = tokio::spawn({
        let (files, path) = (files.clone(), path.clone());
        async move { files.read_text_file(&path).await }
    });
    let asked = editor.next().await;
    assert_eq!(asked["method"], json!("fs/read_text_file"));
    assert_eq!(
        asked["params"],
        json!({"sessionId": session, "path": wire_path})
    );
    editor
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": "unsaved\n"}}))
        .await;
    assert_eq!(reading.await.unwrap().unwrap(), "unsaved\n");

    let writing = tokio::spawn({
        let (files, path) = (files.clone(), path.clone());
        async move { files.write_text_file(&path, "new text").await }
    });
    let asked = editor.next().await;
    assert_eq!(asked["method"], json!("fs/write_text_file"));
    assert_eq!(
        asked["params"],
        json!({"sessionId": session, "path": wire_path, "content": "new text"})
    );
    editor
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": null}))
        .await;
    writing.await.unwrap().unwrap();

    // The editor's error reaches the caller with its message; an answer without text is one.
    for answer in [
        json!({"error": {"code": -32603, "message": "no buffer for it"}}),
        json!({"result": {"content": 7}}),
    ] {
        let reading = tokio::spawn({
            let (files, path) = (files.clone(), path.clone());
            async move { files.read_text_file(&path).await }
        });
        let asked = editor.next().await;
        let mut reply = answer.clone();
        reply["jsonrpc"] = json!("2.0");
        reply["id"] = asked["id"].clone();
        editor.send(reply).await;
        let error = reading.await.unwrap().unwrap_err();
        match error {
            EditorFileError::Editor { message, .. } => assert_eq!(message, "no buffer for it"),
            EditorFileError::Malformed(named) => assert_eq!(named, path),
            other => panic!("unexpected: {other:?}"),
        }
    }
    // A relative path is refused before anything is asked.
    let relative = files
        .read_text_file(std::path::Path::new("notes.txt"))
        .await;
    assert!(
        matches!(relative, Err(EditorFileError::Relative(_))),
        "{relative:?}"
    );
    let seen = editor.seen.clone();
    editor.close().await;
    assert_eq!(
        editor_requests(&seen),
        4,
        "a read, a write, two failed reads"
    );
}

/// How many file requests the agent sent.
fn editor_requests(seen: &[Value]) -> usize {
    seen.iter()
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|method| method.starts_with("fs/"))
        })
        .count()
}

#[tokio::test]
async fn what_the_editor_does_not_offer_is_never_asked() {
    let mut editor = Editor::start(MockAdapter::new(Vec::<Step>::new()));
    editor.initialize().await;
    editor.new_session().await;
    assert!(editor.files.lock().unwrap().is_none(), "nothing offered");

    let mut editor = Editor::start(MockAdapter::new(Vec::<Step>::new()));
    editor
        .call("initialize", initialize_with_fs(true, false))
        .await;
    editor.new_session().await;
    let files = editor
        .files
        .lock()
        .unwrap()
        .clone()
        .expect("reading offered");
    assert!(files.can_read() && !files.can_write());
    let path = editor.cwd.path().join("notes.txt");
    let refused = files.write_text_file(&path, "x").await;
    assert!(
        matches!(
            refused,
            Err(EditorFileError::NotOffered("fs/write_text_file"))
        ),
        "{refused:?}"
    );
    let seen = editor.seen.clone();
    editor.close().await;
    assert_eq!(editor_requests(&seen), 0);
}
