//! `long_session`: one turn of thousands of steps through the real agent loop, each step a
//! model request answered by the scripted model with one call of a trivial tool, recorded to a
//! JSONL session log. The figure is the median step time of the last steps against the first
//! steps of the same session, so a loop whose step cost grew with the history (copying it,
//! rebuilding the tool schemas, scanning it) would show a ratio above one; the peak RSS growth
//! per recorded event says what the history keeps.

use crate::Benchmark;
use crate::measure::{Extra, Measurement, Rounds, Target, median};
use crate::rss::PeakRssWindow;
use agent_loop::{Agent, SessionEvent, TurnEndReason};
use anyhow::{Context, Result, ensure};
use dsh_tools::{ContentBlock, ToolDefinition, ToolOutput, ToolRegistry, ValueSchema};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::runtime::Runtime;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "long_session",
    run: |runtime, sizes| long_session(runtime, sizes.long_session),
};

/// The size of `long_session`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionSize {
    /// Steps of the session, each one tool call.
    pub steps: usize,
    /// Steps compared at each end of the session.
    pub window: usize,
    /// Warm-up and recorded rounds (a fresh session each).
    pub rounds: Rounds,
}

/// A tool that does nothing: the step measures the loop, not the tool.
fn noop() -> Result<ToolDefinition> {
    Ok(ToolDefinition::builder("noop", "Do nothing.")
        .parameters(ValueSchema::closed_object())
        .output(ToolOutput::new(ValueSchema::string(), |_, value| {
            vec![ContentBlock::text(value.as_str().unwrap_or_default())]
        }))
        .execute(|_, _| async { Ok(json!("ok")) })
        .build()?)
}

/// What one session measured.
struct Run {
    /// Median seconds per step over the first `window` steps.
    first: f64,
    /// Median seconds per step over the last `window` steps.
    last: f64,
    /// Events recorded.
    events: usize,
    /// How far the peak RSS rose over the session, in bytes.
    rss_growth: u64,
}

/// Runs one session of `steps` tool-call steps and a final answer, timing each step from one
/// `model/request` event to the next. Returns the disposed agent too, which still holds its
/// history: the caller keeps it, so that the next session cannot grow into memory this one
/// freed, which would hide its growth.
fn run(runtime: &Runtime, registry: &ToolRegistry, size: SessionSize) -> Result<(Run, Agent)> {
    let steps = size.steps;
    let window = size.window.clamp(1, steps / 2);
    // The scripted model answers from the step number; it keeps no request, so the agent's
    // history is never shared when it appends to it (see `MockAdapter::capture_requests`).
    let model = MockAdapter::with_function(move |request| {
        if request.step as usize <= steps {
            Step::from(Response::calls([ScriptedCall::json(
                format!("call-{}", request.step),
                "noop",
                json!({}),
            )]))
        } else {
            Step::from(Response::text("done"))
        }
    })
    .capture_requests(false);
    let requests = Arc::new(Mutex::new(Vec::with_capacity(steps + 1)));
    let events = Arc::new(AtomicUsize::new(0));
    let dir = tempfile::tempdir().context("creating the session log's directory")?;
    let agent = Agent::builder(registry.clone(), Arc::new(model))
        .max_steps(u32::try_from(steps + 1).context("too many steps")?)
        .log(dir.path().join("session.jsonl"))
        .subscriber({
            let (requests, events) = (Arc::clone(&requests), Arc::clone(&events));
            move |record| {
                events.fetch_add(1, Ordering::Relaxed);
                if matches!(record.event, SessionEvent::ModelRequest { .. }) {
                    let mut requests = requests.lock().unwrap_or_else(|e| e.into_inner());
                    requests.push(Instant::now());
                }
            }
        })
        .build()?;
    let rss = PeakRssWindow::open()?;
    let outcome = runtime.block_on(agent.run("Call noop until told to stop."))?;
    let rss_growth = rss.growth_bytes()?;
    ensure!(
        outcome.reason == TurnEndReason::Completed && outcome.steps as usize == steps + 1,
        "the session ended {:?} after {} steps",
        outcome.reason,
        outcome.steps
    );
    ensure!(agent.log_error().is_none(), "the session log failed");
    runtime.block_on(agent.dispose());
    let requests = std::mem::take(&mut *requests.lock().unwrap_or_else(|e| e.into_inner()));
    // Step n runs from request n to request n + 1: the response, the tool call, the result
    // and the next request's assembly.
    let step_times: Vec<f64> = requests
        .windows(2)
        .map(|pair| pair[1].duration_since(pair[0]).as_secs_f64())
        .collect();
    ensure!(
        step_times.len() == steps,
        "{} steps timed",
        step_times.len()
    );
    let run = Run {
        first: median(step_times[..window].to_vec()),
        last: median(step_times[steps - window..].to_vec()),
        events: events.load(Ordering::Relaxed),
        rss_growth,
    };
    Ok((run, agent))
}

/// Measures `long_session` (µs/step over the last window, lower is better) against the first
/// window of the same session.
fn long_session(runtime: &Runtime, size: SessionSize) -> Result<Measurement> {
    let size = SessionSize {
        steps: size.steps.max(4),
        ..size
    };
    let registry = ToolRegistry::new();
    registry.register(noop()?)?;
    // Every session's agent (and history) lives until the end of the measurement.
    let mut kept = Vec::new();
    for _ in 0..size.rounds.warmup {
        kept.push(run(runtime, &registry, size)?.1);
    }
    let mut firsts = Vec::with_capacity(size.rounds.samples);
    let mut lasts = Vec::with_capacity(size.rounds.samples);
    let mut per_event = Vec::with_capacity(size.rounds.samples);
    let mut events = 0;
    for _ in 0..size.rounds.samples.max(1) {
        let (run, agent) = run(runtime, &registry, size)?;
        kept.push(agent);
        firsts.push(run.first * 1e6);
        lasts.push(run.last * 1e6);
        per_event.push(run.rss_growth as f64 / run.events.max(1) as f64);
        events = run.events;
    }
    drop(kept);
    Ok(Measurement {
        name: BENCHMARK.name,
        value: median(lasts),
        unit: "µs/step",
        baseline: "the first steps of the same session",
        baseline_value: median(firsts),
        higher_is_better: false,
        target: Target::RatioAtMost(1.3),
        extras: vec![
            Extra {
                key: "rss_bytes_per_event",
                value: median(per_event),
                unit: "B",
                at_most: None,
            },
            Extra {
                key: "events",
                value: events as f64,
                unit: "events",
                at_most: None,
            },
        ],
        samples: size.rounds.samples,
    })
}
