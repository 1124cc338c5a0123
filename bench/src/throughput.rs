//! `bash_throughput`: a foreground command writing a large stream through the `bash` tool (head
//! and tail in memory, every byte in the spill file) against the shell redirecting the same
//! command to a file.

use crate::Benchmark;
use crate::measure::{Extra, Measurement, Rounds, Target, interleaved};
use crate::rss::PeakRssWindow;
use crate::shell::{bash_c, bash_registry, executor_spilling_into};
use anyhow::{Context, Result, ensure};
use dsh_tools::ToolCall;
use serde_json::json;
use std::path::Path;
use std::time::Instant;
use tokio::runtime::Runtime;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "bash_throughput",
    run: |runtime, sizes| bash_throughput(runtime, sizes.throughput),
};

/// The size of `bash_throughput`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThroughputSize {
    /// Bytes the command writes.
    pub bytes: u64,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// The peak RSS growth allowed while one call streams its output (`docs/performance.md`).
const RSS_GROWTH_LIMIT_MIB: f64 = 32.0;

/// Checks that every byte of a stream is accounted for: the total is right, and either the text
/// shows the whole stream or the spill file holds all of it. Returns the spill file, if any.
fn check_stream(stream: &serde_json::Value, bytes: u64) -> Result<Option<String>> {
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
fn bash_throughput(runtime: &Runtime, size: ThroughputSize) -> Result<Measurement> {
    let dir = tempfile::tempdir().context("cannot create a scratch directory")?;
    let registry = bash_registry(executor_spilling_into(dir.path()), None)?;
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
            let call = ToolCall::new("c1", "bash", arguments.clone());
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
        name: BENCHMARK.name,
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
    bash_c(&format!("{command} > '{}'", file.display())).await
}
