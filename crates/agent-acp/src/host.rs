//! What the host gives each session: the [`SessionFactory`] that builds a session's tools from
//! the editor's [`SessionSetup`], and the [`SessionTools`] it returns.

use dsh_tools::ToolRegistry;
use dsh_tools::jobs::JobRuntime;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;

/// What the editor asked of a session (`session/new` or `session/load`), for the host to build
/// its tools on.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SessionSetup {
    /// The session's id in the store.
    pub session_id: String,
    /// The editor's working directory: an absolute path to a directory.
    pub cwd: PathBuf,
    /// The session's own directory for spilled output, in the store.
    pub spill_dir: PathBuf,
    /// The MCP servers the editor passed, in its order, for the host to connect (or refuse).
    pub mcp_servers: Vec<McpServer>,
    /// Whether the session continues one from the store (`session/load`).
    pub resumed: bool,
    /// The editor's files, when the client offers to read or write them
    /// (`clientCapabilities.fs`): for file tools that should see the editor's buffers.
    pub editor_files: Option<crate::EditorFiles>,
}

/// An MCP server the editor passed with `session/new` or `session/load`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpServer {
    /// Its name, which the editor chose.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
}

/// How to reach an editor's MCP server: the transports this agent announces
/// (`mcpCapabilities`: stdio and HTTP, not SSE).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A program spoken to on its stdio.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// Why a session's tools could not be built: the editor's answer is an error of this kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The editor asked for something this host cannot give (`Invalid params`), e.g. an MCP
    /// server that does not start.
    #[error("{0}")]
    InvalidParams(String),
    /// The host failed (`Internal error`).
    #[error("{0}")]
    Internal(String),
}

/// What runs when a session ends, after its turns, jobs and agent are done.
pub(crate) type OnEnd = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send + Sync>;

/// The tools of one session, as the host built them.
#[non_exhaustive]
pub struct SessionTools {
    /// The session's registry: its own, since the agent installs the session's approvals and
    /// announcements on it.
    pub registry: ToolRegistry,
    /// The jobs runtime of the registry's background tools (an unused one when it has none).
    pub jobs: JobRuntime,
    /// What the session's `session/start` event records of its sandbox, if anything.
    pub sandbox: Option<Value>,
    /// The system prompt, when the host sets one (else the agent loop's default).
    pub system_prompt: Option<String>,
    pub(crate) on_end: Option<OnEnd>,
}

impl std::fmt::Debug for SessionTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTools")
            .field("registry", &self.registry)
            .field("sandbox", &self.sandbox)
            .field("system_prompt", &self.system_prompt)
            .finish_non_exhaustive()
    }
}

impl SessionTools {
    /// A session's tools: `registry`, with a jobs runtime of its own, no sandbox report, no
    /// system prompt of the host's.
    pub fn new(registry: ToolRegistry) -> SessionTools {
        SessionTools {
            registry,
            jobs: JobRuntime::default(),
            sandbox: None,
            system_prompt: None,
            on_end: None,
        }
    }

    /// The jobs runtime behind the registry's background tools.
    pub fn jobs(mut self, jobs: JobRuntime) -> Self {
        self.jobs = jobs;
        self
    }

    /// What `session/start` records of the sandbox.
    pub fn sandbox(mut self, report: Value) -> Self {
        self.sandbox = Some(report);
        self
    }

    /// The session's system prompt.
    pub fn system_prompt(mut self, system: impl Into<String>) -> Self {
        self.system_prompt = Some(system.into());
        self
    }

    /// Runs `end` when the session ends (e.g. shutting down the MCP servers the host started
    /// for it).
    pub fn on_end<F, Fut>(mut self, end: F) -> Self
    where
        F: FnOnce() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_end = Some(Box::new(move || Box::pin(end())));
        self
    }
}

/// Builds the tools of each session the editor opens. A closure
/// `Fn(SessionSetup) -> impl Future<Output = Result<SessionTools, OpenError>>` is one.
pub trait SessionFactory: Send + Sync + 'static {
    /// The tools of the session `setup` describes.
    fn open(&self, setup: SessionSetup) -> BoxFuture<'static, Result<SessionTools, OpenError>>;
}

impl<F, Fut> SessionFactory for F
where
    F: Fn(SessionSetup) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<SessionTools, OpenError>> + Send + 'static,
{
    fn open(&self, setup: SessionSetup) -> BoxFuture<'static, Result<SessionTools, OpenError>> {
        Box::pin(self(setup))
    }
}
