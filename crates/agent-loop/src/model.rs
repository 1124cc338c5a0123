//! The model seam: what the loop sends a model and what streams back.

use dsh_tools::{ContentBlock, ContextSource, InjectedContext, ToolSchema};
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::ops::Deref;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// One message of the conversation history. The system prompt is not a message: it travels
/// as [`ModelRequest::system`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "role",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Message {
    /// Text from the user, or context injected on someone's behalf (`source` set).
    User {
        /// The text.
        content: String,
        /// Who injected it; `None` for real user input.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<ContextSource>,
    },
    /// The model's answer.
    Assistant {
        /// The visible text.
        text: String,
        /// The reasoning text, kept and sent back on later requests (DeepSeek's thinking mode
        /// rejects a tool-call turn whose reasoning was dropped).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// The tool calls, with their raw argument text.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<AssistantToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The call it answers.
        call_id: String,
        /// The model-visible content.
        content: Vec<ContentBlock>,
        /// Whether the call failed.
        is_error: bool,
    },
}

impl Message {
    /// Real user input.
    pub fn user(content: impl Into<String>) -> Message {
        Message::User {
            content: content.into(),
            source: None,
        }
    }
}

impl From<&InjectedContext> for Message {
    /// The user message an injected context becomes when a request drains the inbox.
    fn from(context: &InjectedContext) -> Message {
        Message::User {
            content: context.content.clone(),
            source: Some(context.source.clone()),
        }
    }
}

/// A tool call as the model made it: on the assistant message in the history and, in the same
/// wire form, on the `assistant/message` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssistantToolCall {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The raw argument text, exactly as streamed.
    pub arguments: String,
}

/// The conversation history a request carries: a shared, reference-counted list of messages
/// that reads like a slice (`len`, `iter`, indexing, `last`, `to_vec`).
///
/// Cloning it is cheap (a reference count), which is how the loop hands each request the whole
/// history without copying it: the agent keeps one history, appends to it in place between
/// steps, and gives every request a clone. Appending copies the messages only while someone
/// still holds an earlier request's history, so adapters should let go of a request once its
/// response has streamed (serialise what they need, then drop it). An adapter that keeps every
/// request, as `mock-adapter` does by default to let tests inspect them, makes each step copy
/// the history once more, which is what every step cost before the history was shared.
#[derive(Clone, Default, PartialEq)]
pub struct History(Arc<Vec<Message>>);

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Whether both are the same shared list, not merely equal (nothing was copied between
    /// them).
    pub fn shares_storage(&self, other: &History) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The messages as a slice.
    pub fn as_slice(&self) -> &[Message] {
        &self.0
    }

    /// Appends one message, copying the list first only if another holder shares it.
    pub(crate) fn push(&mut self, message: Message) {
        Arc::make_mut(&mut self.0).push(message);
    }

    /// Appends messages, copying the list first only if another holder shares it (and only
    /// when there is something to append).
    pub(crate) fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        let mut messages = messages.into_iter().peekable();
        if messages.peek().is_some() {
            Arc::make_mut(&mut self.0).extend(messages);
        }
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl Deref for History {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.0
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> History {
        History(Arc::new(messages))
    }
}

impl FromIterator<Message> for History {
    fn from_iter<I: IntoIterator<Item = Message>>(messages: I) -> History {
        History(Arc::new(messages.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq<Vec<Message>> for History {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.0.as_slice() == other.as_slice()
    }
}

impl PartialEq<[Message]> for History {
    fn eq(&self, other: &[Message]) -> bool {
        self.0.as_slice() == other
    }
}

/// What the loop asks a model for.
///
/// Its history and tool schemas are shared with the agent, not copied per request: cloning a
/// request is cheap, and an adapter should drop it once the response has streamed, because
/// the agent's next append copies a history that is still shared (see [`History`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The step of the turn (1-based).
    pub step: u32,
    /// The system prompt.
    pub system: String,
    /// The history, including contexts drained from the inbox for this request.
    pub messages: History,
    /// The tool schemas visible to the agent, shared by every request until the visible tool
    /// set changes (`tools/change`).
    pub tools: Arc<[ToolSchema]>,
}

impl ModelRequest {
    /// A first-step request: the loop builds its own, adapters' tests and other hosts build
    /// one with this (from `Vec`s, or from an already shared history and schema list).
    pub fn new(
        system: impl Into<String>,
        messages: impl Into<History>,
        tools: impl Into<Arc<[ToolSchema]>>,
    ) -> ModelRequest {
        ModelRequest {
            step: 1,
            system: system.into(),
            messages: messages.into(),
            tools: tools.into(),
        }
    }
}

/// Why a model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end.
    Stop,
    /// It wants tool results.
    ToolCalls,
    /// The output-token limit.
    Length,
    /// Anything else the provider says.
    Other(String),
}

/// Token counts, when the provider reports them. Build one with [`Usage::new`]; more counts
/// (cached or reasoning tokens) may be added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Prompt and completion token counts.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            output_tokens,
        }
    }
}

/// One streamed event from a model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelEvent {
    /// Visible text.
    TextDelta(String),
    /// Reasoning text.
    ReasoningDelta(String),
    /// A tool call begins: its id and name arrive once.
    ToolCallStart {
        /// The call's position among parallel calls (0, 1, …).
        index: usize,
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// A fragment of a call's argument text.
    ToolCallArguments {
        /// The call's position.
        index: usize,
        /// The next fragment.
        fragment: String,
    },
    /// The response is complete.
    Finish {
        /// Why it stopped.
        reason: FinishReason,
        /// Token counts.
        usage: Option<Usage>,
    },
}

/// A model failure (network, provider, script).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// What went wrong.
    pub message: String,
}

impl ModelError {
    /// A model error.
    pub fn new(message: impl Into<String>) -> ModelError {
        ModelError {
            message: message.into(),
        }
    }
}

/// A stream of model events.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// The seam between the loop and a model provider (OpenAI-compatible HTTP, DeepSeek, the
/// scripted mock). Given a request and a cancellation signal, stream the response.
///
/// Take what the request carries (serialise it into a body, say) and drop it: the history it
/// shares with the agent is copied by the agent's next append while an adapter still holds it
/// (see [`History`]).
pub trait ModelAdapter: Send + Sync {
    /// Streams one response. The stream should end promptly once `signal` fires.
    fn stream(&self, request: ModelRequest, signal: CancellationToken) -> ModelStream;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Agent;
    use dsh_tools::{ToolDefinition, ToolOutput, ToolRegistry, ValueSchema};
    use std::sync::Mutex;

    /// What one request carried: where its history lives, how many holders shared it, how
    /// long it was, and its schemas (kept, so no two lists can share an address).
    #[derive(Debug, Clone)]
    struct Seen {
        history: usize,
        holders: usize,
        tools: Arc<[ToolSchema]>,
        len: usize,
    }

    /// Calls the unknown tool `nothing` for `calls` steps, then answers; notes what each
    /// request carried, and keeps every request too when `retain` is set.
    struct Recording {
        calls: u32,
        retain: bool,
        seen: Mutex<Vec<Seen>>,
        kept: Mutex<Vec<ModelRequest>>,
    }

    impl ModelAdapter for Recording {
        fn stream(&self, request: ModelRequest, _signal: CancellationToken) -> ModelStream {
            self.seen.lock().unwrap().push(Seen {
                history: Arc::as_ptr(&request.messages.0) as usize,
                holders: Arc::strong_count(&request.messages.0),
                tools: Arc::clone(&request.tools),
                len: request.messages.len(),
            });
            let events = if request.step <= self.calls {
                vec![
                    Ok(ModelEvent::ToolCallStart {
                        index: 0,
                        id: format!("c{}", request.step),
                        name: String::from("nothing"),
                    }),
                    Ok(ModelEvent::ToolCallArguments {
                        index: 0,
                        fragment: String::from("{}"),
                    }),
                ]
            } else {
                vec![Ok(ModelEvent::TextDelta(String::from("done")))]
            };
            if self.retain {
                self.kept.lock().unwrap().push(request);
            }
            Box::pin(futures::stream::iter(events))
        }
    }

    fn recording(calls: u32, retain: bool) -> Arc<Recording> {
        Arc::new(Recording {
            calls,
            retain,
            seen: Mutex::new(Vec::new()),
            kept: Mutex::new(Vec::new()),
        })
    }

    fn echo() -> ToolDefinition {
        ToolDefinition::builder("echo", "Echo nothing back.")
            .parameters(ValueSchema::closed_object())
            .output(ToolOutput::new(ValueSchema::string(), |_, _| Vec::new()))
            .execute(|_, _| async { Ok(serde_json::Value::from("")) })
            .build()
            .unwrap()
    }

    async fn run(registry: &ToolRegistry, adapter: &Arc<Recording>) -> Vec<Seen> {
        let agent = Agent::builder(registry.clone(), adapter.clone())
            .build()
            .unwrap();
        agent.run("go").await.unwrap();
        agent.dispose().await;
        adapter.seen.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn consecutive_requests_share_one_history_and_one_schema_list() {
        let registry = ToolRegistry::new();
        registry.register(echo()).unwrap();
        let adapter = recording(3, false);
        let seen = run(&registry, &adapter).await;
        // The user message, then an assistant message and a tool result per step.
        assert_eq!(
            seen.iter().map(|s| s.len).collect::<Vec<_>>(),
            vec![1, 3, 5, 7]
        );
        // The same list every step (appended to in place, never copied), held by the agent
        // and the request only, and the same schemas.
        for step in &seen {
            assert_eq!(
                (step.history, step.holders),
                (seen[0].history, 2),
                "{seen:?}"
            );
            assert!(Arc::ptr_eq(&step.tools, &seen[0].tools), "{seen:?}");
        }
    }

    #[tokio::test]
    async fn a_retained_request_makes_the_next_append_copy_the_history() {
        let registry = ToolRegistry::new();
        let adapter = recording(2, true);
        let seen = run(&registry, &adapter).await;
        let kept = adapter.kept.lock().unwrap();
        // Each kept request holds the history it was sent, unchanged, so each step's history
        // is a new copy.
        assert_eq!(
            kept.iter().map(|r| r.messages.len()).collect::<Vec<_>>(),
            vec![1, 3, 5]
        );
        assert_ne!(seen[0].history, seen[1].history);
        assert_ne!(seen[1].history, seen[2].history);
        assert!(kept[1].messages.starts_with(&kept[0].messages));
    }

    #[tokio::test]
    async fn the_schemas_are_rebuilt_after_a_tools_change_only() {
        let registry = ToolRegistry::new();
        let agent_adapter = recording(1, false);
        let agent = Agent::builder(registry.clone(), agent_adapter.clone())
            .build()
            .unwrap();
        agent.run("one").await.unwrap();
        let registration = registry.register(echo()).unwrap();
        agent.run("two").await.unwrap();
        registration.dispose();
        agent.run("three").await.unwrap();
        agent.dispose().await;
        let tools: Vec<Arc<[ToolSchema]>> = agent_adapter
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| Arc::clone(&s.tools))
            .collect();
        let names = |i: usize| tools[i].iter().map(|t| t.name.as_str()).collect::<Vec<_>>();
        assert_eq!(
            (0..6).map(names).collect::<Vec<_>>(),
            vec![vec![], vec![], vec!["echo"], vec!["echo"], vec![], vec![]]
        );
        // Two steps per turn; each change (a registration, then its disposal) gives the next
        // request a new list, and the step after it shares that list.
        let shared = |a: usize, b: usize| Arc::ptr_eq(&tools[a], &tools[b]);
        assert_eq!(
            [
                shared(0, 1),
                shared(1, 2),
                shared(2, 3),
                shared(3, 4),
                shared(4, 5)
            ],
            [true, false, true, false, true]
        );
    }
}
