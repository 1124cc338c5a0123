//! `code_mode_call`: a trivial tool called N times from one `run_code` program, against the
//! same N calls made directly with `call_value` from inside a tool body. Both go through the
//! same pipeline for each nested call, so the difference per call is what Code Mode adds: the
//! engine, the promise machinery and the hop between the engine thread and the host. The
//! program's engine start-up and TypeScript erasure are counted in, spread over the N calls.

use crate::Benchmark;
use crate::dispatch::MicroSize;
use crate::measure::{Extra, Measurement, Target, interleaved, median};
use anyhow::{Result, ensure};
use dsh_tools::{ToolCall, ToolDefinition, ToolError, ToolOutput, ToolRegistry, ValueSchema};
use serde_json::{Value, json};
use std::time::Instant;
use tokio::runtime::Runtime;
use tool_code::{CodeModeLimits, register_run_code};

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "code_mode_call",
    run: |runtime, sizes| code_mode_call(runtime, sizes.code_mode),
};

/// A registry with a trivial `add` tool, a `direct` tool whose body calls `add` `calls` times
/// with `call_value`, and `run_code` allowed that many nested calls.
fn registry(calls: usize) -> Result<ToolRegistry> {
    let registry = ToolRegistry::new();
    registry.register(
        ToolDefinition::builder("add", "Add two integers.")
            .output(ToolOutput::new(ValueSchema::open_object(), |_, _| {
                Vec::new()
            }))
            .execute(|args, _| async move {
                let number = |key: &str| args[key].as_i64().unwrap_or(0);
                Ok(json!({"sum": number("a").wrapping_add(number("b"))}))
            })
            .build()?,
    )?;
    let handle = registry.clone();
    registry.register(
        ToolDefinition::builder("direct", "Call add many times directly.")
            .output(ToolOutput::new(ValueSchema::open_object(), |_, _| {
                Vec::new()
            }))
            .execute(move |_, ctx| {
                let registry = handle.clone();
                async move {
                    let mut total = 0i64;
                    for i in 0..calls {
                        let value = registry
                            .call_value("add", json!({"a": i, "b": 1}), &ctx)
                            .await
                            .map_err(|e| ToolError::failed(e.to_string()))?;
                        total = total.wrapping_add(value["sum"].as_i64().unwrap_or(0));
                    }
                    Ok(json!({"total": total}))
                }
            })
            .build()?,
    )?;
    let mut limits = CodeModeLimits::default();
    limits.nested_calls = calls;
    register_run_code(&registry, limits)?;
    Ok(registry)
}

/// The program: the same calls as `direct`, from JavaScript.
fn program(calls: usize) -> String {
    format!(
        "let total = 0;\nfor (let i = 0; i < {calls}; i++) {{\n  const r = await tools.add({{ a: i, b: 1 }});\n  total += r.sum;\n}}\nreturn {{ total }};"
    )
}

/// Runs `call` once and returns the `total` it reports.
async fn total(registry: &ToolRegistry, call: ToolCall) -> Option<i64> {
    let result = registry.execute(call).await;
    let value = result.value?;
    value
        .get("value")
        .unwrap_or(&value)
        .get("total")
        .and_then(Value::as_i64)
}

/// Measures `code_mode_call` (µs of overhead per nested call).
fn code_mode_call(runtime: &Runtime, size: MicroSize) -> Result<Measurement> {
    let calls = size.calls.max(1);
    let registry = registry(calls)?;
    let code = program(calls);
    let expected = (1..=calls as i64).sum::<i64>();
    let through_program = || ToolCall::new("call-1", "run_code", json!({"code": code}));
    let direct = || ToolCall::new("call-1", "direct", json!({}));
    let checked = runtime.block_on(async {
        (
            total(&registry, through_program()).await,
            total(&registry, direct()).await,
        )
    });
    ensure!(
        checked == (Some(expected), Some(expected)),
        "the program and the direct loop disagree: {checked:?}, expected {expected}"
    );
    // µs per call of one run of `call`, which must compute `expected` in `calls` calls.
    let timed = |call: ToolCall, expected: i64, calls: usize| {
        runtime.block_on(async {
            let started = Instant::now();
            let got = total(&registry, call).await;
            ensure!(got == Some(expected), "a round computed {got:?}");
            Ok(started.elapsed().as_nanos() as f64 / calls as f64 / 1000.0)
        })
    };
    let (program_us, direct_us) = interleaved(
        size.rounds,
        || timed(through_program(), expected, calls),
        || timed(direct(), expected, calls),
    )?;
    // What one run costs whatever it calls (thread, engine, prelude, erasure, result), the
    // part of the overhead that shrinks as a program makes more calls.
    let empty = || {
        ToolCall::new(
            "call-1",
            "run_code",
            json!({"code": "return { total: 0 };"}),
        )
    };
    let empty_us = median(
        (0..size.rounds.samples)
            .map(|_| timed(empty(), 0, 1))
            .collect::<Result<Vec<f64>>>()?,
    );
    Ok(Measurement {
        name: BENCHMARK.name,
        value: program_us - direct_us,
        unit: "µs/call",
        baseline: "direct call_value from a tool body (µs/call)",
        baseline_value: direct_us,
        higher_is_better: false,
        target: Target::ValueAtMost(10.0),
        extras: vec![
            Extra {
                key: "program_us_per_call",
                value: program_us,
                unit: "µs/call",
                at_most: None,
            },
            Extra {
                key: "empty_program_us",
                value: empty_us,
                unit: "µs",
                at_most: None,
            },
        ],
        samples: size.rounds.samples,
    })
}
