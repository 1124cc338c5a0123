//! MCP both ways: `dsh-agent mcp` serves the built-in tools over stdio as an MCP server, and
//! `run`/`chat` load MCP servers' tools from `.mcp.json` and `--mcp-config FILE`.

use anyhow::{Context, Result};
use dsh_tools::jobs::JobRuntime;
use dsh_tools::{AgentGone, AgentHandle, InjectedContext, ToolCall, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{
    MaybeSendFuture, RequestContext, RoleServer, RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tool_mcp::{McpConfig, McpOptions, McpServers, ServerLauncher};

/// Loads `.mcp.json` from the session's directory and each `--mcp-config FILE` (later files
/// replace servers of the same name), and starts the servers; `None` when none is configured.
/// Stdio servers start through `launcher` (the shell's, which supervises them, inside its
/// sandbox when it is on), or without one under a supervisor of a default shell executor's:
/// never as a bare process group, which `setsid` leaves. Its destructive tools ask first when
/// `ask` (`--ask`). A server that fails to start is said on stderr and retried in the
/// background.
pub(crate) async fn load_servers(
    registry: &ToolRegistry,
    cwd: &Path,
    files: &[String],
    launcher: Option<ServerLauncher>,
    ask: bool,
) -> Result<Option<McpServers>> {
    let mut config = McpConfig::load_from_dir_with(cwd, crate::secrets::var)?;
    for file in files {
        config.merge(McpConfig::load_with(Path::new(file), crate::secrets::var)?);
    }
    if config.is_empty() {
        return Ok(None);
    }
    let mut options = McpOptions::default();
    // Destructive MCP tools ask as `bash` does: under `--ask`; without it nothing asks.
    options.approve_destructive = ask;
    options.base_dir = Some(cwd.to_owned());
    options.launcher = Some(launcher.unwrap_or_else(|| {
        crate::tools::unconfined_launcher(
            Arc::new(tool_bash::LocalExecutor::default()),
            cwd.to_owned(),
        )
    }));
    let servers = McpServers::start(registry.global_scope(), &config, options)
        .await
        .context("starting the MCP servers")?;
    for status in servers.status() {
        if status.state != tool_mcp::ServerState::Connected {
            crate::output::say(&format!(
                "dsh-agent: MCP server `{}`: {:?}",
                status.name, status.state
            ));
        }
        if let Some(why) = &status.listing {
            crate::output::say(&format!(
                "dsh-agent: MCP server `{}`: its tools could not be listed: {why}",
                status.name
            ));
        }
        for (tool, why) in &status.rejected {
            crate::output::say(&format!(
                "dsh-agent: MCP server `{}`: tool `{tool}` not registered: {why}",
                status.name
            ));
        }
    }
    Ok(Some(servers))
}

/// The one session an MCP client's calls run in: it gives `bash` the working directory and owns
/// background jobs; their completion notices ride on the next tool result.
#[derive(Debug)]
struct ClientSession {
    cwd: PathBuf,
    notices: Mutex<Vec<String>>,
}

impl AgentHandle for ClientSession {
    fn session_id(&self) -> &str {
        "mcp"
    }

    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        self.notices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(context.content);
        Ok(())
    }

    fn is_alive(&self) -> bool {
        true
    }

    fn cwd(&self) -> Option<&Path> {
        Some(&self.cwd)
    }
}

/// The built-in tools as an MCP server.
#[derive(Clone)]
struct ToolServer {
    registry: ToolRegistry,
    session: Arc<ClientSession>,
    calls: Arc<AtomicU64>,
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("dsh-agent", env!("CARGO_PKG_VERSION")))
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        std::future::ready(list_tools(&self.registry))
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        let id = self.calls.fetch_add(1, Ordering::Relaxed);
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let call = ToolCall::new(format!("mcp-{id}"), request.name.to_string(), arguments)
            .with_agent(self.session.clone())
            .with_signal(context.ct.clone());
        async move {
            let result = self.registry.execute(call).await;
            let notices = std::mem::take(
                &mut *self
                    .session
                    .notices
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
            );
            let mut content: Vec<Value> = result
                .content
                .iter()
                .filter_map(|block| block.as_text())
                .chain(
                    result
                        .additional_contexts
                        .iter()
                        .map(|c| c.content.as_str()),
                )
                .chain(notices.iter().map(String::as_str))
                .map(|text| json!({"type": "text", "text": text}))
                .collect();
            if content.is_empty() {
                content.push(json!({"type": "text", "text": ""}));
            }
            let mut answer = json!({"content": content, "isError": result.is_error});
            if let Some(value) = result.value.as_deref().filter(|v| v.is_object()) {
                answer["structuredContent"] = value.clone();
            }
            let result: CallToolResult = serde_json::from_value(answer)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            Ok(CallToolResponse::Complete(result))
        }
    }
}

/// `tools/list`: each tool's input schema, and its output schema when the value is an object
/// (MCP's `structuredContent` is always one).
fn list_tools(registry: &ToolRegistry) -> Result<ListToolsResult, ErrorData> {
    let tools: Vec<Value> = registry
        .visible(None)
        .iter()
        .map(|tool| {
            let schema = tool.schema();
            let mut entry = json!({
                "name": schema.name,
                "description": schema.description,
                "inputSchema": schema.parameters,
            });
            let output = serde_json::to_value(tool.output().schema().json()).unwrap_or_default();
            if output.get("type") == Some(&json!("object")) {
                entry["outputSchema"] = output;
            }
            entry
        })
        .collect();
    serde_json::from_value(json!({ "tools": tools }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// Serves the registry's tools over stdio until the client disconnects, then stops every
/// background job (no process is left behind).
pub(crate) async fn serve(registry: ToolRegistry, jobs: JobRuntime) -> Result<()> {
    let cwd = std::env::current_dir().context("no working directory")?;
    let _controller = jobs.attach_controller();
    let server = ToolServer {
        registry,
        session: Arc::new(ClientSession {
            cwd,
            notices: Mutex::new(Vec::new()),
        }),
        calls: Arc::new(AtomicU64::new(1)),
    };
    let service = server
        .serve(StdioFraming::start())
        .await
        .context("starting the MCP server on stdio")?;
    let _ = service.waiting().await;
    jobs.teardown().await;
    Ok(())
}

/// `dsh-agent mcp`'s stdio, framed here rather than by rmcp, which drops invalid JSON and
/// over-long lines without a word and answers a malformed request with no `id`. Each line is
/// read by [`crate::acp::rpc::read_message`] under the limit ACP has too
/// ([`crate::acp::rpc::MAX_MESSAGE_BYTES`]; a longer line is read through and discarded, never
/// kept), and what rmcp cannot take is answered here as JSON-RPC 2.0 says: a parse error with
/// `id: null`, an invalid request with the request's id when one can be read, invalid params
/// for a well-formed request whose params do not fit its method, and a message of more than
/// [`crate::acp::rpc::MAX_MESSAGE_VALUES`] JSON values refused before rmcp parses it (its typed
/// parse costs about 200 bytes a value). At most [`MAX_REQUESTS_IN_FLIGHT`] requests are with
/// rmcp unanswered: stdin is not read past the next request until one is answered, so a client
/// that does not read its answers stops being read instead of having them all kept.
struct StdioFraming {
    incoming: tokio::sync::mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    stdout: Arc<tokio::sync::Mutex<tokio::io::Stdout>>,
    in_flight: Arc<InFlight>,
}

/// The most requests handed to rmcp and not yet answered. Notifications (a cancel among them)
/// are still read while this many wait.
const MAX_REQUESTS_IN_FLIGHT: usize = 32;

/// The requests handed to rmcp and not yet answered, by id (its JSON text), each holding one
/// of [`MAX_REQUESTS_IN_FLIGHT`] permits until its answer is written.
struct InFlight {
    requests: Mutex<std::collections::HashMap<String, tokio::sync::OwnedSemaphorePermit>>,
    room: Arc<tokio::sync::Semaphore>,
}

impl InFlight {
    fn key(id: &rmcp::model::RequestId) -> String {
        serde_json::to_string(id).unwrap_or_default()
    }

    /// The request `id` is answered (or cancelled, when rmcp drops its answer): its id is free
    /// again, and its permit, returned, goes back when dropped.
    fn done(&self, id: &rmcp::model::RequestId) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&Self::key(id))
    }
}

/// What one line from the client is.
#[derive(Debug)]
enum Line {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Not one: the error response to send back.
    Refused(Value),
    /// Nothing to do (a blank line, or a notification or response rmcp cannot read, which
    /// JSON-RPC leaves unanswered).
    Skipped,
}

impl StdioFraming {
    /// The transport, and the task that reads stdin into it until stdin ends.
    fn start() -> StdioFraming {
        let (sender, incoming) = tokio::sync::mpsc::channel(16);
        let stdout = Arc::new(tokio::sync::Mutex::new(tokio::io::stdout()));
        let in_flight = Arc::new(InFlight {
            requests: Mutex::default(),
            room: Arc::new(tokio::sync::Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
        });
        tokio::spawn(read_stdin(
            sender,
            Arc::clone(&stdout),
            Arc::clone(&in_flight),
        ));
        StdioFraming {
            incoming,
            stdout,
            in_flight,
        }
    }
}

impl Transport<RoleServer> for StdioFraming {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdout = Arc::clone(&self.stdout);
        let in_flight = Arc::clone(&self.in_flight);
        async move {
            let message = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            let answered = match &item {
                rmcp::model::JsonRpcMessage::Response(response) => Some(&response.id),
                rmcp::model::JsonRpcMessage::Error(error) => error.id.as_ref(),
                _ => None,
            };
            // The id is free before the answer goes out (a client may reuse it as soon as it
            // has read the answer); the place in flight only once the answer is written, so
            // answers nobody reads still hold the input back.
            let permit = answered.and_then(|id| in_flight.done(id));
            let written = write_line(&stdout, &message).await;
            drop(permit);
            written
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.incoming.close();
        std::future::ready(Ok(()))
    }
}

/// Writes one message and its newline, whole: rmcp's messages and ours share the lock.
async fn write_line(
    stdout: &tokio::sync::Mutex<tokio::io::Stdout>,
    message: &Value,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut line = message.to_string();
    line.push('\n');
    let mut stdout = stdout.lock().await;
    stdout.write_all(line.as_bytes()).await?;
    stdout.flush().await
}

/// Reads the client's lines until stdin ends (or rmcp stops taking them), answering those
/// that are not messages for rmcp.
async fn read_stdin(
    messages: tokio::sync::mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    stdout: Arc<tokio::sync::Mutex<tokio::io::Stdout>>,
    in_flight: Arc<InFlight>,
) {
    use crate::acp::rpc::{self, Frame, RpcError};
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        let refused = match rpc::read_message(&mut stdin, &mut line, rpc::MAX_MESSAGE_BYTES).await {
            Ok(Frame::End) => return,
            Err(error) => {
                tracing::warn!(%error, "cannot read stdin");
                return;
            }
            Ok(Frame::TooLong) => {
                tracing::warn!(
                    limit = rpc::MAX_MESSAGE_BYTES,
                    "an MCP message over the size limit was discarded"
                );
                RpcError::too_long().response(Value::Null)
            }
            Ok(Frame::Message) => match classify(&line) {
                Line::Message(message) => match admit(*message, &in_flight).await {
                    Ok(message) => {
                        if messages.send(message).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(refused) => refused,
                },
                Line::Refused(answer) => answer,
                Line::Skipped => continue,
            },
        };
        if let Err(error) = write_line(&stdout, &refused).await {
            tracing::warn!(%error, "the MCP client stopped reading stdout");
            return;
        }
    }
}

/// Lets a message through to rmcp: a request once fewer than [`MAX_REQUESTS_IN_FLIGHT`] are
/// unanswered, and not under the id of one of them (rmcp would answer only one of the two);
/// a cancel frees its request's place, since rmcp drops the answer of a cancelled request.
async fn admit(
    message: RxJsonRpcMessage<RoleServer>,
    in_flight: &InFlight,
) -> Result<RxJsonRpcMessage<RoleServer>, Value> {
    use crate::acp::rpc::RpcError;
    use rmcp::model::{ClientNotification, JsonRpcMessage};
    match &message {
        JsonRpcMessage::Request(request) => {
            let key = InFlight::key(&request.id);
            let in_use = || {
                let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
                Err(RpcError::invalid_request(format!(
                    "request id {key} is already in use by a request still being answered"
                ))
                .response(id))
            };
            let taken = |in_flight: &InFlight| {
                in_flight
                    .requests
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .contains_key(&key)
            };
            if taken(in_flight) {
                return in_use();
            }
            let Ok(permit) = Arc::clone(&in_flight.room).acquire_owned().await else {
                return Ok(message);
            };
            let mut requests = in_flight
                .requests
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if requests.contains_key(&key) {
                drop(requests);
                return in_use();
            }
            requests.insert(key, permit);
        }
        JsonRpcMessage::Notification(notification) => {
            if let ClientNotification::CancelledNotification(cancelled) = &notification.notification
                && let Some(id) = &cancelled.params.request_id
            {
                drop(in_flight.done(id));
            }
        }
        _ => {}
    }
    Ok(message)
}

/// The methods this server answers, whose params rmcp reads as their own types.
const SERVED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// Tells a message rmcp reads from a line to answer or skip.
fn classify(line: &[u8]) -> Line {
    use crate::acp::rpc::{self, Incoming, RpcError};
    let Ok(text) = std::str::from_utf8(line) else {
        return Line::Refused(RpcError::not_utf8().response(Value::Null));
    };
    // RFC 8259 lets a parser ignore a byte order mark; rmcp's framing did.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Line::Skipped;
    }
    if let Some((id, error)) = rpc::too_many_values(text) {
        return Line::Refused(error.response(id));
    }
    let unreadable = match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text) {
        // rmcp reads a request of a method it knows whose params do not fit as a custom
        // request, and would answer it as an unknown method.
        Ok(rmcp::model::JsonRpcMessage::Request(request))
            if matches!(&request.request, ClientRequest::CustomRequest(custom)
                if SERVED_METHODS.contains(&custom.method.as_str())) =>
        {
            let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
            let method = request.request.method();
            return Line::Refused(
                RpcError::invalid_params(format!("the params do not fit `{method}`")).response(id),
            );
        }
        Ok(message) => return Line::Message(Box::new(message)),
        Err(error) => error,
    };
    match rpc::parse(text) {
        Err((id, error)) => Line::Refused(error.response(id)),
        Ok(Some(Incoming::Request { id, method, .. })) => {
            Line::Refused(RpcError::invalid_params(format!("{method}: {unreadable}")).response(id))
        }
        Ok(None | Some(Incoming::Notification { .. } | Incoming::Response { .. })) => {
            tracing::debug!(error = %unreadable, "an MCP message rmcp cannot read, skipped");
            Line::Skipped
        }
    }
}
