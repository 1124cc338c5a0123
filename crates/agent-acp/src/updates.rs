//! Session events as ACP `session/update` payloads: the model's text and reasoning as message
//! and thought chunks, tool calls as `tool_call` / `tool_call_update` built from the cards by
//! the presenters' ACP projection, and a background job's completion notice as an update of
//! the call that started the job.

use agent_loop::{CardTracker, SessionEvent};
use dsh_tools::{ContentBlock, ToolRegistry};
use serde_json::{Value, json};
use std::collections::HashMap;

/// Whether events are live (the model's text already went out as it streamed, and the client
/// sent the user's prompt itself) or replayed from a log for `session/load` (everything is
/// sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Live,
    Replay,
}

/// Follows one session's events and says what the client is told of each.
#[derive(Debug)]
pub(crate) struct Projection {
    mode: Mode,
    tracker: CardTracker,
    /// Jobs started whose call is not known yet: the call's result names them.
    unclaimed_jobs: Vec<String>,
    /// The call that started each background job.
    job_calls: HashMap<String, String>,
    /// The content each call last showed, which a job's notice extends (an update's content
    /// replaces the call's).
    contents: HashMap<String, Vec<Value>>,
}

impl Projection {
    pub(crate) fn new(registry: ToolRegistry, session: Option<String>, mode: Mode) -> Projection {
        Projection {
            mode,
            tracker: CardTracker::new(registry, session),
            unclaimed_jobs: Vec::new(),
            job_calls: HashMap::new(),
            contents: HashMap::new(),
        }
    }

    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The `update` objects (`{"sessionUpdate": …}`) `event` makes, in order.
    pub(crate) fn observe(&mut self, event: &SessionEvent) -> Vec<Value> {
        self.tracker.observe(event);
        match event {
            SessionEvent::UserMessage { content } if self.mode == Mode::Replay => {
                vec![chunk("user_message_chunk", content)]
            }
            SessionEvent::AssistantMessage {
                text, reasoning, ..
            } if self.mode == Mode::Replay => {
                let mut updates = Vec::new();
                if let Some(reasoning) = reasoning.as_deref().filter(|r| !r.is_empty()) {
                    updates.push(chunk("agent_thought_chunk", reasoning));
                }
                if !text.is_empty() {
                    updates.push(chunk("agent_message_chunk", text));
                }
                updates
            }
            SessionEvent::ToolCall { call_id, .. } => {
                let Some(cards) = self.card(call_id) else {
                    return Vec::new();
                };
                let mut call = presenters::acp::tool_call(call_id, &cards.call);
                if let Some(content) = call.get("content").and_then(Value::as_array) {
                    self.contents.insert(call_id.clone(), content.clone());
                }
                vec![tagged("tool_call", &mut call)]
            }
            SessionEvent::ToolResult {
                call_id,
                is_error,
                content,
                ..
            } => {
                self.claim_jobs(call_id, content);
                let Some(result) = self.card(call_id).and_then(|cards| cards.result.clone()) else {
                    return Vec::new();
                };
                let mut update = presenters::acp::tool_call_update(call_id, &result, *is_error);
                if let Some(content) = update.get("content").and_then(Value::as_array) {
                    self.contents.insert(call_id.clone(), content.clone());
                }
                vec![tagged("tool_call_update", &mut update)]
            }
            SessionEvent::JobStart { job_id, .. } => {
                self.unclaimed_jobs.push(job_id.clone());
                Vec::new()
            }
            SessionEvent::ContextInject { content, .. } => self.notice(content),
            _ => Vec::new(),
        }
    }

    fn card(&self, call_id: &str) -> Option<&agent_loop::CallCards> {
        self.tracker
            .cards()
            .iter()
            .rev()
            .find(|cards| cards.call_id == call_id)
    }

    /// The call whose result says it started a job is that job's call.
    fn claim_jobs(&mut self, call_id: &str, content: &[ContentBlock]) {
        let texts: Vec<&str> = content.iter().filter_map(ContentBlock::as_text).collect();
        let (claimed, unclaimed): (Vec<String>, Vec<String>) =
            std::mem::take(&mut self.unclaimed_jobs)
                .into_iter()
                .partition(|job| {
                    let started = presenters::markers::background_started(job);
                    texts.iter().any(|text| text.contains(&started))
                });
        self.unclaimed_jobs = unclaimed;
        for job in claimed {
            self.job_calls.insert(job, call_id.to_owned());
        }
    }

    /// A job's completion notice ("background job ID … finished …") as an update of the call
    /// that started the job: its content so far, then the notice.
    fn notice(&mut self, content: &str) -> Vec<Value> {
        let Some(call_id) = self.job_calls.iter().find_map(|(job, call)| {
            (content.starts_with(&format!("background job {job} "))).then(|| call.clone())
        }) else {
            return Vec::new();
        };
        let shown = self.contents.entry(call_id.clone()).or_default();
        shown.push(json!({"type": "content", "content": {"type": "text", "text": content}}));
        let mut update = json!({"toolCallId": call_id, "content": shown.clone()});
        vec![tagged("tool_call_update", &mut update)]
    }
}

/// A text chunk update of `kind` (`agent_message_chunk`, `agent_thought_chunk`,
/// `user_message_chunk`).
pub(crate) fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// `object` with `"sessionUpdate": kind` first.
fn tagged(kind: &str, object: &mut Value) -> Value {
    let mut update = serde_json::Map::new();
    update.insert("sessionUpdate".into(), json!(kind));
    if let Value::Object(fields) = object.take() {
        update.extend(fields);
    }
    Value::Object(update)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_tools::ContextSource;
    use pretty_assertions::assert_eq;

    /// A registry without the bash tool: its calls show the fallback cards, which a job's
    /// notice extends as it extends any.
    fn registry() -> ToolRegistry {
        ToolRegistry::new()
    }

    #[test]
    fn a_background_jobs_notice_updates_the_call_that_started_it() {
        let mut projection = Projection::new(registry(), None, Mode::Live);
        let call = projection.observe(&SessionEvent::ToolCall {
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: json!({"command": "sleep 1", "description": "Wait",
                              "run_in_background": true}),
        });
        assert_eq!(call[0]["sessionUpdate"], json!("tool_call"));
        assert!(
            projection
                .observe(&SessionEvent::JobStart {
                    job_id: "bash-1".into(),
                    kind: "bash".into(),
                    label: "sleep 1".into(),
                })
                .is_empty()
        );
        let result = projection.observe(&SessionEvent::ToolResult {
            call_id: "c1".into(),
            name: "bash".into(),
            is_error: false,
            content: vec![ContentBlock::text(presenters::markers::background_started(
                "bash-1",
            ))],
            error: None,
            meta: None,
        });
        assert_eq!(result[0]["sessionUpdate"], json!("tool_call_update"));
        let shown = result[0]["content"].as_array().cloned().unwrap_or_default();
        let notice = "background job bash-1 (bash: sleep 1) finished [status: completed]. \
                      Read its output with job_output.";
        let updates = projection.observe(&SessionEvent::ContextInject {
            source: ContextSource::plugin("bash"),
            content: notice.into(),
        });
        let mut content = shown;
        content.push(json!({"type": "content", "content": {"type": "text", "text": notice}}));
        assert_eq!(
            updates,
            vec![
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                        "content": content})
            ]
        );
        // A notice of a job no call started is not a call's update.
        assert!(
            projection
                .observe(&SessionEvent::ContextInject {
                    source: ContextSource::plugin("bash"),
                    content: "background job bash-9 finished [status: completed].".into(),
                })
                .is_empty()
        );
    }

    #[test]
    fn live_text_is_left_to_the_stream_and_replayed_text_is_sent() {
        let message = SessionEvent::AssistantMessage {
            text: "Done.".into(),
            reasoning: Some("Think.".into()),
            tool_calls: Vec::new(),
        };
        let user = SessionEvent::UserMessage {
            content: "Hi".into(),
        };
        let mut live = Projection::new(registry(), None, Mode::Live);
        assert!(live.observe(&user).is_empty());
        assert!(live.observe(&message).is_empty());
        let mut replay = Projection::new(registry(), None, Mode::Replay);
        assert_eq!(
            [replay.observe(&user), replay.observe(&message)].concat(),
            vec![
                chunk("user_message_chunk", "Hi"),
                chunk("agent_thought_chunk", "Think."),
                chunk("agent_message_chunk", "Done."),
            ]
        );
    }
}
