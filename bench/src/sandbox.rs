//! `sandbox_spawn`: `true` through the sandboxed executor (workspace-write on Landlock, the
//! network denied) against a raw `tokio::process::Command` running `bash -c true`; the same
//! through bubblewrap as a secondary figure, when `bwrap` works here.

use crate::Benchmark;
use crate::dispatch::MicroSize;
use crate::measure::{Extra, Measurement, Target, interleaved};
use crate::spawn::{ms_per_call, raw_true_ms_per_call};
use anyhow::{Context, Result, ensure};
use tokio::runtime::Runtime;
use tool_bash::LocalConfig;
use tool_bash::sandbox::{
    SandboxBackend, SandboxMode, SandboxPolicy, SandboxProbe, SandboxedExecutor, SystemProbe,
};
use tool_bash::shell::{ShellExecutor, ShellRequest};

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "sandbox_spawn",
    run: |runtime, sizes| sandbox_spawn(runtime, sizes.spawn),
};

fn executor(backend: SandboxBackend, workspace: &std::path::Path) -> Result<SandboxedExecutor> {
    let mut config = LocalConfig::default();
    config.spill_budget_bytes = u64::MAX;
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite).with_workspace_root(workspace);
    SandboxedExecutor::new(policy, backend, config)
        .with_context(|| format!("cannot build the {backend} sandbox"))
}

async fn sandboxed_true(executor: &SandboxedExecutor) -> Result<()> {
    let spec = executor.resolve(ShellRequest::new("true"), None)?;
    let result = executor.run(spec).await?;
    ensure!(
        result.exit_code == Some(0),
        "`true` in the sandbox failed: {result:?}"
    );
    Ok(())
}

/// Milliseconds per `true` through `executor`, over `calls` calls.
fn per_call(runtime: &Runtime, executor: &SandboxedExecutor, calls: usize) -> Result<f64> {
    ms_per_call(runtime, calls, async || sandboxed_true(executor).await)
}

/// Measures `sandbox_spawn` (ms/call).
fn sandbox_spawn(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let workspace = tempfile::tempdir()?;
    let landlock = executor(SandboxBackend::Landlock, workspace.path())?;
    let calls = size.calls.max(1);
    let (value, baseline) = interleaved(
        size.rounds,
        || per_call(runtime, &landlock, calls),
        || raw_true_ms_per_call(runtime, calls),
    )?;
    // Bubblewrap is reported, not held to the target: it starts namespaces per command.
    let mut extras = Vec::new();
    if SystemProbe.bubblewrap().is_ok() {
        let bubblewrap = executor(SandboxBackend::Bubblewrap, workspace.path())?;
        // The same rounds and median as the main figure; its baseline is the one above, so
        // none is measured again here.
        let (bwrap, _) = interleaved(
            size.rounds,
            || per_call(runtime, &bubblewrap, calls),
            || Ok(baseline),
        )?;
        extras.push(Extra {
            key: "bubblewrap_ms_per_call",
            value: bwrap,
            unit: "ms/call (bubblewrap)",
            at_most: None,
        });
    }
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "ms/call",
        baseline: "raw tokio Command `bash -c true`",
        baseline_value: baseline,
        higher_is_better: false,
        // A mount namespace, a seccomp filter and the dropped capabilities per command: security
        // first, but a namespace per command must stay cheap: within twice a raw spawn.
        target: Target::RatioAtMost(2.0),
        extras,
        samples: size.rounds.samples,
    })
}
