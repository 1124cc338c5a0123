//! Assembly of a streamed model response, kept pure: it sees the model's events one at a time
//! and nothing else (no stream, clock, lock or agent), so every rule of joining them is tested
//! here on its own.
//!
//! Text and reasoning deltas are joined in order. Tool calls are keyed by the index the model
//! gives them: argument fragments are joined per index in arrival order, a call's id and name
//! are the first non-empty ones streamed for its index, and the calls come out in index order
//! whatever order their events interleaved in. A `Finish` event ends the response.

use crate::model::ModelEvent;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// A tool call as streamed: its id may be empty or repeat another call's (see
/// [`unique_call_id`]), and its arguments are the joined fragments, not checked here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct StreamedCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// A whole streamed response.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct StreamedResponse {
    pub(super) text: String,
    /// `None` when the model streamed no reasoning.
    pub(super) reasoning: Option<String>,
    /// In index order.
    pub(super) calls: Vec<StreamedCall>,
}

/// Whether the response goes on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// More events may follow.
    Streaming,
    /// The model finished its response; later events are not part of it.
    Finished,
}

/// Joins a response's events; see the module docs.
#[derive(Debug, Default)]
pub(super) struct ResponseAssembler {
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, StreamedCall>,
}

impl ResponseAssembler {
    /// Takes one event of the response.
    pub(super) fn push(&mut self, event: ModelEvent) -> Progress {
        match event {
            ModelEvent::TextDelta(delta) => self.text.push_str(&delta),
            ModelEvent::ReasoningDelta(delta) => self.reasoning.push_str(&delta),
            ModelEvent::ToolCallStart { index, id, name } => {
                let call = self.calls.entry(index).or_default();
                if call.id.is_empty() {
                    call.id = id;
                }
                if call.name.is_empty() {
                    call.name = name;
                }
            }
            ModelEvent::ToolCallArguments { index, fragment } => {
                self.calls
                    .entry(index)
                    .or_default()
                    .arguments
                    .push_str(&fragment);
            }
            ModelEvent::Finish { .. } => return Progress::Finished,
        }
        Progress::Streaming
    }

    /// The response as assembled so far (a stream that ends without `Finish` is whole too).
    pub(super) fn finish(self) -> StreamedResponse {
        StreamedResponse {
            text: self.text,
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            calls: self.calls.into_values().collect(),
        }
    }
}

/// The id a streamed call is recorded under: its own, unless it is empty or already in `used`
/// (every id of the session), and then `call-auto-N`. `calls_made` counts the session's calls
/// (restored ones included) and N is that count, skipping any number whose id is taken (a model
/// may stream `call-auto-2` itself), so a fallback id never repeats, whichever turn or step it
/// is made in. The id returned is added to `used`.
pub(super) fn unique_call_id(
    calls_made: &AtomicU64,
    used: &mut HashSet<String>,
    streamed: String,
) -> String {
    let mut n = calls_made.fetch_add(1, Ordering::Relaxed) + 1;
    let mut id = streamed;
    if id.is_empty() || used.contains(&id) {
        id = format!("call-auto-{n}");
        while used.contains(&id) {
            n = calls_made.fetch_add(1, Ordering::Relaxed) + 1;
            id = format!("call-auto-{n}");
        }
    }
    used.insert(id.clone());
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FinishReason;
    use pretty_assertions::assert_eq;

    fn start(index: usize, id: &str, name: &str) -> ModelEvent {
        ModelEvent::ToolCallStart {
            index,
            id: id.into(),
            name: name.into(),
        }
    }

    fn fragment(index: usize, fragment: &str) -> ModelEvent {
        ModelEvent::ToolCallArguments {
            index,
            fragment: fragment.into(),
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> StreamedCall {
        StreamedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// Pushes every event, checking that only the last one (if any) finishes the response.
    fn assemble(events: Vec<ModelEvent>, finished: bool) -> StreamedResponse {
        let mut assembler = ResponseAssembler::default();
        let count = events.len();
        for (i, event) in events.into_iter().enumerate() {
            let last = i + 1 == count;
            let expected = if last && finished {
                Progress::Finished
            } else {
                Progress::Streaming
            };
            assert_eq!(assembler.push(event), expected, "event {i}");
        }
        assembler.finish()
    }

    #[test]
    fn text_and_reasoning_deltas_join_in_order() {
        let response = assemble(
            vec![
                ModelEvent::ReasoningDelta("think".into()),
                ModelEvent::TextDelta("hel".into()),
                ModelEvent::ReasoningDelta("ing".into()),
                ModelEvent::TextDelta("lo".into()),
            ],
            false,
        );
        assert_eq!(
            response,
            StreamedResponse {
                text: "hello".into(),
                reasoning: Some("thinking".into()),
                calls: vec![],
            }
        );
    }

    #[test]
    fn no_reasoning_is_none_and_an_empty_response_is_empty() {
        assert_eq!(
            assemble(vec![], false),
            StreamedResponse {
                text: String::new(),
                reasoning: None,
                calls: vec![],
            }
        );
    }

    #[test]
    fn interleaved_fragments_join_per_index_and_calls_come_out_in_index_order() {
        let response = assemble(
            vec![
                start(1, "b", "second"),
                fragment(1, r#"{"n":"#),
                start(0, "a", "first"),
                fragment(0, r#"{"t""#),
                fragment(1, "2}"),
                fragment(0, r#":"x"}"#),
            ],
            false,
        );
        assert_eq!(
            response.calls,
            vec![
                call("a", "first", r#"{"t":"x"}"#),
                call("b", "second", r#"{"n":2}"#),
            ]
        );
    }

    #[test]
    fn the_first_id_and_name_of_an_index_win_and_fragments_may_come_before_them() {
        let response = assemble(
            vec![
                fragment(0, "{"),
                start(0, "", ""),
                start(0, "c1", "echo"),
                start(0, "c2", "other"),
                fragment(0, "}"),
            ],
            false,
        );
        assert_eq!(response.calls, vec![call("c1", "echo", "{}")]);
    }

    #[test]
    fn finish_ends_the_response() {
        let response = assemble(
            vec![
                ModelEvent::TextDelta("done".into()),
                ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: None,
                },
            ],
            true,
        );
        assert_eq!(response.text, "done");
    }

    #[test]
    fn a_missing_or_repeated_id_gets_a_fresh_call_auto_id_that_skips_taken_ones() {
        let calls_made = AtomicU64::new(0);
        let mut used = HashSet::new();
        let mut next = |streamed: &str| unique_call_id(&calls_made, &mut used, streamed.into());
        assert_eq!(next("c1"), "c1");
        assert_eq!(next(""), "call-auto-2");
        // The model itself streams the id the next fallback would take.
        assert_eq!(next("call-auto-4"), "call-auto-4");
        assert_eq!(next("c1"), "call-auto-5");
        assert_eq!(next("call-auto-4"), "call-auto-6");
        assert_eq!(next(""), "call-auto-7");
        assert_eq!(calls_made.load(Ordering::Relaxed), 7);
    }
}
