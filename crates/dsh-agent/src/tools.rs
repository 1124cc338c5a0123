//! The tool set of a session: the registry with the `bash` tool and the job tools, over the
//! local shell executor, sandboxed as `--sandbox` asks.

use crate::{Failure, output};
use anyhow::Context;
use dsh_tools::ToolRegistry;
use dsh_tools::jobs::{JobRuntime, JobsConfig, NoticeDelivery};
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tool_bash::{
    BuiltinTools, ConfinedProgram, LocalConfig, LocalExecutor, ProgramError, SandboxChoice,
    SandboxMode, ShellExecutor, SupervisedProgram,
};
use tool_mcp::{LaunchedServer, ServerHandle, ServerLaunch, ServerLauncher};

/// The registry of the built-in tools over an unconfined shell, and the jobs runtime behind
/// them.
pub(crate) fn registry(background: bool) -> (ToolRegistry, JobRuntime) {
    registry_with(background, Arc::new(LocalExecutor::default()))
}

/// The bash tool's executor for `--sandbox`, what `session/start` records of it, and what
/// starts the stdio MCP servers: under the shell's supervisor, inside the same sandbox when it
/// is on ([`supervising_launcher`]). An explicit mode the system cannot wholly enforce is a
/// usage error; the default enforces what the system can, with a warning line on stderr naming
/// the rest, and falls back to `off` only where nothing can be confined (see
/// [`SandboxChoice`]). The shell's spill files go to `spill_dir` (the session's), or to the
/// executor's own temporary directory; `store` (the session store), wherever it lies beneath
/// the working directory, is read-only to every command.
pub(crate) fn shell_executor(
    choice: Option<SandboxMode>,
    cwd: &Path,
    spill_dir: Option<&Path>,
    store: Option<&Path>,
) -> Result<Sandboxed, Failure> {
    let mut config = LocalConfig::default();
    config.spill_dir = spill_dir.map(Path::to_path_buf);
    let mut request = SandboxChoice::new(choice, cwd).with_config(config);
    if let Some(store) = store {
        request = request.with_session_store(store);
    }
    let mode = request.mode();
    let shell = request
        .apply()
        .map_err(|why| Failure::new(2, format!("--sandbox {mode}: {why}")))?;
    if let Some(fallback) = shell.fallback() {
        output::say(&format!("dsh-agent: warning: {fallback}"));
    }
    let report = serde_json::to_value(shell.applied()).context("recording the sandbox")?;
    let spawning = shell.clone();
    let launcher = supervising_launcher(cwd.to_owned(), move |program| {
        let shell = spawning.clone();
        Box::pin(async move { shell.spawn_program(&program).await })
    });
    Ok((shell.executor(), report, Some(launcher)))
}

/// The shell's executor, its report for `session/start`, and the MCP servers' launcher.
pub(crate) type Sandboxed = (
    Arc<dyn ShellExecutor>,
    serde_json::Value,
    Option<tool_mcp::ServerLauncher>,
);

/// What starts each stdio MCP server unconfined, under a supervisor of `executor`'s (see
/// [`supervising_launcher`]); a relative server `cwd` is the session's `workdir`'s.
pub(crate) fn unconfined_launcher(
    executor: Arc<LocalExecutor>,
    workdir: PathBuf,
) -> ServerLauncher {
    supervising_launcher(workdir, move |program| {
        let executor = Arc::clone(&executor);
        Box::pin(async move { executor.spawn_program(&program).await })
    })
}

/// A launcher that starts each stdio MCP server with `spawn` (a shell executor's
/// `spawn_program`): under a supervisor of its own, as the shell's commands run, so that
/// whatever a server starts (`setsid -f`, a double fork, a group of its own) is killed when the
/// server is stopped (the session's end, a restart, a dropped connection) and swept by the
/// supervisor when this process dies. A server without a `cwd` runs in `workdir`.
fn supervising_launcher(
    workdir: PathBuf,
    spawn: impl Fn(ConfinedProgram) -> BoxFuture<'static, Result<SupervisedProgram, ProgramError>>
    + Send
    + Sync
    + 'static,
) -> ServerLauncher {
    ServerLauncher::spawning(move |launch: &ServerLaunch| {
        let program = ConfinedProgram::new(
            launch.program.clone(),
            launch.cwd.clone().unwrap_or_else(|| workdir.clone()),
        )
        .with_args(launch.args.clone())
        .with_env(launch.env.clone());
        let started = spawn(program);
        Box::pin(async move {
            let mut program = started.await.map_err(start_error)?;
            let (Some(stdin), Some(stdout)) = (program.take_stdin(), program.take_stdout()) else {
                return Err(std::io::Error::other("the server's stdio was not piped"));
            };
            let stderr = program.take_stderr();
            Ok(LaunchedServer::new(
                stdin,
                stdout,
                stderr,
                Box::new(SupervisedServer(program)),
            ))
        })
    })
}

/// A program's start error as the MCP client reports it (`cannot start `npx`: …`).
fn start_error(error: ProgramError) -> std::io::Error {
    match error {
        ProgramError::Start { program, source } => {
            std::io::Error::new(source.kind(), format!("{}: {source}", program.display()))
        }
        ProgramError::NotFound { .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, error.to_string())
        }
        other => std::io::Error::other(other.to_string()),
    }
}

/// A stdio MCP server under its supervisor: dropped, the supervisor kills all of it.
#[derive(Debug)]
struct SupervisedServer(SupervisedProgram);

impl ServerHandle for SupervisedServer {
    fn stop(self: Box<Self>, grace: std::time::Duration) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let program = self.0.program().display().to_string();
            if let Err(error) = self.0.stop(grace).await {
                tracing::warn!(%error, program, "an MCP server's stop");
            }
        })
    }
}

/// Registers Code Mode's `run_code` in `registry` unless left out: last, so that its
/// description declares every tool registered before it, MCP ones included.
pub(crate) fn code_mode(
    registry: &ToolRegistry,
    enabled: bool,
) -> anyhow::Result<Option<dsh_tools::Disposer>> {
    if !enabled {
        return Ok(None);
    }
    let disposer = tool_code::register_run_code(registry, tool_code::CodeModeLimits::default())
        .map_err(|e| anyhow::anyhow!("registering run_code: {e}"))?;
    Ok(Some(disposer))
}

/// The registry of the built-in tools with `executor` under `bash`, and the jobs runtime
/// behind them.
pub(crate) fn registry_with(
    background: bool,
    executor: Arc<dyn ShellExecutor>,
) -> (ToolRegistry, JobRuntime) {
    let registry = ToolRegistry::new();
    let jobs = JobRuntime::new(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let mut builtin = BuiltinTools::new(executor, jobs.clone());
    if !background {
        builtin = builtin.foreground_only();
    }
    // Loading the built-in plugins only registers definitions; failing here is a bug in this
    // program, which must not run with half its tools.
    if let Err(error) = registry.global_scope().load(builtin) {
        panic!("the built-in tools failed to load: {error}");
    }
    // Once nobody reads stdout (`| head` has closed it, or it is full), the session's work
    // would go unseen: no further command starts.
    if let Err(error) = registry.global_scope().guard(|_| {
        output::closed()
            .is_cancelled()
            .then(|| String::from("stdout is closed; no more commands are started"))
    }) {
        panic!("the stdout guard failed to install: {error}");
    }
    (registry, jobs)
}

/// Loads the file tools (`read`, `write`, `edit`, `glob`, `grep`) unless left out: over the
/// session's working directory, writing where `--sandbox` lets the shell write (`off`:
/// anywhere; `read-only`: nowhere; `workspace-write`, the default: beneath the sandbox's
/// writable roots and the commands' private temporary directory, as `sandbox` — the shell's
/// report — names them, else beneath `cwd`), each capped list spilled to `spill_dir`, and
/// each change kept in `history` for `dsh-agent undo`. Before Code Mode, which declares them.
pub(crate) fn file_tools(
    registry: &ToolRegistry,
    enabled: bool,
    mode: Option<SandboxMode>,
    sandbox: &serde_json::Value,
    cwd: &Path,
    spill_dir: Option<&Path>,
    history: Option<PathBuf>,
) -> anyhow::Result<()> {
    if !enabled {
        return Ok(());
    }
    let policy = match mode.unwrap_or(SandboxMode::WorkspaceWrite) {
        SandboxMode::FullAccess => tool_fs::WritePolicy::Anywhere,
        SandboxMode::ReadOnly => tool_fs::WritePolicy::ReadOnly,
        _ => tool_fs::WritePolicy::Roots(writable_roots(sandbox, cwd)),
    };
    let options = tool_fs::FsOptions::new(cwd.to_owned(), policy, spill_dir.map(Path::to_path_buf));
    let mut plugin = tool_fs::FsPlugin::new(options);
    if let Some(dir) = history {
        plugin = plugin.keeping_history(tool_fs::history::FileHistory::new(dir));
    }
    registry
        .global_scope()
        .load(plugin)
        .map(drop)
        .map_err(|e| anyhow::anyhow!("loading the file tools: {e}"))
}

/// The roots the shell's sandbox report names (`writableRoots`, and `tempDir` when it is a
/// directory of this system, not bubblewrap's `/tmp` inside the command's namespace), else
/// `cwd`.
fn writable_roots(sandbox: &serde_json::Value, cwd: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = sandbox["writableRoots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|root| root.as_str().map(PathBuf::from))
        .collect();
    if roots.is_empty() {
        roots.push(cwd.to_owned());
    }
    if let Some(temp) = sandbox["tempDir"].as_str().filter(|t| *t != "/tmp") {
        roots.push(PathBuf::from(temp));
    }
    roots
}
