//! `mcp_call`: a trivial tool of an in-process MCP server called through the registry and the
//! `tool-mcp` bridge, against the `rmcp` client calling it directly. Both talk to the same kind
//! of server over an in-memory pipe, so the ratio is what the registry and the bridge add.

use crate::Benchmark;
use crate::dispatch::MicroSize;
use crate::measure::{Measurement, Target, interleaved};
use anyhow::{Context, Result, ensure};
use dsh_tools::{ToolCall, ToolRegistry};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;
use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use tokio::runtime::Runtime;
use tool_mcp::{Connector, McpOptions, McpServers, StreamConnection};

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "mcp_call",
    run: |runtime, sizes| mcp_call(runtime, sizes.mcp),
};

/// A server with one trivial tool, `add`.
#[derive(Clone)]
struct Adder;

impl ServerHandler for Adder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        let tools = json!({"tools": [{
            "name": "add", "description": "Add two integers.",
            "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object",
                            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                            "required": ["a", "b"]}
        }]});
        std::future::ready(
            serde_json::from_value(tools)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        )
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        let arguments = request.arguments.unwrap_or_default();
        let number = |key: &str| arguments.get(key).and_then(|v| v.as_i64()).unwrap_or(0);
        let sum = number("a").wrapping_add(number("b"));
        let result: Result<CallToolResult, _> =
            serde_json::from_value(json!({"content": [{"type": "text", "text": sum.to_string()}]}));
        std::future::ready(
            result
                .map(CallToolResponse::Complete)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        )
    }
}

/// A fresh in-process [`Adder`] over an in-memory pipe.
fn pipe_to_adder() -> tokio::io::DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(service) = Adder.serve(server).await {
            let _ = service.waiting().await;
        }
    });
    client
}

struct InProcess;

impl Connector for InProcess {
    fn connect(&self) -> BoxFuture<'static, std::io::Result<StreamConnection>> {
        Box::pin(async {
            let (reader, writer) = tokio::io::split(pipe_to_adder());
            Ok(StreamConnection::new(reader, writer))
        })
    }

    fn describe(&self) -> String {
        String::from("the in-process adder")
    }
}

const ARGUMENTS: &str = r#"{"a": 40, "b": 2}"#;

/// Measures `mcp_call` (µs/call).
fn mcp_call(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let registry = ToolRegistry::new();
    let mut options = McpOptions::default();
    options.call_timeout = None;
    let servers = runtime.block_on(async {
        let servers = McpServers::new(registry.global_scope(), options)?;
        servers.add_connector("bench", Arc::new(InProcess))?.await;
        Ok::<_, tool_mcp::McpError>(servers)
    })?;
    let direct = runtime
        .block_on(async { ().serve(pipe_to_adder()).await })
        .context("connecting the direct client")?;
    let call = || ToolCall::new("call-1", "mcp__bench__add", ARGUMENTS);
    let check = runtime.block_on(registry.execute(call()));
    ensure!(
        !check.is_error && dsh_tools::content_text(&check.content) == "42",
        "the MCP tool did not answer 42: {check:?}"
    );
    let params = || {
        let mut params = CallToolRequestParams::new("add");
        params.arguments = serde_json::from_str(ARGUMENTS).ok();
        params
    };
    let calls = size.calls.max(1);
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            let batch: Vec<ToolCall> = (0..calls).map(|_| call()).collect();
            runtime.block_on(async {
                let started = Instant::now();
                for call in batch {
                    black_box(registry.execute(call).await);
                }
                Ok(started.elapsed().as_nanos() as f64 / calls as f64 / 1000.0)
            })
        },
        || {
            let batch: Vec<CallToolRequestParams> = (0..calls).map(|_| params()).collect();
            runtime.block_on(async {
                let started = Instant::now();
                for params in batch {
                    black_box(direct.peer().call_tool(params).await?);
                }
                Ok(started.elapsed().as_nanos() as f64 / calls as f64 / 1000.0)
            })
        },
    )?;
    runtime.block_on(servers.shutdown());
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "µs/call",
        baseline: "the rmcp client calling the server directly",
        baseline_value: baseline,
        higher_is_better: false,
        target: Target::RatioAtMost(1.2),
        extras: Vec::new(),
        samples: size.rounds.samples,
    })
}
