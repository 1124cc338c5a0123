//! `dsh-agent acp`: the agent of an editor, over the Agent Client Protocol on stdio, served by
//! the `agent-acp` library. What is wired here: the model of the flags, the session store, and
//! each session's tools — `bash` and the job tools over the session's working directory and
//! sandbox, the editor's MCP servers through `tool-mcp` (started in the same sandbox), and
//! `run_code` — with every `bash` call asked about in the editor unless `--no-ask`.

use crate::Failure;
use crate::cli::{AcpOptions, RunOptions};
use crate::model::Model;
use agent_acp::{AcpAgent, McpServer, McpTransport, OpenError, SessionSetup, SessionTools};
use agent_loop::FsSessionStore;
use std::path::PathBuf;
use std::sync::Arc;
use tool_mcp::{HttpServer, McpConfig, McpOptions, McpServers, ServerConfig, StdioServer};

/// What `dsh-agent acp` was started with.
#[derive(Debug)]
pub(crate) struct Config {
    /// The run options that apply: the model, the system prompt, the sandbox, background jobs.
    options: RunOptions,
    /// Run calls without asking the editor.
    no_ask: bool,
}

impl From<AcpOptions> for Config {
    fn from(acp: AcpOptions) -> Config {
        Config {
            options: RunOptions {
                script: acp.script,
                model: acp.model,
                base_url: acp.base_url,
                api_key_env: acp.api_key_env,
                no_stream: acp.no_stream,
                ask: !acp.no_ask,
                system: acp.system,
                log: None,
                cwd: None,
                json: false,
                no_background: acp.no_background,
                no_code_mode: acp.no_code_mode,
                no_fs: acp.no_fs,
                mcp_config: Vec::new(),
                sandbox: acp.sandbox,
                wait_jobs: std::time::Duration::ZERO,
                prompt: Vec::new(),
            },
            no_ask: acp.no_ask,
        }
    }
}

/// Serves one client on stdin and stdout until stdin ends.
pub(crate) async fn serve(config: Config, store: FsSessionStore) -> Result<(), Failure> {
    if config.options.script.as_deref() == Some("-") {
        return Err(Failure::new(
            2,
            "acp: --script - would read the script from stdin, which is the protocol's",
        ));
    }
    let model = crate::model::select_model(&config.options)?;
    let remote = matches!(model, Model::Remote(_));
    let no_ask = config.no_ask;
    let options = Arc::new(config.options);
    let root = store.root().to_owned();
    let sessions = move |setup: SessionSetup| {
        let options = Arc::clone(&options);
        let root = root.clone();
        async move { open(&options, &root, remote, no_ask, setup).await }
    };
    let mut agent = AcpAgent::new(model.adapter(), Arc::new(store), sessions)
        .agent_info("dsh-agent", env!("CARGO_PKG_VERSION"));
    agent = if no_ask {
        agent.without_approvals()
    } else {
        agent.ask_before("bash", "bash runs commands on this machine")
    };
    agent.serve_stdio().await;
    Ok(())
}

/// The tools of one session: the shell over its working directory and sandbox, the editor's
/// MCP servers, and `run_code` registered last, so that its description declares every other
/// tool.
async fn open(
    options: &RunOptions,
    store: &std::path::Path,
    remote: bool,
    no_ask: bool,
    setup: SessionSetup,
) -> Result<SessionTools, OpenError> {
    let cwd = &setup.cwd;
    let (executor, sandbox, launcher) =
        crate::tools::shell_executor(options.sandbox, cwd, Some(&setup.spill_dir), Some(store))
            .map_err(|f| OpenError::Internal(f.message))?;
    let (registry, jobs) = crate::tools::registry_with(!options.no_background, executor);
    crate::tools::file_tools(
        &registry,
        !options.no_fs,
        options.sandbox,
        &sandbox,
        cwd,
        Some(&setup.spill_dir),
        setup
            .spill_dir
            .parent()
            .map(|session| session.join(crate::undo::CHANGES_DIR)),
    )
    .map_err(|e| OpenError::Internal(format!("{e:#}")))?;
    let mcp = if setup.mcp_servers.is_empty() {
        None
    } else {
        let mut mcp_options = McpOptions::default();
        mcp_options.base_dir = Some(cwd.clone());
        // `--no-ask` runs every call without asking the editor, the MCP servers' too.
        mcp_options.approve_destructive = !no_ask;
        // The editor's stdio servers start in the session's sandbox, as `.mcp.json`'s do.
        mcp_options.launcher = launcher;
        let config = mcp_config(setup.mcp_servers);
        Some(
            McpServers::start(registry.global_scope(), &config, mcp_options)
                .await
                .map_err(|e| OpenError::InvalidParams(format!("the MCP servers: {e}")))?,
        )
    };
    if !options.no_code_mode {
        tool_code::register_run_code(&registry, tool_code::CodeModeLimits::default())
            .map_err(|e| OpenError::Internal(format!("registering run_code: {e}")))?;
    }
    let mut tools = SessionTools::new(registry.clone())
        .jobs(jobs)
        .sandbox(sandbox);
    if remote {
        let cwd: PathBuf = cwd.clone();
        tools = tools.system_prompt(
            crate::model::system_prompt(options, &registry, &cwd)
                .map_err(|f| OpenError::Internal(f.message))?,
        );
    }
    if let Some(mcp) = mcp {
        tools = tools.on_end(move || async move { mcp.shutdown().await });
    }
    Ok(tools)
}

/// The editor's MCP servers as a `tool-mcp` configuration (a later server of a name replaces
/// an earlier one).
fn mcp_config(servers: Vec<McpServer>) -> McpConfig {
    let mut config = McpConfig::default();
    for server in servers {
        let entry = match server.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut stdio = StdioServer::new(command, args);
                stdio.env = env;
                ServerConfig::Stdio(stdio)
            }
            McpTransport::Http { url, headers } => {
                let mut http = HttpServer::default();
                http.url = url;
                http.headers = headers;
                ServerConfig::Http(http)
            }
            // A transport this version of agent-acp announces and this CLI does not know.
            other => {
                tracing::warn!(?other, "an MCP transport not supported");
                continue;
            }
        };
        config.servers.insert(server.name, entry);
    }
    config
}
