//! `job_churn`: many short jobs of a trivial in-process producer run one after another through
//! the jobs runtime, each owned by an agent that receives its completion notice. The figure is
//! the time per job of the last tenth of the run against the first tenth of the same run, so a
//! runtime whose records (or whose `start`) grew with every job ever run would show a ratio
//! above one; the peak RSS growth over the run bounds what the settled records keep.

use crate::Benchmark;
use crate::measure::{Extra, Measurement, Rounds, Target, median};
use crate::rss::PeakRssWindow;
use anyhow::{Context, Result, ensure};
use dsh_tools::jobs::{JobEnd, JobError, JobHooks, JobOutcome, JobRuntime, JobStart, JobsConfig};
use dsh_tools::{AgentGone, AgentHandle, AgentRef, InjectedContext};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "job_churn",
    run: |runtime, sizes| job_churn(runtime, sizes.churn),
};

/// The size of `job_churn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChurnSize {
    /// Jobs run, one after another.
    pub jobs: usize,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// The peak RSS growth allowed over one run (`docs/performance.md`).
const RSS_GROWTH_LIMIT_MIB: f64 = 16.0;

/// How long a reported record is kept: short against the run, so the runtime reaches its
/// steady state (evicting as many records as it settles) early in the first tenth.
const RETENTION: Duration = Duration::from_millis(10);

/// An owner that counts the notices it is given and keeps none of them, so the benchmark
/// measures the runtime's memory, not the owner's inbox.
#[derive(Debug)]
struct CountingOwner {
    notices: AtomicUsize,
}

impl AgentHandle for CountingOwner {
    fn session_id(&self) -> &str {
        "churn"
    }

    fn inject(&self, _context: InjectedContext) -> Result<(), AgentGone> {
        self.notices.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn is_alive(&self) -> bool {
        true
    }
}

/// What one run measured.
struct Run {
    /// Seconds per job over the first tenth of the jobs.
    first: f64,
    /// Seconds per job over the last tenth of the jobs.
    last: f64,
    /// How far the peak RSS rose over the run, in bytes.
    rss_growth: u64,
    /// Records the runtime still held at the end.
    held: usize,
}

/// Runs `jobs` jobs one after another: start, settle (the producer's `done` is ready at once),
/// notice delivered, and the host's `settled` returning. Times the first and last tenths.
fn run(runtime: &Runtime, jobs: usize) -> Result<Run> {
    let tenth = (jobs / 10).max(1);
    let service = JobRuntime::new(JobsConfig {
        settled_retention: RETENTION,
        ..JobsConfig::default()
    });
    let controller = service.attach_controller();
    let owner = Arc::new(CountingOwner {
        notices: AtomicUsize::new(0),
    });
    let window = PeakRssWindow::open()?;
    let (first, last) = runtime.block_on(async {
        let mut first = Duration::ZERO;
        let mut tenth_started = Instant::now();
        for n in 0..jobs {
            if n == jobs - tenth {
                tenth_started = Instant::now();
            }
            let handle: AgentRef = owner.clone();
            let start = JobStart::new("churn", "a trivial job", || {
                Ok(JobHooks::new(|_| {}, async {
                    Ok(JobOutcome::new(JobEnd::Completed).with_output("done"))
                }))
            })
            .owner(handle);
            let id = service.start(start).context("starting a job")?;
            match service.settled(id.as_str(), Some("churn")).await {
                Ok(settled) => ensure!(settled.reported, "{id} settled without its notice"),
                // Under a heavy load the job may settle and outlive its retention before this
                // wait looks; only a reported record is evicted, so that is a pass too.
                Err(JobError::Expired { .. }) => {}
                Err(error) => return Err(error).with_context(|| format!("waiting for {id}")),
            }
            if n + 1 == tenth {
                first = tenth_started.elapsed();
            }
        }
        anyhow::Ok((first, tenth_started.elapsed()))
    })?;
    let rss_growth = window.growth_bytes()?;
    let held = service.list(Some("churn")).len();
    let notices = owner.notices.load(Ordering::Relaxed);
    ensure!(notices == jobs, "{notices} notices for {jobs} jobs");
    controller.dispose();
    Ok(Run {
        first: first.as_secs_f64() / tenth as f64,
        last: last.as_secs_f64() / tenth as f64,
        rss_growth,
        held,
    })
}

/// Measures `job_churn` (µs/job of the last tenth, lower is better) against the first tenth
/// of the same run.
fn job_churn(runtime: &Runtime, size: ChurnSize) -> Result<Measurement> {
    let jobs = size.jobs.max(10);
    for _ in 0..size.rounds.warmup {
        run(runtime, jobs)?;
    }
    let mut firsts = Vec::with_capacity(size.rounds.samples);
    let mut lasts = Vec::with_capacity(size.rounds.samples);
    let (mut peak_growth, mut held) = (0u64, 0usize);
    for _ in 0..size.rounds.samples.max(1) {
        let run = run(runtime, jobs)?;
        firsts.push(run.first * 1e6);
        lasts.push(run.last * 1e6);
        peak_growth = peak_growth.max(run.rss_growth);
        held = held.max(run.held);
    }
    Ok(Measurement {
        name: BENCHMARK.name,
        value: median(lasts),
        unit: "µs/job",
        baseline: "the first tenth of the same run",
        baseline_value: median(firsts),
        higher_is_better: false,
        target: Target::RatioAtMost(1.3),
        extras: vec![
            Extra {
                key: "rss_growth_mib",
                value: peak_growth as f64 / f64::from(1 << 20),
                unit: "MiB",
                at_most: Some(RSS_GROWTH_LIMIT_MIB),
            },
            Extra {
                key: "records_held",
                value: held as f64,
                unit: "records",
                at_most: None,
            },
        ],
        samples: size.rounds.samples,
    })
}
