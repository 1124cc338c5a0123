//! `bash_throughput`: a foreground command writing a large stream through the `bash` tool (head
//! and tail in memory, every byte in the spill file) against the shell redirecting the same
//! command to a file.

use crate::measure::{Extra, Measurement, Rounds, Target, interleaved};
use crate::rss::PeakRssWindow;
use anyhow::{Context, Result, ensure};
use dsh_tools::{ToolCall, ToolRegistry};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tool_bash::{BashPlugin, LocalConfig, LocalExecutor};

/// The size of `bash_throughput`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThroughputSize {
    /// Bytes the command writes.
    pub bytes: u64,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// The peak RSS growth allowed while one call streams its output (spec 07 §7.1).
const RSS_GROWTH_LIMIT_MIB: f64 = 32.0;

/// Checks that every byte of a stream is accounted for: the total is right, and either the text
/// shows the whole stream or the spill file holds all of it. Returns the spill file, if any.
pub(crate) fn check_stream(stream: &serde_json::Value, bytes: u64) -> Result<Option<String>> {
    ensure!(
        stream["totalBytes"].as_u64() == Some(bytes),
        "the stream reports {} bytes, {bytes} were written",
        stream["totalBytes"]
    );
    if stream["truncated"] != json!(true) {
        ensure!(
            stream["shownBytes"].as_u64() == Some(bytes),
            "an untruncated stream must show every byte: {stream}"
        );
        return Ok(None);
    }
    let path = stream["spillPath"]
        .as_str()
        .with_context(|| format!("a truncated stream has no spill file: {stream}"))?;
    ensure!(
        stream.get("spillLimitBytes").is_none(),
        "the spill file stopped at its cap: {stream}"
    );
    let spilled = std::fs::metadata(path)
        .with_context(|| format!("cannot stat the spill file {path}"))?
        .len();
    ensure!(
        spilled == bytes,
        "the spill file holds {spilled} bytes, {bytes} were written"
    );
    Ok(Some(path.to_owned()))
}

/// Measures `bash_throughput` (MB/s, higher is better) and the peak RSS growth of the tool
/// path.
pub fn bash_throughput(runtime: &Runtime, size: ThroughputSize) -> Result<Measurement> {
    // Spill files and the baseline's file live in one directory, so both write to the same
    // file system.
    let dir = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mut config = LocalConfig::default();
    config.spill_root = Some(dir.path().to_path_buf());
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(LocalExecutor::new(config))))?;
    let bytes = size.bytes;
    let command = format!("head -c {bytes} /dev/zero");
    let arguments = json!({
        "command": command,
        "description": "Write zeros to stdout",
        "timeout_ms": 600_000,
    })
    .to_string();
    let mut peak_growth = 0u64;
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            let window = PeakRssWindow::open()?;
            let call = ToolCall::new("c1", "bash", arguments.clone(), CancellationToken::new());
            let started = Instant::now();
            let result = runtime.block_on(registry.execute(call));
            let seconds = started.elapsed().as_secs_f64();
            peak_growth = peak_growth.max(window.growth_bytes()?);
            let value = result
                .value
                .as_deref()
                .filter(|_| !result.is_error)
                .with_context(|| format!("the bash call failed: {:?}", result.content))?;
            ensure!(value["exitCode"] == json!(0), "the command failed: {value}");
            if let Some(spill) = check_stream(&value["stdout"], bytes)? {
                std::fs::remove_file(&spill)
                    .with_context(|| format!("cannot remove the spill file {spill}"))?;
            }
            Ok(bytes as f64 / 1e6 / seconds)
        },
        || {
            let file = dir.path().join("baseline.out");
            let started = Instant::now();
            runtime.block_on(shell_redirect(&command, &file))?;
            let seconds = started.elapsed().as_secs_f64();
            let written = std::fs::metadata(&file)?.len();
            ensure!(
                written == bytes,
                "the baseline wrote {written} bytes, not {bytes}"
            );
            std::fs::remove_file(&file)?;
            Ok(bytes as f64 / 1e6 / seconds)
        },
    )?;
    Ok(Measurement {
        name: "bash_throughput",
        value,
        unit: "MB/s",
        baseline: "shell redirect to a file",
        baseline_value: baseline,
        higher_is_better: true,
        target: Target::RatioAtLeast(0.75),
        extras: vec![Extra {
            key: "peak_rss_growth_mib",
            value: peak_growth as f64 / f64::from(1 << 20),
            unit: "MiB",
            at_most: Some(RSS_GROWTH_LIMIT_MIB),
        }],
        samples: size.rounds.samples,
    })
}

/// Runs `command > file` with `bash -c`.
pub(crate) async fn shell_redirect(command: &str, file: &Path) -> Result<()> {
    let status = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!("{command} > '{}'", file.display()))
        .stdin(Stdio::null())
        .status()
        .await
        .context("cannot run bash")?;
    ensure!(status.success(), "`{command}` redirected failed: {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{check_basics, runtime};

    #[test]
    fn bash_throughput_runs_and_accounts_for_every_byte() {
        // Larger than the 30 000-byte window, so the spill path is exercised and checked.
        let size = ThroughputSize {
            bytes: 256 * 1024,
            rounds: Rounds {
                warmup: 0,
                samples: 1,
            },
        };
        let measurement = bash_throughput(&runtime(), size).unwrap();
        check_basics(&measurement);
        assert_eq!(measurement.extras[0].key, "peak_rss_growth_mib");
        assert!(measurement.extras[0].value.is_finite());
    }
}
