//! Cards from session events, live or replayed: the same presenters over the same durable
//! facts, so a replayed log shows exactly what a live UI showed, for the tools the replaying
//! registry presents the same way (the global ones; see [`replay_cards`]).

use crate::event::{EventRecord, SessionEvent};
use dsh_tools::{ToolCallView, ToolRegistry, ToolResultRecord, ToolResultView};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

/// The cards of one tool call: the pending card, and the completed one once its result is in.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallCards {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The pending card.
    pub call: ToolCallView,
    /// The completed card.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolResultView>,
}

/// Turns `tool/call` and `tool/result` events into cards through the registry's presenters
/// (the generic fallback when a tool has none or is no longer registered). Feed it live events
/// or a log; it never fails and never panics on odd input.
#[derive(Debug)]
pub struct CardTracker {
    registry: ToolRegistry,
    session: Option<String>,
    cards: Vec<CallCards>,
    /// The calls still waiting for their result: card index and arguments.
    arguments: HashMap<String, (usize, Value)>,
}

impl CardTracker {
    /// A tracker over `registry`, presenting as the agent of `session` sees its tools (`None`
    /// for the global view, the usual choice when replaying).
    pub fn new(registry: ToolRegistry, session: Option<String>) -> CardTracker {
        CardTracker {
            registry,
            session,
            cards: Vec::new(),
            arguments: HashMap::new(),
        }
    }

    /// Feeds one event.
    pub fn observe(&mut self, event: &SessionEvent) {
        let session = self.session.as_deref();
        match event {
            SessionEvent::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                let call = self.registry.present_call(name, arguments, session);
                self.arguments
                    .insert(call_id.clone(), (self.cards.len(), arguments.clone()));
                self.cards.push(CallCards {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    call,
                    result: None,
                });
            }
            SessionEvent::ToolResult {
                call_id,
                name,
                is_error,
                content,
                error,
                meta,
            } => {
                let record = ToolResultRecord {
                    content: content.clone(),
                    is_error: *is_error,
                    error: error.clone(),
                    meta: meta.clone(),
                };
                // A call is answered once; forgetting its arguments keeps a long session's
                // tracker as small as its open calls.
                match self.arguments.remove(call_id) {
                    Some((index, arguments)) => {
                        let result = self
                            .registry
                            .present_result(name, &arguments, &record, session);
                        if let Some(cards) = self.cards.get_mut(index) {
                            cards.result = Some(result);
                        }
                    }
                    None => {
                        // A result without its pending call (a log cut at the front, a
                        // repeated result): the generic cards.
                        self.cards.push(CallCards {
                            call_id: call_id.clone(),
                            name: name.clone(),
                            call: ToolCallView::fallback(name, &Value::Null),
                            result: Some(ToolResultView::fallback(&record)),
                        });
                    }
                }
            }
            _ => {}
        }
    }

    /// The cards so far, in call order.
    pub fn cards(&self) -> &[CallCards] {
        &self.cards
    }

    /// Consumes the tracker, returning its cards.
    pub fn into_cards(self) -> Vec<CallCards> {
        self.cards
    }
}

/// Replays events into cards (see [`CardTracker`]), presenting with the global view of the
/// registry: a call to a tool that lived only in an agent scope (or is no longer registered)
/// gets the generic card, even if the live UI, presenting as that agent, showed the tool's own.
pub fn replay_cards(registry: &ToolRegistry, events: &[EventRecord]) -> Vec<CallCards> {
    let mut tracker = CardTracker::new(registry.clone(), None);
    for record in events {
        tracker.observe(&record.event);
    }
    tracker.into_cards()
}

/// The cards of one session of a log.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReplayedSession {
    /// The session id, from its `session/start` (`None` for events before any).
    pub session_id: Option<String>,
    /// Its cards, in call order.
    pub cards: Vec<CallCards>,
}

/// Replays a log that may hold several sessions (one appended after another) into the cards of
/// each: every `session/start` after the first event begins a new session with a tracker of
/// its own, so a call id used in two sessions never pairs a call of one with a result of the
/// other.
pub fn replay_sessions(registry: &ToolRegistry, events: &[EventRecord]) -> Vec<ReplayedSession> {
    let mut sessions = Vec::new();
    let mut current: Option<(Option<String>, CardTracker)> = None;
    for record in events {
        if let SessionEvent::SessionStart { session_id, .. } = &record.event {
            if let Some((id, tracker)) = current.take() {
                sessions.push(ReplayedSession {
                    session_id: id,
                    cards: tracker.into_cards(),
                });
            }
            current = Some((
                Some(session_id.clone()),
                CardTracker::new(registry.clone(), None),
            ));
        }
        current
            .get_or_insert_with(|| (None, CardTracker::new(registry.clone(), None)))
            .1
            .observe(&record.event);
    }
    sessions.extend(current.map(|(id, tracker)| ReplayedSession {
        session_id: id,
        cards: tracker.into_cards(),
    }));
    sessions
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::ContentBlock;

    #[test]
    fn an_answered_call_is_forgotten() {
        let mut tracker = CardTracker::new(ToolRegistry::new(), None);
        tracker.observe(&SessionEvent::ToolCall {
            call_id: "c1".into(),
            name: "echo".into(),
            arguments: serde_json::json!({"text": "hi"}),
        });
        assert_eq!(tracker.arguments.len(), 1);
        tracker.observe(&SessionEvent::ToolResult {
            call_id: "c1".into(),
            name: "echo".into(),
            is_error: false,
            content: vec![ContentBlock::text("hi")],
            error: None,
            meta: None,
        });
        assert!(tracker.arguments.is_empty());
        assert_eq!(tracker.cards().len(), 1);
        assert!(tracker.cards()[0].result.is_some());
    }
}
