//! From streamed chunks to the loop's events.
//!
//! Text and reasoning pass through as they arrive. Tool calls are numbered in the order they
//! first appear (the provider's own indices may start anywhere or interleave), a call's start
//! is emitted once its name is known (with the server's id, or `call_<position>` when it gave
//! none or one an earlier call has), and a call's arguments are held and go out whole, redacted
//! in their decoded form too, at the end of the response. The finish
//! reason and the usage are held until the end-of-stream marker, because the usage comes in a
//! chunk after the finish reason: `Finish` is the last event and carries both.
//!
//! Everything the server wrote passes through the key's redaction (a run of the key split
//! across deltas included, which holds back at most the key's length), and the text,
//! reasoning and tool calls of one response together may be at most the configured number of
//! bytes, with at most [`MAX_TOOL_CALLS`] calls.

use crate::config::MAX_TOOL_CALLS;
use crate::error::{AdapterError, ResponseLimit};
use crate::redact::{RedactingStream, Redactor};
use crate::sse::MESSAGE_CHARS;
use crate::wire::ChatChunk;
use agent_loop::{FinishReason, ModelEvent, Usage};
use std::collections::{HashMap, HashSet};

/// The characters of an unknown finish reason kept.
const FINISH_REASON_CHARS: usize = 200;

/// A tool call seen in the stream.
#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: Option<String>,
    /// Whether `ToolCallStart` went out.
    started: bool,
    /// Its argument text as it arrived. It goes out whole, at the end of the response (see
    /// [`Translator::flush`]), so that the key's redaction sees it decoded: a key written with
    /// JSON escapes is split by them in the raw text. The response's budget bounds it.
    arguments: String,
}

/// The translation state of one response.
#[derive(Debug)]
pub(crate) struct Translator {
    provider: String,
    redactor: Redactor,
    /// The bytes of text, reasoning and tool calls the response may carry.
    limit: usize,
    /// What is left of `limit`.
    budget: usize,
    /// The provider's call index to the call's position in first-seen order.
    positions: HashMap<u32, usize>,
    calls: Vec<Call>,
    /// The ids of the calls started, each once.
    ids: HashSet<String>,
    text: RedactingStream,
    reasoning: RedactingStream,
    finish: Option<FinishReason>,
    /// The last valid count of each kind (prompt, completion).
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl Translator {
    /// A translator for one response of `provider`, redacting the key `redactor` knows and
    /// failing past `limit` bytes of text, reasoning and tool calls.
    pub(crate) fn new(provider: &str, redactor: &Redactor, limit: usize) -> Translator {
        Translator {
            provider: provider.to_owned(),
            redactor: redactor.clone(),
            limit,
            budget: limit,
            positions: HashMap::new(),
            calls: Vec::new(),
            ids: HashSet::new(),
            text: redactor.stream(),
            reasoning: redactor.stream(),
            finish: None,
            input_tokens: None,
            output_tokens: None,
        }
    }

    /// Takes `bytes` from the response's budget.
    fn spend(&mut self, bytes: usize) -> Result<(), AdapterError> {
        match self.budget.checked_sub(bytes) {
            Some(left) => {
                self.budget = left;
                Ok(())
            }
            None => Err(self.too_large(ResponseLimit::Content, self.limit)),
        }
    }

    fn too_large(&self, what: ResponseLimit, limit: usize) -> AdapterError {
        AdapterError::ResponseTooLarge {
            provider: self.provider.clone(),
            what,
            limit,
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
                message: self.redactor.clip(&error.describe(), MESSAGE_CHARS),
            });
        }
        if let Some(usage) = chunk.usage {
            // A count that is not a token count (null, a fraction, negative, text, too
            // large) is unknown; it does not undo a valid one an earlier chunk gave.
            self.input_tokens = usage.prompt_tokens.or(self.input_tokens);
            self.output_tokens = usage.completion_tokens.or(self.output_tokens);
        }
        // The adapter asks for one choice; another index would be a second completion.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            if let Some(reasoning) = delta.reasoning_content.filter(|r| !r.is_empty()) {
                self.spend(reasoning.len())?;
                let reasoning = self.reasoning.push(&reasoning);
                if !reasoning.is_empty() {
                    out.push(ModelEvent::ReasoningDelta(reasoning));
                }
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.spend(text.len())?;
                let text = self.text.push(&text);
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta(text));
                }
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.call(call, out)?;
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(match reason.as_str() {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    other => FinishReason::Other(self.redactor.clip(other, FINISH_REASON_CHARS)),
                });
            }
        }
        Ok(())
    }

    /// One fragment of a tool call.
    fn call(
        &mut self,
        call: crate::wire::ToolCallDelta,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), AdapterError> {
        let position = match self.positions.get(&call.index) {
            Some(&position) => position,
            None if self.calls.len() >= MAX_TOOL_CALLS => {
                return Err(self.too_large(ResponseLimit::ToolCalls, MAX_TOOL_CALLS));
            }
            None => {
                self.calls.push(Call::default());
                self.positions.insert(call.index, self.calls.len() - 1);
                self.calls.len() - 1
            }
        };
        let (name, arguments) = match call.function {
            Some(function) => (function.name, function.arguments.unwrap_or_default()),
            None => (None, String::new()),
        };
        let id = call.id.filter(|id| !id.is_empty());
        let name = name.filter(|name| !name.is_empty());
        let state = &self.calls[position];
        let new_id = id.filter(|_| state.id.is_none());
        let new_name = name.filter(|_| state.name.is_none());
        let spent = [&new_id, &new_name]
            .into_iter()
            .flatten()
            .map(String::len)
            .sum::<usize>()
            + arguments.len();
        self.spend(spent)?;
        let state = &mut self.calls[position];
        if new_id.is_some() {
            state.id = new_id;
        }
        if new_name.is_some() {
            state.name = new_name;
        }
        state.arguments.push_str(&arguments);
        if state.started {
            return Ok(());
        }
        let Some(name) = state.name.as_deref() else {
            return Ok(());
        };
        // A call starts once its name is known. One that came without an id, or with the id
        // of an earlier call of the response, gets `call_<position>` (made unique).
        let name = self.redactor.redact(name);
        let given = state.id.as_deref().map(|id| self.redactor.redact(id));
        let id = match given {
            Some(id) if !self.ids.contains(&id) => id,
            _ => self.assigned_id(position),
        };
        self.ids.insert(id.clone());
        self.calls[position].started = true;
        out.push(ModelEvent::ToolCallStart {
            index: position,
            id,
            name,
        });
        Ok(())
    }

    /// `call_<position>`, or with a suffix if the response already has a call of that id.
    fn assigned_id(&self, position: usize) -> String {
        let base = format!("call_{position}");
        std::iter::once(base.clone())
            .chain((1..).map(|n| format!("{base}_{n}")))
            .find(|id| !self.ids.contains(id))
            .unwrap_or(base)
    }

    /// The text the redaction still holds back (at most the key's length per stream) and the
    /// calls' arguments, as events: before an error ends the stream, and at its end.
    pub(crate) fn flush(&mut self, out: &mut Vec<ModelEvent>) {
        let reasoning = self.reasoning.finish();
        if !reasoning.is_empty() {
            out.push(ModelEvent::ReasoningDelta(reasoning));
        }
        let text = self.text.finish();
        if !text.is_empty() {
            out.push(ModelEvent::TextDelta(text));
        }
        for (index, call) in self.calls.iter_mut().enumerate() {
            if call.started && !call.arguments.is_empty() {
                let fragment = self
                    .redactor
                    .redact_escaped(&std::mem::take(&mut call.arguments));
                out.push(ModelEvent::ToolCallArguments { index, fragment });
            }
        }
    }

    /// The rest of the response and its closing `Finish`, at the end-of-stream marker. A
    /// stream that never gave a finish reason, or a call that never got its name, is
    /// truncated.
    pub(crate) fn done(mut self, out: &mut Vec<ModelEvent>) -> Result<(), AdapterError> {
        self.flush(out);
        if let Some(position) = self.calls.iter().position(|call| !call.started) {
            return Err(AdapterError::Truncated(format!(
                "tool call {position} never received its name"
            )));
        }
        let usage = match (self.input_tokens, self.output_tokens) {
            (Some(input), Some(output)) => Some(Usage::new(input, output)),
            (None, None) => None,
            (input, output) => {
                tracing::debug!(provider = %self.provider, ?input, ?output, "a usage count is unknown; the usage is not reported");
                None
            }
        };
        match self.finish {
            Some(reason) => {
                out.push(ModelEvent::Finish { reason, usage });
                Ok(())
            }
            None => Err(AdapterError::Truncated(String::from(
                "the end marker came without a finish reason",
            ))),
        }
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
        let mut translator = Translator::new("test", &Redactor::none(), 1024);
        let mut out = Vec::new();
        for line in [
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c1","function":{"arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"name":"bash","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            translator.chunk(chunk(line), &mut out).unwrap();
        }
        translator.done(&mut out).unwrap();
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
        let mut translator = Translator::new("test", &Redactor::none(), 1024);
        translator
            .chunk(
                chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":""}}]},"finish_reason":"tool_calls"}]}"#),
                &mut Vec::new(),
            )
            .unwrap();
        assert_eq!(
            translator.done(&mut Vec::new()),
            Err(AdapterError::Truncated(
                "tool call 0 never received its name".into()
            ))
        );
    }
}
