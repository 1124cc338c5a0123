//! The Chat Completions wire types: what a request body holds and what one streamed chunk
//! carries. Only the fields the adapter reads or writes are declared; unknown chunk fields are
//! ignored, so providers may add their own.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request body.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ChatRequest {
    pub(crate) model: String,
    pub(crate) messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tools: Vec<WireTool>,
    pub(crate) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
}

/// Asks for a usage chunk at the end of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: bool,
}

/// One message of a request.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(crate) enum WireMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        /// `null` when the message holds only tool calls, as the API expects.
        content: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A tool call on an assistant message of the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct WireToolCall {
    pub(crate) id: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: WireFunctionCall,
}

/// The function part of a tool call: the name and the raw argument text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct WireFunctionCall {
    pub(crate) name: String,
    pub(crate) arguments: String,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct WireTool {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: WireFunction,
}

/// A function declaration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct WireFunction {
    pub(crate) name: String,
    pub(crate) description: String,
    /// Held losslessly, so the model sees the properties in their declared order.
    pub(crate) parameters: dsh_tools::json::JsonValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) strict: Option<bool>,
}

/// One streamed chunk (`data:` line) of a completion.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct ChatChunk {
    #[serde(default)]
    pub(crate) choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    /// Some providers report a failure inside the stream, after a `200` status.
    #[serde(default)]
    pub(crate) error: Option<WireError>,
}

/// The streamed part of one choice.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) delta: Delta,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

/// New content of a choice.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    /// DeepSeek's thinking-mode reasoning.
    #[serde(default)]
    pub(crate) reasoning_content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A fragment of one tool call: the first one of a call carries its id and name.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionDelta>,
}

/// The function part of a tool-call fragment.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
}

/// Token counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) prompt_tokens: u64,
    #[serde(default)]
    pub(crate) completion_tokens: u64,
}

/// A whole (non-streamed) completion.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct Completion {
    #[serde(default)]
    pub(crate) choices: Vec<CompletionChoice>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<WireError>,
}

/// One choice of a whole completion.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct CompletionChoice {
    #[serde(default)]
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) message: CompletionMessage,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

/// The assistant message of a whole completion.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct CompletionMessage {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) reasoning_content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<CompletionToolCall>>,
}

/// A tool call of a whole completion.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct CompletionToolCall {
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionDelta>,
}

impl Completion {
    /// The completion as the one chunk that would have streamed it, so both modes share the
    /// translation. A call without an id gets `call_N` (some local servers leave it out).
    pub(crate) fn into_chunk(self) -> ChatChunk {
        ChatChunk {
            choices: self
                .choices
                .into_iter()
                .map(|choice| ChunkChoice {
                    index: choice.index,
                    delta: Delta {
                        content: choice.message.content,
                        reasoning_content: choice.message.reasoning_content,
                        tool_calls: choice.message.tool_calls.map(|calls| {
                            calls
                                .into_iter()
                                .zip(0u32..)
                                .map(|(call, index)| ToolCallDelta {
                                    index,
                                    id: call.id.or_else(|| Some(format!("call_{index}"))),
                                    function: call.function,
                                })
                                .collect()
                        }),
                    },
                    finish_reason: choice.finish_reason,
                })
                .collect(),
            usage: self.usage,
            error: self.error,
        }
    }
}

/// The error object of an error body (`{"error": {...}}`) or an in-stream error chunk.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct WireError {
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) code: Option<Value>,
}

impl WireError {
    /// The provider's message, with its type or code when it gave one.
    pub(crate) fn describe(&self) -> String {
        let message = self.message.clone().unwrap_or_default();
        let label = match (&self.kind, &self.code) {
            (Some(kind), _) if !kind.is_empty() => Some(kind.clone()),
            (_, Some(Value::String(code))) => Some(code.clone()),
            (_, Some(code)) if !code.is_null() => Some(code.to_string()),
            _ => None,
        };
        match label {
            Some(label) if message.is_empty() => label,
            Some(label) => format!("{message} ({label})"),
            None => message,
        }
    }
}

/// An error response body.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct ErrorBody {
    pub(crate) error: WireError,
}
