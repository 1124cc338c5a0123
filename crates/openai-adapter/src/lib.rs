//! A streaming Chat Completions model adapter for dsh-rs agents: DeepSeek (`deepseek-chat`,
//! `deepseek-reasoner`), OpenAI, and any other OpenAI-compatible server (vLLM, llama.cpp,
//! Ollama) at a base URL. It implements `agent_loop::ModelAdapter`.
//!
//! - Requests carry the system prompt, the history (assistant tool calls with their raw
//!   argument text; DeepSeek's reasoning sent back on tool-call turns), the tools (in the
//!   strict projection when configured), `stream: true` and a request for usage. A setting the
//!   provider would not honour is an error, not a quietly different request.
//! - Responses stream as text, reasoning and tool-call events; calls are numbered in the order
//!   they first appear, argument text passes through raw, and `Finish` (with the usage) is the
//!   last event, sent at the `[DONE]` marker.
//! - Failures are typed ([`AdapterError`]): HTTP status and the provider's message; retries of
//!   429/500/502/503/504 with jittered exponential backoff honouring `Retry-After`, only before
//!   anything was streamed; connect, first-byte and idle timeouts; truncated streams; malformed
//!   chunks named by their data line; cancellation that closes the connection.
//! - The API key is only ever in the `Authorization` header: `Debug` output, errors, logs and
//!   events never show it.
//!
//! The modules follow the path of a request: `wire` (the JSON types), `serialize` (request
//! body), `sse` (HTTP, retries, timeouts, server-sent events), `translate` (chunks to events)
//! and `adapter`.
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

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod adapter;
mod config;
mod error;
mod serialize;
mod sse;
mod translate;
mod wire;

pub use adapter::{OpenAiAdapter, decode_recording};
pub use agent_loop::ModelEvent;
pub use config::{
    AdapterConfig, ApiKey, DEEPSEEK_BASE_URL, OPENAI_BASE_URL, Provider, RetryPolicy, Timeouts,
};
pub use error::AdapterError;
