//! The adapter's failures. Each becomes the loop's `ModelError` through its message; none
//! carries the API key.

use crate::redact::Redactor;
use std::fmt;
use std::time::Duration;

/// Why a request or its stream failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// The key's environment variable is unset or empty.
    #[error("no API key: set the environment variable {variable}")]
    MissingKey {
        /// The variable read.
        variable: String,
    },
    /// The configuration cannot be used.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// The request asks for something the provider would not honour.
    #[error("{provider} cannot honour the request: {what}")]
    Unsupported {
        /// The provider.
        provider: String,
        /// What it cannot do.
        what: String,
    },
    /// The server answered with an error status.
    #[error("HTTP {status} from {provider}: {message}{}", retried_note(*.attempts))]
    Http {
        /// The provider.
        provider: String,
        /// The status code.
        status: u16,
        /// The provider's message (from its JSON error body, or the body's text).
        message: String,
        /// How many requests were made.
        attempts: u32,
    },
    /// The connection could not be made or broke before the response began.
    #[error("cannot reach {provider}: {detail}{}", retried_note(*.attempts))]
    Connect {
        /// The provider.
        provider: String,
        /// What the transport said.
        detail: String,
        /// How many requests were made.
        attempts: u32,
    },
    /// No response headers within the first-byte timeout.
    #[error("no response from {provider} within {:?} (first-byte timeout)", .timeout)]
    FirstByteTimeout {
        /// The provider.
        provider: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The stream was silent for longer than the idle timeout.
    #[error("the stream from {provider} was idle for {:?} (idle timeout)", .timeout)]
    IdleTimeout {
        /// The provider.
        provider: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The body failed while streaming.
    #[error("the stream from {provider} broke: {detail}")]
    Stream {
        /// The provider.
        provider: String,
        /// What the transport said.
        detail: String,
    },
    /// The response took longer than the total timeout.
    #[error("the response from {provider} took longer than {:?} (total timeout)", .timeout)]
    TotalTimeout {
        /// The provider.
        provider: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The response passed one of its size limits; the rest of it was not read.
    #[error(
        "the response from {provider} passed its limit of {limit} {what}; the rest was not read"
    )]
    ResponseTooLarge {
        /// The provider.
        provider: String,
        /// Which limit.
        what: ResponseLimit,
        /// The limit.
        limit: usize,
    },
    /// A successful status came with a body that is not what was asked for: an HTML page, or
    /// a body without a single server-sent event.
    #[error("{provider} answered HTTP {status} with {content_type}, not {expected}: {start}")]
    UnexpectedBody {
        /// The provider.
        provider: String,
        /// The status code.
        status: u16,
        /// The `Content-Type` the server sent (`no Content-Type` without one).
        content_type: String,
        /// What was asked for: `an event stream` or `a JSON completion`.
        expected: &'static str,
        /// The start of the body, clipped, the key redacted.
        start: String,
    },
    /// The stream ended before its end marker or without a finish reason.
    #[error("stream truncated: {0}")]
    Truncated(String),
    /// A `data:` line is not a chunk.
    #[error("malformed chunk on data line {line}: {detail}: {text}")]
    MalformedChunk {
        /// The 1-based number of the `data:` line in the stream.
        line: usize,
        /// What is wrong with it.
        detail: String,
        /// The line, clipped.
        text: String,
    },
    /// The provider reported an error inside the stream.
    #[error("{provider} failed mid-stream: {message}")]
    Provider {
        /// The provider.
        provider: String,
        /// Its message.
        message: String,
    },
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl AdapterError {
    /// The error with every run of the key in its texts redacted (see the `redact` module),
    /// for a provider that quotes the key it was sent back. The texts were redacted where
    /// they were made, before any clipping; this is the last line of defence.
    pub(crate) fn redacted(self, redactor: &Redactor) -> AdapterError {
        let clean = |text: String| redactor.redact_escaped(&text);
        match self {
            AdapterError::Http {
                provider,
                status,
                message,
                attempts,
            } => AdapterError::Http {
                provider,
                status,
                message: clean(message),
                attempts,
            },
            AdapterError::Provider { provider, message } => AdapterError::Provider {
                provider,
                message: clean(message),
            },
            AdapterError::MalformedChunk { line, detail, text } => AdapterError::MalformedChunk {
                line,
                detail: clean(detail),
                text: clean(text),
            },
            AdapterError::Connect {
                provider,
                detail,
                attempts,
            } => AdapterError::Connect {
                provider,
                detail: clean(detail),
                attempts,
            },
            AdapterError::Stream { provider, detail } => AdapterError::Stream {
                provider,
                detail: clean(detail),
            },
            AdapterError::UnexpectedBody {
                provider,
                status,
                content_type,
                expected,
                start,
            } => AdapterError::UnexpectedBody {
                provider,
                status,
                content_type: clean(content_type),
                expected,
                start: clean(start),
            },
            AdapterError::Truncated(detail) => AdapterError::Truncated(clean(detail)),
            other => other,
        }
    }
}

/// The size limits of one response ([`AdapterError::ResponseTooLarge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseLimit {
    /// The bytes of text, reasoning and tool calls (ids, names and arguments) together:
    /// `AdapterConfig::max_response_bytes`.
    Content,
    /// The bytes of one server-sent event: `AdapterConfig::event_limit`.
    Event,
    /// The bytes of a whole body read at once (a non-streamed completion, or one sent in
    /// answer to a streamed request): `AdapterConfig::event_limit`.
    Body,
    /// The number of tool calls: [`crate::MAX_TOOL_CALLS`].
    ToolCalls,
}

impl fmt::Display for ResponseLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResponseLimit::Content => {
                "bytes of text, reasoning and tool calls (max_response_bytes)"
            }
            ResponseLimit::Event => "bytes in one server-sent event",
            ResponseLimit::Body => "bytes of body",
            ResponseLimit::ToolCalls => "tool calls",
        })
    }
}

fn retried_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

impl From<AdapterError> for agent_loop::ModelError {
    fn from(error: AdapterError) -> agent_loop::ModelError {
        agent_loop::ModelError::new(error.to_string())
    }
}
