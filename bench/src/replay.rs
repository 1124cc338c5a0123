//! `replay`: a long session log parsed and replayed to cards with the built-in tools'
//! registry, against parsing the same lines with `serde_json` only.

use crate::Benchmark;
use crate::measure::{Measurement, Rounds, Target, interleaved};
use crate::shell::bash_registry;
use agent_loop::{Agent, EventRecord, SessionEvent, SessionLog, replay_cards};
use anyhow::{Context, Result, ensure};
use dsh_tools::ToolRegistry;
use dsh_tools::jobs::{JobRuntime, JobsConfig};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::runtime::Runtime;
use tool_bash::LocalExecutor;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "replay",
    run: |runtime, sizes| replay(runtime, sizes.replay),
};

/// The size of `replay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplaySize {
    /// Events in the log.
    pub events: usize,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// The registry of the built-in tools: `bash` with background jobs, and the job controls.
fn builtin_registry() -> Result<(ToolRegistry, JobRuntime)> {
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = bash_registry(LocalExecutor::default(), Some(&jobs))?;
    Ok((registry, jobs))
}

/// The script of the template session: successful, failing, long-output, malformed and
/// background `bash` calls, the job controls, reasoning and text.
fn template_script() -> MockAdapter {
    let bash = |id: &str, command: &str, description: &str| {
        ScriptedCall::json(
            id,
            "bash",
            json!({"command": command, "description": description}),
        )
    };
    MockAdapter::new([
        Step::from(
            Response::calls([bash("c1", "echo hello", "Print a greeting")])
                .with_text("Let me look around first.")
                .with_reasoning("Start small."),
        ),
        Response::calls([
            bash("c2", "seq 1 20000", "Print many numbers"),
            ScriptedCall::json("c3", "job_list", json!({})),
        ])
        .into(),
        Response::calls([bash("c4", "echo oops >&2; exit 3", "Fail on purpose")]).into(),
        Response::calls([ScriptedCall::raw("c5", "bash", "{\"command\": \"ls")]).into(),
        Response::calls([ScriptedCall::json(
            "c6",
            "bash",
            json!({"command": "echo started; echo finished", "description": "Run in the background", "run_in_background": true}),
        )])
        .into(),
        Response::calls([ScriptedCall::json(
            "c7",
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": 10_000}),
        )])
        .into(),
        Response::text("All done: one command failed on purpose.").into(),
    ])
}

/// Runs the template session through the agent loop and returns its events.
async fn template_events() -> Result<Vec<EventRecord>> {
    let (registry, jobs) = builtin_registry()?;
    let workdir = tempfile::tempdir()?;
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&records);
    let agent = Agent::builder(registry, Arc::new(template_script()))
        .session_id("bench")
        .cwd(workdir.path())
        .jobs(jobs.clone())
        .subscriber(move |record| {
            if let Ok(mut records) = sink.lock() {
                records.push(record.clone());
            }
        })
        .build()?;
    agent.run("Run a few commands for me.").await?;
    agent.dispose().await;
    jobs.teardown().await;
    let records = records
        .lock()
        .map(|r| r.clone())
        .map_err(|_| anyhow::anyhow!("the event sink was poisoned"))?;
    Ok(records)
}

/// Renames a call id for repetition `n`, so every call in the long log is distinct.
fn renumber_calls(event: &mut SessionEvent, n: usize) {
    match event {
        SessionEvent::ToolCall { call_id, .. } | SessionEvent::ToolResult { call_id, .. } => {
            *call_id = format!("{call_id}-{n}");
        }
        SessionEvent::AssistantMessage { tool_calls, .. } => {
            for call in tool_calls {
                call.call_id = format!("{}-{n}", call.call_id);
            }
        }
        _ => {}
    }
}

/// A log of exactly `events` lines: the template session's `session/start`, then its other
/// events repeated with renumbered sequence numbers and call ids. Returns the text and the
/// number of `tool/call` events in it.
fn session_log(runtime: &Runtime, events: usize) -> Result<(String, usize)> {
    let template = runtime.block_on(template_events())?;
    let (start, body): (Vec<_>, Vec<_>) = template
        .into_iter()
        .partition(|r| matches!(r.event, SessionEvent::SessionStart { .. }));
    ensure!(
        start.len() == 1 && !body.is_empty(),
        "the template session is malformed"
    );
    let mut text = String::new();
    let mut calls = 0;
    let mut seq = 0;
    let records = start
        .iter()
        .cloned()
        .map(|r| (0, r))
        .chain((1..).flat_map(|n| body.iter().cloned().map(move |r| (n, r))))
        .take(events);
    for (n, mut record) in records {
        seq += 1;
        record.seq = seq;
        renumber_calls(&mut record.event, n);
        if matches!(record.event, SessionEvent::ToolCall { .. }) {
            calls += 1;
        }
        text.push_str(&record.to_json_line());
        text.push('\n');
    }
    Ok((text, calls))
}

/// Measures `replay` (events/s, higher is better): `SessionLog::parse` then `replay_cards`
/// with the built-in tools' registry, against `serde_json::from_str::<Value>` per line.
fn replay(runtime: &Runtime, size: ReplaySize) -> Result<Measurement> {
    let events = size.events.max(1);
    let (text, calls) = session_log(runtime, events)?;
    let (registry, _jobs) = builtin_registry()?;
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            let started = Instant::now();
            let log = SessionLog::parse(&text);
            let cards = replay_cards(&registry, &log.events);
            let seconds = started.elapsed().as_secs_f64();
            ensure!(
                log.events.len() == events && log.skipped.is_empty(),
                "the log replayed {} events and skipped {:?}",
                log.events.len(),
                log.skipped.first()
            );
            ensure!(
                cards.len() == calls,
                "{} cards for {calls} calls",
                cards.len()
            );
            Ok(events as f64 / seconds)
        },
        || {
            let started = Instant::now();
            let mut parsed = 0usize;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let value: Value = serde_json::from_str(line).context("a log line is not JSON")?;
                std::hint::black_box(&value);
                parsed += 1;
            }
            let seconds = started.elapsed().as_secs_f64();
            ensure!(parsed == events, "{parsed} lines parsed of {events}");
            Ok(events as f64 / seconds)
        },
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "events/s",
        baseline: "serde_json::Value per line",
        baseline_value: baseline,
        higher_is_better: true,
        target: Target::Report,
        extras: Vec::new(),
        samples: size.rounds.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_has_exactly_the_requested_events_with_distinct_calls() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (text, calls) = session_log(&runtime, 250).unwrap();
        let log = SessionLog::parse(&text);
        assert_eq!(log.events.len(), 250);
        assert!(log.skipped.is_empty());
        let seqs: Vec<u64> = log.events.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=250).collect::<Vec<u64>>());
        let mut ids: Vec<&str> = log
            .events
            .iter()
            .filter_map(|r| match &r.event {
                SessionEvent::ToolCall { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids.len(), calls);
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), calls, "call ids repeat");
    }
}
