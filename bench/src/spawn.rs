//! `bash_spawn`: a foreground `bash` call running `true` through the registry against a raw
//! `tokio::process::Command` running `bash -c true`.

use crate::Benchmark;
use crate::dispatch::MicroSize;
use crate::measure::{Measurement, Target, interleaved};
use crate::shell::{bash_c, bash_registry};
use anyhow::{Result, ensure};
use dsh_tools::{ToolCall, ToolRegistry};
use std::time::Instant;
use tokio::runtime::Runtime;
use tool_bash::LocalExecutor;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "bash_spawn",
    run: |runtime, sizes| bash_spawn(runtime, sizes.spawn),
};

const TRUE_ARGUMENTS: &str = r#"{"command": "true", "description": "Do nothing, successfully"}"#;

async fn tool_true(registry: &ToolRegistry) -> Result<()> {
    let call = ToolCall::new("c1", "bash", TRUE_ARGUMENTS);
    let result = registry.execute(call).await;
    let exit_code = result.value.as_deref().map(|v| v["exitCode"].clone());
    ensure!(
        !result.is_error && exit_code == Some(serde_json::json!(0)),
        "bash `true` through the tool failed: {:?}",
        result.content
    );
    Ok(())
}

/// Milliseconds per call of `call`, made `calls` times in a row on `runtime`.
pub(crate) fn ms_per_call(
    runtime: &Runtime,
    calls: usize,
    mut call: impl AsyncFnMut() -> Result<()>,
) -> Result<f64> {
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..calls {
            call().await?;
        }
        Ok(started.elapsed().as_secs_f64() * 1e3 / calls as f64)
    })
}

/// The spawn benchmarks' baseline: milliseconds per raw `bash -c true`, over `calls` calls.
pub(crate) fn raw_true_ms_per_call(runtime: &Runtime, calls: usize) -> Result<f64> {
    ms_per_call(runtime, calls, async || bash_c("true").await)
}

/// Measures `bash_spawn` (ms/call).
fn bash_spawn(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let registry = bash_registry(LocalExecutor::default(), None)?;
    let calls = size.calls.max(1);
    let (value, baseline) = interleaved(
        size.rounds,
        || ms_per_call(runtime, calls, async || tool_true(&registry).await),
        || raw_true_ms_per_call(runtime, calls),
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "ms/call",
        baseline: "raw tokio Command `bash -c true`",
        baseline_value: baseline,
        higher_is_better: false,
        // Two `fork`s per command since issue 33 (`docs/design/launcher.md`); the clone-based
        // launcher's 1.15 is withdrawn with it.
        target: Target::RatioAtMost(1.5),
        extras: Vec::new(),
        samples: size.rounds.samples,
    })
}
