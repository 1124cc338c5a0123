//! Hostile servers written by hand: raw JSON-RPC lines over an in-memory pipe, for what an rmcp
//! server cannot be made to send — a line over the size limit, a result or a tool schema
//! nested past the depth limit, a deep message without an id, tool names that collide once
//! cleaned, and tools without annotations.

use super::{failure, support};
use dsh_tools::{FailureCode, ToolRegistry};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tool_mcp::{
    Connector, MAX_MESSAGE_BYTES, MAX_MESSAGE_DEPTH, MAX_MESSAGE_VALUES, McpOptions, McpServers,
    ServerState, StreamConnection,
};

/// A server that lists `tools` (a JSON array, as text) and answers calls as [`answer`] says.
struct Hostile {
    tools: String,
}

impl Connector for Hostile {
    fn connect(&self) -> BoxFuture<'static, std::io::Result<StreamConnection>> {
        // One message a line: the list as written spans several.
        let tools = self.tools.replace('\n', " ");
        Box::pin(async move {
            let (client, server) = tokio::io::duplex(1 << 16);
            tokio::spawn(serve(server, tools));
            let (reader, writer) = tokio::io::split(client);
            Ok(StreamConnection::new(reader, writer))
        })
    }

    fn describe(&self) -> String {
        String::from("the hand-written hostile server")
    }
}

/// Answers until the client closes its end of the pipe.
async fn serve(stream: DuplexStream, tools: String) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = serde_json::from_str(&line).unwrap();
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let line = match message["method"].as_str().unwrap_or_default() {
            "initialize" => response(
                &id,
                &json!({
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "0"}
                })
                .to_string(),
            ),
            "tools/list" => response(&id, &format!(r#"{{"tools":{tools}}}"#)),
            "tools/call" => match answer(&id, message["params"]["name"].as_str().unwrap()) {
                Some(line) => line,
                None => continue,
            },
            _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
                .to_string(),
        };
        if write.write_all(line.as_bytes()).await.is_err() || write.write_all(b"\n").await.is_err()
        {
            return;
        }
    }
}

fn response(id: &Value, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// `levels` objects nested in one another around `1`.
fn nested(levels: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(levels), "}".repeat(levels))
}

/// The line a call of `name` is answered with; `None`: never answered.
fn answer(id: &Value, name: &str) -> Option<String> {
    let text = |text: &str| {
        response(
            id,
            &json!({"content": [{"type": "text", "text": text}]}).to_string(),
        )
    };
    Some(match name {
        // One byte over the limit, counted without the newline.
        "huge" => {
            let envelope = text("").len();
            text(&"x".repeat(MAX_MESSAGE_BYTES + 1 - envelope))
        }
        // A valid result whose message nests `levels` deep: the message, `result`, then the
        // structured content's objects.
        "deep" => response(
            id,
            &format!(r#"{{"content":[],"structuredContent":{}}}"#, nested(198)),
        ),
        "deepest_allowed" => response(
            id,
            &format!(
                r#"{{"content":[{{"type":"text","text":"deep"}}],"structuredContent":{}}}"#,
                nested(MAX_MESSAGE_DEPTH - 2)
            ),
        ),
        // A deep message without an id, and no answer: nothing says which call it is.
        "anonymous" => format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":{}}}}}"#,
            nested(300)
        ),
        // A result of exactly the most values a message may hold: the message, its version,
        // id and result, the content, the structured content and its array: 7, and the zeros.
        "most_values" => response(
            id,
            &format!(
                r#"{{"content":[],"structuredContent":{{"v":[{}0]}}}}"#,
                "0,".repeat(MAX_MESSAGE_VALUES - 8)
            ),
        ),
        // A result within the size and depth limits that holds millions of JSON values.
        "many" => response(
            id,
            &format!(
                r#"{{"content":[],"structuredContent":{{"v":{}}}}}"#,
                zeros()
            ),
        ),
        other => text(&format!("called {other}")),
    })
}

/// `[0,0,…,0]`, almost as long as a message may be: millions of JSON values.
fn zeros() -> String {
    let elements = (MAX_MESSAGE_BYTES - 4096) / 2;
    format!("[{}0]", "0,".repeat(elements - 1))
}

fn options() -> McpOptions {
    let mut options = McpOptions::default();
    // Far beyond what a failure that is reported at once takes.
    options.call_timeout = Some(Duration::from_secs(60));
    options.connect_timeout = Duration::from_secs(60);
    options.restart.initial_delay = Duration::from_millis(50);
    options
}

/// What "at once" means here: far below the call and start timeouts of a minute.
const AT_ONCE: Duration = Duration::from_secs(10);

async fn start(tools: &str) -> (ToolRegistry, McpServers) {
    let registry = ToolRegistry::new();
    let servers = McpServers::new(registry.global_scope(), options()).unwrap();
    let started = servers
        .add_connector(
            "hostile",
            Arc::new(Hostile {
                tools: tools.to_owned(),
            }),
        )
        .unwrap();
    tokio::time::timeout(AT_ONCE, started)
        .await
        .expect("the start waited for its timeout");
    (registry, servers)
}

const CALLS: &str = r#"[
    {"name": "huge", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
    {"name": "deep", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
    {"name": "deepest_allowed", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
    {"name": "anonymous", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
    {"name": "most_values", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
    {"name": "many", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
    {"name": "ok", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}}
]"#;

/// Calls `name` and checks that it failed at once with `MCP_MALFORMED_RESULT`; the message.
async fn fails_at_once(registry: &ToolRegistry, name: &str) -> String {
    let began = Instant::now();
    let result = support::call(registry, name, "{}").await;
    let took = began.elapsed();
    assert!(took < AT_ONCE, "{name} took {took:?}: {result:?}");
    let (code, message) = failure(&result);
    assert_eq!(code, FailureCode::ToolError, "{result:?}");
    assert!(message.starts_with("MCP_MALFORMED_RESULT: "), "{message}");
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_line_over_the_size_limit_fails_its_call_at_once() {
    let (registry, servers) = start(CALLS).await;
    let message = fails_at_once(&registry, "mcp__hostile__huge").await;
    assert_eq!(
        message,
        format!(
            "MCP_MALFORMED_RESULT: the MCP server `hostile` answered with a message over the \
             {MAX_MESSAGE_BYTES}-byte (16 MiB) limit of one message"
        )
    );
    // The server's other answers still arrive: only that call failed.
    let ok = support::call(&registry, "mcp__hostile__ok", "{}").await;
    assert!(!ok.is_error, "{ok:?}");
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_nested_past_the_depth_limit_fails_its_call_at_once() {
    let (registry, servers) = start(CALLS).await;
    let message = fails_at_once(&registry, "mcp__hostile__deep").await;
    assert_eq!(
        message,
        format!(
            "MCP_MALFORMED_RESULT: the MCP server `hostile` answered with a message that nests \
             deeper than the {MAX_MESSAGE_DEPTH} levels one message may nest"
        )
    );
    // A result as deep as the limit allows is delivered.
    let deepest = support::call(&registry, "mcp__hostile__deepest_allowed", "{}").await;
    assert!(!deepest.is_error, "{deepest:?}");
    assert_eq!(
        **deepest.value.as_ref().unwrap(),
        json!({"text": "deep", "isError": false})
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_message_without_an_id_breaks_the_connection_and_fails_the_calls_at_once() {
    let (registry, servers) = start(CALLS).await;
    let message = fails_at_once(&registry, "mcp__hostile__anonymous").await;
    assert_eq!(
        message,
        format!(
            "MCP_MALFORMED_RESULT: the MCP server `hostile` sent a message that nests deeper \
             than the {MAX_MESSAGE_DEPTH} levels one message may nest, and no id says which \
             call it answers; the connection is closed and the server restarted"
        )
    );
    let status = tokio::time::timeout(AT_ONCE, servers.wait_connected("hostile", 1))
        .await
        .expect("the server was not restarted")
        .unwrap();
    assert_eq!(status.state, ServerState::Connected);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_schema_nests_past_the_depth_limit_is_refused_alone() {
    let deep_schema = format!(
        r#"{}{{}}{}"#,
        r#"{"type":"object","properties":{"a":"#.repeat(150),
        "}}".repeat(150)
    );
    let tools = format!(
        r#"[{{"name": "first", "annotations": {{"readOnlyHint": true}}, "inputSchema": {{"type": "object"}}}},
            {{"name": "deep", "inputSchema": {deep_schema}}},
            {{"name": "last", "annotations": {{"readOnlyHint": true}}, "inputSchema": {{"type": "object"}}}}]"#
    );
    let (registry, servers) = start(&tools).await;
    let status = servers.server_status("hostile").unwrap();
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.tools, ["mcp__hostile__first", "mcp__hostile__last"]);
    assert_eq!(
        status.rejected,
        [(
            String::from("deep"),
            format!(
                "its definition nests deeper than the {MAX_MESSAGE_DEPTH} levels one MCP \
                 message may nest"
            )
        )]
    );
    let last = support::call(&registry, "mcp__hostile__last", "{}").await;
    assert_eq!(
        **last.value.as_ref().unwrap(),
        json!({"text": "called last", "isError": false})
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_collide_once_cleaned_keep_the_first_and_refuse_the_other() {
    let tools = r#"[
        {"name": "a.b", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
        {"name": "a_b", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}},
        {"name": "c", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}}
    ]"#;
    let (registry, servers) = start(tools).await;
    let status = servers.server_status("hostile").unwrap();
    assert_eq!(status.tools, ["mcp__hostile__a_b", "mcp__hostile__c"]);
    assert_eq!(
        status.rejected,
        [(
            String::from("a_b"),
            String::from(
                "its registered name `mcp__hostile__a_b` is also the name of the tool `a.b`, \
                 which the server lists first"
            )
        )]
    );
    let kept = support::call(&registry, "mcp__hostile__a_b", "{}").await;
    assert_eq!(
        **kept.value.as_ref().unwrap(),
        json!({"text": "called a.b", "isError": false})
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_not_annotated_read_only_or_non_destructive_asks_first() {
    let tools = r#"[
        {"name": "plain", "inputSchema": {"type": "object"}},
        {"name": "writes", "annotations": {"readOnlyHint": false}, "inputSchema": {"type": "object"}},
        {"name": "wipe", "annotations": {"destructiveHint": true}, "inputSchema": {"type": "object"}},
        {"name": "reads", "annotations": {"readOnlyHint": true, "destructiveHint": true}, "inputSchema": {"type": "object"}},
        {"name": "adds", "annotations": {"destructiveHint": false}, "inputSchema": {"type": "object"}}
    ]"#;
    let (registry, servers) = start(tools).await;
    let mut outcomes = Vec::new();
    for tool in ["plain", "writes", "wipe", "reads", "adds"] {
        let result = support::call(&registry, &format!("mcp__hostile__{tool}"), "{}").await;
        outcomes.push(match &result.error {
            Some(error) => format!("{tool}: {:?}: {}", error.code, error.message),
            None => format!("{tool}: ran"),
        });
    }
    // A call without an agent cannot be asked about: a tool that asks is denied.
    assert_eq!(
        outcomes,
        [
            String::from(
                "plain: Denied: the MCP server does not mark `mcp__hostile__plain` read-only or \
                 non-destructive, so it counts as destructive; the call has no agent to ask for approval"
            ),
            String::from(
                "writes: Denied: the MCP server does not mark `mcp__hostile__writes` read-only or \
                 non-destructive, so it counts as destructive; the call has no agent to ask for approval"
            ),
            String::from(
                "wipe: Denied: the MCP server marks `mcp__hostile__wipe` as destructive; the call \
                 has no agent to ask for approval"
            ),
            String::from("reads: ran"),
            String::from("adds: ran"),
        ]
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_the_value_limit_fails_its_call_at_once_without_being_parsed() {
    let (registry, servers) = start(CALLS).await;
    let message = fails_at_once(&registry, "mcp__hostile__many").await;
    assert_eq!(
        message,
        format!(
            "MCP_MALFORMED_RESULT: the MCP server `hostile` answered with a message of more \
             than the {MAX_MESSAGE_VALUES} JSON values one message may hold"
        )
    );
    let ok = support::call(&registry, "mcp__hostile__ok", "{}").await;
    assert!(!ok.is_error, "{ok:?}");
    servers.shutdown().await;
    // A tool list of millions of values: the start ends at once, with no tools.
    let wide = zeros();
    let registry = ToolRegistry::new();
    let servers = McpServers::new(registry.global_scope(), options()).unwrap();
    let started = servers
        .add_connector("wide", Arc::new(Hostile { tools: wide }))
        .unwrap();
    tokio::time::timeout(AT_ONCE, started)
        .await
        .expect("the start waited for its timeout");
    // The list failed as a whole (its answer stood in by an error naming the limit): no tool
    // of it is registered.
    let status = servers.server_status("wide").unwrap();
    assert_eq!(status.tools, Vec::<String>::new(), "{status:?}");
    // And the status says why, for the host to show.
    let listing = status.listing.clone().unwrap_or_default();
    assert!(
        listing.contains(&format!("{MAX_MESSAGE_VALUES} JSON values")),
        "{status:?}"
    );
    servers.shutdown().await;
    dsh_test_support::report_peak_rss();
}

#[test]
fn reading_messages_of_millions_of_values_costs_little_memory() {
    // Each 16 MiB message is held about twice (the server's copy, the client's line); a
    // scan that kept a record of each value, or a parse of them, would take gigabytes.
    let peak = dsh_test_support::peak_rss_of_test(
        "faults::hostile::a_message_past_the_value_limit_fails_its_call_at_once_without_being_parsed",
    );
    assert!(peak < 200 << 20, "peak resident memory {} MiB", peak >> 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_of_the_most_values_allowed_is_delivered() {
    let (registry, servers) = start(CALLS).await;
    let result = support::call(&registry, "mcp__hostile__most_values", "{}").await;
    assert!(!result.is_error, "{:?}", result.error);
    // Without an output schema the value is the (empty) content.
    assert_eq!(
        **result.value.as_ref().unwrap(),
        json!({"text": "", "isError": false})
    );
    servers.shutdown().await;
    dsh_test_support::report_peak_rss();
}

#[test]
fn a_message_of_the_most_values_allowed_costs_a_bounded_memory() {
    // What the value limit bounds: the parse's tree of a million values (about 120 MiB).
    let peak = dsh_test_support::peak_rss_of_test(
        "faults::hostile::a_message_of_the_most_values_allowed_is_delivered",
    );
    assert!(peak < 200 << 20, "peak resident memory {} MiB", peak >> 20);
}
