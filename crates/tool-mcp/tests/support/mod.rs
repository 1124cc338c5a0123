//! Shared helpers of the tool-mcp integration tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::{ToolCall, ToolRegistry, ToolResult};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "../../../dsh-tools/tests/support/npm.rs"]
pub mod npm;
pub mod processes;

/// The pinned MCP reference servers.
pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
pub const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// The entry script of the everything server, installed into `target/` on first use.
pub fn everything_entry() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY
        .get_or_init(|| {
            npm::install(
                EVERYTHING,
                "mcp-everything",
                "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        })
        .clone()
}

/// The entry script of the filesystem server, installed into `target/` on first use.
pub fn filesystem_entry() -> PathBuf {
    static ENTRY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENTRY
        .get_or_init(|| {
            npm::install(
                FILESYSTEM,
                "mcp-filesystem",
                "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            )
        })
        .clone()
}

/// A mark unique to this test run, put in a server's environment to find its processes.
pub fn unique_mark(label: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{label}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits (up to 10 s) until no process carries `mark`, on a worker of the multi-threaded
/// runtime the tests use.
pub async fn assert_no_process_left(mark: &str) {
    tokio::task::block_in_place(|| processes::wait_gone(mark));
}

/// Executes a call without an agent.
pub async fn call(registry: &ToolRegistry, name: &str, args: &str) -> ToolResult {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    registry
        .execute(ToolCall::new(format!("call-{id}"), name, args))
        .await
}

/// Waits (up to 30 s) until `name` is visible in the registry, or not.
pub async fn wait_visible(registry: &ToolRegistry, name: &str, visible: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while registry.get(name, None).is_some() != visible {
        assert!(
            Instant::now() < deadline,
            "`{name}` never became {}",
            if visible { "visible" } else { "invisible" }
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
