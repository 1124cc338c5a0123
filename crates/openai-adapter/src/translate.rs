//! From streamed chunks to the loop's events.
//!
//! Text and reasoning pass through as they arrive. Tool calls are numbered in the order they
//! first appear (the provider's own indices may start anywhere or interleave), a call's start
//! is emitted once its id and name are known, and argument fragments pass through raw. The
//! finish reason and the usage are held until the end-of-stream marker, because the usage
//! comes in a chunk after the finish reason: `Finish` is the last event and carries both.

use crate::error::AdapterError;
use crate::wire::ChatChunk;
use agent_loop::{FinishReason, ModelEvent, Usage};
use std::collections::HashMap;

/// A tool call seen in the stream.
#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: Option<String>,
    /// Whether `ToolCallStart` went out.
    started: bool,
    /// Argument text that arrived before the id and name.
    pending: String,
}

/// The translation state of one response.
#[derive(Debug, Default)]
pub(crate) struct Translator {
    provider: String,
    /// The provider's call index to the call's position in first-seen order.
    positions: HashMap<u32, usize>,
    calls: Vec<Call>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

impl Translator {
    pub(crate) fn new(provider: &str) -> Translator {
        Translator {
            provider: provider.to_owned(),
            ..Translator::default()
        }
    }

    /// The events one chunk yields, appended to `out`. An error chunk fails the stream.
    pub(crate) fn chunk(
        &mut self,
        chunk: ChatChunk,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), AdapterError> {
        if let Some(error) = chunk.error {
            return Err(AdapterError::Provider {
                provider: self.provider.clone(),
                message: error.describe(),
            });
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage::new(usage.prompt_tokens, usage.completion_tokens));
        }
        // The adapter asks for one choice; another index would be a second completion.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            if let Some(reasoning) = delta.reasoning_content.filter(|r| !r.is_empty()) {
                out.push(ModelEvent::ReasoningDelta(reasoning));
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                out.push(ModelEvent::TextDelta(text));
            }
            for call in delta.tool_calls.unwrap_or_default() {
                let position = *self.positions.entry(call.index).or_insert_with(|| {
                    self.calls.push(Call::default());
                    self.calls.len() - 1
                });
                let state = &mut self.calls[position];
                if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                    state.id.get_or_insert(id);
                }
                let (name, arguments) = match call.function {
                    Some(function) => (function.name, function.arguments.unwrap_or_default()),
                    None => (None, String::new()),
                };
                if let Some(name) = name.filter(|n| !n.is_empty()) {
                    state.name.get_or_insert(name);
                }
                if state.started {
                    if !arguments.is_empty() {
                        out.push(ModelEvent::ToolCallArguments {
                            index: position,
                            fragment: arguments,
                        });
                    }
                    continue;
                }
                state.pending.push_str(&arguments);
                if let (Some(id), Some(name)) = (&state.id, &state.name) {
                    state.started = true;
                    out.push(ModelEvent::ToolCallStart {
                        index: position,
                        id: id.clone(),
                        name: name.clone(),
                    });
                    if !state.pending.is_empty() {
                        out.push(ModelEvent::ToolCallArguments {
                            index: position,
                            fragment: std::mem::take(&mut state.pending),
                        });
                    }
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(finish_reason(&reason));
            }
        }
        Ok(())
    }

    /// The closing `Finish` at the end-of-stream marker. A stream that never gave a finish
    /// reason, or a call that never got its id and name, is truncated.
    pub(crate) fn done(self) -> Result<ModelEvent, AdapterError> {
        if let Some(position) = self.calls.iter().position(|call| !call.started) {
            return Err(AdapterError::Truncated(format!(
                "tool call {position} never received its id and name"
            )));
        }
        match self.finish {
            Some(reason) => Ok(ModelEvent::Finish {
                reason,
                usage: self.usage,
            }),
            None => Err(AdapterError::Truncated(String::from(
                "the end marker came without a finish reason",
            ))),
        }
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        other => FinishReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn chunk(json: &str) -> ChatChunk {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_call_whose_name_comes_late_starts_when_it_comes_with_its_early_arguments() {
        let mut translator = Translator::new("test");
        let mut out = Vec::new();
        for line in [
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c1","function":{"arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"name":"bash","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            translator.chunk(chunk(line), &mut out).unwrap();
        }
        out.push(translator.done().unwrap());
        assert_eq!(
            out,
            vec![
                ModelEvent::ToolCallStart {
                    index: 0,
                    id: "c1".into(),
                    name: "bash".into()
                },
                ModelEvent::ToolCallArguments {
                    index: 0,
                    fragment: r#"{"a":1}"#.into()
                },
                ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None
                },
            ]
        );
    }

    #[test]
    fn a_call_without_a_name_by_the_end_is_truncation() {
        let mut translator = Translator::new("test");
        translator
            .chunk(
                chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1"}]},"finish_reason":"tool_calls"}]}"#),
                &mut Vec::new(),
            )
            .unwrap();
        assert_eq!(
            translator.done(),
            Err(AdapterError::Truncated(
                "tool call 0 never received its id and name".into()
            ))
        );
    }
}
