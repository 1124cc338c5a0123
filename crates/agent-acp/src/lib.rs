//! Serve a dsh-rs agent to an editor over the Agent Client Protocol (ACP).
//!
//! The editor (the client) starts the host's program and speaks JSON-RPC on its stdin and
//! stdout, one message per line. An [`AcpAgent`] answers it with the host's model adapter,
//! session store and a [`SessionFactory`] that builds each session's tools:
//!
//! - `initialize` states what the agent does (session loading, text and embedded-context
//!   prompts, stdio and HTTP MCP servers) and must come first;
//! - `session/new` opens a session of the store in the editor's working directory, its tools
//!   built by the factory from a [`SessionSetup`] (the editor's MCP servers included, for the
//!   host to connect); `session/load` continues one from the store and replays its history as
//!   updates before it answers;
//! - `session/prompt` runs a turn and streams it (`session/update`: message and thought chunks,
//!   tool calls and their results as cards projected by `presenters::acp`, background jobs'
//!   completion notices, the calls of a `run_code` program as tool calls of their own), asking
//!   the editor before each call of the tools named with [`AcpAgent::ask_before`]
//!   (`session/request_permission`, through the one approval flow of
//!   [`dsh_tools::approval`]); a prompt sent while a background job's notice has a turn of its
//!   own waits for that turn, then has its own;
//! - `session/cancel` and `$/cancel_request` cancel a prompt;
//! - a message is at most [`rpc::MAX_MESSAGE_BYTES`] and [`rpc::MAX_MESSAGE_VALUES`] values,
//!   malformed input gets a JSON-RPC error while the connection goes on, and while
//!   [`rpc::MAX_UNWRITTEN`] messages wait for the output the input is not read (backpressure);
//! - the end of the input cancels every prompt, lets the sessions still opening open, answers
//!   everything read, then ends every session and stops its jobs.
//!
//! It deliberately does not choose tools, a model or a sandbox: those are the host's (the
//! `dsh-agent acp` command wires its bash tool, sandbox and MCP client; `examples/tool-host`
//! serves one custom tool). When the client offers its file methods (`fs.readTextFile`,
//! `fs.writeTextFile`), each [`SessionSetup`] carries [`EditorFiles`], through which the host's
//! file tools read and write the editor's buffers; the client's terminal methods are not used.
//!
//! The protocol layer is written here on `serde_json` rather than taken from the
//! `agent-client-protocol` crate: that crate's types turn on `serde_json`'s `preserve_order`,
//! which Cargo would unify into every crate of a user's graph (docs/design/lossless-json.md).
//! The messages are checked against the official ACP schema and client in `dsh-agent`'s tests
//! and in `tests/acp-conformance` instead.
//!
//! Unsafe budget: 0 — none.
//!
//! ```no_run
//! use agent_acp::{AcpAgent, SessionSetup, SessionTools};
//! use agent_loop::FsSessionStore;
//! use dsh_tools::ToolRegistry;
//! use std::sync::Arc;
//!
//! # async fn serve(model: Arc<dyn agent_loop::ModelAdapter>) -> Result<(), Box<dyn std::error::Error>> {
//! let store = FsSessionStore::new("/tmp/sessions");
//! let sessions = |_setup: SessionSetup| async move {
//!     // Each session gets a registry of its own: the agent installs its approvals on it.
//!     Ok(SessionTools::new(ToolRegistry::new()))
//! };
//! AcpAgent::new(model, Arc::new(store), sessions)
//!     .agent_info("my-host", "1.0.0")
//!     .serve_stdio()
//!     .await;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

/// The README's example, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod files;
mod host;
mod nested;
mod params;
mod permission;
pub mod rpc;
mod server;
mod tasks;
mod updates;

pub use files::{EDITOR_FILE_TIMEOUT, EditorFileError, EditorFiles};
pub use host::{McpServer, McpTransport, OpenError, SessionFactory, SessionSetup, SessionTools};

use agent_loop::{ModelAdapter, SessionStore};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// An ACP agent: the host's model, session store and session factory, and how it asks.
pub struct AcpAgent {
    adapter: Arc<dyn ModelAdapter>,
    store: Arc<dyn SessionStore>,
    sessions: Box<dyn SessionFactory>,
    /// The tools whose calls ask the editor, with the reason; `None`: no approval flow at all
    /// (every call runs without asking).
    asked: Option<Vec<(String, String)>>,
    name: String,
    version: String,
}

impl std::fmt::Debug for AcpAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpAgent")
            .field("store", &self.store)
            .field("asked", &self.asked)
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl AcpAgent {
    /// An agent answering with `adapter`, keeping sessions in `store`, building each session's
    /// tools with `sessions`. It asks the editor about the calls other policies ask about (an
    /// MCP tool marked destructive, a request to leave the sandbox), and before no tool's
    /// calls until [`AcpAgent::ask_before`] names one. It calls itself `agent-acp` until
    /// [`AcpAgent::agent_info`] says otherwise.
    pub fn new(
        adapter: Arc<dyn ModelAdapter>,
        store: Arc<dyn SessionStore>,
        sessions: impl SessionFactory,
    ) -> AcpAgent {
        AcpAgent {
            adapter,
            store,
            sessions: Box::new(sessions),
            asked: Some(Vec::new()),
            name: String::from(env!("CARGO_PKG_NAME")),
            version: String::from(env!("CARGO_PKG_VERSION")),
        }
    }

    /// Asks the editor before every call of `tool` (that the other listeners allow), saying
    /// `reason`: allow once, allow the tool for the session, or reject.
    pub fn ask_before(mut self, tool: impl Into<String>, reason: impl Into<String>) -> Self {
        self.asked
            .get_or_insert_with(Vec::new)
            .push((tool.into(), reason.into()));
        self
    }

    /// Never asks the editor: every call runs (a host's `--no-ask`). A question another policy
    /// raises is then answered by no one, which refuses the call.
    pub fn without_approvals(mut self) -> Self {
        self.asked = None;
        self
    }

    /// The name (also the title) and version `initialize` reports in `agentInfo`.
    pub fn agent_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// Serves one client that writes to `input` and reads `output`, until `input` ends and
    /// every session has ended.
    pub async fn serve<R, W>(self, input: R, output: W)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        server::serve(self, input, output).await;
    }

    /// Serves the client on this process's stdin and stdout.
    pub async fn serve_stdio(self) {
        self.serve(tokio::io::stdin(), tokio::io::stdout()).await;
    }
}
