//! MCP both ways: `dsh-agent mcp` serves the built-in tools over stdio (through
//! `tool_mcp::serve_stdio`), and `run`/`chat` load MCP servers' tools from `.mcp.json` and
//! `--mcp-config FILE`.

use anyhow::{Context, Result};
use dsh_tools::ToolRegistry;
use dsh_tools::jobs::JobRuntime;
use std::path::Path;
use std::sync::Arc;
use tool_mcp::{McpConfig, McpOptions, McpServers, ServeOptions, ServerLauncher};

/// Loads `.mcp.json` from the session's directory and each `--mcp-config FILE` (later files
/// replace servers of the same name), and starts the servers; `None` when none is configured.
/// Stdio servers start through `launcher` (the shell's, which supervises them, inside its
/// sandbox when it is on), or without one under a supervisor of a default shell executor's:
/// never as a bare process group, which `setsid` leaves. Its destructive tools ask first when
/// `ask` (`--ask`). A server that fails to start is said on stderr and retried in the
/// background.
pub(crate) async fn load_servers(
    registry: &ToolRegistry,
    cwd: &Path,
    files: &[String],
    launcher: Option<ServerLauncher>,
    ask: bool,
) -> Result<Option<McpServers>> {
    let mut config = McpConfig::load_from_dir_with(cwd, crate::secrets::var)?;
    for file in files {
        config.merge(McpConfig::load_with(Path::new(file), crate::secrets::var)?);
    }
    if config.is_empty() {
        return Ok(None);
    }
    let mut options = McpOptions::default();
    // Destructive MCP tools ask as `bash` does: under `--ask`; without it nothing asks.
    options.approve_destructive = ask;
    options.base_dir = Some(cwd.to_owned());
    options.launcher = Some(launcher.unwrap_or_else(|| {
        crate::tools::unconfined_launcher(
            Arc::new(tool_bash::LocalExecutor::default()),
            cwd.to_owned(),
        )
    }));
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
        if let Some(why) = &status.listing {
            crate::output::say(&format!(
                "dsh-agent: MCP server `{}`: its tools could not be listed: {why}",
                status.name
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

/// Serves the registry's tools over stdio until the client disconnects, then stops every
/// background job (no process is left behind).
pub(crate) async fn serve(registry: ToolRegistry, jobs: JobRuntime) -> Result<()> {
    let cwd = std::env::current_dir().context("no working directory")?;
    let _controller = jobs.attach_controller();
    let options = ServeOptions::new("dsh-agent", env!("CARGO_PKG_VERSION")).with_cwd(cwd);
    tool_mcp::serve_stdio(registry, options)
        .await
        .context("starting the MCP server on stdio")?;
    jobs.teardown().await;
    Ok(())
}
