//! Fault injection with an in-process rmcp server over an in-memory pipe: a crash mid-call, a
//! hang (during a call, and during a reload of the tool list), a server that never lists its
//! tools, a malformed result, a schema that does not compile, an output schema with references,
//! and a destructive tool; `hostile` has the hand-written servers that break the limits.

mod hostile;

use crate::support;

use dsh_tools::{
    AgentGone, AgentHandle, AgentRef, FailureCode, InjectedContext, ToolCall, ToolRegistry,
    ToolsChange, ToolsChangeKind,
};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tool_mcp::{Connector, McpOptions, McpServers, ServerState, StreamConnection};

/// The test server: one instance per connection.
#[derive(Clone, Default)]
struct Faulty {
    /// Set by `hang`: from then on the server answers nothing, `tools/list` included.
    hung: Arc<AtomicBool>,
    /// Fired by `crash`: the connection's server task drops the connection.
    crash: Arc<tokio::sync::Notify>,
    /// Fired when a `wait` call arrives, and when it is cancelled by the client.
    signals: Signals,
    /// Whether the server crashes on `tools/list`.
    crash_on_list: bool,
}

/// What the test sees of `wait` calls, shared by every connection.
#[derive(Clone, Default)]
struct Signals {
    arrived: Arc<tokio::sync::Notify>,
    cancelled: Arc<tokio::sync::Notify>,
    /// Fired when a `tools/list` arrives after `hang` or `stall` and will never be answered.
    listing_stalled: Arc<tokio::sync::Notify>,
}

fn tools() -> ListToolsResult {
    serde_json::from_value(json!({"tools": [
        {"name": "ok", "description": "Answer ok.", "annotations": {"readOnlyHint": true},
         "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}},
        {"name": "crash", "annotations": {"destructiveHint": false},
         "description": "Crash the server mid-call.",
         "inputSchema": {"type": "object"}},
        {"name": "hang", "annotations": {"destructiveHint": false},
         "description": "Stop answering anything.",
         "inputSchema": {"type": "object"}},
        {"name": "stall", "annotations": {"destructiveHint": false},
         "description": "Announce a new tool list, then stop answering anything.",
         "inputSchema": {"type": "object"}},
        {"name": "malformed", "annotations": {"destructiveHint": false},
         "description": "Break the output schema.",
         "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
        {"name": "refs", "annotations": {"destructiveHint": false},
         "description": "Answer under an output schema that refers to its own definitions.",
         "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "$defs": {"n": {"type": "integer"}},
                          "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}},
        {"name": "bad_schema", "annotations": {"destructiveHint": false},
         "description": "A schema that does not compile.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "strin"}}}},
        {"name": "typed", "annotations": {"destructiveHint": false},
         "description": "A schema with $ref, anyOf and a format.",
         "inputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                         "type": "object", "$defs": {"n": {"type": "integer", "minimum": 0}},
                         "properties": {"v": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "string", "format": "uri"}]}},
                         "required": ["v"]}},
        {"name": "wait", "annotations": {"destructiveHint": false},
         "description": "Wait until cancelled.",
         "inputSchema": {"type": "object"}},
        {"name": "wipe", "description": "Delete everything.",
         "annotations": {"destructiveHint": true},
         "inputSchema": {"type": "object"}}
    ]}))
    .unwrap()
}

impl ServerHandler for Faulty {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        let hung = self.hung.load(Ordering::SeqCst);
        async move {
            if self.crash_on_list {
                // Never answered: the list must not slip through the relay before it closes.
                self.crash.notify_one();
                std::future::pending::<()>().await;
            }
            if hung {
                self.signals.listing_stalled.notify_one();
                std::future::pending::<()>().await;
            }
            Ok(tools())
        }
    }

    #[allow(clippy::manual_async_fn)]
    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        async move {
            let result: CallToolResult = match request.name.as_ref() {
                "ok" | "wipe" | "typed" => {
                    serde_json::from_value(json!({"content": [{"type": "text", "text": "ok"}]}))
                        .unwrap()
                }
                "crash" => {
                    self.crash.notify_one();
                    std::future::pending().await
                }
                "wait" => {
                    self.signals.arrived.notify_one();
                    // rmcp cancels this token when `notifications/cancelled` names the request.
                    context.ct.cancelled().await;
                    self.signals.cancelled.notify_one();
                    std::future::pending().await
                }
                "hang" => {
                    self.hung.store(true, Ordering::SeqCst);
                    std::future::pending().await
                }
                "stall" => {
                    self.hung.store(true, Ordering::SeqCst);
                    let _ = context.peer.notify_tool_list_changed().await;
                    std::future::pending().await
                }
                "refs" => {
                    serde_json::from_value(json!({"content": [], "structuredContent": {"n": 1}}))
                        .unwrap()
                }
                "malformed" => serde_json::from_value(
                    json!({"content": [], "structuredContent": {"n": "not a number"}}),
                )
                .unwrap(),
                other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
            };
            Ok(CallToolResponse::Complete(result))
        }
    }
}

/// Connects to a fresh in-process server over a pipe, counting connections.
#[derive(Default)]
struct InProcess {
    connections: Arc<AtomicU32>,
    signals: Signals,
    crash_on_list: bool,
}

impl Connector for InProcess {
    fn connect(&self) -> BoxFuture<'static, std::io::Result<StreamConnection>> {
        self.connections.fetch_add(1, Ordering::SeqCst);
        let signals = self.signals.clone();
        let crash_on_list = self.crash_on_list;
        Box::pin(async move {
            // client ⇄ relay ⇄ server: a crash ends the relay, which drops the client's pipe
            // at once, the way a dying process closes its stdio.
            let (client, mut relay_client) = tokio::io::duplex(1 << 16);
            let (mut relay_server, server) = tokio::io::duplex(1 << 16);
            let handler = Faulty {
                signals,
                crash_on_list,
                ..Faulty::default()
            };
            let crash = Arc::clone(&handler.crash);
            tokio::spawn(async move {
                if let Ok(service) = handler.serve(server).await {
                    let _ = service.waiting().await;
                }
            });
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut relay_client, &mut relay_server) => {}
                    () = crash.notified() => {}
                }
            });
            let (reader, writer) = tokio::io::split(client);
            Ok(StreamConnection::new(reader, writer))
        })
    }

    fn describe(&self) -> String {
        String::from("the in-process test server")
    }
}

/// An agent that keeps what it is told.
#[derive(Debug, Default)]
struct Listener {
    told: Mutex<Vec<String>>,
}

impl AgentHandle for Listener {
    fn session_id(&self) -> &str {
        "s1"
    }

    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        self.told.lock().unwrap().push(context.content);
        Ok(())
    }

    fn is_alive(&self) -> bool {
        true
    }
}

fn options() -> McpOptions {
    let mut options = McpOptions::default();
    options.call_timeout = Some(Duration::from_millis(500));
    options.probe_timeout = Duration::from_millis(300);
    options.restart.initial_delay = Duration::from_millis(50);
    options.restart.max_delay = Duration::from_millis(200);
    options
}

async fn start() -> (
    ToolRegistry,
    McpServers,
    Arc<AtomicU32>,
    Arc<Mutex<Vec<ToolsChange>>>,
) {
    let (registry, servers, connections, changes, _) = start_with_signals().await;
    (registry, servers, connections, changes)
}

async fn start_with_signals() -> (
    ToolRegistry,
    McpServers,
    Arc<AtomicU32>,
    Arc<Mutex<Vec<ToolsChange>>>,
    Signals,
) {
    let registry = ToolRegistry::new();
    let changes: Arc<Mutex<Vec<ToolsChange>>> = Arc::default();
    let seen = Arc::clone(&changes);
    registry
        .global_scope()
        .on_change(move |change| seen.lock().unwrap().push(change.clone()))
        .unwrap();
    let servers = McpServers::new(registry.global_scope(), options()).unwrap();
    let connector = InProcess::default();
    let connections = Arc::clone(&connector.connections);
    let signals = connector.signals.clone();
    servers
        .add_connector("faulty", Arc::new(connector))
        .unwrap()
        .await;
    (registry, servers, connections, changes, signals)
}

async fn call_as(registry: &ToolRegistry, agent: &AgentRef, name: &str) -> dsh_tools::ToolResult {
    registry
        .execute(ToolCall::new("c", name, "{}").with_agent(Arc::clone(agent)))
        .await
}

fn failure(result: &dsh_tools::ToolResult) -> (FailureCode, String) {
    let error = result.error.as_ref().expect("a failure");
    (error.code, error.message.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_that_does_not_compile_is_rejected_alone() {
    let (registry, servers, _, _) = start().await;
    let status = servers.server_status("faulty").unwrap();
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(
        status.tools,
        [
            "mcp__faulty__crash",
            "mcp__faulty__hang",
            "mcp__faulty__malformed",
            "mcp__faulty__ok",
            "mcp__faulty__refs",
            "mcp__faulty__stall",
            "mcp__faulty__typed",
            "mcp__faulty__wait",
            "mcp__faulty__wipe"
        ]
    );
    assert_eq!(status.rejected.len(), 1, "{status:?}");
    assert_eq!(status.rejected[0].0, "bad_schema");
    assert!(
        status.rejected[0]
            .1
            .contains("tool `mcp__faulty__bad_schema`: parameters schema"),
        "{:?}",
        status.rejected
    );
    assert!(registry.get("mcp__faulty__bad_schema", None).is_none());
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_result_and_a_destructive_tool_fail_with_clear_codes() {
    let (registry, servers, _, _) = start().await;
    let malformed = support::call(&registry, "mcp__faulty__malformed", "{}").await;
    assert_eq!(
        failure(&malformed).0,
        FailureCode::InvalidToolOutput,
        "{malformed:?}"
    );
    // `destructiveHint` asks first; a call without an agent cannot be asked about.
    let wipe = support::call(&registry, "mcp__faulty__wipe", "{}").await;
    assert_eq!(
        failure(&wipe),
        (
            FailureCode::Denied,
            String::from(
                "the MCP server marks `mcp__faulty__wipe` as destructive; the call has no agent to ask for approval"
            )
        )
    );
    let ok = support::call(&registry, "mcp__faulty__ok", "{}").await;
    assert!(!ok.is_error, "{ok:?}");
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_with_refs_any_of_and_formats_is_enforced_by_the_registry() {
    let (registry, servers, _, _) = start().await;
    for args in [r#"{"v": 3}"#, r#"{"v": "https://example.com"}"#] {
        let result = support::call(&registry, "mcp__faulty__typed", args).await;
        assert!(!result.is_error, "{args}: {result:?}");
    }
    for args in [r#"{"v": -1}"#, r#"{"v": true}"#, "{}"] {
        let result = support::call(&registry, "mcp__faulty__typed", args).await;
        assert_eq!(
            failure(&result).0,
            FailureCode::InvalidArgs,
            "{args}: {result:?}"
        );
    }
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_fails_the_call_unregisters_restarts_and_tells_the_agent() {
    let (registry, servers, connections, changes) = start().await;
    let listener = Arc::new(Listener::default());
    let agent: AgentRef = listener.clone();
    assert!(!call_as(&registry, &agent, "mcp__faulty__ok").await.is_error);

    let crashed = call_as(&registry, &agent, "mcp__faulty__crash").await;
    let (code, message) = failure(&crashed);
    assert_eq!(code, FailureCode::ToolError);
    assert_eq!(
        message,
        "MCP_SERVER_EXITED: the MCP server `faulty` exited during the call; its tools are unregistered until it restarts"
    );
    let status = servers.wait_connected("faulty", 1).await.unwrap();
    assert_eq!((status.state, status.restarts), (ServerState::Connected, 1));
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    let changes = changes.lock().unwrap().clone();
    let ok_changes: Vec<&ToolsChangeKind> = changes
        .iter()
        .map(|c| &c.kind)
        .filter(|k| {
            matches!(k, ToolsChangeKind::Registered { name } | ToolsChangeKind::Unregistered { name } if name == "mcp__faulty__ok")
        })
        .collect();
    assert_eq!(
        ok_changes,
        [
            &ToolsChangeKind::Registered {
                name: "mcp__faulty__ok".into()
            },
            &ToolsChangeKind::Unregistered {
                name: "mcp__faulty__ok".into()
            },
            &ToolsChangeKind::Registered {
                name: "mcp__faulty__ok".into()
            },
        ]
    );
    assert!(!call_as(&registry, &agent, "mcp__faulty__ok").await.is_error);
    assert_eq!(
        listener.told.lock().unwrap().clone(),
        [
            "The MCP server `faulty` exited; its tools are unavailable until it restarts.",
            "The MCP server `faulty` was restarted; its tools are available again: mcp__faulty__crash, mcp__faulty__hang, mcp__faulty__malformed, mcp__faulty__ok, mcp__faulty__refs, mcp__faulty__stall, mcp__faulty__typed, mcp__faulty__wait, mcp__faulty__wipe."
        ]
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_times_out_is_killed_and_restarted() {
    let (registry, servers, connections, _) = start().await;
    let listener = Arc::new(Listener::default());
    let agent: AgentRef = listener.clone();
    let hung = call_as(&registry, &agent, "mcp__faulty__hang").await;
    assert_eq!(failure(&hung).0, FailureCode::Timeout, "{hung:?}");
    let status = servers.wait_connected("faulty", 1).await.unwrap();
    assert_eq!((status.state, status.restarts), (ServerState::Connected, 1));
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        listener.told.lock().unwrap().first().cloned(),
        Some(String::from(
            "The MCP server `faulty` stopped answering and was killed; its tools are unavailable until it restarts."
        ))
    );
    assert!(!call_as(&registry, &agent, "mcp__faulty__ok").await.is_error);
    servers.shutdown().await;
    assert_eq!(registry.schemas(None), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_hangs_while_its_tool_list_reloads_is_killed_and_restarted() {
    let (registry, servers, connections, _) = start().await;
    let stalled = support::call(&registry, "mcp__faulty__stall", "{}").await;
    assert_eq!(failure(&stalled).0, FailureCode::Timeout, "{stalled:?}");
    // The probe after the timeout finds the server hung, though the reload of its tool list
    // (bounded only by the connect timeout, a minute) is still waiting for an answer.
    let status = tokio::time::timeout(Duration::from_secs(10), servers.wait_connected("faulty", 1))
        .await
        .expect("the hung server was not restarted")
        .unwrap();
    assert_eq!((status.state, status.restarts), (ServerState::Connected, 1));
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_tool_list_reload_that_hangs() {
    let (registry, servers, _, _, signals) = start_with_signals().await;
    let stalled = support::call(&registry, "mcp__faulty__stall", "{}");
    let shutdown = async {
        signals.listing_stalled.notified().await;
        tokio::time::timeout(Duration::from_secs(5), servers.shutdown())
            .await
            .expect("shutdown waited for the reload");
    };
    let (stalled, ()) = tokio::join!(stalled, shutdown);
    assert!(stalled.is_error, "{stalled:?}");
    assert_eq!(registry.schemas(None), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_schema_that_refers_to_its_own_definitions_validates_the_result() {
    let (registry, servers, _, _) = start().await;
    let result = support::call(&registry, "mcp__faulty__refs", "{}").await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(**result.value.as_ref().unwrap(), json!({"n": 1}));
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_lists_its_tools_is_given_up_on() {
    let registry = ToolRegistry::new();
    let mut options = options();
    options.restart.max_attempts = 2;
    let servers = McpServers::new(registry.global_scope(), options).unwrap();
    let connector = InProcess {
        crash_on_list: true,
        ..InProcess::default()
    };
    let connections = Arc::clone(&connector.connections);
    servers
        .add_connector("faulty", Arc::new(connector))
        .unwrap()
        .await;
    // No restart count is ever reached: this waits for the server to be stopped.
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        servers.wait_connected("faulty", u32::MAX),
    )
    .await
    .expect("the server was restarted without end")
    .unwrap();
    assert_eq!(
        status.state,
        ServerState::Stopped {
            reason: String::from(
                "the server did not list its tools; gave up after 3 failed starts"
            )
        }
    );
    assert_eq!(connections.load(Ordering::SeqCst), 3);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_sends_notifications_cancelled_to_the_server() {
    let (registry, servers, _, _, signals) = start_with_signals().await;
    let signal = tokio_util::sync::CancellationToken::new();
    let running =
        registry.execute(ToolCall::new("w", "mcp__faulty__wait", "{}").with_signal(signal.clone()));
    let cancel = async {
        signals.arrived.notified().await;
        signal.cancel();
    };
    let (result, ()) = tokio::join!(running, cancel);
    assert_eq!(failure(&result).0, FailureCode::Aborted, "{result:?}");
    tokio::time::timeout(Duration::from_secs(10), signals.cancelled.notified())
        .await
        .expect("the server never saw notifications/cancelled");
    servers.shutdown().await;
}
