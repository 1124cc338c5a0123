//! The model seam: what the loop sends a model and what streams back.

use dsh_tools::{ContentBlock, ContextSource, InjectedContext, ToolSchema};
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
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

/// What the loop asks a model for.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The step of the turn (1-based).
    pub step: u32,
    /// The system prompt.
    pub system: String,
    /// The history, including contexts drained from the inbox for this request.
    pub messages: Vec<Message>,
    /// The tool schemas visible to the agent.
    pub tools: Vec<ToolSchema>,
}

impl ModelRequest {
    /// A first-step request: the loop builds its own, adapters' tests and other hosts build
    /// one with this.
    pub fn new(
        system: impl Into<String>,
        messages: Vec<Message>,
        tools: Vec<ToolSchema>,
    ) -> ModelRequest {
        ModelRequest {
            step: 1,
            system: system.into(),
            messages,
            tools,
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
pub trait ModelAdapter: Send + Sync {
    /// Streams one response. The stream should end promptly once `signal` fires.
    fn stream(&self, request: ModelRequest, signal: CancellationToken) -> ModelStream;
}
