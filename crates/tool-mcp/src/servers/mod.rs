//! The connections: one supervised task per server, its tools in a plugin scope of their own.
//!
//! This module holds the public types, [`McpServers`] and the state of one server; how a
//! server is supervised is in `supervision`, and how its tools are defined and called in
//! `calls`.

mod calls;
mod supervision;

use crate::config::{McpConfig, ServerConfig};
use crate::connect::{Connector, Endpoint, ServerLauncher, StdioConnector};
use dsh_tools::{
    AgentRef, InjectedContext, Plugin, PluginError, PluginHandle, PreDecision, Scope, ScopeError,
    ToolDefinition, ToolError,
};
use futures::FutureExt;
use rmcp::ClientHandler;
use rmcp::service::{MaybeSendFuture, NotificationContext, Peer, RoleClient, RunningService};
use std::collections::{BTreeMap, HashMap};
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
    /// Whether destructive tools ask for approval before each call: those the server marks
    /// `destructiveHint: true`, and, as the specification's defaults make them, those it marks
    /// neither `readOnlyHint: true` nor `destructiveHint: false`.
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
    /// Why its last `tools/list` failed (a protocol error, or an answer past one of the
    /// limits of a message, [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES) and the like);
    /// `None` when it answered. Its tools are then those of the list before, none on a first
    /// list.
    pub listing: Option<String>,
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
    /// The registered names of the tools that ask before each call (marked destructive, or
    /// not marked read-only or non-destructive), with the reason they ask.
    destructive: Mutex<HashMap<String, String>>,
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
    /// installs the policy of MCP tools there: destructive tools ask for approval (a tool is
    /// destructive unless marked `readOnlyHint: true` or `destructiveHint: false`).
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
                let asks = approve
                    .then(|| {
                        policy
                            .destructive
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get(execution.name())
                            .cloned()
                    })
                    .flatten();
                match asks {
                    Some(why) if verdict == PreDecision::Allow => PreDecision::ask(why),
                    _ => verdict,
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
                listing: None,
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
    /// What the connection's transport refused: answers past its limits.
    refusals: Arc<crate::framing::Refusals>,
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
