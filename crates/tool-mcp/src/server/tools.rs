//! The server role: `tools/list` from the registry, `tools/call` through
//! [`ToolRegistry::execute`], in the one session every call of the connection runs in.

use dsh_tools::{AgentGone, AgentHandle, InjectedContext, ToolCall, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The session id the calls of a served connection carry ([`AgentHandle::session_id`]).
pub(crate) const SESSION_ID: &str = "mcp";

/// The one session a client's calls run in: it gives tools the working directory and receives
/// what they inject (a background job's completion notice, say), which rides on the next tool
/// result.
#[derive(Debug)]
struct ClientSession {
    cwd: PathBuf,
    notices: Mutex<Vec<String>>,
}

impl AgentHandle for ClientSession {
    fn session_id(&self) -> &str {
        SESSION_ID
    }

    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        self.notices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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

/// A registry's tools as an MCP server.
#[derive(Clone, Debug)]
pub(crate) struct ToolServer {
    registry: ToolRegistry,
    info: Implementation,
    session: Arc<ClientSession>,
    calls: Arc<AtomicU64>,
}

impl ToolServer {
    pub(crate) fn new(registry: ToolRegistry, info: Implementation, cwd: PathBuf) -> ToolServer {
        ToolServer {
            registry,
            info,
            session: Arc::new(ClientSession {
                cwd,
                notices: Mutex::new(Vec::new()),
            }),
            calls: Arc::new(AtomicU64::new(1)),
        }
    }
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(self.info.clone())
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
        // The request's token is cancelled by the client's `notifications/cancelled`.
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
                    .unwrap_or_else(PoisonError::into_inner),
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
/// (MCP's `structuredContent` is always one). No annotations: a registry's definition says
/// whether a call may overlap its siblings, not whether it only reads, so every tool goes out
/// with the specification's defaults (not read-only, destructive).
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
