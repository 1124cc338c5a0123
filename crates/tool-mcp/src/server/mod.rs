//! Serving a registry's tools over MCP (the `server` feature): [`serve_stdio`] for a host's
//! own stdin and stdout, [`serve_streams`] for any byte stream pair (a pipe, an in-memory
//! duplex in a test).
//!
//! `tools/list` lists the registry's visible tools with their input schemas and, when the
//! value is an object, their output schemas; `tools/call` runs through
//! [`ToolRegistry::execute`], so the registry's validation, hooks, approver and timeouts apply
//! as to any call, and answers with the text content (and the injected context) and, for an
//! object value, `structuredContent`; a tool failure is `isError: true`. A client's
//! `notifications/cancelled` cancels the call's signal. Every call runs in one session
//! (`session_id` `mcp`, the [`ServeOptions::cwd`] directory), whose injected notices, a
//! background job's completion among them, ride on the next call's content.
//!
//! The framing is the server's own (`lines`, over `rpc`): bad input is answered as JSON-RPC
//! 2.0 says while the connection goes on, a message is bounded in bytes and in values
//! ([`MAX_CLIENT_MESSAGE_BYTES`], [`MAX_CLIENT_MESSAGE_VALUES`]) before anything parses it, and
//! at most [`MAX_REQUESTS_IN_FLIGHT`] requests wait for their answers.

mod lines;
mod rpc;
mod tools;

pub use lines::MAX_REQUESTS_IN_FLIGHT;
pub use rpc::{MAX_CLIENT_MESSAGE_BYTES, MAX_CLIENT_MESSAGE_VALUES};

use dsh_tools::ToolRegistry;
use rmcp::ServiceExt;
use rmcp::model::Implementation;
use std::path::PathBuf;
use tokio::io::{AsyncRead, AsyncWrite};

/// How [`serve_stdio`] and [`serve_streams`] present themselves and run the calls.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The server's name in its `initialize` answer (`serverInfo.name`).
    pub name: String,
    /// The server's version there (`serverInfo.version`).
    pub version: String,
    /// The working directory the calls' session gives the tools (`AgentHandle::cwd`, where
    /// `bash` runs); `None` for the process's current directory when serving starts.
    pub cwd: Option<PathBuf>,
}

impl ServeOptions {
    /// A server that calls itself `name`, at `version`, with its calls in the current
    /// directory.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> ServeOptions {
        ServeOptions {
            name: name.into(),
            version: version.into(),
            cwd: None,
        }
    }

    /// The same, with the calls' working directory `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> ServeOptions {
        self.cwd = Some(cwd.into());
        self
    }
}

impl Default for ServeOptions {
    /// `tool-mcp` at this crate's version.
    fn default() -> ServeOptions {
        ServeOptions::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
    }
}

/// Why serving ended before a client was served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// [`ServeOptions::cwd`] was `None` and the process has no current directory.
    #[error("no working directory")]
    NoWorkingDirectory(#[source] std::io::Error),
    /// The connection ended, or broke the protocol, before the client's `initialize` was
    /// answered.
    #[error(transparent)]
    Initialize(Box<dyn std::error::Error + Send + Sync>),
}

/// Serves `registry`'s tools over this process's stdin and stdout until the client closes
/// stdin. Nothing else may write to stdout meanwhile.
pub async fn serve_stdio(registry: ToolRegistry, options: ServeOptions) -> Result<(), ServeError> {
    serve_streams(registry, tokio::io::stdin(), tokio::io::stdout(), options).await
}

/// Serves `registry`'s tools over a byte stream pair: messages are read from `input`, one a
/// line, and answers written to `output`, until `input` ends. The calls still running then
/// have 5 s to answer (rmcp's drain) before their signals are cancelled; what they started in
/// the background is the host's to stop (a job runtime's teardown, say).
pub async fn serve_streams<R, W>(
    registry: ToolRegistry,
    input: R,
    output: W,
    options: ServeOptions,
) -> Result<(), ServeError>
where
    R: AsyncRead + Send + 'static,
    W: AsyncWrite + Send + 'static,
{
    let cwd = match options.cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(ServeError::NoWorkingDirectory)?,
    };
    let server = tools::ToolServer::new(
        registry,
        Implementation::new(options.name, options.version),
        cwd,
    );
    let service = server
        .serve(lines::LineTransport::start(input, output))
        .await
        .map_err(|e| ServeError::Initialize(Box::new(e)))?;
    // How the connection ended (the input's end, or a transport error) is not the host's
    // concern: either way the client is gone.
    let _ = service.waiting().await;
    Ok(())
}
