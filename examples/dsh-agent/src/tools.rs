//! The tool set of a session: the registry with the `bash` tool and the job tools, over the
//! local shell executor, sandboxed as `--sandbox` asks.

use crate::{Failure, output};
use dsh_tools::ToolRegistry;
use dsh_tools::jobs::{JobRuntime, JobsConfig, NoticeDelivery};
use std::path::Path;
use std::sync::Arc;
use tool_bash::{BuiltinTools, LocalConfig, LocalExecutor, ShellExecutor};

/// The registry of the built-in tools over an unconfined shell, and the jobs runtime behind
/// them.
pub(crate) fn registry(background: bool) -> (ToolRegistry, JobRuntime) {
    registry_with(background, Arc::new(LocalExecutor::default()))
}

/// The bash tool's executor for `--sandbox`, what `session/start` records of it, and what
/// starts the stdio MCP servers inside the same sandbox (`None` with the sandbox off). An
/// explicit mode the system cannot enforce is a usage error; the default falls back to `off`
/// with a warning line on stderr. The shell's spill files go to `spill_dir` (the session's),
/// or to the executor's own temporary directory.
pub(crate) fn shell_executor(
    choice: Option<&str>,
    cwd: &Path,
    spill_dir: Option<&Path>,
) -> Result<Sandboxed, Failure> {
    let mut config = LocalConfig::default();
    config.spill_dir = spill_dir.map(Path::to_path_buf);
    let off = |why: Option<String>| {
        let mut report = serde_json::json!({"mode": "off"});
        if let Some(why) = why {
            report["reason"] = why.into();
        }
        (
            Arc::new(LocalExecutor::new(config.clone())) as Arc<dyn ShellExecutor>,
            report,
            None,
        )
    };
    let mode = match choice {
        Some("off") => return Ok(off(None)),
        Some("read-only") => "read-only",
        _ => "workspace-write",
    };
    match sandboxed(mode, cwd, config.clone()) {
        Ok(confined) => Ok(confined),
        Err(why) if choice.is_none() => {
            output::say(&format!(
                "dsh-agent: warning: the shell sandbox is off: {why}"
            ));
            Ok(off(Some(why)))
        }
        Err(why) => Err(Failure::new(2, format!("--sandbox {mode}: {why}"))),
    }
}

/// The shell's executor, its report for `session/start`, and the MCP servers' launcher.
pub(crate) type Sandboxed = (
    Arc<dyn ShellExecutor>,
    serde_json::Value,
    Option<tool_mcp::ServerLauncher>,
);

/// A Landlock-sandboxed executor in `mode` with `cwd` as its workspace root, and a launcher
/// that starts stdio MCP servers under the same confinement.
#[cfg(target_os = "linux")]
pub(crate) fn sandboxed(mode: &str, cwd: &Path, config: LocalConfig) -> Result<Sandboxed, String> {
    use tool_bash::sandbox::{SandboxBackend, SandboxMode, SandboxPolicy, SandboxedExecutor};
    let mode = if mode == "read-only" {
        SandboxMode::ReadOnly
    } else {
        SandboxMode::WorkspaceWrite
    };
    let policy = SandboxPolicy::new(mode).with_workspace_root(cwd);
    let executor = SandboxedExecutor::new(policy, SandboxBackend::Landlock, config)
        .map_err(|e| e.to_string())?;
    let report = serde_json::to_value(executor.report()).map_err(|e| e.to_string())?;
    let executor = Arc::new(executor);
    let confining = Arc::clone(&executor);
    let workdir = cwd.to_owned();
    let launcher = tool_mcp::ServerLauncher::new(move |launch| {
        let program = tool_bash::sandbox::ConfinedProgram::new(
            launch.program.clone(),
            launch.cwd.clone().unwrap_or_else(|| workdir.clone()),
        )
        .with_args(launch.args.clone())
        .with_env(launch.env.clone());
        Ok(confining.command(&program))
    });
    Ok((executor, report, Some(launcher)))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn sandboxed(
    _mode: &str,
    _cwd: &Path,
    _config: LocalConfig,
) -> Result<Sandboxed, String> {
    Err(String::from("the shell sandbox needs Linux (Landlock)"))
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
