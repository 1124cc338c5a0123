//! `model_stream`: a recorded Chat Completions stream decoded by the model adapter (SSE
//! parsing, typed chunks, translation to `ModelEvent`s), against parsing each `data:` line
//! into a `serde_json::Value`.

use crate::Benchmark;
use crate::measure::{Measurement, Rounds, Target, interleaved};
use agent_loop::ModelEvent;
use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use std::time::Instant;
use tokio::runtime::Runtime;

/// The benchmark's entry in [`crate::BENCHMARKS`].
pub(crate) const BENCHMARK: Benchmark = Benchmark {
    name: "model_stream",
    run: |runtime, sizes| model_stream(runtime, sizes.model_stream),
};

/// The size of `model_stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSize {
    /// Bytes of recorded stream (at least this many).
    pub bytes: usize,
    /// Warm-up and recorded rounds.
    pub rounds: Rounds,
}

/// One `data:` line in the shape OpenAI and DeepSeek stream, with the fields the adapter
/// ignores (`id`, `created`, `system_fingerprint`, `logprobs`) present as in a real stream.
fn chunk_line(delta: &Value, finish: Option<&str>, usage: Option<&Value>) -> String {
    let mut chunk = json!({
        "id": "chatcmpl-9f2c1d7e8a6b4c3d",
        "object": "chat.completion.chunk",
        "created": 1_764_460_800u64,
        "model": "deepseek-reasoner",
        "system_fingerprint": "fp_7a2b9c0d1e_prod0820_fp8_kvcache",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    if let Some(usage) = usage {
        chunk["usage"] = usage.clone();
    }
    format!("data: {chunk}\n\n")
}

/// A recorded stream of at least `bytes`: rounds of reasoning deltas, text deltas and a tool
/// call whose arguments arrive in fragments, then the finish, a usage-only chunk and `[DONE]`.
/// Returns the text and the number of events decoding it must yield.
fn recording(bytes: usize) -> (String, usize) {
    let mut text = String::with_capacity(bytes + 4096);
    let mut events = 0usize;
    let mut calls = 0usize;
    while text.len() < bytes {
        for word in ["Let", " me", " check", " the", " directory", " first", "."] {
            text.push_str(&chunk_line(
                &json!({"content": null, "reasoning_content": word}),
                None,
                None,
            ));
            events += 1;
        }
        for word in [
            "Listing", " the", " files", " now", ":", " \"src\"", " and", " tests", ".",
        ] {
            text.push_str(&chunk_line(&json!({"content": word}), None, None));
            events += 1;
        }
        let id = format!("call_{calls:08}");
        text.push_str(&chunk_line(
            &json!({"tool_calls": [{"index": calls, "id": id, "type": "function", "function": {"name": "bash", "arguments": ""}}]}),
            None,
            None,
        ));
        events += 1;
        for fragment in [
            "{\"comm",
            "and\": \"ls -la",
            " src tests\", \"desc",
            "ription\": \"List\"}",
        ] {
            text.push_str(&chunk_line(
                &json!({"tool_calls": [{"index": calls, "function": {"arguments": fragment}}]}),
                None,
                None,
            ));
        }
        // A call's arguments come out whole, as one event, once the response ends.
        events += 1;
        calls += 1;
    }
    text.push_str(&chunk_line(&json!({}), Some("tool_calls"), None));
    let usage = json!({"prompt_tokens": 1200, "completion_tokens": 800, "total_tokens": 2000});
    text.push_str(&format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-9f2c1d7e8a6b4c3d", "object": "chat.completion.chunk", "choices": [], "usage": usage})
    ));
    text.push_str("data: [DONE]\n\n");
    // The closing `Finish`.
    events += 1;
    (text, events)
}

/// Measures `model_stream` (MB/s, higher is better).
fn model_stream(runtime: &Runtime, size: StreamSize) -> Result<Measurement> {
    let (text, expected) = recording(size.bytes.max(1));
    let recorded = bytes::Bytes::from(text.clone());
    let megabytes = text.len() as f64 / 1e6;
    let (value, baseline) = interleaved(
        size.rounds,
        || {
            let body = recorded.clone();
            let started = Instant::now();
            let events = runtime
                .block_on(openai_adapter::decode_recording(body))
                .context("the recording did not decode")?;
            let seconds = started.elapsed().as_secs_f64();
            ensure!(
                events.len() == expected,
                "{} events decoded, {expected} expected",
                events.len()
            );
            ensure!(
                matches!(
                    events.last(),
                    Some(ModelEvent::Finish { usage: Some(_), .. })
                ),
                "the stream did not finish with its usage"
            );
            std::hint::black_box(&events);
            Ok(megabytes / seconds)
        },
        || {
            let started = Instant::now();
            let mut parsed = 0usize;
            for line in text.lines() {
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                if data == "[DONE]" {
                    continue;
                }
                let value: Value = serde_json::from_str(data).context("a data line is not JSON")?;
                std::hint::black_box(&value);
                parsed += 1;
            }
            let seconds = started.elapsed().as_secs_f64();
            ensure!(parsed > 0, "no data line parsed");
            Ok(megabytes / seconds)
        },
    )?;
    Ok(Measurement {
        name: BENCHMARK.name,
        value,
        unit: "MB/s",
        baseline: "serde_json::Value per data line",
        baseline_value: baseline,
        higher_is_better: true,
        target: Target::RatioAtLeast(1.0),
        extras: Vec::new(),
        samples: size.rounds.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recording_decodes_to_the_counted_events() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (text, expected) = recording(20_000);
        assert!(text.len() >= 20_000);
        let events = runtime
            .block_on(openai_adapter::decode_recording(text))
            .unwrap();
        assert_eq!(events.len(), expected);
        let starts = events
            .iter()
            .filter(|e| matches!(e, ModelEvent::ToolCallStart { .. }))
            .count();
        assert!(starts > 1, "{starts} tool calls");
    }
}
