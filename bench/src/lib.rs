//! The benchmarks of spec 07 §7.1, run by `cargo xtask bench` (the `dsh-bench` binary).
//!
//! Every benchmark measures its value and its baseline in the same run, alternating between
//! them round by round so both share the machine's noise, and reports the medians. Speed is
//! claimed only from these ratios, never from a single timing.
//!
//! Each benchmark is a function taking its size, so the crate's tests run every one of them
//! at tiny sizes (in debug mode) and CI catches a broken benchmark without a release build.
//!
//! It deliberately changes nothing in the library crates: it drives their public APIs only.

mod dispatch;
mod fanout;
mod measure;
mod replay;
mod rss;
mod spawn;
mod throughput;
mod validate;

pub use dispatch::{MicroSize, dispatch_overhead};
pub use fanout::{FanoutSize, jobs_fanout};
pub use measure::{Extra, Measurement, Rounds, Target, interleaved, json_line, median};
pub use replay::{ReplaySize, replay};
pub use spawn::bash_spawn;
pub use throughput::{ThroughputSize, bash_throughput};
pub use validate::validate_args;

use anyhow::Result;

/// The names of the benchmarks, in the order they run.
pub const NAMES: [&str; 6] = [
    "dispatch_overhead",
    "validate_args",
    "bash_spawn",
    "bash_throughput",
    "jobs_fanout",
    "replay",
];

/// The size of every benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// `dispatch_overhead`.
    pub dispatch: MicroSize,
    /// `validate_args`.
    pub validate: MicroSize,
    /// `bash_spawn`.
    pub spawn: MicroSize,
    /// `bash_throughput`.
    pub throughput: ThroughputSize,
    /// `jobs_fanout`.
    pub fanout: FanoutSize,
    /// `replay`.
    pub replay: ReplaySize,
}

const fn rounds(warmup: usize, samples: usize) -> Rounds {
    Rounds { warmup, samples }
}

impl Sizes {
    /// The sizes of spec 07 §7.1: 1 GiB, 100 jobs × 4 MiB, 100 000 events.
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
    };

    /// A smoke run well under a minute in release mode: 64 MiB, 10 jobs × 1 MiB, 10 000
    /// events, fewer rounds.
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
    };

    /// Sizes that only check every benchmark works (the crate's tests, debug mode); the
    /// figures mean nothing.
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
    };
}

/// Runs the benchmarks at `sizes` (all of them when `only` is empty, else those named), calling
/// `progress` with each name before it starts and each measurement when it is done.
pub fn run_all(
    sizes: &Sizes,
    only: &[String],
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<Measurement>> {
    if let Some(unknown) = only.iter().find(|n| !NAMES.contains(&n.as_str())) {
        anyhow::bail!(
            "unknown benchmark `{unknown}`; the benchmarks are {}",
            NAMES.join(", ")
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut out = Vec::with_capacity(NAMES.len());
    let mut run = |name: &'static str, bench: &mut dyn FnMut() -> Result<Measurement>| {
        if !only.is_empty() && !only.iter().any(|n| n == name) {
            return anyhow::Ok(());
        }
        progress(Progress::Starting(name));
        let measurement = bench()?;
        progress(Progress::Done(&measurement));
        out.push(measurement);
        anyhow::Ok(())
    };
    run(NAMES[0], &mut || {
        dispatch_overhead(&runtime, sizes.dispatch)
    })?;
    run(NAMES[1], &mut || validate_args(sizes.validate))?;
    run(NAMES[2], &mut || bash_spawn(&runtime, sizes.spawn))?;
    run(NAMES[3], &mut || {
        bash_throughput(&runtime, sizes.throughput)
    })?;
    run(NAMES[4], &mut || jobs_fanout(&runtime, sizes.fanout))?;
    run(NAMES[5], &mut || replay(&runtime, sizes.replay))?;
    Ok(out)
}

/// What [`run_all`] reports as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A benchmark is about to run.
    Starting(&'static str),
    /// A benchmark finished.
    Done(&'a Measurement),
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tokio::runtime::Runtime;

    /// A multi-threaded runtime like the binary's.
    pub(crate) fn runtime() -> Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// What every benchmark must produce: finite positive figures and a named baseline.
    pub(crate) fn check_basics(m: &Measurement) {
        assert!(NAMES.contains(&m.name), "{m:?}");
        assert!(m.value.is_finite() && m.value > 0.0, "{m:?}");
        assert!(
            m.baseline_value.is_finite() && m.baseline_value > 0.0,
            "{m:?}"
        );
        assert!(!m.baseline.is_empty() && !m.unit.is_empty(), "{m:?}");
        assert!(m.ratio().is_finite() && m.ratio() > 0.0, "{m:?}");
    }
}
