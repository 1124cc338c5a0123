//! `dsh-agent acp`: the agent of an editor, over the Agent Client Protocol on stdio.
//!
//! The editor (the client) starts `dsh-agent acp` and speaks JSON-RPC on its stdin and stdout,
//! one message per line. `initialize` states what this agent does; `session/new` opens a
//! session of the store in the editor's working directory, with the MCP servers the editor
//! passes connected through `tool-mcp`; `session/load` continues one from the store and
//! replays its history as updates; `session/prompt` runs a turn with the configured model and
//! streams it (`session/update`: message and thought chunks, tool calls and their results as
//! cards projected by `presenters::acp`, background jobs' completion notices), asking the
//! editor before each `bash` call (`session/request_permission`); `session/cancel` cancels
//! the running turn. Malformed input gets a JSON-RPC error and the connection goes on. The
//! end of stdin ends every session and stops its jobs.
//!
//! The protocol layer is written here on `serde_json` rather than taken from the
//! `agent-client-protocol` crate: that crate's types turn on `serde_json`'s `preserve_order`,
//! which Cargo would unify into every crate of the workspace (docs/design/lossless-json.md).
//! The messages are checked against the official ACP schema and client in the tests instead.

mod permission;
mod rpc;
mod updates;

use crate::Failure;
use crate::cli::{AcpOptions, RunOptions};
use crate::model::Model;
use agent_loop::{
    Agent, AgentDirectory, EventRecord, FsSessionStore, ModelAdapter, SessionEndReason,
    SessionEvent, SessionLease, SessionLog, SessionStore, StoreError, TurnEndReason,
};
use dsh_tools::jobs::JobRuntime;
use rpc::{Incoming, Outbox, RpcError};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use tool_mcp::{HttpServer, McpConfig, McpOptions, McpServers, ServerConfig, StdioServer};
use updates::{Mode, Projection};

/// The ACP protocol version spoken.
const PROTOCOL_VERSION: u64 = 1;

/// What `dsh-agent acp` was started with.
#[derive(Debug)]
pub(crate) struct Config {
    /// The run options that apply: the model, the system prompt, the sandbox, background jobs.
    options: RunOptions,
    /// Run calls without asking the editor.
    no_ask: bool,
}

impl From<AcpOptions> for Config {
    fn from(acp: AcpOptions) -> Config {
        Config {
            options: RunOptions {
                script: acp.script,
                model: acp.model,
                base_url: acp.base_url,
                api_key_env: acp.api_key_env,
                no_stream: acp.no_stream,
                ask: !acp.no_ask,
                system: acp.system,
                log: None,
                cwd: None,
                json: false,
                no_background: acp.no_background,
                no_code_mode: acp.no_code_mode,
                mcp_config: Vec::new(),
                sandbox: acp.sandbox,
                wait_jobs: std::time::Duration::ZERO,
                prompt: Vec::new(),
            },
            no_ask: acp.no_ask,
        }
    }
}

/// Serves one client on stdin and stdout until stdin ends.
pub(crate) async fn serve(config: Config, store: FsSessionStore) -> Result<(), Failure> {
    if config.options.script.as_deref() == Some("-") {
        return Err(Failure::new(
            2,
            "acp: --script - would read the script from stdin, which is the protocol's",
        ));
    }
    let model = crate::model::select_model(&config.options)?;
    let (outbox, writer) = Outbox::stdout();
    let server = Arc::new(Server {
        outbox: outbox.clone(),
        store,
        adapter: model.adapter(),
        remote: matches!(model, Model::Remote(_)),
        config,
        sessions: Mutex::default(),
        loading: Mutex::default(),
    });
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        match rpc::read_message(&mut stdin, &mut line, rpc::MAX_MESSAGE_BYTES).await {
            Ok(rpc::Frame::End) => break,
            Ok(rpc::Frame::Message) => server.receive(&String::from_utf8_lossy(&line)),
            Ok(rpc::Frame::TooLong) => {
                tracing::warn!(
                    limit = rpc::MAX_MESSAGE_BYTES,
                    "an ACP message over the size limit was discarded"
                );
                server.outbox.respond(
                    Value::Null,
                    Err(
                        RpcError::new(rpc::INVALID_REQUEST, "Invalid Request").with_data(json!(
                            format!(
                                "a message longer than {} bytes was discarded",
                                rpc::MAX_MESSAGE_BYTES
                            )
                        )),
                    ),
                );
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read stdin");
                break;
            }
        }
    }
    server.shutdown().await;
    outbox.close();
    drop(server);
    drop(outbox);
    let _ = writer.await;
    Ok(())
}

struct Server {
    outbox: Outbox,
    store: FsSessionStore,
    adapter: Arc<dyn ModelAdapter>,
    remote: bool,
    config: Config,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The sessions a `session/load` on this connection is opening: a second load of one is
    /// told so before it looks at the store, whose lock the first holds (perhaps not yet with
    /// its pid written).
    loading: Mutex<std::collections::HashSet<String>>,
}

/// A session being loaded: out of [`Server::loading`] when the load ends, however it ends.
struct Loading<'a> {
    server: &'a Server,
    id: String,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.server
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// One open session: its agent, the tools and jobs behind it, and its place in the store.
struct Session {
    agent: Agent,
    jobs: JobRuntime,
    lease: Mutex<Option<SessionLease>>,
    mcp: Option<McpServers>,
    /// The message of the last model error, which fails the prompt that saw it.
    model_error: Arc<Mutex<Option<String>>>,
    _directory: AgentDirectory,
}

impl Server {
    /// Handles one line from the client. Requests run in tasks of their own, so a
    /// `session/cancel` is read while a prompt runs.
    fn receive(self: &Arc<Self>, line: &str) {
        match rpc::parse(line) {
            Err((id, error)) => self.outbox.respond(id, Err(error)),
            Ok(None) => {}
            Ok(Some(Incoming::Response { id, outcome })) => self.outbox.answer(&id, outcome),
            Ok(Some(Incoming::Notification { method, params })) => self.notified(&method, &params),
            Ok(Some(Incoming::Request { id, method, params })) => {
                let server = Arc::clone(self);
                tokio::spawn(async move {
                    let outcome = server.request(&method, params).await;
                    server.outbox.respond(id, outcome);
                });
            }
        }
    }

    fn notified(&self, method: &str, params: &Value) {
        match method {
            "session/cancel" => {
                let id = params["sessionId"].as_str().unwrap_or_default();
                match self.session(id) {
                    Ok(session) => session.agent.cancel_turn(),
                    Err(_) => tracing::warn!(session = id, "session/cancel for no open session"),
                }
            }
            // Notifications have no answer: one not understood is only logged.
            other => tracing::debug!(method = other, "an ACP notification not handled"),
        }
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => initialize(&params),
            "session/new" => self.new_session(&params).await,
            "session/load" => self.load_session(&params).await,
            "session/prompt" => self.prompt(&params).await,
            other => Err(RpcError::new(rpc::METHOD_NOT_FOUND, "Method not found")
                .with_data(json!({"method": other}))),
        }
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, RpcError> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_session(id))
    }

    async fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = working_directory(params)?;
        let servers = mcp_config(params)?;
        let lease = self
            .store
            .create(&cwd)
            .map_err(|e| RpcError::internal(format!("cannot create the session: {e}")))?;
        let id = lease.id().to_owned();
        self.open(lease, None, cwd, servers).await?;
        Ok(json!({"sessionId": id}))
    }

    async fn load_session(&self, params: &Value) -> Result<Value, RpcError> {
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("`sessionId` must be a string"))?;
        let cwd = working_directory(params)?;
        let servers = mcp_config(params)?;
        let already_open =
            || RpcError::invalid_params(format!("session {id} is already open on this connection"));
        if self.session(id).is_ok() {
            return Err(already_open());
        }
        let fresh = self
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned());
        if !fresh {
            return Err(already_open());
        }
        let _loading = Loading {
            server: self,
            id: id.to_owned(),
        };
        let resumed = self.store.resume(id).map_err(|error| match error {
            StoreError::NotFound { .. } | StoreError::InvalidId { .. } => unknown_session(id),
            // A load of the same session still opening holds its lock.
            StoreError::SessionInUse { pid, .. } if pid == std::process::id() => already_open(),
            in_use @ StoreError::SessionInUse { .. } => RpcError::invalid_params(in_use),
            other => RpcError::internal(other),
        })?;
        self.open(resumed.lease, Some(resumed.log), cwd, servers)
            .await?;
        // Every update of the history went out before this answer (one outbox, in order).
        Ok(json!({}))
    }

    /// Starts the agent of a session: the tools over the session's working directory and
    /// sandbox, the editor's MCP servers, approvals through the editor, and the history
    /// replayed to the editor when continuing.
    async fn open(
        &self,
        lease: SessionLease,
        history: Option<SessionLog>,
        cwd: PathBuf,
        servers: McpConfig,
    ) -> Result<(), RpcError> {
        let options = &self.config.options;
        let session_id = lease.id().to_owned();
        let (executor, sandbox, launcher) = crate::tools::shell_executor(
            options.sandbox.as_deref(),
            &cwd,
            Some(lease.spill_dir()),
            Some(self.store.root()),
        )
        .map_err(|f| RpcError::internal(f.message))?;
        let (registry, jobs) = crate::tools::registry_with(!options.no_background, executor);
        if !self.config.no_ask {
            permission::install(&registry, self.outbox.clone(), &session_id)
                .map_err(RpcError::internal)?;
        }
        let mcp = if servers.servers.is_empty() {
            None
        } else {
            let mut mcp_options = McpOptions::default();
            mcp_options.base_dir = Some(cwd.clone());
            // The editor's stdio servers start in the session's sandbox, as `.mcp.json`'s do.
            mcp_options.launcher = launcher;
            Some(
                McpServers::start(registry.global_scope(), &servers, mcp_options)
                    .await
                    .map_err(|e| RpcError::invalid_params(format!("the MCP servers: {e}")))?,
            )
        };
        // Registered last, as in `run`, so that its description declares every other tool.
        if !options.no_code_mode {
            tool_code::register_run_code(&registry, tool_code::CodeModeLimits::default())
                .map_err(|e| RpcError::internal(format!("registering run_code: {e}")))?;
        }
        let projection = Arc::new(Mutex::new(Projection::new(
            registry.clone(),
            Some(session_id.clone()),
            Mode::Replay,
        )));
        if let Some(log) = &history {
            let mut projection = projection.lock().unwrap_or_else(|e| e.into_inner());
            for record in &log.events {
                for update in projection.observe(&record.event) {
                    self.update(&session_id, update);
                }
            }
            projection.set_mode(Mode::Live);
        } else {
            projection
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .set_mode(Mode::Live);
        }
        let model_error: Arc<Mutex<Option<String>>> = Arc::default();
        let subscriber = {
            let outbox = self.outbox.clone();
            let session_id = session_id.clone();
            let model_error = Arc::clone(&model_error);
            move |record: &EventRecord| {
                if let SessionEvent::Error { message, .. } = &record.event {
                    *model_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(message.clone());
                }
                let updates = projection
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .observe(&record.event);
                for update in updates {
                    outbox.notify(
                        "session/update",
                        json!({"sessionId": session_id, "update": update}),
                    );
                }
            }
        };
        let adapter = Arc::new(Streamed {
            inner: Arc::clone(&self.adapter),
            outbox: self.outbox.clone(),
            session_id: session_id.clone(),
        });
        let mut builder = Agent::builder(registry.clone(), adapter);
        if self.remote {
            builder = builder.system_prompt(
                crate::model::system_prompt(options, &registry, &cwd)
                    .map_err(|f| RpcError::internal(f.message))?,
            );
        }
        let mut builder = builder
            .cwd(cwd)
            .jobs(jobs.clone())
            .sandbox(sandbox)
            .subscriber(subscriber)
            .session_id(session_id.clone())
            .log(lease.log_path());
        if let Some(log) = history {
            builder = builder.resume(log);
        }
        let agent = builder
            .build()
            .map_err(|e| RpcError::internal(format!("cannot start the agent: {e}")))?;
        let directory = AgentDirectory::new();
        directory.insert(&agent);
        jobs.set_turn_opener(Arc::new(directory.clone()));
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                session_id,
                Arc::new(Session {
                    agent,
                    jobs,
                    lease: Mutex::new(Some(lease)),
                    mcp,
                    model_error,
                    _directory: directory,
                }),
            );
        Ok(())
    }

    fn update(&self, session_id: &str, update: Value) {
        self.outbox.notify(
            "session/update",
            json!({"sessionId": session_id, "update": update}),
        );
    }

    async fn prompt(&self, params: &Value) -> Result<Value, RpcError> {
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("`sessionId` must be a string"))?;
        let session = self.session(id)?;
        let text = prompt_text(&params["prompt"])?;
        *session
            .model_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        let outcome = session.agent.run(text).await.map_err(|e| match e {
            agent_loop::AgentError::Busy(_) => RpcError::new(
                rpc::INVALID_REQUEST,
                "a prompt of this session is still running",
            ),
            other => RpcError::internal(other),
        })?;
        let stop = match outcome.reason {
            TurnEndReason::Completed | TurnEndReason::Concluded => "end_turn",
            TurnEndReason::Cancelled => "cancelled",
            TurnEndReason::MaxSteps => "max_turn_requests",
            _ => {
                let message = session
                    .model_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .unwrap_or_else(|| String::from("the model failed"));
                return Err(RpcError::internal(message));
            }
        };
        Ok(json!({"stopReason": stop}))
    }

    /// Ends every session: running turns cancelled, jobs stopped, MCP servers shut down, the
    /// session recorded as ended and its lease released.
    async fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, session)| session)
            .collect();
        for session in sessions {
            session.agent.cancel_turn();
            session.agent.wait_idle().await;
            session.agent.dispose().await;
            session.jobs.teardown().await;
            session.agent.end_session(SessionEndReason::Completed);
            if let Some(mcp) = &session.mcp {
                mcp.shutdown().await;
            }
            drop(
                session
                    .lease
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
        }
    }
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(rpc::RESOURCE_NOT_FOUND, "Resource not found")
        .with_data(json!({"sessionId": id, "reason": "no such session"}))
}

/// `initialize`: the protocol version (ours, whatever the client asked for, which it checks)
/// and what this agent does.
fn initialize(params: &Value) -> Result<Value, RpcError> {
    if !params["protocolVersion"].is_u64() {
        return Err(RpcError::invalid_params(
            "`protocolVersion` must be a whole number",
        ));
    }
    Ok(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": false},
            // No session list, resume or close, and no logout: said, not left to defaults.
            "sessionCapabilities": {},
            "auth": {},
        },
        "authMethods": [],
        "agentInfo": {"name": "dsh-agent", "title": "dsh-agent", "version": env!("CARGO_PKG_VERSION")},
    }))
}

/// The session's `cwd`: an absolute path to a directory.
fn working_directory(params: &Value) -> Result<PathBuf, RpcError> {
    let cwd = params["cwd"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| RpcError::invalid_params("`cwd` must be a string"))?;
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(RpcError::invalid_params(format!(
            "`cwd` must be an absolute path to a directory: {}",
            cwd.display()
        )));
    }
    Ok(cwd)
}

/// The `mcpServers` of `session/new` or `session/load` as a `tool-mcp` configuration: stdio
/// and HTTP servers (this agent does not announce SSE).
fn mcp_config(params: &Value) -> Result<McpConfig, RpcError> {
    let mut config = McpConfig::default();
    let servers = match &params["mcpServers"] {
        Value::Null => return Ok(config),
        Value::Array(servers) => servers,
        _ => return Err(RpcError::invalid_params("`mcpServers` must be an array")),
    };
    let pairs = |value: &Value, what: &str| -> Result<BTreeMap<String, String>, RpcError> {
        match value {
            Value::Null => Ok(BTreeMap::new()),
            Value::Array(items) => items
                .iter()
                .map(
                    |item| match (item["name"].as_str(), item["value"].as_str()) {
                        (Some(name), Some(value)) => Ok((name.to_owned(), value.to_owned())),
                        _ => Err(RpcError::invalid_params(format!(
                            "each of `{what}` has a string `name` and `value`"
                        ))),
                    },
                )
                .collect(),
            _ => Err(RpcError::invalid_params(format!(
                "`{what}` must be an array"
            ))),
        }
    };
    for server in servers {
        let name = server["name"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("an MCP server needs a string `name`"))?;
        let entry = match server["type"].as_str() {
            None | Some("stdio") => {
                let command = server["command"].as_str().ok_or_else(|| {
                    RpcError::invalid_params(format!("MCP server `{name}` needs a `command`"))
                })?;
                let args: Vec<String> = match &server["args"] {
                    Value::Null => Vec::new(),
                    Value::Array(args) => args
                        .iter()
                        .map(|a| a.as_str().map(str::to_owned))
                        .collect::<Option<_>>()
                        .ok_or_else(|| {
                            RpcError::invalid_params(format!(
                                "MCP server `{name}`: `args` must be strings"
                            ))
                        })?,
                    _ => {
                        return Err(RpcError::invalid_params(format!(
                            "MCP server `{name}`: `args` must be an array"
                        )));
                    }
                };
                let mut stdio = StdioServer::new(command, args);
                stdio.env = pairs(&server["env"], "env")?;
                ServerConfig::Stdio(stdio)
            }
            Some("http") => {
                let mut http = HttpServer::default();
                http.url = server["url"]
                    .as_str()
                    .ok_or_else(|| {
                        RpcError::invalid_params(format!("MCP server `{name}` needs a `url`"))
                    })?
                    .to_owned();
                http.headers = pairs(&server["headers"], "headers")?;
                ServerConfig::Http(http)
            }
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "MCP server `{name}`: transport `{other}` is not supported (mcpCapabilities)"
                )));
            }
        };
        config.servers.insert(name.to_owned(), entry);
    }
    Ok(config)
}

/// The user's words from a prompt's content blocks: text, links to resources, and the text of
/// embedded resources; images and audio were not announced and are refused.
fn prompt_text(prompt: &Value) -> Result<String, RpcError> {
    let blocks = prompt
        .as_array()
        .ok_or_else(|| RpcError::invalid_params("`prompt` must be an array of content blocks"))?;
    let mut parts = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => parts.push(
                block["text"]
                    .as_str()
                    .ok_or_else(|| RpcError::invalid_params("a text block needs `text`"))?
                    .to_owned(),
            ),
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or_default();
                let name = block["name"].as_str().unwrap_or(uri);
                parts.push(format!("[{name}]({uri})"));
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                let text = resource["text"].as_str().ok_or_else(|| {
                    RpcError::invalid_params("only text resources can be embedded")
                })?;
                parts.push(format!("<resource uri=\"{uri}\">\n{text}\n</resource>"));
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "content of type {} is not supported (promptCapabilities)",
                    other.unwrap_or("(none)")
                )));
            }
        }
    }
    Ok(parts.join("\n"))
}

/// The model adapter of a session: the model's text and reasoning go to the editor as they
/// stream.
struct Streamed {
    inner: Arc<dyn ModelAdapter>,
    outbox: Outbox,
    session_id: String,
}

impl ModelAdapter for Streamed {
    fn stream(
        &self,
        request: agent_loop::ModelRequest,
        signal: CancellationToken,
    ) -> agent_loop::ModelStream {
        use futures::StreamExt;
        let outbox = self.outbox.clone();
        let session_id = self.session_id.clone();
        Box::pin(self.inner.stream(request, signal).map(move |item| {
            let update = match &item {
                Ok(agent_loop::ModelEvent::TextDelta(d)) if !d.is_empty() => {
                    updates::chunk("agent_message_chunk", d)
                }
                Ok(agent_loop::ModelEvent::ReasoningDelta(d)) if !d.is_empty() => {
                    updates::chunk("agent_thought_chunk", d)
                }
                _ => return item,
            };
            outbox.notify(
                "session/update",
                json!({"sessionId": session_id, "update": update}),
            );
            item
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_editors_mcp_servers_become_a_tool_mcp_configuration() {
        let config = mcp_config(&json!({"mcpServers": [
            {"name": "files", "command": "/usr/bin/fs", "args": ["/w"],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer x"}]}
        ]}))
        .unwrap();
        let mut stdio = StdioServer::new("/usr/bin/fs", ["/w"]);
        stdio.env.insert("TOKEN".into(), "t".into());
        let mut http = HttpServer::default();
        http.url = "http://127.0.0.1:1/mcp".into();
        http.headers
            .insert("Authorization".into(), "Bearer x".into());
        let mut expected = McpConfig::default();
        expected
            .servers
            .insert("files".into(), ServerConfig::Stdio(stdio));
        expected
            .servers
            .insert("web".into(), ServerConfig::Http(http));
        assert_eq!(config, expected);
        let refused = mcp_config(&json!({"mcpServers": [
            {"type": "sse", "name": "old", "url": "http://x", "headers": []}
        ]}))
        .unwrap_err();
        assert_eq!(refused.code, rpc::INVALID_PARAMS);
    }

    #[test]
    fn a_prompt_reads_text_links_and_embedded_text_and_refuses_images() {
        let text = prompt_text(&json!([
            {"type": "text", "text": "Look at"},
            {"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}
        ]))
        .unwrap();
        assert_eq!(
            text,
            "Look at\n[a.rs](file:///w/a.rs)\n<resource uri=\"file:///w/b.rs\">\nfn b() {}\n</resource>"
        );
        let refused = prompt_text(&json!([{"type": "image", "data": "", "mimeType": "image/png"}]))
            .unwrap_err();
        assert_eq!(refused.code, rpc::INVALID_PARAMS);
        assert_eq!(
            prompt_text(&json!("words")).unwrap_err().code,
            rpc::INVALID_PARAMS
        );
    }
}
