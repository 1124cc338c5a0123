//! The Chat Completions wire types: what a request body holds and what one streamed chunk
//! carries. Only the fields the adapter reads or writes are declared; unknown chunk fields are
//! ignored, so providers may add their own.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

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
    /// Read leniently (see [`WireUsage`]).
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

/// The prompt and completion token counts of a `usage` object, each `None` unless it is a
/// whole number a `u64` holds: a server's `null`, fraction, negative number, text or
/// overflowing count is unknown, not a reason to fail the response. A `usage` that is no
/// object has no counts. Whatever else it holds is skipped as it is read, never built into a
/// value tree: a 16 MiB array of numbers costs no memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WireUsage {
    pub(crate) prompt_tokens: Option<u64>,
    pub(crate) completion_tokens: Option<u64>,
}

impl<'de> Deserialize<'de> for WireUsage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Lenient::<WireUsage>::default())
    }
}

/// A token count, or `None` for any other JSON value (skipped as it is read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Count(Option<u64>);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Lenient::<Count>::default())
    }
}

/// An error's `code`: text, or a number written as text; any other JSON value is no code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct WireCode(pub(crate) Option<String>);

impl<'de> Deserialize<'de> for WireCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Lenient::<WireCode>::default())
    }
}

/// The visitor of a leniently read `T`: what `T` keeps of a JSON value, and everything else
/// skipped with [`IgnoredAny`] (an array or object is drained element by element).
struct Lenient<T>(std::marker::PhantomData<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(std::marker::PhantomData)
    }
}

/// What a leniently read value keeps of each kind of JSON value; the default keeps nothing.
trait LenientRead: Default {
    const EXPECTING: &'static str;
    fn unsigned(value: u64) -> Self {
        let _ = value;
        Self::default()
    }
    fn signed(value: i64) -> Self {
        u64::try_from(value).map_or_else(|_| Self::default(), Self::unsigned)
    }
    fn float(value: f64) -> Self {
        let _ = value;
        Self::default()
    }
    fn text(value: &str) -> Self {
        let _ = value;
        Self::default()
    }
    fn object<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
}

impl LenientRead for Count {
    const EXPECTING: &'static str = "a token count";
    fn unsigned(value: u64) -> Self {
        Count(Some(value))
    }
}

impl LenientRead for WireCode {
    const EXPECTING: &'static str = "an error code";
    fn unsigned(value: u64) -> Self {
        WireCode(Some(value.to_string()))
    }
    fn signed(value: i64) -> Self {
        WireCode(Some(value.to_string()))
    }
    fn float(value: f64) -> Self {
        WireCode(Some(value.to_string()))
    }
    fn text(value: &str) -> Self {
        WireCode(Some(value.to_owned()))
    }
}

/// The fields of a `usage` object the adapter reads; any other is skipped.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum UsageField {
    PromptTokens,
    CompletionTokens,
    #[serde(other)]
    Other,
}

impl LenientRead for WireUsage {
    const EXPECTING: &'static str = "a usage object";
    fn object<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut usage = WireUsage::default();
        while let Some(field) = map.next_key::<UsageField>()? {
            match field {
                UsageField::PromptTokens => usage.prompt_tokens = map.next_value::<Count>()?.0,
                UsageField::CompletionTokens => {
                    usage.completion_tokens = map.next_value::<Count>()?.0;
                }
                UsageField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(usage)
    }
}

impl<'de, T: LenientRead> Visitor<'de> for Lenient<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<T, E> {
        Ok(T::signed(value))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<T, E> {
        Ok(T::unsigned(value))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<T, E> {
        Ok(T::float(value))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<T, E> {
        Ok(T::text(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::object(map)
    }
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
    /// translation (which gives a call without an id one).
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
                                    id: call.id,
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
    /// Read leniently (see [`WireCode`]).
    #[serde(default)]
    pub(crate) code: WireCode,
}

impl WireError {
    /// The provider's message, with its type or code when it gave one.
    pub(crate) fn describe(&self) -> String {
        let message = self.message.clone().unwrap_or_default();
        let label = match (&self.kind, &self.code.0) {
            (Some(kind), _) if !kind.is_empty() => Some(kind.clone()),
            (_, Some(code)) => Some(code.clone()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn an_error_code_is_text_or_a_number_and_anything_else_is_no_code() {
        for (code, expected) in [
            (r#""invalid_api_key""#, "boom (invalid_api_key)"),
            ("429", "boom (429)"),
            ("-1", "boom (-1)"),
            ("null", "boom"),
            ("[1,[2,{}]]", "boom"),
            (r#"{"a":[1]}"#, "boom"),
            ("true", "boom"),
        ] {
            let body = format!(r#"{{"error":{{"message":"boom","code":{code}}}}}"#);
            let body: ErrorBody = serde_json::from_str(&body).unwrap();
            assert_eq!(body.error.describe(), expected, "{code}");
        }
    }
}
