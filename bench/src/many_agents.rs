//! `many_agents`: a thousand agents in one process, each running one turn in which the scripted
//! model calls `bash` with `true`, all at once, through one registry and one local executor (as
//! a service hosting many agents would share them). The baseline is as many raw `bash -c true`
//! spawns at the executor's concurrency limit, so the ratio is what an agent, the loop, the
//! registry, the tool and the supervisor add to a spawn when a thousand calls queue for the
//! same slots. The memory an idle agent keeps is measured before any of them runs.

use crate::Benchmark;
use crate::measure::{Extra, Measurement, Rounds, Target, interleaved};
use crate::rss;
use crate::shell::{bash_c, bash_registry};
use agent_loop::{Agent, Message, TurnEndReason};
use anyhow::{Context, Result, ensure};
use dsh_tools::ToolRegistry;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tool_bash::LocalExecutor;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "many_agents",
    run: |runtime, sizes| many_agents(runtime, sizes.many_agents),
};

/// The size of `many_agents`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentsSize {
    /// Agents, each making one `bash` call.
    pub agents: usize,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// The most an idle agent may keep resident (`docs/performance.md`).
const IDLE_AGENT_LIMIT_KIB: f64 = 64.0;

/// One model for every agent: the first step of a turn calls `bash` with `true`, the second
/// answers. It keeps no request.
fn model() -> Arc<MockAdapter> {
    Arc::new(
        MockAdapter::with_function(|request| {
            if request.step == 1 {
                Step::from(Response::calls([ScriptedCall::json(
                    "call-1",
                    "bash",
                    json!({"command": "true", "description": "Do nothing, successfully"}),
                )]))
            } else {
                Step::from(Response::text("done"))
            }
        })
        .capture_requests(false),
    )
}

/// `agents` idle agents over `registry` and `model`, named after `round`.
fn build(
    registry: &ToolRegistry,
    model: &Arc<MockAdapter>,
    round: usize,
    agents: usize,
) -> Result<Vec<Agent>> {
    (0..agents)
        .map(|n| {
            Ok(Agent::builder(registry.clone(), model.clone())
                .session_id(format!("agent-{round}-{n}"))
                .build()?)
        })
        .collect()
}

/// Runs one turn on every agent at once; returns calls per second.
fn run_agents(runtime: &Runtime, agents: Vec<Agent>) -> Result<f64> {
    let count = agents.len();
    runtime.block_on(async move {
        let started = Instant::now();
        let turns: Vec<_> = agents
            .iter()
            .cloned()
            .map(|agent| tokio::spawn(async move { agent.run("Run true.").await }))
            .collect();
        for turn in turns {
            let outcome = turn.await.context("an agent's task failed")??;
            ensure!(
                outcome.reason == TurnEndReason::Completed && outcome.steps == 2,
                "a turn ended {:?} after {} steps",
                outcome.reason,
                outcome.steps
            );
        }
        let rate = count as f64 / started.elapsed().as_secs_f64();
        for agent in &agents {
            let failed = agent
                .history()
                .iter()
                .any(|m| matches!(m, Message::Tool { is_error: true, .. }));
            ensure!(!failed, "{}: the bash call failed", agent.session_id());
            agent.dispose().await;
        }
        Ok(rate)
    })
}

/// Runs `count` raw `bash -c true` at most `limit` at a time; returns spawns per second.
fn run_raw(runtime: &Runtime, count: usize, limit: usize) -> Result<f64> {
    runtime.block_on(async move {
        let slots = Arc::new(Semaphore::new(limit));
        let started = Instant::now();
        let spawns: Vec<_> = (0..count)
            .map(|_| {
                let slots = Arc::clone(&slots);
                tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await?;
                    bash_c("true").await
                })
            })
            .collect();
        for spawn in spawns {
            spawn.await.context("a spawn's task failed")??;
        }
        Ok(count as f64 / started.elapsed().as_secs_f64())
    })
}

/// Measures `many_agents` (calls/s, higher is better) against raw spawns at the same
/// concurrency, and the resident memory per idle agent.
fn many_agents(runtime: &Runtime, size: AgentsSize) -> Result<Measurement> {
    let count = size.agents.max(1);
    let executor = LocalExecutor::default();
    let limit = executor.config().max_concurrent_commands;
    let registry = bash_registry(executor, None)?;
    let model = model();

    // Idle agents first, before any turn has run, so the allocator has the least freed memory
    // to hand back to them.
    let before = rss::current_bytes()?;
    let idle = build(&registry, &model, 0, count)?;
    let idle_kib = rss::current_bytes()?.saturating_sub(before) as f64 / 1024.0 / count as f64;
    drop(idle);

    let mut round = 0;
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            round += 1;
            let agents = build(&registry, &model, round, count)?;
            run_agents(runtime, agents)
        },
        || run_raw(runtime, count, limit),
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "calls/s",
        baseline: "raw `bash -c true` at the executor's concurrency limit",
        baseline_value: baseline,
        higher_is_better: true,
        // Issue 33 set 0.6 for the fork-based launcher (`docs/design/launcher.md`).
        target: Target::RatioAtLeast(0.6),
        extras: vec![
            Extra {
                key: "rss_per_idle_agent_kib",
                value: idle_kib,
                unit: "KiB",
                at_most: Some(IDLE_AGENT_LIMIT_KIB),
            },
            Extra {
                key: "concurrency",
                value: limit as f64,
                unit: "commands",
                at_most: None,
            },
        ],
        samples: size.rounds.samples,
    })
}
