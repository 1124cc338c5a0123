//! The connections: one supervised task per server, its tools in a plugin scope of their own.

use crate::bridge::{self, CallOutcome};
use crate::config::{McpConfig, ServerConfig};
use crate::connect::{Connector, Endpoint, ServerLauncher, ServerProcess, StdioConnector};
use dsh_tools::{
    AgentRef, ExecContext, InjectedContext, Plugin, PluginError, PluginHandle, PreDecision, Scope,
    ScopeError, ToolDefinition, ToolError,
};
use futures::FutureExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ListToolsRequest, ServerResult,
};
use rmcp::service::{
    MaybeSendFuture, NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService,
};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a server that is shut down has to exit once its stdin is closed, before its
/// process group is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// The error codes a call of an MCP tool fails with, at the start of its message
/// (`MCP_SERVER_EXITED: …`); the registry's code is `TOOL_ERROR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpFailure {
    /// The server exited (or its connection closed) while the call ran.
    ServerExited,
    /// The server stopped answering; it was killed and is being restarted.
    ServerHung,
    /// The server is not connected (starting, restarting, or given up on).
    ServerUnavailable,
    /// The server's answer breaks the protocol.
    MalformedResult,
    /// The server answered the call with a protocol error.
    ProtocolError,
}

impl McpFailure {
    /// The code, e.g. `MCP_SERVER_EXITED`.
    pub fn as_str(self) -> &'static str {
        match self {
            McpFailure::ServerExited => "MCP_SERVER_EXITED",
            McpFailure::ServerHung => "MCP_SERVER_HUNG",
            McpFailure::ServerUnavailable => "MCP_SERVER_UNAVAILABLE",
            McpFailure::MalformedResult => "MCP_MALFORMED_RESULT",
            McpFailure::ProtocolError => "MCP_PROTOCOL_ERROR",
        }
    }

    fn error(self, message: impl fmt::Display) -> ToolError {
        ToolError::failed(format!("{}: {message}", self.as_str()))
    }
}

impl fmt::Display for McpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Restarts of a server that exited or hung: the delay doubles from `initial_delay` up to
/// `max_delay`, and after `max_attempts` failed starts in a row the server is given up on. A
/// start fails unless the server connects and lists its tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartPolicy {
    /// The delay before the first restart.
    pub initial_delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// Starts that may fail in a row before the server is given up on.
    pub max_attempts: u32,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_attempts: 5,
        }
    }
}

impl RestartPolicy {
    /// The delay before restart number `attempt` (from 1).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.initial_delay
            .saturating_mul(factor)
            .min(self.max_delay)
    }
}

/// How the MCP servers are run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpOptions {
    /// The timeout of each tool call (`TIMEOUT` when it elapses; the server is sent
    /// `notifications/cancelled`). `None`: no timeout.
    pub call_timeout: Option<Duration>,
    /// How long a server may take to start and answer `initialize` and `tools/list`.
    pub connect_timeout: Duration,
    /// After a cancelled or timed-out call, how long the server has to answer a probe before
    /// it counts as hung (killed and restarted).
    pub probe_timeout: Duration,
    /// Restarts.
    pub restart: RestartPolicy,
    /// Whether tools the server marks `destructiveHint` ask for approval before each call.
    pub approve_destructive: bool,
    /// The directory relative `cwd`s of stdio servers are resolved against, and the default
    /// working directory of a server.
    pub base_dir: Option<PathBuf>,
    /// What starts each stdio server (a sandbox's confinement); `None`: the plain command.
    pub launcher: Option<ServerLauncher>,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            call_timeout: Some(Duration::from_secs(300)),
            connect_timeout: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(5),
            restart: RestartPolicy::default(),
            approve_destructive: true,
            base_dir: None,
            launcher: None,
        }
    }
}

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Starting for the first time.
    Starting,
    /// Connected; its tools are registered.
    Connected,
    /// Exited, hung or failed to start; a restart is due.
    Restarting {
        /// What happened.
        reason: String,
    },
    /// Failed to start too many times in a row, or was shut down.
    Stopped {
        /// Why.
        reason: String,
    },
}

/// A snapshot of one server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// Where it stands.
    pub state: ServerState,
    /// Its registered tools, by registered name.
    pub tools: Vec<String>,
    /// Its tools that could not be registered, with the reason.
    pub rejected: Vec<(String, String)>,
    /// How many times it was restarted.
    pub restarts: u32,
}

/// Why the servers could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The scope the servers' tools go into was disposed.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// A server name is used twice.
    #[error("an MCP server named `{0}` is already running")]
    Duplicate(String),
}

/// What every server shares: who to tell, and which tools ask first.
#[derive(Default)]
struct Shared {
    /// The agents that have called a tool, to be told of servers that exit or come back.
    agents: Mutex<Vec<AgentRef>>,
    /// The registered names of tools the servers mark destructive.
    destructive: Mutex<HashSet<String>>,
}

impl Shared {
    fn remember(&self, agent: &AgentRef) {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        agents.retain(|a| a.is_alive());
        if !agents.iter().any(|a| a.session_id() == agent.session_id()) {
            agents.push(Arc::clone(agent));
        }
    }

    fn tell(&self, server: &str, text: &str) {
        let agents: Vec<AgentRef> = self
            .agents
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for agent in agents {
            let _ = agent.inject(InjectedContext::from_plugin(format!("mcp:{server}"), text));
        }
    }
}

/// The MCP servers of a registry: each a supervised connection whose tools live in a plugin
/// scope of their own (`mcp:<server>`) under the scope given to [`McpServers::new`].
///
/// Dropping it stops the servers (their processes are killed); [`McpServers::shutdown`] also
/// waits for them to be gone and unregisters their tools.
pub struct McpServers {
    scope: Scope,
    options: Arc<McpOptions>,
    shared: Arc<Shared>,
    servers: Mutex<BTreeMap<String, Arc<Server>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    shutdown: CancellationToken,
}

impl fmt::Debug for McpServers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.status())
            .finish_non_exhaustive()
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl McpServers {
    /// An empty set of servers whose tools go into a child scope (`mcp`) of `scope`. It
    /// installs the policy of MCP tools there: destructive tools ask for approval.
    pub fn new(scope: &Scope, options: McpOptions) -> Result<McpServers, McpError> {
        let scope = scope.child("mcp")?;
        let shared = Arc::new(Shared::default());
        let policy = Arc::clone(&shared);
        let approve = options.approve_destructive;
        scope.on_pre_execute(move |execution, next| {
            let policy = Arc::clone(&policy);
            async move {
                if let Some(agent) = execution.agent() {
                    policy.remember(agent);
                }
                let verdict = next.run().await;
                let destructive = approve
                    && policy
                        .destructive
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .contains(execution.name());
                if destructive && verdict == PreDecision::Allow {
                    PreDecision::ask(format!(
                        "the MCP server marks `{}` as destructive",
                        execution.name()
                    ))
                } else {
                    verdict
                }
            }
        })?;
        Ok(McpServers {
            scope,
            options: Arc::new(options),
            shared,
            servers: Mutex::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
        })
    }

    /// Starts every server of `config` and waits until each has connected and registered
    /// its tools, or failed its first start (it is then retried in the background).
    pub async fn start(
        scope: &Scope,
        config: &McpConfig,
        options: McpOptions,
    ) -> Result<McpServers, McpError> {
        let servers = McpServers::new(scope, options)?;
        let mut started = Vec::new();
        for (name, server) in &config.servers {
            started.push(servers.add(name, server.clone())?);
        }
        futures::future::join_all(started).await;
        Ok(servers)
    }

    /// Adds a configured server. The returned future resolves once its first start has
    /// connected or failed; the server runs whether or not it is awaited.
    pub fn add(
        &self,
        name: &str,
        server: ServerConfig,
    ) -> Result<impl Future<Output = ()> + Send + 'static, McpError> {
        let endpoint = match server {
            ServerConfig::Stdio(stdio) => {
                let mut connector = StdioConnector::new(stdio, self.options.base_dir.clone());
                if let Some(launcher) = &self.options.launcher {
                    connector = connector.with_launcher(launcher.clone());
                }
                Endpoint::Stream(Arc::new(connector))
            }
            ServerConfig::Http(http) => Endpoint::Http(http),
        };
        self.add_endpoint(name, endpoint)
    }

    /// Adds a server reached through `connector` (an in-process server over a pipe, a
    /// program spawned some other way).
    pub fn add_connector(
        &self,
        name: &str,
        connector: Arc<dyn Connector>,
    ) -> Result<impl Future<Output = ()> + Send + 'static, McpError> {
        self.add_endpoint(name, Endpoint::Stream(connector))
    }

    fn add_endpoint(
        &self,
        name: &str,
        endpoint: Endpoint,
    ) -> Result<impl Future<Output = ()> + Send + 'static, McpError> {
        let mut servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        if servers.contains_key(name) {
            return Err(McpError::Duplicate(name.to_owned()));
        }
        let server = Arc::new(Server {
            name: name.to_owned(),
            endpoint,
            options: Arc::clone(&self.options),
            shared: Arc::clone(&self.shared),
            scope: self.scope.clone(),
            plugin: Mutex::new(None),
            live: Mutex::new(None),
            status: Mutex::new(ServerStatus {
                name: name.to_owned(),
                state: ServerState::Starting,
                tools: Vec::new(),
                rejected: Vec::new(),
                restarts: 0,
            }),
            list_changed: Arc::new(Notify::new()),
            shutdown: self.shutdown.child_token(),
        });
        servers.insert(name.to_owned(), Arc::clone(&server));
        let (ready, started) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(Arc::clone(&server).supervise(ready));
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
        Ok(started.map(|_| ()))
    }

    /// A snapshot of every server, by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|server| server.status())
            .collect()
    }

    /// A snapshot of one server.
    pub fn server_status(&self, name: &str) -> Option<ServerStatus> {
        let servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        servers.get(name).map(|server| server.status())
    }

    /// Waits until `name` is connected after at least `restarts` restarts, or stopped, for
    /// tests and hosts that show progress; `None` when there is no such server.
    pub async fn wait_connected(&self, name: &str, restarts: u32) -> Option<ServerStatus> {
        loop {
            let status = self.server_status(name)?;
            match status.state {
                ServerState::Connected if status.restarts >= restarts => return Some(status),
                ServerState::Stopped { .. } => return Some(status),
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// Stops every server, waits for their processes to be gone, and unregisters their
    /// tools.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for task in tasks {
            let _ = task.await;
        }
        self.scope.dispose();
    }
}

/// The live connection of a server.
#[derive(Clone)]
struct Live {
    peer: Peer<RoleClient>,
    /// Fires when the connection ends; `ended` says why.
    closed: CancellationToken,
    /// Fired by a probe that found this connection's server not answering; a token of the
    /// connection, so a late probe cannot end the next one.
    hung: CancellationToken,
    ended: Arc<Mutex<Option<McpFailure>>>,
}

impl Live {
    fn ended(&self) -> McpFailure {
        self.ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(McpFailure::ServerExited)
    }
}

/// One supervised server.
struct Server {
    name: String,
    endpoint: Endpoint,
    options: Arc<McpOptions>,
    shared: Arc<Shared>,
    scope: Scope,
    plugin: Mutex<Option<PluginHandle>>,
    live: Mutex<Option<Live>>,
    status: Mutex<ServerStatus>,
    list_changed: Arc<Notify>,
    shutdown: CancellationToken,
}

/// The client side of a connection: it hears `notifications/tools/list_changed`.
#[derive(Clone)]
struct Handler {
    list_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.list_changed.notify_one();
        std::future::ready(())
    }
}

type Service = RunningService<RoleClient, Handler>;

/// How a connection ended.
enum Ending {
    Shutdown,
    /// It closed, or `tools/list` went unanswered, before the tools were listed.
    Unlisted,
    Exited,
    Hung,
}

impl Server {
    fn status(&self) -> ServerStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_state(&self, state: ServerState) {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).state = state;
    }

    fn live(&self) -> Option<Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn supervise(self: Arc<Self>, ready: tokio::sync::oneshot::Sender<()>) {
        let mut ready = Some(ready);
        let mut failures: u32 = 0;
        let mut started_once = false;
        loop {
            if self.shutdown.is_cancelled() {
                break;
            }
            let connected = tokio::select! {
                connected = tokio::time::timeout(self.options.connect_timeout, self.connect()) => connected,
                () = self.shutdown.cancelled() => break,
            };
            let reason = match connected {
                Ok(Ok((service, process))) => {
                    let restarted = started_once;
                    started_once = true;
                    let ending = self.serve(service, process, ready.take(), restarted).await;
                    // A start succeeds once the tools are listed: a server that always ends
                    // (or stalls) before is given up on like one that cannot be spawned.
                    if !matches!(ending, Ending::Unlisted) {
                        failures = 0;
                    }
                    match ending {
                        Ending::Shutdown => break,
                        Ending::Unlisted => String::from("the server did not list its tools"),
                        Ending::Exited => String::from("the server exited"),
                        Ending::Hung => String::from("the server stopped answering and was killed"),
                    }
                }
                Ok(Err(error)) => format!("the server failed to start: {error}"),
                Err(_) => format!(
                    "the server did not start within {}s",
                    self.options.connect_timeout.as_secs_f64()
                ),
            };
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            failures += 1;
            let policy = self.options.restart;
            if failures > policy.max_attempts {
                let why = format!("{reason}; gave up after {} failed starts", failures);
                tracing::warn!(server = %self.name, "MCP server stopped: {why}");
                self.set_state(ServerState::Stopped {
                    reason: why.clone(),
                });
                self.shared.tell(
                    &self.name,
                    &format!(
                        "The MCP server `{}` is stopped ({why}); its tools are unavailable.",
                        self.name
                    ),
                );
                return;
            }
            tracing::warn!(server = %self.name, "MCP server: {reason}; restarting");
            self.set_state(ServerState::Restarting {
                reason: reason.clone(),
            });
            tokio::select! {
                () = tokio::time::sleep(policy.delay(failures)) => {}
                () = self.shutdown.cancelled() => break,
            }
        }
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
        self.set_state(ServerState::Stopped {
            reason: String::from("shut down"),
        });
    }

    async fn connect(&self) -> Result<(Service, Option<ServerProcess>), String> {
        let handler = Handler {
            list_changed: Arc::clone(&self.list_changed),
        };
        match &self.endpoint {
            Endpoint::Stream(connector) => {
                let connection = connector
                    .connect()
                    .await
                    .map_err(|e| format!("{} ({e})", connector.describe()))?;
                let service = handler
                    .serve((connection.reader, connection.writer))
                    .await
                    .map_err(|e| format!("{}: {e}", connector.describe()))?;
                Ok((service, connection.process))
            }
            Endpoint::Http(http) => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                // `https` needs a crypto provider; install ring's unless the host has one.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut headers = std::collections::HashMap::new();
                for (name, value) in &http.headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header {name}: {e}"))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|e| format!("header {name}: {e}"))?;
                    headers.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                    .custom_headers(headers);
                let transport = StreamableHttpClientTransport::from_config(config);
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("{}: {e}", http.url))?;
                Ok((service, None))
            }
        }
    }

    /// Runs one connection: registers its tools, follows `list_changed`, and ends when the
    /// server exits, hangs or is shut down.
    async fn serve(
        self: &Arc<Self>,
        service: Service,
        process: Option<ServerProcess>,
        ready: Option<tokio::sync::oneshot::Sender<()>>,
        restarted: bool,
    ) -> Ending {
        let live = Live {
            peer: service.peer().clone(),
            closed: CancellationToken::new(),
            hung: CancellationToken::new(),
            ended: Arc::new(Mutex::new(None)),
        };
        let stop = service.cancellation_token();
        let mut waiting = Box::pin(service.waiting());
        // Whether `waiting` has finished: a finished future must not be polled again.
        let mut finished = false;
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = Some(live.clone());
        let listed = tokio::select! {
            listed = tokio::time::timeout(self.options.connect_timeout, self.refresh(&live.peer)) => listed.unwrap_or(false),
            _ = &mut waiting => {
                finished = true;
                false
            }
        };
        {
            let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
            status.state = ServerState::Connected;
            if restarted {
                status.restarts += 1;
            }
        }
        if let Some(ready) = ready {
            let _ = ready.send(());
        }
        if restarted && listed {
            let tools = self.status().tools.join(", ");
            self.shared.tell(
                &self.name,
                &format!(
                    "The MCP server `{}` was restarted; its tools are available again: {tools}.",
                    self.name
                ),
            );
        }
        let ending = if !listed {
            Ending::Unlisted
        } else {
            // The reloads race the ending like any other branch: a reload the server never
            // answers must not delay a shutdown or hide a hang.
            let reloads = async {
                loop {
                    self.list_changed.notified().await;
                    let refreshed = self.refresh(&live.peer);
                    let _ = tokio::time::timeout(self.options.connect_timeout, refreshed).await;
                }
            };
            tokio::select! {
                () = self.shutdown.cancelled() => Ending::Shutdown,
                () = live.hung.cancelled() => Ending::Hung,
                _ = &mut waiting => {
                    finished = true;
                    Ending::Exited
                }
                _ = reloads => Ending::Exited,
            }
        };
        let failure = match ending {
            Ending::Hung => McpFailure::ServerHung,
            _ => McpFailure::ServerExited,
        };
        *live.ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = None;
        live.closed.cancel();
        stop.cancel();
        if !finished {
            let _ = waiting.await;
        }
        // The connection is closed, so is the server's stdin: a server shut down gets a moment
        // to clean up after itself (stop its own children), one that exited or hung none.
        if let Some(process) = process {
            let grace = match ending {
                Ending::Shutdown => SHUTDOWN_GRACE,
                _ => Duration::ZERO,
            };
            process.stop(grace).await;
        }
        self.unregister();
        if !matches!(ending, Ending::Shutdown) {
            let what = match ending {
                Ending::Hung => "stopped answering and was killed",
                _ => "exited",
            };
            self.shared.tell(
                &self.name,
                &format!(
                    "The MCP server `{}` {what}; its tools are unavailable until it restarts.",
                    self.name
                ),
            );
        }
        ending
    }

    /// Lists the server's tools and registers them in place of the previous list. Whether
    /// the server answered: with a list, or with a protocol error (a server without tools),
    /// not a connection that closed.
    async fn refresh(self: &Arc<Self>, peer: &Peer<RoleClient>) -> bool {
        let tools = match peer.list_all_tools().await {
            Ok(tools) => tools,
            Err(error) => {
                tracing::warn!(server = %self.name, "MCP tools/list failed: {error}");
                return matches!(error, ServiceError::McpError(_));
            }
        };
        let mut definitions = Vec::new();
        let mut rejected = Vec::new();
        let mut destructive = Vec::new();
        for tool in tools {
            let tool = match serde_json::to_value(&tool) {
                Ok(tool) => tool,
                Err(error) => {
                    rejected.push((tool.name.to_string(), error.to_string()));
                    continue;
                }
            };
            match self.definition(&tool) {
                Ok((definition, asks)) => {
                    if asks {
                        destructive.push(definition.name().to_owned());
                    }
                    definitions.push(definition);
                }
                Err((name, why)) => rejected.push((name, why)),
            }
        }
        for (name, why) in &rejected {
            tracing::warn!(server = %self.name, tool = %name, "MCP tool not registered: {why}");
        }
        let plugin = ToolsPlugin {
            name: format!("mcp:{}", self.name),
            definitions,
        };
        let mut names: Vec<String> = plugin
            .definitions
            .iter()
            .map(|d| d.name().to_owned())
            .collect();
        names.sort();
        // The status is read before the shared set is locked: `unregister` takes the two
        // locks in that order too.
        let previous = self.status().tools;
        {
            let mut set = self
                .shared
                .destructive
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for name in previous {
                set.remove(&name);
            }
            set.extend(destructive);
        }
        let mut handle = self.plugin.lock().unwrap_or_else(|e| e.into_inner());
        let applied = match handle.as_ref() {
            Some(handle) => handle.reload(plugin),
            None => self.scope.load(plugin).map(|loaded| {
                *handle = Some(loaded);
            }),
        };
        if let Err(error) = applied {
            tracing::warn!(server = %self.name, "MCP tools could not be registered: {error}");
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.tools = names;
        status.rejected = rejected;
        true
    }

    fn unregister(&self) {
        if let Some(handle) = self
            .plugin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            handle.dispose();
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let mut set = self
            .shared
            .destructive
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for name in status.tools.drain(..) {
            set.remove(&name);
        }
    }

    /// The raw definition of one listed tool, and whether it asks for approval; or its name
    /// and why it cannot be registered.
    fn definition(
        self: &Arc<Self>,
        tool: &Value,
    ) -> Result<(ToolDefinition, bool), (String, String)> {
        let remote = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(name) = bridge::tool_name(&self.name, &remote) else {
            return Err((
                remote,
                String::from("its name is too long for `mcp__<server>__<tool>` (64 characters)"),
            ));
        };
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| {
                format!(
                    "The tool `{remote}` of the MCP server `{}` (it has no description).",
                    self.name
                )
            });
        let input = tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let declared = tool.get("outputSchema").filter(|s| !s.is_null()).cloned();
        let has_output_schema = declared.is_some();
        let annotations = tool.get("annotations");
        let hint = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
        };
        let read_only = hint("readOnlyHint") == Some(true);
        let destructive = !read_only && hint("destructiveHint") == Some(true);

        let server = Arc::clone(self);
        let remote_name = remote.clone();
        let mut builder = ToolDefinition::builder(name.clone(), description)
            .raw_parameters(input)
            .raw_output(bridge::output_schema(declared.as_ref()), move |_, value| {
                bridge::render(value, has_output_schema)
            })
            .execute(move |args, exec| {
                let server = Arc::clone(&server);
                let remote = remote_name.clone();
                async move { server.call(remote, args, exec, has_output_schema).await }
            });
        if read_only {
            builder = builder.concurrency_safe(|_| true);
        }
        if let Some(timeout) = self.options.call_timeout {
            builder = builder.timeout(timeout);
        }
        builder
            .build()
            .map(|definition| (definition, destructive))
            .map_err(|error| (remote, error.to_string()))
    }

    /// One `tools/call`.
    async fn call(
        self: Arc<Self>,
        remote: String,
        args: Arc<Value>,
        exec: ExecContext,
        has_output_schema: bool,
    ) -> Result<Value, ToolError> {
        let Some(live) = self.live() else {
            return Err(McpFailure::ServerUnavailable.error(format!(
                "the MCP server `{}` is not connected ({})",
                self.name,
                describe_state(&self.status().state)
            )));
        };
        let mut params = CallToolRequestParams::new(remote);
        params.arguments = match &*args {
            Value::Object(map) => Some(map.clone()),
            Value::Null => None,
            other => {
                return Err(ToolError::invalid_args(format!(
                    "MCP tool arguments must be an object, not {other}"
                )));
            }
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = live
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await;
        let mut handle = match sent {
            Ok(handle) => handle,
            Err(error) => return Err(self.transport_failure(&live, &error)),
        };
        let answer = tokio::select! {
            answer = &mut handle.rx => answer,
            () = exec.signal().cancelled() => {
                // The registry reports the call as cancelled (or timed out); the server is told,
                // and probed in the background in case it has stopped answering altogether.
                let _ = handle.cancel(Some(String::from("the caller cancelled the call"))).await;
                self.probe(live);
                return Err(ToolError::failed("cancelled"));
            }
            () = live.closed.cancelled() => {
                return Err(self.ended_failure(&live));
            }
        };
        let result = match answer {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => return Err(self.transport_failure(&live, &error)),
            Err(_) => return Err(self.ended_failure(&live)),
        };
        let result = match result {
            ServerResult::CallToolResult(result) => {
                serde_json::to_value(result).map_err(|e| McpFailure::MalformedResult.error(e))?
            }
            other => {
                let value = serde_json::to_value(&other).unwrap_or(Value::Null);
                return Err(McpFailure::MalformedResult.error(format!(
                    "the MCP server `{}` answered tools/call with something that is not a tool result: {value}",
                    self.name
                )));
            }
        };
        match bridge::call_outcome(&result, has_output_schema) {
            CallOutcome::Value(value) => Ok(value),
            CallOutcome::Malformed(why) => {
                Err(McpFailure::MalformedResult
                    .error(format!("the MCP server `{}`: {why}", self.name)))
            }
        }
    }

    fn ended_failure(&self, live: &Live) -> ToolError {
        let failure = live.ended();
        let what = match failure {
            McpFailure::ServerHung => "stopped answering during the call and was killed",
            _ => "exited during the call",
        };
        failure.error(format!(
            "the MCP server `{}` {what}; its tools are unregistered until it restarts",
            self.name
        ))
    }

    fn transport_failure(&self, live: &Live, error: &ServiceError) -> ToolError {
        match error {
            ServiceError::McpError(data) => McpFailure::ProtocolError.error(format!(
                "the MCP server `{}` refused the call: {} (code {})",
                self.name, data.message, data.code.0
            )),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.ended_failure(live)
            }
            other => {
                McpFailure::ProtocolError.error(format!("the MCP server `{}`: {other}", self.name))
            }
        }
    }

    /// Checks in the background that the server still answers; one that does not within the
    /// probe timeout is killed and restarted.
    fn probe(self: &Arc<Self>, live: Live) {
        let server = Arc::clone(self);
        tokio::spawn(async move {
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::default());
            let options = PeerRequestOptions::with_timeout(server.options.probe_timeout);
            let answer = match live.peer.send_request_with_option(request, options).await {
                Ok(handle) => handle.await_response().await,
                Err(error) => Err(error),
            };
            if let Err(ServiceError::Timeout { .. }) = answer
                && !live.closed.is_cancelled()
            {
                tracing::warn!(server = %server.name, "MCP server does not answer; killing it");
                live.hung.cancel();
            }
        });
    }
}

fn describe_state(state: &ServerState) -> String {
    match state {
        ServerState::Starting => String::from("it is starting"),
        ServerState::Connected => String::from("it is reconnecting"),
        ServerState::Restarting { reason } => format!("{reason}; it is restarting"),
        ServerState::Stopped { reason } => format!("it is stopped: {reason}"),
    }
}

/// The tools of one server's current tool list: applying it registers them in the server's
/// scope, reloading it replaces them.
struct ToolsPlugin {
    name: String,
    definitions: Vec<ToolDefinition>,
}

impl Plugin for ToolsPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        for definition in &self.definitions {
            // A name another layer's tool already holds is skipped, not fatal: the rest of
            // the server's tools still register.
            if let Err(error) = scope.register(definition.clone()) {
                tracing::warn!(plugin = %self.name, "MCP tool not registered: {error}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_delays_double_up_to_the_limit() {
        let policy = RestartPolicy {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
            max_attempts: 3,
        };
        let delays: Vec<u128> = (1..=5).map(|n| policy.delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
    }
}
