//! The binary's contract: with `--json` the last line of stdout is a JSON array holding every
//! benchmark with the spec's fields.

use serde_json::Value;
use std::process::Command;

#[test]
fn json_output_ends_with_every_benchmark() {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-bench"))
        .args(["--tiny", "--json"])
        .output()
        .expect("dsh-bench runs");
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
    assert_eq!(names, bench::NAMES);
    for result in &results {
        for field in ["value", "baseline_value", "ratio"] {
            assert!(
                result[field].as_f64().is_some_and(|v| v > 0.0),
                "{field} of {result}"
            );
        }
        for field in ["unit", "baseline"] {
            assert!(result[field].as_str().is_some(), "{field} of {result}");
        }
    }
    // One human line per benchmark before the JSON line.
    assert_eq!(stdout.lines().count(), bench::NAMES.len() + 1);
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
        let output = Command::new(env!("CARGO_BIN_EXE_dsh-bench"))
            .args(args)
            .output()
            .expect("dsh-bench runs");
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
