//! `dispatch_overhead`: the whole pipeline for a trivial typed tool against calling its
//! function directly.

use crate::Benchmark;
use crate::measure::{Extra, Measurement, Rounds, Target, interleaved};
use anyhow::{Result, ensure};
use dsh_tools::{ContentBlock, ExecContext, Tool, ToolCall, ToolError, ToolRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;
use tokio::runtime::Runtime;

/// The size of a per-call micro-benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroSize {
    /// Calls per sample (the sample is their mean).
    pub calls: usize,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// The arguments of the trivial tool.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

/// The trivial tool's output.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Sum {
    sum: i64,
}

/// The tool's logic: what the baseline calls directly.
#[inline(never)]
fn add(args: AddArgs) -> Sum {
    Sum {
        sum: args.a.wrapping_add(args.b),
    }
}

/// The trivial typed tool.
struct Add;

impl Tool for Add {
    type Args = AddArgs;
    type Output = Sum;

    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Add two integers. Use when the user asks for a sum."
    }

    async fn execute(&self, args: AddArgs, _exec: ExecContext) -> Result<Sum, ToolError> {
        Ok(add(args))
    }

    fn render(&self, _args: &AddArgs, value: &Sum) -> Vec<ContentBlock> {
        vec![ContentBlock::text(value.sum.to_string())]
    }
}

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "dispatch_overhead",
    run: |runtime, sizes| dispatch_overhead(runtime, sizes.dispatch),
};

const ARGUMENTS: &str = r#"{"a": 40, "b": 2}"#;

fn call() -> ToolCall {
    ToolCall::new("call-1", "add", ARGUMENTS)
}

/// Measures `dispatch_overhead` (ns/call): materialise the argument text, validate, no hooks,
/// execute, validate the output and render, through [`ToolRegistry::execute`]; the baseline
/// calls the tool's function with arguments deserialised beforehand. The size of the future
/// `execute` returns is reported too: the pipeline moves it between its nested stages.
fn dispatch_overhead(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let registry = ToolRegistry::new();
    registry.register_tool(Add)?;
    // Created and dropped unpolled: only its size is wanted.
    let future_bytes = std::mem::size_of_val(&registry.execute(call()));
    let check = runtime.block_on(registry.execute(call()));
    ensure!(
        !check.is_error && dsh_tools::content_text(&check.content) == "42",
        "the trivial tool did not answer 42: {check:?}"
    );
    let calls = size.calls.max(1);
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            // The calls are built before the clock starts: what is timed is the registry.
            let batch: Vec<ToolCall> = (0..calls).map(|_| call()).collect();
            runtime.block_on(async {
                let started = Instant::now();
                for call in batch {
                    black_box(registry.execute(call).await);
                }
                Ok(started.elapsed().as_nanos() as f64 / calls as f64)
            })
        },
        || {
            let batch: Vec<AddArgs> = (0..calls)
                .map(|_| serde_json::from_str(ARGUMENTS))
                .collect::<Result<_, _>>()?;
            let started = Instant::now();
            for args in batch {
                black_box(add(black_box(args)));
            }
            Ok(started.elapsed().as_nanos() as f64 / calls as f64)
        },
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "ns/call",
        baseline: "direct call, args deserialised",
        baseline_value: baseline,
        higher_is_better: false,
        target: Target::ValueAtMost(2000.0),
        extras: vec![Extra {
            key: "execute_future_bytes",
            value: future_bytes as f64,
            unit: "bytes",
            at_most: None,
        }],
        samples: size.rounds.samples,
    })
}
