//! The binary's contract, and the one run of every benchmark in the crate's tests: with
//! `--tiny --json` each benchmark runs once at tiny sizes in debug mode, and the last line of
//! stdout is a JSON array holding every benchmark with the fields that
//! docs/performance.md#running-the-benchmarks lists (`name`, `value`, `unit`, `baseline`,
//! `baseline_value`, `ratio`), finite positive figures and, for the benchmarks that stream
//! output, the byte accounting.

#![allow(clippy::expect_used)]

use bench::{BENCHMARKS, Sizes};
use serde_json::Value;
use std::process::{Command, Output};

fn dsh_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dsh-bench"))
        .args(args)
        .output()
        .expect("dsh-bench runs")
}

/// What every benchmark must report: finite positive figures (non-finite ones are written as
/// `null`), a unit and a named baseline.
fn check_basics(result: &Value) {
    for field in ["value", "baseline_value", "ratio"] {
        assert!(
            result[field]
                .as_f64()
                .is_some_and(|v| v.is_finite() && v > 0.0),
            "{field} of {result}"
        );
    }
    for field in ["unit", "baseline"] {
        assert!(
            result[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field} of {result}"
        );
    }
}

#[test]
fn every_benchmark_runs_at_tiny_sizes_and_reports_json() {
    let output = dsh_bench(&["--tiny", "--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "dsh-bench failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().expect("stdout is not empty");
    let results: Vec<Value> = serde_json::from_str(last).expect("the last line is JSON");
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, BENCHMARKS.map(|b| b.name));
    results.iter().for_each(check_basics);
    let result = |name: &str| &results[names.iter().position(|n| *n == name).unwrap_or(0)];
    let figure = |name: &str, key: &str| {
        result(name)[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} of {}", result(name)))
    };

    assert!(figure("dispatch_overhead", "execute_future_bytes") > 0.0);
    assert!(figure("bash_throughput", "peak_rss_growth_mib") >= 0.0);
    // The tiny jobs outgrow the in-memory window, so reads skip bytes the spill files hold;
    // every byte is either read or skipped.
    let tiny = Sizes::TINY.fanout;
    let mib = (tiny.jobs as u64 * tiny.bytes_per_job) as f64 / f64::from(1 << 20);
    let read = figure("jobs_fanout", "read_mib");
    let skipped = figure("jobs_fanout", "skipped_mib");
    assert!(read > 0.0, "{}", result("jobs_fanout"));
    assert!(
        (read + skipped - mib).abs() < 1e-9,
        "{read} MiB read + {skipped} MiB skipped ≠ {mib} MiB written"
    );

    // The long session recorded its events (a user message, four per step, the answer and the
    // turn's ends), and the idle agents' memory and the executor's limit were reported.
    let steps = Sizes::TINY.long_session.steps as f64;
    assert!(
        figure("long_session", "events") >= 4.0 * steps,
        "{}",
        result("long_session")
    );
    assert!(figure("long_session", "rss_bytes_per_event") >= 0.0);
    assert!(figure("many_agents", "rss_per_idle_agent_kib") >= 0.0);
    assert!(figure("many_agents", "concurrency") >= 1.0);

    // One human line per benchmark before the JSON line.
    assert_eq!(stdout.lines().count(), BENCHMARKS.len() + 1);
}

#[test]
fn unknown_options_and_benchmarks_are_refused() {
    for (args, message) in [
        (&["--fast"][..], "unknown option `--fast`"),
        (
            &["--tiny", "--only", "nope"][..],
            "unknown benchmark `nope`",
        ),
    ] {
        let output = dsh_bench(args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
