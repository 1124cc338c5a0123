//! Scheduling of one assistant message's tool calls: consecutive concurrency-safe calls overlap
//! (bounded by the agent's `max_parallel_tools`), every other call is an exclusive barrier,
//! and results are committed to the history in call order, one result per call.

use super::Agent;
use super::state::lock;
use crate::event::SessionEvent;
use crate::model::{AssistantToolCall, Message};
use dsh_tools::{Arguments, FailureCode, ToolCall, ToolResult};
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use tokio_util::sync::CancellationToken;

impl Agent {
    /// Runs the calls of one assistant message: consecutive concurrency-safe calls overlap
    /// (bounded), every other call is an exclusive barrier, and results are committed in call
    /// order. Returns whether a result concluded the turn.
    pub(super) async fn run_tools(
        &self,
        calls: Vec<AssistantToolCall>,
        signal: &CancellationToken,
    ) -> bool {
        let inner = &self.inner;
        let session = inner.session_id.as_str();
        // Parsed once here; the registry gets the value, or the raw text when it is not JSON
        // (and then names the parse error in its result). Text over the registry's limit is
        // never parsed: the registry refuses it unread, which keeps memory bounded.
        let limit = inner.registry.config().max_argument_bytes;
        let mut parsed: Vec<Option<Value>> = calls
            .iter()
            .map(|c| {
                (c.arguments.len() <= limit)
                    .then(|| serde_json::from_str::<Value>(&c.arguments).ok())
                    .flatten()
            })
            .collect();
        for (call, args) in calls.iter().zip(&parsed) {
            inner.emit(SessionEvent::ToolCall {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                arguments: args
                    .clone()
                    .unwrap_or_else(|| Value::String(call.arguments.clone())),
            });
        }
        let safe: Vec<bool> = calls
            .iter()
            .zip(&parsed)
            .map(|(call, args)| {
                args.as_ref().is_some_and(|args| {
                    inner
                        .registry
                        .is_concurrency_safe(&call.name, args, Some(session))
                })
            })
            .collect();
        let mut concluded = false;
        for members in concurrency_groups(&safe) {
            let pending: Vec<_> = members
                .iter()
                .map(|&i| {
                    let arguments = match parsed[i].take() {
                        Some(value) => Arguments::Value(value),
                        None => Arguments::Text(calls[i].arguments.clone()),
                    };
                    self.execute(&calls[i], arguments, signal)
                })
                .collect();
            let results: Vec<ToolResult> = futures::stream::iter(pending)
                .buffered(inner.max_parallel)
                .collect()
                .await;
            // One hold of the state lock for the group: the results, then each call's deferred
            // and additional contexts in call order, with nothing (a job notice) in between.
            // The contexts go through the inbox, which the next request drains right after
            // these results.
            let mut state = lock(&inner.state);
            let mut contexts = Vec::new();
            for (&i, result) in members.iter().zip(results) {
                let call = &calls[i];
                concluded |= result.concludes_turn;
                inner.emit(SessionEvent::ToolResult {
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    is_error: result.is_error,
                    content: result.content.clone(),
                    error: result.error.clone(),
                    meta: result.meta.clone(),
                });
                state.history.push(Message::Tool {
                    call_id: call.call_id.clone(),
                    content: result.content,
                    is_error: result.is_error,
                });
                contexts.extend(result.additional_contexts);
            }
            if !state.disposed {
                for context in contexts {
                    inner.enqueue(&mut state, context);
                }
            }
        }
        concluded
    }

    async fn execute(
        &self,
        call: &AssistantToolCall,
        arguments: Arguments,
        signal: &CancellationToken,
    ) -> ToolResult {
        let request = ToolCall::new(call.call_id.clone(), call.name.clone(), arguments)
            .with_signal(signal.child_token())
            .with_agent(self.handle());
        // The registry contains every failure it knows of; this guard keeps the pairing
        // invariant (one result per call) even if something below it panics anyway.
        match AssertUnwindSafe(self.inner.registry.execute(request))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(_) => ToolResult::failure(FailureCode::ToolPanic, "the tool call crashed"),
        }
    }
}

/// The groups the calls of one message run in, as indices in call order: each run of
/// consecutive concurrency-safe calls is one group (its calls overlap), and every other call is
/// a group of its own (a barrier). `safe[i]` says whether call `i` is concurrency-safe.
pub(super) fn concurrency_groups(safe: &[bool]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(bool, Vec<usize>)> = Vec::new();
    for (i, &safe) in safe.iter().enumerate() {
        match groups.last_mut() {
            Some((true, members)) if safe => members.push(i),
            _ => groups.push((safe, vec![i])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

#[cfg(test)]
mod tests {
    use super::concurrency_groups;
    use pretty_assertions::assert_eq;

    #[test]
    fn safe_runs_share_a_group_and_every_other_call_stands_alone() {
        let (s, x) = (true, false);
        let cases: [(&[bool], Vec<Vec<usize>>); 6] = [
            (&[], vec![]),
            (&[s], vec![vec![0]]),
            (&[x, x], vec![vec![0], vec![1]]),
            (&[s, s, s], vec![vec![0, 1, 2]]),
            (&[s, s, x, s, s], vec![vec![0, 1], vec![2], vec![3, 4]]),
            (
                &[x, s, x, x, s, s],
                vec![vec![0], vec![1], vec![2], vec![3], vec![4, 5]],
            ),
        ];
        for (safe, groups) in cases {
            assert_eq!(concurrency_groups(safe), groups, "{safe:?}");
        }
    }
}
