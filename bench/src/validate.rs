//! `validate_args`: our validator on the `bash` argument schema against the `jsonschema`
//! crate's validator compiled once for the same schema.

use crate::Benchmark;
use crate::dispatch::MicroSize;
use crate::measure::{Measurement, Target, interleaved};
use anyhow::{Result, anyhow, ensure};
use dsh_tools::json::JsonValue;
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::Instant;

/// Arguments a model typically sends to `bash`: the two required strings, sometimes a timeout,
/// a working directory or the background switch.
fn typical_bash_arguments() -> Vec<Value> {
    vec![
        json!({"command": "cargo test --workspace 2>&1 | tail -n 50", "description": "Run the workspace tests"}),
        json!({"command": "ls -la", "description": "List the files", "workdir": "crates/tool-bash"}),
        json!({"command": "rg -n 'fn validate' crates/", "description": "Find the validator", "timeout_ms": 30000}),
        json!({"command": "npm run dev", "description": "Start the dev server", "run_in_background": true}),
    ]
}

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "validate_args",
    run: |_, sizes| validate_args(sizes.validate),
};

/// Measures `validate_args` (ns/op): `dsh_tools::validate` against
/// `jsonschema::draft202012::new(..).validate(..)` on the same schema and arguments, each
/// validator given the arguments already parsed into the value it walks (ours the exact
/// `JsonValue` the pipeline parses from the argument text, the oracle a `serde_json::Value`).
fn validate_args(size: MicroSize) -> Result<Measurement> {
    let schema = tool_bash::tool::bash_parameters(true)?;
    let oracle = jsonschema::draft202012::new(&serde_json::to_value(schema.to_json())?)
        .map_err(|e| anyhow!("jsonschema rejects the bash schema: {e}"))?;
    let arguments = typical_bash_arguments();
    let exact = arguments
        .iter()
        .map(|args| JsonValue::parse(&args.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    for (args, exact) in arguments.iter().zip(&exact) {
        ensure!(
            dsh_tools::validate(&schema, exact).is_ok() && oracle.validate(args).is_ok(),
            "both validators must accept the typical arguments {args}"
        );
    }
    let ops = size.calls.max(1);
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            let started = Instant::now();
            for args in exact.iter().cycle().take(ops) {
                black_box(dsh_tools::validate(&schema, black_box(args)).is_ok());
            }
            Ok(started.elapsed().as_nanos() as f64 / ops as f64)
        },
        || {
            let started = Instant::now();
            for args in arguments.iter().cycle().take(ops) {
                black_box(oracle.validate(black_box(args)).is_ok());
            }
            Ok(started.elapsed().as_nanos() as f64 / ops as f64)
        },
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "ns/op",
        baseline: "jsonschema, compiled once",
        baseline_value: baseline,
        higher_is_better: false,
        target: Target::RatioAtMost(1.0),
        extras: Vec::new(),
        samples: size.rounds.samples,
    })
}
