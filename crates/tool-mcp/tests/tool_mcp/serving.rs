//! The server role (the `server` feature): a registry of one typed tool served over an
//! in-memory duplex with `serve_streams`, driven by rmcp's client (the listing, a call in the
//! served session, a validation error, the registry's policy, a cancelled call) and by raw
//! lines (JSON-RPC's errors, the size and value limits, an id in use, the requests in flight).

use dsh_tools::prelude::*;
use pretty_assertions::assert_eq;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tool_mcp::{
    MAX_CLIENT_MESSAGE_BYTES, MAX_CLIENT_MESSAGE_VALUES, MAX_REQUESTS_IN_FLIGHT, ServeError,
    ServeOptions, serve_streams,
};

/// The arguments of [`Sum`].
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SumArgs {
    /// The numbers to add.
    numbers: Vec<i64>,
    /// Wait until the call is cancelled, or released by the test, before answering.
    #[serde(default)]
    wait: bool,
}

/// What [`Sum`] answers: the total, and the session the call ran in.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Total {
    total: i64,
    session: String,
    cwd: String,
}

/// What [`Sum`] tells the test.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A waiting call started.
    Waiting,
    /// A waiting call's signal was cancelled.
    Cancelled,
}

/// The served tool: adds numbers, after waiting for its call's cancellation (which fails
/// it) or for the test's release when asked to wait.
struct Sum {
    seen: mpsc::UnboundedSender<Seen>,
    release: Arc<Notify>,
}

impl Tool for Sum {
    type Args = SumArgs;
    type Output = Total;

    fn name(&self) -> &str {
        "sum"
    }

    fn description(&self) -> &str {
        "Add numbers."
    }

    async fn execute(&self, args: SumArgs, exec: ExecContext) -> Result<Total, ToolError> {
        if args.wait {
            let _ = self.seen.send(Seen::Waiting);
            tokio::select! {
                () = exec.signal().cancelled() => {
                    let _ = self.seen.send(Seen::Cancelled);
                    return Err(ToolError::failed("cancelled"));
                }
                () = self.release.notified() => {}
            }
        }
        let agent = exec.agent();
        Ok(Total {
            total: args.numbers.iter().sum(),
            session: agent.map(|a| a.session_id().to_owned()).unwrap_or_default(),
            cwd: agent
                .and_then(|a| a.cwd())
                .map(|cwd| cwd.display().to_string())
                .unwrap_or_default(),
        })
    }

    fn render(&self, _args: &SumArgs, value: &Total) -> Vec<ContentBlock> {
        vec![ContentBlock::text(format!("The sum is {}.", value.total))]
    }
}

/// The served end: the server's task, and what its tool saw.
struct Served {
    server: JoinHandle<Result<(), ServeError>>,
    seen: mpsc::UnboundedReceiver<Seen>,
    /// Lets one waiting call answer.
    release: Arc<Notify>,
}

impl Served {
    /// The next thing the tool saw (within 10 s).
    async fn seen(&mut self) -> Seen {
        tokio::time::timeout(Duration::from_secs(10), self.seen.recv())
            .await
            .expect("the tool saw nothing in 10 s")
            .unwrap()
    }

    /// The server's end once its input has ended (within 10 s).
    async fn ended(self) -> Result<(), ServeError> {
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("the server did not end in 10 s")
            .unwrap()
    }
}

/// Serves a registry holding [`Sum`] on one end of an in-memory duplex; the other end is the
/// client's.
fn serve() -> (Served, DuplexStream) {
    serve_with(|_| {})
}

/// The same, with the registry set up by `host` first (its policy, say).
fn serve_with(host: impl FnOnce(&ToolRegistry)) -> (Served, DuplexStream) {
    let (sender, seen) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let registry = ToolRegistry::new();
    registry
        .register_tool(Sum {
            seen: sender,
            release: Arc::clone(&release),
        })
        .unwrap();
    host(&registry);
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (input, output) = tokio::io::split(server);
    let options = ServeOptions::new("test-host", "9.9.9").with_cwd("/srv/served");
    let server = tokio::spawn(serve_streams(registry, input, output, options));
    (
        Served {
            server,
            seen,
            release,
        },
        client,
    )
}

async fn client(stream: DuplexStream) -> RunningService<RoleClient, ()> {
    ().serve(stream).await.unwrap()
}

fn sum(arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object: {arguments}")
    };
    CallToolRequestParams::new("sum").with_arguments(arguments)
}

#[tokio::test]
async fn the_registrys_tool_is_listed_with_its_schemas_and_called_in_the_served_session() {
    let (served, stream) = serve();
    let client = client(stream).await;
    let info = client.peer_info().unwrap().server_info.clone().unwrap();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("test-host", "9.9.9")
    );
    let tools = serde_json::to_value(client.list_all_tools().await.unwrap()).unwrap();
    assert_eq!(
        tools,
        json!([{
            "name": "sum",
            "description": "Add numbers.",
            "inputSchema": {
                "type": "object",
                "description": "The arguments of [`Sum`].",
                "properties": {
                    "numbers": {"type": "array", "items": {"type": "integer"},
                                "description": "The numbers to add."},
                    "wait": {"type": "boolean", "default": false,
                             "description":
                                 "Wait until the call is cancelled, or released by the test, before answering."}
                },
                "required": ["numbers"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "description": "What [`Sum`] answers: the total, and the session the call ran in.",
                "additionalProperties": true,
                "properties": {
                    "total": {"type": "integer"},
                    "session": {"type": "string"},
                    "cwd": {"type": "string"}
                },
                "required": ["cwd", "session", "total"]
            }
        }])
    );
    let called = client
        .call_tool(sum(json!({"numbers": [1, 2, 3]})))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(called).unwrap(),
        json!({
            "content": [{"type": "text", "text": "The sum is 6."}],
            "isError": false,
            "structuredContent": {"total": 6, "session": "mcp", "cwd": "/srv/served"}
        })
    );
    client.cancel().await.unwrap();
    served.ended().await.unwrap();
}

#[tokio::test]
async fn arguments_the_schema_refuses_are_a_tool_error_and_the_tool_never_runs() {
    let (mut served, stream) = serve();
    let client = client(stream).await;
    let refused = client
        .call_tool(sum(json!({"numbers": "1, 2", "wait": true})))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(refused).unwrap(),
        json!({"content": [{"type": "text",
                          "text": "Error: invalid arguments: /numbers: expected array, got string"}],
               "isError": true})
    );
    // `wait: true` was never acted on: the body did not run.
    assert!(served.seen.try_recv().is_err());
    client.cancel().await.unwrap();
    served.ended().await.unwrap();
}

#[tokio::test]
async fn a_call_the_client_cancels_has_its_signal_cancelled_and_the_connection_goes_on() {
    let (mut served, stream) = serve();
    let client = client(stream).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(sum(
        json!({"numbers": [], "wait": true}),
    )));
    let waiting = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    assert_eq!(served.seen().await, Seen::Waiting);
    waiting
        .cancel(Some("the user stopped".into()))
        .await
        .unwrap();
    assert_eq!(served.seen().await, Seen::Cancelled);
    let called = client
        .call_tool(sum(json!({"numbers": [4]})))
        .await
        .unwrap();
    assert_eq!(
        called.structured_content,
        Some(json!({"total": 4, "session": "mcp", "cwd": "/srv/served"}))
    );
    client.cancel().await.unwrap();
    served.ended().await.unwrap();
}

#[tokio::test]
async fn the_registrys_policy_decides_a_served_call_as_any_other() {
    let (mut served, stream) = serve_with(|registry| {
        // Kept until disposed: the registry's for its life.
        let _guard = registry
            .global_scope()
            .guard(|execution| {
                let numbers = execution.args().map(|args| args["numbers"].clone());
                let unlucky = numbers
                    .as_ref()
                    .and_then(Value::as_array)
                    .is_some_and(|n| n.contains(&json!(13)));
                unlucky.then(|| String::from("the host refuses 13"))
            })
            .unwrap();
    });
    let client = client(stream).await;
    let refused = client
        .call_tool(sum(json!({"numbers": [13], "wait": true})))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(refused).unwrap(),
        json!({"content": [{"type": "text", "text": "Error: the host refuses 13"}], "isError": true})
    );
    assert!(served.seen.try_recv().is_err(), "the body did not run");
    let allowed = client
        .call_tool(sum(json!({"numbers": [12]})))
        .await
        .unwrap();
    assert_eq!(allowed.is_error, Some(false));
    client.cancel().await.unwrap();
    served.ended().await.unwrap();
}

/// The client's end spoken to by hand, one line at a time.
struct Raw {
    input: WriteHalf<DuplexStream>,
    answers: Lines<BufReader<ReadHalf<DuplexStream>>>,
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hand","version":"1"}}}"#;

impl Raw {
    /// A connection past `initialize`.
    async fn start(stream: DuplexStream) -> Raw {
        let (answers, input) = tokio::io::split(stream);
        let mut raw = Raw {
            input,
            answers: BufReader::new(answers).lines(),
        };
        assert_eq!(raw.ask(INITIALIZE).await["id"], json!(0));
        raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw
    }

    async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.unwrap();
        self.input.write_all(b"\n").await.unwrap();
        self.input.flush().await.unwrap();
    }

    /// The next answer, or `None` when none comes within `wait`.
    async fn answer_within(&mut self, wait: Duration) -> Option<Value> {
        let line = tokio::time::timeout(wait, self.answers.next_line())
            .await
            .ok()?;
        Some(serde_json::from_str(&line.unwrap().unwrap()).unwrap())
    }

    async fn answer(&mut self) -> Value {
        self.answer_within(Duration::from_secs(10))
            .await
            .expect("no answer in 10 s")
    }

    async fn ask(&mut self, line: &str) -> Value {
        self.send(line).await;
        self.answer().await
    }
}

fn refused(id: Value, code: i64, message: &str, data: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

fn wait_call(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "sum", "arguments": {"numbers": [], "wait": true}}})
    .to_string()
}

fn cancel(id: u64) -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
        .to_string()
}

#[tokio::test]
async fn bad_input_is_answered_as_json_rpc_says_and_the_connection_goes_on() {
    let (served, stream) = serve();
    let mut raw = Raw::start(stream).await;
    for (line, id, code, message) in [
        ("{not json", Value::Null, -32700, "Parse error"),
        ("[]", Value::Null, -32600, "Invalid Request"),
        (
            r#"{"jsonrpc":"1.0","id":"eight","method":"tools/list"}"#,
            json!("eight"),
            -32600,
            "Invalid Request",
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}"#,
            json!(9),
            -32602,
            "Invalid params",
        ),
    ] {
        let mut answer = raw.ask(line).await;
        assert!(answer["error"]["data"].is_string(), "{answer}");
        answer["error"].as_object_mut().unwrap().remove("data");
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
            "{line}"
        );
    }
    assert_eq!(
        raw.ask("\u{feff}{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}")
            .await,
        json!({"jsonrpc": "2.0", "id": 10, "result": {}})
    );
    drop(raw);
    served.ended().await.unwrap();
}

#[tokio::test]
async fn a_message_is_read_up_to_its_byte_limit_and_a_longer_one_discarded_unread() {
    let (served, stream) = serve();
    let mut raw = Raw::start(stream).await;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    // Exactly the limit, newline included: answered.
    let padded = format!(
        "{ping}{}",
        " ".repeat(MAX_CLIENT_MESSAGE_BYTES - 1 - ping.len())
    );
    assert_eq!(
        raw.ask(&padded).await,
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
    // One byte more: discarded, and answered without an id, which was not read.
    assert_eq!(
        raw.ask(&format!("{padded} ")).await,
        refused(
            Value::Null,
            -32600,
            "Invalid Request",
            "a message longer than 16777216 bytes (16 MiB) was discarded"
        )
    );
    assert_eq!(
        raw.ask(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await,
        json!({"jsonrpc": "2.0", "id": 2, "result": {}})
    );
    drop(raw);
    served.ended().await.unwrap();
}

#[tokio::test]
async fn a_message_of_too_many_values_is_refused_with_its_id_and_one_within_them_served() {
    let (served, stream) = serve();
    let mut raw = Raw::start(stream).await;
    let call = |id: u64, numbers: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "sum", "arguments": {"numbers": vec![1; numbers]}}})
        .to_string()
    };
    assert_eq!(
        raw.ask(&call(3, MAX_CLIENT_MESSAGE_VALUES)).await,
        refused(
            json!(3),
            -32600,
            "Invalid Request",
            "too many values: a message holds at most 100000 JSON values"
        )
    );
    let half = MAX_CLIENT_MESSAGE_VALUES / 2;
    let served_call = raw.ask(&call(4, half)).await;
    assert_eq!(
        served_call["result"]["structuredContent"]["total"],
        json!(half),
        "{served_call:.300}"
    );
    drop(raw);
    served.ended().await.unwrap();
}

#[tokio::test]
async fn a_request_under_the_id_of_one_unanswered_is_refused_until_that_one_ends() {
    let (mut served, stream) = serve();
    let mut raw = Raw::start(stream).await;
    raw.send(&wait_call(7)).await;
    assert_eq!(served.seen().await, Seen::Waiting);
    assert_eq!(
        raw.ask(&wait_call(7)).await,
        refused(
            json!(7),
            -32600,
            "Invalid Request",
            "request id 7 is already in use by a request still being answered"
        )
    );
    // Cancelled, the call is not answered (rmcp drops the answer), and its id is free again.
    raw.send(&cancel(7)).await;
    assert_eq!(served.seen().await, Seen::Cancelled);
    assert_eq!(
        raw.ask(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).await,
        json!({"jsonrpc": "2.0", "id": 7, "result": {}})
    );
    drop(raw);
    served.ended().await.unwrap();
}

#[tokio::test]
async fn past_the_requests_in_flight_the_next_is_read_only_once_one_is_answered() {
    let (mut served, stream) = serve();
    let mut raw = Raw::start(stream).await;
    let busy = u64::try_from(MAX_REQUESTS_IN_FLIGHT).unwrap();
    // A cancel read before the next request frees its request's place at once.
    raw.send(&wait_call(0)).await;
    assert_eq!(served.seen().await, Seen::Waiting);
    raw.send(&cancel(0)).await;
    assert_eq!(served.seen().await, Seen::Cancelled);
    for id in 1..=busy {
        raw.send(&wait_call(id)).await;
        assert_eq!(served.seen().await, Seen::Waiting);
    }
    raw.send(r#"{"jsonrpc":"2.0","id":"next","method":"ping"}"#)
        .await;
    assert_eq!(
        raw.answer_within(Duration::from_millis(300)).await,
        None,
        "a request past the limit is held"
    );
    served.release.notify_one();
    let mut answered = vec![
        raw.answer().await["id"].clone(),
        raw.answer().await["id"].clone(),
    ];
    answered.sort_by_key(Value::is_string);
    assert!(
        answered[0].is_u64(),
        "a waiting call answered: {answered:?}"
    );
    assert_eq!(answered[1], json!("next"));
    // The others are cancelled, or the end of the input would wait for them.
    for id in 1..=busy {
        if Some(id) != answered[0].as_u64() {
            raw.send(&cancel(id)).await;
            assert_eq!(served.seen().await, Seen::Cancelled);
        }
    }
    drop(raw);
    served.ended().await.unwrap();
}
