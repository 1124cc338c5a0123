//! `bash_spawn`: a foreground `bash` call running `true` through the registry against a raw
//! `tokio::process::Command` running `bash -c true`.

use crate::dispatch::MicroSize;
use crate::measure::{Measurement, Target, interleaved};
use anyhow::{Context, Result, ensure};
use dsh_tools::{ToolCall, ToolRegistry};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tool_bash::{BashPlugin, LocalExecutor};

const TRUE_ARGUMENTS: &str = r#"{"command": "true", "description": "Do nothing, successfully"}"#;

/// A registry with the foreground `bash` tool over the default local executor.
fn bash_registry() -> Result<ToolRegistry> {
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(LocalExecutor::default())))?;
    Ok(registry)
}

async fn tool_true(registry: &ToolRegistry) -> Result<()> {
    let call = ToolCall::new("c1", "bash", TRUE_ARGUMENTS, CancellationToken::new());
    let result = registry.execute(call).await;
    let exit_code = result.value.as_deref().map(|v| v["exitCode"].clone());
    ensure!(
        !result.is_error && exit_code == Some(serde_json::json!(0)),
        "bash `true` through the tool failed: {:?}",
        result.content
    );
    Ok(())
}

async fn raw_true() -> Result<()> {
    let status = tokio::process::Command::new("bash")
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .status()
        .await
        .context("cannot run bash")?;
    ensure!(status.success(), "raw `bash -c true` failed: {status}");
    Ok(())
}

/// Measures `bash_spawn` (ms/call).
pub fn bash_spawn(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let registry = bash_registry()?;
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
                    raw_true().await?;
                }
                Ok(started.elapsed().as_secs_f64() * 1e3 / calls as f64)
            })
        },
    )?;
    Ok(Measurement {
        name: "bash_spawn",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Rounds;
    use crate::tests::{check_basics, runtime};

    #[test]
    fn bash_spawn_runs() {
        let size = MicroSize {
            calls: 1,
            rounds: Rounds {
                warmup: 0,
                samples: 1,
            },
        };
        check_basics(&bash_spawn(&runtime(), size).unwrap());
    }
}
