//! `jobs_fanout`: background `bash` jobs started through the tool and read to completion
//! through the jobs runtime, against raw processes writing to files.

use crate::Benchmark;
use crate::measure::{Extra, Measurement, Rounds, Target, interleaved};
use crate::shell::{bash_registry, executor_spilling_into};
use crate::throughput::shell_redirect;
use anyhow::{Context, Result, ensure};
use dsh_tools::ToolCall;
use dsh_tools::jobs::{JobRuntime, JobsConfig};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tool_bash::LocalConfig;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "jobs_fanout",
    run: |runtime, sizes| jobs_fanout(runtime, sizes.fanout),
};

/// The size of `jobs_fanout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FanoutSize {
    /// How many background jobs.
    pub jobs: usize,
    /// Bytes each job writes to stdout.
    pub bytes_per_job: u64,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// Where the bytes of one round went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Accounting {
    /// Bytes of output returned by the runtime's reads.
    read: u64,
    /// Bytes the reads skipped; each job's spill file holds all of its bytes.
    skipped: u64,
}

/// One round through the tool: fresh registry, runtime and executor (setup is not timed), all
/// jobs started through `bash` with `run_in_background`, then every job waited for and read
/// until its output is exhausted. Returns the seconds taken and the byte accounting.
fn tool_round(runtime: &Runtime, size: FanoutSize, root: &Path) -> Result<(f64, Accounting)> {
    let scratch = tempfile::tempdir_in(root)?;
    let executor = executor_spilling_into(scratch.path());
    let jobs = JobRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: size.jobs.max(1),
        ..JobsConfig::default()
    });
    let registry = bash_registry(executor.clone(), Some(&jobs))?;
    let arguments = json!({
        "command": format!("head -c {} /dev/zero", size.bytes_per_job),
        "description": "Write zeros in the background",
        "run_in_background": true,
    })
    .to_string();
    let (seconds, texts) = runtime.block_on(async {
        let started = Instant::now();
        let mut ids = Vec::with_capacity(size.jobs);
        for i in 0..size.jobs {
            let call = ToolCall::new(format!("c{i}"), "bash", arguments.clone());
            let result = registry.execute(call).await;
            let id = result
                .value
                .as_deref()
                .filter(|_| !result.is_error)
                .and_then(|v| v["jobId"].as_str().map(str::to_owned))
                .with_context(|| format!("starting a job failed: {:?}", result.content))?;
            ids.push(id);
        }
        let texts =
            futures::future::try_join_all(ids.iter().map(|id| read_to_end(&jobs, id))).await?;
        let seconds = started.elapsed().as_secs_f64();
        jobs.teardown().await;
        anyhow::Ok((seconds, texts))
    })?;
    let accounting = account(size, &texts, executor.spill_dir().as_deref())?;
    Ok((seconds, accounting))
}

/// Waits for a job and reads its output until the job is settled and a read returns nothing;
/// returns every read's text, concatenated.
async fn read_to_end(jobs: &JobRuntime, id: &str) -> Result<String> {
    let never = CancellationToken::new();
    let mut text = String::new();
    loop {
        jobs.wait(id, Duration::from_secs(600), None, &never)
            .await
            .with_context(|| format!("waiting for {id}"))?;
        let read = jobs
            .read(id, None)
            .with_context(|| format!("reading {id}"))?;
        text.push_str(&read.text);
        if read.snapshot.status.is_terminal() && read.text.is_empty() {
            ensure!(
                read.snapshot.detail.as_deref() == Some("exit code: 0"),
                "job {id} did not succeed: {:?}",
                read.snapshot
            );
            return Ok(text);
        }
    }
}

/// Checks that every byte is accounted for: each job's output is zeros, so the bytes read are
/// the NULs in its text (the runtime's notices are plain text); the bytes not read must be in a
/// spill file, and every job whose output outgrew the in-memory window must have a complete
/// one (the jobs' spill files, `job-stdout-*`, are counted and sized).
fn account(size: FanoutSize, texts: &[String], spill_dir: Option<&Path>) -> Result<Accounting> {
    let expected = size.bytes_per_job;
    let window = LocalConfig::default().background_window_bytes as u64;
    let mut accounting = Accounting::default();
    for text in texts {
        let read = text.bytes().filter(|b| *b == 0).count() as u64;
        ensure!(
            read <= expected,
            "a job returned {read} bytes of {expected}"
        );
        // A read that skips output must say so and where the bytes are.
        ensure!(
            read == expected || text.contains("earlier bytes of stdout were skipped"),
            "a job's reads skipped {} bytes without saying where they are",
            expected - read
        );
        accounting.read += read;
        accounting.skipped += expected - read;
    }
    if expected > window {
        let dir = spill_dir.context("the jobs spilled nothing, yet their output outgrew memory")?;
        let mut complete = 0;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with("job-stdout-")
            {
                let len = entry.metadata()?.len();
                ensure!(
                    len == expected,
                    "a spill file holds {len} bytes, not {expected}"
                );
                complete += 1;
            }
        }
        ensure!(
            complete == texts.len(),
            "{complete} complete spill files for {} jobs",
            texts.len()
        );
    } else {
        ensure!(
            accounting.skipped == 0,
            "output that fits in memory must be read whole"
        );
    }
    ensure!(
        accounting.read + accounting.skipped == expected * texts.len() as u64,
        "bytes are missing: {accounting:?}"
    );
    Ok(accounting)
}

/// One baseline round: the same number of raw `bash` processes redirecting the same command to
/// files, all spawned, then all awaited; the files' sizes are checked afterwards.
fn raw_round(runtime: &Runtime, size: FanoutSize, root: &Path) -> Result<f64> {
    let scratch = tempfile::tempdir_in(root)?;
    let command = format!("head -c {} /dev/zero", size.bytes_per_job);
    let files: Vec<_> = (0..size.jobs)
        .map(|i| scratch.path().join(format!("raw-{i}.out")))
        .collect();
    let seconds = runtime.block_on(async {
        let started = Instant::now();
        futures::future::try_join_all(files.iter().map(|file| shell_redirect(&command, file)))
            .await?;
        anyhow::Ok(started.elapsed().as_secs_f64())
    })?;
    for file in &files {
        let len = std::fs::metadata(file)?.len();
        ensure!(
            len == size.bytes_per_job,
            "{} holds {len} bytes",
            file.display()
        );
    }
    Ok(seconds)
}

/// Measures `jobs_fanout` (s for all jobs, lower is better) and checks the byte accounting of
/// every round.
fn jobs_fanout(runtime: &Runtime, size: FanoutSize) -> Result<Measurement> {
    let root = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mut last = Accounting::default();
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            let (seconds, accounting) = tool_round(runtime, size, root.path())?;
            last = accounting;
            Ok(seconds)
        },
        || raw_round(runtime, size, root.path()),
    )?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "s",
        baseline: "raw processes writing files",
        baseline_value: baseline,
        higher_is_better: false,
        target: Target::RatioAtMost(1.5),
        extras: vec![
            Extra {
                key: "read_mib",
                value: mib(last.read),
                unit: "MiB",
                at_most: None,
            },
            Extra {
                key: "skipped_mib",
                value: mib(last.skipped),
                unit: "MiB",
                at_most: None,
            },
        ],
        samples: size.rounds.samples,
    })
}
