//! The benchmarks of `docs/performance.md`, run by `cargo xtask bench` (the `dsh-bench` binary).
//!
//! Every benchmark measures its value and its baseline in the same run, alternating between
//! them round by round so both share the machine's noise, and reports the medians. Speed is
//! claimed only from these ratios, never from a single timing.
//!
//! Each benchmark is a function taking its size, so `dsh-bench --tiny` runs every one of them
//! at tiny sizes; the crate's test does that once in debug mode, so CI catches a broken
//! benchmark without a release build.
//!
//! It deliberately changes nothing in the library crates: it drives their public APIs only.

mod churn;
mod code_mode;
mod dispatch;
mod fanout;
mod long_session;
mod many_agents;
mod mcp;
mod measure;
mod model_stream;
mod replay;
mod rss;
mod sandbox;
mod shell;
mod spawn;
mod throughput;
mod validate;

pub use churn::ChurnSize;
pub use dispatch::MicroSize;
pub use fanout::FanoutSize;
pub use long_session::SessionSize;
pub use many_agents::AgentsSize;
pub use measure::{Extra, Measurement, Rounds, Target, json_line};
pub use model_stream::StreamSize;
pub use replay::ReplaySize;
pub use throughput::ThroughputSize;

use anyhow::{Result, bail};
use tokio::runtime::Runtime;

/// One benchmark: the name it is reported and selected (`--only`) by, and how it runs.
#[derive(Clone, Copy, Debug)]
pub struct Benchmark {
    /// The name listed in `docs/performance.md`.
    pub name: &'static str,
    run: fn(&Runtime, &Sizes) -> Result<Measurement>,
}

/// Every benchmark, in the order they run.
pub const BENCHMARKS: [Benchmark; 13] = [
    dispatch::BENCHMARK,
    validate::BENCHMARK,
    spawn::BENCHMARK,
    sandbox::BENCHMARK,
    throughput::BENCHMARK,
    fanout::BENCHMARK,
    replay::BENCHMARK,
    model_stream::BENCHMARK,
    churn::BENCHMARK,
    long_session::BENCHMARK,
    many_agents::BENCHMARK,
    mcp::BENCHMARK,
    code_mode::BENCHMARK,
];

/// The size of every benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// `dispatch_overhead`.
    pub dispatch: MicroSize,
    /// `validate_args`.
    pub validate: MicroSize,
    /// `bash_spawn` and `sandbox_spawn`.
    pub spawn: MicroSize,
    /// `bash_throughput`.
    pub throughput: ThroughputSize,
    /// `jobs_fanout`.
    pub fanout: FanoutSize,
    /// `replay`.
    pub replay: ReplaySize,
    /// `model_stream`.
    pub model_stream: StreamSize,
    /// `job_churn`.
    pub churn: ChurnSize,
    /// `long_session`.
    pub long_session: SessionSize,
    /// `many_agents`.
    pub many_agents: AgentsSize,
    /// `mcp_call`.
    pub mcp: MicroSize,
    /// `code_mode_call`: `calls` nested calls from one program.
    pub code_mode: MicroSize,
}

const fn rounds(warmup: usize, samples: usize) -> Rounds {
    Rounds { warmup, samples }
}

impl Sizes {
    /// The full sizes of `docs/performance.md`: 1 GiB, 100 jobs × 4 MiB, 100 000 events, a
    /// 10 MiB model stream, 100 000 churned jobs, a 5 000-step session, 1 000 agents.
    pub const FULL: Sizes = Sizes {
        dispatch: MicroSize {
            calls: 20_000,
            rounds: rounds(2, 15),
        },
        validate: MicroSize {
            calls: 50_000,
            rounds: rounds(2, 15),
        },
        spawn: MicroSize {
            calls: 10,
            rounds: rounds(1, 21),
        },
        throughput: ThroughputSize {
            bytes: 1 << 30,
            rounds: rounds(1, 5),
        },
        fanout: FanoutSize {
            jobs: 100,
            bytes_per_job: 4 << 20,
            rounds: rounds(1, 5),
        },
        replay: ReplaySize {
            events: 100_000,
            rounds: rounds(1, 5),
        },
        model_stream: StreamSize {
            bytes: 10 << 20,
            rounds: rounds(1, 7),
        },
        churn: ChurnSize {
            jobs: 100_000,
            rounds: rounds(1, 5),
        },
        long_session: SessionSize {
            steps: 5_000,
            window: 500,
            rounds: rounds(1, 5),
        },
        many_agents: AgentsSize {
            agents: 1_000,
            rounds: rounds(1, 5),
        },
        mcp: MicroSize {
            calls: 2_000,
            rounds: rounds(2, 15),
        },
        code_mode: MicroSize {
            calls: 1_000,
            rounds: rounds(2, 15),
        },
    };

    /// A smoke run well under a minute in release mode: 64 MiB, 10 jobs × 1 MiB, 10 000
    /// events, a 2 MiB model stream, 20 000 churned jobs, a 2 000-step session, 200 agents,
    /// fewer rounds.
    pub const QUICK: Sizes = Sizes {
        dispatch: MicroSize {
            calls: 5_000,
            rounds: rounds(1, 7),
        },
        validate: MicroSize {
            calls: 10_000,
            rounds: rounds(1, 7),
        },
        spawn: MicroSize {
            calls: 5,
            rounds: rounds(1, 9),
        },
        throughput: ThroughputSize {
            bytes: 64 << 20,
            rounds: rounds(1, 3),
        },
        fanout: FanoutSize {
            jobs: 10,
            bytes_per_job: 1 << 20,
            rounds: rounds(1, 3),
        },
        replay: ReplaySize {
            events: 10_000,
            rounds: rounds(1, 3),
        },
        model_stream: StreamSize {
            bytes: 2 << 20,
            rounds: rounds(1, 5),
        },
        churn: ChurnSize {
            jobs: 20_000,
            rounds: rounds(1, 3),
        },
        long_session: SessionSize {
            steps: 2_000,
            window: 200,
            rounds: rounds(1, 3),
        },
        many_agents: AgentsSize {
            agents: 200,
            rounds: rounds(1, 3),
        },
        mcp: MicroSize {
            calls: 500,
            rounds: rounds(1, 7),
        },
        code_mode: MicroSize {
            calls: 1_000,
            rounds: rounds(1, 7),
        },
    };

    /// Sizes that only check every benchmark works (`--tiny`, which the crate's test runs in
    /// debug mode); the figures mean nothing.
    pub const TINY: Sizes = Sizes {
        dispatch: MicroSize {
            calls: 20,
            rounds: rounds(0, 1),
        },
        validate: MicroSize {
            calls: 20,
            rounds: rounds(0, 1),
        },
        spawn: MicroSize {
            calls: 1,
            rounds: rounds(0, 1),
        },
        throughput: ThroughputSize {
            bytes: 256 << 10,
            rounds: rounds(0, 1),
        },
        fanout: FanoutSize {
            jobs: 2,
            bytes_per_job: 128 << 10,
            rounds: rounds(0, 1),
        },
        replay: ReplaySize {
            events: 200,
            rounds: rounds(0, 1),
        },
        model_stream: StreamSize {
            bytes: 64 << 10,
            rounds: rounds(0, 1),
        },
        churn: ChurnSize {
            jobs: 200,
            rounds: rounds(0, 1),
        },
        long_session: SessionSize {
            steps: 40,
            window: 10,
            rounds: rounds(0, 1),
        },
        many_agents: AgentsSize {
            agents: 4,
            rounds: rounds(0, 1),
        },
        mcp: MicroSize {
            calls: 5,
            rounds: rounds(0, 1),
        },
        code_mode: MicroSize {
            calls: 5,
            rounds: rounds(0, 1),
        },
    };
}

/// Runs the benchmarks at `sizes` (all of them when `only` is empty, else those named), calling
/// `progress` with each name before it starts and each measurement when it is done.
pub fn run_all(
    sizes: &Sizes,
    only: &[String],
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<Measurement>> {
    let selected = select(only)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut out = Vec::with_capacity(selected.len());
    for benchmark in selected {
        progress(Progress::Starting(benchmark.name));
        let measurement = (benchmark.run)(&runtime, sizes)?;
        progress(Progress::Done(&measurement));
        out.push(measurement);
    }
    Ok(out)
}

/// The benchmarks `only` names, in the order they run (all of them when `only` is empty); an
/// unknown name is an error that lists the known ones.
pub fn select(only: &[String]) -> Result<Vec<&'static Benchmark>> {
    let names = BENCHMARKS.map(|b| b.name);
    if let Some(unknown) = only.iter().find(|n| !names.contains(&n.as_str())) {
        bail!(
            "unknown benchmark `{unknown}`; the benchmarks are {}",
            names.join(", ")
        );
    }
    Ok(BENCHMARKS
        .iter()
        .filter(|b| only.is_empty() || only.iter().any(|n| n == b.name))
        .collect())
}

/// What [`run_all`] reports as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A benchmark is about to run.
    Starting(&'static str),
    /// A benchmark finished.
    Done(&'a Measurement),
}
