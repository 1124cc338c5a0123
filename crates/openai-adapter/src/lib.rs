//! A streaming Chat Completions model adapter for dsh-rs agents: DeepSeek (`deepseek-chat`,
//! `deepseek-reasoner`), OpenAI, and any other OpenAI-compatible server (vLLM, llama.cpp,
//! Ollama) at a base URL. It implements `agent_loop::ModelAdapter`.
//!
//! - Requests carry the system prompt, the history (assistant tool calls with their raw
//!   argument text; DeepSeek's reasoning sent back on tool-call turns), the tools (in the
//!   strict projection when configured), `stream: true` and a request for usage. A setting the
//!   provider would not honour is an error, not a quietly different request.
//! - Responses stream as text, reasoning and tool-call events; calls are numbered in the order
//!   they first appear (a call without an id gets `call_<position>`), argument text passes
//!   through raw, and `Finish` (with the usage, when the server's counts are valid) is the last
//!   event, sent at the `[DONE]` marker.
//! - Failures are typed ([`AdapterError`]): HTTP status and the provider's message; retries of
//!   429/500/502/503/504 with jittered exponential backoff honouring `Retry-After` (any value
//!   is an answer: one too large waits longer than `max_delay`, so no retry; a malformed one is
//!   ignored), only before anything was streamed; connect, first-byte, idle and total
//!   timeouts; an HTML page or a body without events named by its status, type and start;
//!   truncated streams; malformed chunks named by their data line; cancellation that closes
//!   the connection.
//! - One response is bounded: at most [`AdapterConfig::max_response_bytes`] (default
//!   [`DEFAULT_MAX_RESPONSE_BYTES`], 4 MiB) of text, reasoning and tool calls, no event or
//!   whole body over [`AdapterConfig::event_limit`], at most [`MAX_TOOL_CALLS`] calls, and at
//!   most [`Timeouts::total`] (default 10 minutes) from the first request to the last event.
//!   Past a limit the stream ends with an error that names it.
//! - The API key is only ever in the `Authorization` header: `Debug` output, errors, logs and
//!   events never show it, and any run of 8 or more of its characters that the server writes
//!   back (quoted, cut short, split across deltas, upper-cased, or written with JSON escapes
//!   in a call's arguments or an error's text) becomes `<redacted>` before anything is clipped
//!   or passed on.
//!
//! The modules follow the path of a request: `wire` (the JSON types), `serialize` (request
//! body), `sse` (HTTP, retries, timeouts, server-sent events, the event and body limits),
//! `translate` (chunks to events, the response limits), `redact` (the key out of the server's
//! text) and `adapter`.
//!
//! ```no_run
//! use agent_loop::{Message, ModelRequest};
//! use futures::StreamExt;
//! use openai_adapter::{AdapterConfig, OpenAiAdapter};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo() -> Result<(), openai_adapter::AdapterError> {
//! // Reads DEEPSEEK_API_KEY; `--base-url`-style overrides go in the second argument.
//! let config = AdapterConfig::from_spec("deepseek:deepseek-chat", None, None)?;
//! let adapter = OpenAiAdapter::new(config)?;
//! let request = ModelRequest::new("You are terse.", vec![Message::user("Say hi.")], vec![]);
//! let mut events = adapter.events(&request, CancellationToken::new());
//! while let Some(event) = events.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Decoding needs no network; a recorded stream decodes to the events the adapter would send:
//!
//! ```
//! use agent_loop::{FinishReason, ModelEvent, Usage};
//!
//! let recording = concat!(
//!     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
//!     "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
//!     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n",
//!     "data: [DONE]\n\n",
//! );
//! let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
//! let events = runtime.block_on(openai_adapter::decode_recording(recording))?;
//! assert_eq!(
//!     events,
//!     vec![
//!         ModelEvent::TextDelta("Hi".into()),
//!         ModelEvent::Finish { reason: FinishReason::Stop, usage: Some(Usage::new(5, 1)) },
//!     ]
//! );
//! # Ok::<(), openai_adapter::AdapterError>(())
//! ```
//!
//! Unsafe budget: 0 — none.

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod adapter;
mod config;
mod error;
mod redact;
mod serialize;
mod sse;
mod translate;
mod wire;

pub use adapter::{OpenAiAdapter, decode_recording};
pub use agent_loop::ModelEvent;
pub use config::{
    AdapterConfig, ApiKey, DEEPSEEK_BASE_URL, DEFAULT_MAX_RESPONSE_BYTES, MAX_TOOL_CALLS,
    OPENAI_BASE_URL, Provider, RetryPolicy, Timeouts,
};
pub use error::{AdapterError, ResponseLimit};
