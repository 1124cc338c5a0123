//! The `bash` tool as the benchmarks drive it, and the raw `bash -c` their baselines run.

use anyhow::{Context, Result, ensure};
use dsh_tools::ToolRegistry;
use dsh_tools::jobs::JobRuntime;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use tool_bash::{BashPlugin, BuiltinTools, LocalConfig, LocalExecutor};

/// A registry with `bash` over `executor`. With `jobs`, `bash` may run in the background and
/// the job tools are registered too, as in a real agent.
pub(crate) fn bash_registry(
    executor: LocalExecutor,
    jobs: Option<&JobRuntime>,
) -> Result<ToolRegistry> {
    let registry = ToolRegistry::new();
    let executor = Arc::new(executor);
    match jobs {
        None => {
            registry.global_scope().load(BashPlugin::new(executor))?;
        }
        Some(jobs) => {
            registry
                .global_scope()
                .load(BuiltinTools::new(executor, jobs.clone()))?;
        }
    }
    Ok(registry)
}

/// A local executor whose spill files go under `dir`; the baselines write their files there
/// too, so both sides use the same file system.
pub(crate) fn executor_spilling_into(dir: &Path) -> LocalExecutor {
    let mut config = LocalConfig::default();
    config.spill_root = Some(dir.to_path_buf());
    // The session's spill budget counts every byte ever spilled, and the benchmarks spill far
    // more than the default 4 GiB over their rounds (a 1 GiB stream per round of
    // `bash_throughput`), removing each round's files as they go. The budget itself is tested
    // in tool-bash; here it would only stop the measurement.
    config.spill_budget_bytes = u64::MAX;
    LocalExecutor::new(config)
}

/// Runs `script` with `bash -c` and stdin closed, as the baselines do; fails unless it exits 0.
pub(crate) async fn bash_c(script: &str) -> Result<()> {
    let status = tokio::process::Command::new("bash")
        .args(["-c", script])
        .stdin(Stdio::null())
        .status()
        .await
        .context("cannot run bash")?;
    ensure!(status.success(), "`bash -c {script:?}` failed: {status}");
    Ok(())
}
