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

/// Measures `bash_spawn` (ms/call).
fn bash_spawn(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let registry = bash_registry(LocalExecutor::default(), None)?;
    let calls = size.calls.max(1);
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            runtime.block_on(async {
                let started = Instant::now();
                for _ in 0..calls {
                    tool_true(&registry).await?;
                }
                Ok(started.elapsed().as_secs_f64() * 1e3 / calls as f64)
            })
        },
        || {
            runtime.block_on(async {
                let started = Instant::now();
                for _ in 0..calls {
                    bash_c("true").await?;
                }
                Ok(started.elapsed().as_secs_f64() * 1e3 / calls as f64)
            })
        },
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "ms/call",
        baseline: "raw tokio Command `bash -c true`",
        baseline_value: baseline,
        higher_is_better: false,
        target: Target::RatioAtMost(1.15),
        extras: Vec::new(),
        samples: size.rounds.samples,
    })
}
