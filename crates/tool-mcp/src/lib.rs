//! MCP servers' tools in a dsh-tools registry, and (with the `server` feature) a registry's
//! tools served to MCP clients.
//!
//! [`McpServers`] connects to Model Context Protocol servers with the official Rust SDK
//! (`rmcp`): over stdio, spawning the server with the shell executor's hygiene (its own process
//! group, an environment of [`INHERITED_VARS`] plus its configured `env`, the group killed on
//! dispose), or over streamable HTTP. Each server is a plugin scope (`mcp:<server>`): its tools
//! register as raw definitions named `mcp__<server>__<tool>` with the server's description,
//! input schema and output schema, and `notifications/tools/list_changed` reloads them.
//!
//! - A result's `structuredContent` is the canonical value when the tool declares an output
//!   schema (the registry validates it); otherwise the content blocks become the value's text
//!   and images. `isError` is a domain failure: a value with `isError: true`.
//! - `readOnlyHint` makes calls concurrency-safe; a tool asks for approval before each call
//!   ([`McpOptions::approve_destructive`]) unless it is marked `readOnlyHint: true` or
//!   `destructiveHint: false`, the specification's defaults making an unannotated tool
//!   destructive. Of two tools whose names clean to the same registered name, the first in the
//!   server's list keeps it and the other is refused ([`ServerStatus::rejected`]).
//! - Over a byte stream (stdio) a server's message is at most [`MAX_MESSAGE_BYTES`], nests
//!   at most [`MAX_MESSAGE_DEPTH`] levels and holds at most [`MAX_MESSAGE_VALUES`] JSON values
//!   (counted before it is parsed): an answer past a limit fails its call at once
//!   ([`McpFailure::MalformedResult`]), a tool in a tool list past the depth is refused alone,
//!   and a message past a limit without an id closes the connection.
//! - A server that exits or stops answering fails its in-flight calls
//!   ([`McpFailure::ServerExited`], [`McpFailure::ServerHung`]), has its tools unregistered, is
//!   restarted with a bounded backoff ([`RestartPolicy`]), and the agents that used the tools are
//!   told through injected context.
//! - A cancelled call sends `notifications/cancelled`; [`McpOptions::call_timeout`] bounds each
//!   call.
//! - [`McpConfig`] reads `.mcp.json` and `--mcp-config FILE` files
//!   (`{"mcpServers": {NAME: {"command", "args", "env", "cwd"} | {"type": "http", "url",
//!   "headers"}}}`, with `${VAR}` expansion).
//!
//! - With the `server` feature, `serve_stdio` serves any registry's tools to an MCP client
//!   over stdin and stdout, `serve_streams` over any byte stream pair: every call goes
//!   through [`ToolRegistry::execute`](dsh_tools::ToolRegistry::execute) with the registry's
//!   validation and hooks, a client's cancel cancels it, and bad input is answered as JSON-RPC
//!   says within `MAX_CLIENT_MESSAGE_BYTES` and `MAX_CLIENT_MESSAGE_VALUES`.
//!
//! | Feature | Default | What it adds |
//! |---|---|---|
//! | `server` | off | `serve_stdio`, `serve_streams`, `ServeOptions`: rmcp's server role |
//!
//! The modules are private; everything public is re-exported at the crate root: `config`
//! ([`McpConfig`]: the configuration files), `connect` (the transports: [`Connector`],
//! [`StdioConnector`]), `framing` (a byte stream's messages, bounded in size and depth),
//! `bridge` (MCP tools and results as dsh-tools definitions and values), and `servers`
//! ([`McpServers`]: one supervised connection per server, with `servers/supervision` for
//! connecting, listing and restarting, and `servers/calls` for the tools' definitions and
//! calls), and `server` (the `server` feature: `server/tools` for the server role,
//! `server/lines` and `server/rpc` for its framing of a byte stream).
//!
//! ```no_run
//! use dsh_tools::ToolRegistry;
//! use tool_mcp::{McpConfig, McpOptions, McpServers};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = ToolRegistry::new();
//! let config = McpConfig::load_from_dir(std::path::Path::new("."))?;
//! let servers = McpServers::start(registry.global_scope(), &config, McpOptions::default()).await?;
//! for schema in registry.schemas(None) {
//!     println!("{}", schema.name);
//! }
//! servers.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Serving a registry instead (the `server` feature):
//!
//! ```no_run
//! # #[cfg(feature = "server")]
//! # async fn demo() -> Result<(), tool_mcp::ServeError> {
//! use dsh_tools::ToolRegistry;
//! use tool_mcp::{ServeOptions, serve_stdio};
//!
//! let registry = ToolRegistry::new();
//! // registry.register_tool(MyTool)?; …
//! serve_stdio(registry, ServeOptions::new("my-host", "1.0.0")).await
//! # }
//! ```
//!
//! Unsafe budget: 0 — none.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod bridge;
mod config;
mod connect;
mod framing;
#[cfg(feature = "server")]
mod server;
mod servers;

pub use bridge::{TOOL_PREFIX, content_value_schema, tool_name};
pub use config::{CONFIG_FILE_NAME, ConfigError, HttpServer, McpConfig, ServerConfig, StdioServer};
pub use connect::{
    ByteReader, ByteWriter, Connector, INHERITED_VARS, LaunchedServer, ServerHandle, ServerLaunch,
    ServerLauncher, StdioConnector, StreamConnection,
};
pub use framing::{MAX_MESSAGE_BYTES, MAX_MESSAGE_DEPTH, MAX_MESSAGE_VALUES};
#[cfg(feature = "server")]
pub use server::{
    MAX_CLIENT_MESSAGE_BYTES, MAX_CLIENT_MESSAGE_VALUES, MAX_REQUESTS_IN_FLIGHT, ServeError,
    ServeOptions, serve_stdio, serve_streams,
};
pub use servers::{
    McpError, McpFailure, McpOptions, McpServers, RestartPolicy, ServerState, ServerStatus,
};
