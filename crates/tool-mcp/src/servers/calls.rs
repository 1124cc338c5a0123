//! One server's tools as tool definitions, and their calls: cancellation, timeouts, and the
//! failures of a server that exits or hangs (found by a probe).

use super::{Live, McpFailure, Server, describe_state};
use crate::bridge::{self, CallOutcome};
use dsh_tools::{ExecContext, ToolDefinition, ToolError};
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ListToolsRequest, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;
use std::sync::Arc;

impl Server {
    /// The raw definition of one listed tool, and why it asks for approval when it does; or
    /// its name and why it cannot be registered.
    pub(super) fn definition(
        self: &Arc<Self>,
        tool: &Value,
    ) -> Result<(ToolDefinition, Option<String>), (String, String)> {
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
        // The specification's defaults: `readOnlyHint` false, `destructiveHint` true (read
        // only when `readOnlyHint` is false). A tool not marked read-only or non-destructive
        // may destroy, and asks like one that says so.
        let read_only = hint("readOnlyHint") == Some(true);
        let destructive = match hint("destructiveHint") {
            _ if read_only => None,
            Some(false) => None,
            Some(true) => Some(format!("the MCP server marks `{name}` as destructive")),
            None => Some(format!(
                "the MCP server does not mark `{name}` read-only or non-destructive, so it \
                 counts as destructive"
            )),
        };

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
        // However the call ends (answered, cancelled, timed out, dropped), the transport
        // forgets its request.
        let _ended = CallEnd {
            refusals: Arc::clone(&live.refusals),
            id: handle.id.clone(),
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
            // The transport answered for the server: its message passed a limit.
            Ok(Err(ServiceError::McpError(_)))
                if let Some(why) = live.refusals.call(&handle.id) =>
            {
                return Err(McpFailure::MalformedResult.error(why));
            }
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
        if let Some(why) = live.refusals.connection() {
            return McpFailure::MalformedResult.error(why);
        }
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

/// Forgets a call's request in its connection's transport when dropped.
struct CallEnd {
    refusals: Arc<crate::framing::Refusals>,
    id: rmcp::model::RequestId,
}

impl Drop for CallEnd {
    fn drop(&mut self) {
        self.refusals.end(&self.id);
    }
}
