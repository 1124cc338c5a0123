//! MCP both ways: `dsh-agent mcp` serves the built-in tools over stdio as an MCP server, and
//! `run`/`chat` load MCP servers' tools from `.mcp.json` and `--mcp-config FILE`.

use anyhow::{Context, Result};
use dsh_tools::jobs::JobRuntime;
use dsh_tools::{AgentGone, AgentHandle, InjectedContext, ToolCall, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tool_mcp::{McpConfig, McpOptions, McpServers, ServerLauncher};

/// Loads `.mcp.json` from the session's directory and each `--mcp-config FILE` (later files
/// replace servers of the same name), and starts the servers; `None` when none is configured.
/// Stdio servers start through `launcher` (the shell's sandbox) when there is one. A server
/// that fails to start is said on stderr and retried in the background.
pub(crate) async fn load_servers(
    registry: &ToolRegistry,
    cwd: &Path,
    files: &[String],
    launcher: Option<ServerLauncher>,
) -> Result<Option<McpServers>> {
    let mut config = McpConfig::load_from_dir_with(cwd, crate::secrets::var)?;
    for file in files {
        config.merge(McpConfig::load_with(Path::new(file), crate::secrets::var)?);
    }
    if config.is_empty() {
        return Ok(None);
    }
    let mut options = McpOptions::default();
    options.base_dir = Some(cwd.to_owned());
    options.launcher = launcher;
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
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP server on stdio")?;
    let _ = service.waiting().await;
    jobs.teardown().await;
    Ok(())
}
