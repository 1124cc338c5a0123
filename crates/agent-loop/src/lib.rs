//! The model loop for dsh-rs agents.
//!
//! `agent-loop` drives an [`Agent`] turn by turn against any [`ModelAdapter`]: it assembles
//! requests (system prompt, the tool schemas the agent sees, history, and the inbox of injected
//! contexts), assembles streamed responses (argument fragments joined per call index; reasoning
//! kept and sent back), schedules tool calls through the [`dsh_tools::ToolRegistry`]
//! (concurrency-safe calls overlap, everything else is a barrier, results land in call order),
//! and records every step as a [`SessionEvent`] for subscribers and the JSONL session log. Logs
//! replay into cards ([`replay_cards`]) and resume into a live agent ([`AgentBuilder::resume`]).
//! A [`SessionStore`] ([`FsSessionStore`] on disk) keeps sessions beyond the process: log and
//! spill files together, one writer at a time, to list, resume, fork and prune.
//!
//! Requests share the history ([`History`]) and the tool schemas with the agent instead of
//! copying them, and the schemas are rebuilt only after a `tools/change`, so a step costs the
//! same however long the session has run.
//!
//! Invariant: every tool call in the history has exactly one tool result, whatever fails or is
//! cancelled, so the next request is always well-formed.
//!
//! Promises to the model and the host: call ids are unique in a session (a repeated one gets a
//! fresh `call-auto-N`); every job notice reaches a model request (the [`AgentDirectory`]
//! gathers notices settling together into one request, and [`Agent::dispose`] records the
//! ones no request took as `context/undelivered`); a session log that cannot be written is an
//! error the host sees ([`Agent::log_error`], an `error` event); and logs are read a line at a
//! time, with at most [`MAX_LINE_BYTES`] per line, which the writer never exceeds.
//!
//! It deliberately does not talk HTTP to a model provider (that is an adapter's job; the
//! `mock-adapter` crate is the scripted one), render cards (`presenters`), or run shell
//! commands (`tool-bash`).
//!
//! # Modules
//!
//! The modules are private; everything public is re-exported at the crate root.
//!
//! - `agent`: [`Agent`] and its turn loop, with `agent/builder` ([`AgentBuilder`]),
//!   `agent/state` (history, inbox, running turn, event emitter, cached schemas),
//!   `agent/assembly` (the pure assembler of a streamed response, and unique call ids),
//!   `agent/scheduling` (how one message's tool calls run), `agent/cancelling` (a turn
//!   cancelled when a token fires), `agent/directory`
//!   ([`AgentDirectory`]) and `agent/settling` (the wait for jobs at a session's end,
//!   [`Agent::settle_jobs`]);
//! - `ending`: [`SessionEnding`], how a session ended as its events tell;
//! - `event`: [`SessionEvent`] and [`EventRecord`], the wire format of subscribers and logs;
//! - `log`: the JSONL session log, written ([`SessionLogWriter`], with `log/bound` keeping every
//!   line within [`MAX_LINE_BYTES`]) and read a line at a time ([`SessionLog`]);
//! - `model`: the model seam ([`ModelAdapter`], [`ModelRequest`], [`ModelEvent`]) and the
//!   shared [`History`];
//! - `prompt`: [`default_system_prompt`], the system prompt a host starts from;
//! - `replay`: logs back into cards ([`replay_cards`], [`CardTracker`]);
//! - `store` (Unix): [`SessionStore`] and [`FsSessionStore`], with `store/lock` (one writer per
//!   session) and `store/disk` (files opened beneath directory handles without following links,
//!   the checks of kind, owner and mode, the torn-tail bound, sizes), `store/error`
//!   ([`StoreError`]), `store/info` (what `list` reports of each session) and `store/location`
//!   (the default root, the prune at start) and `store/opening` (a run's session, new or
//!   continued).
//!
//! # Example
//!
//! ```
//! use agent_loop::{Agent, ModelAdapter, ModelEvent, ModelRequest, ModelStream, TurnEndReason};
//! use dsh_tools::ToolRegistry;
//! use std::sync::Arc;
//! use tokio_util::sync::CancellationToken;
//!
//! /// A model that always says hello.
//! struct Hello;
//!
//! impl ModelAdapter for Hello {
//!     fn stream(&self, _request: ModelRequest, _signal: CancellationToken) -> ModelStream {
//!         Box::pin(futures::stream::iter([Ok(ModelEvent::TextDelta("hello".into()))]))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let agent = Agent::builder(ToolRegistry::new(), Arc::new(Hello)).build()?;
//! let outcome = agent.run("hi").await?;
//! assert_eq!(outcome.reason, TurnEndReason::Completed);
//! assert_eq!(outcome.text, "hello");
//! # Ok::<(), agent_loop::AgentError>(())
//! # }).unwrap();
//! ```
//!
//! Unsafe budget: 0 — none.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod agent;
mod ending;
mod event;
mod log;
mod model;
mod prompt;
mod replay;
// The file-system store uses Unix permissions and `flock`.
#[cfg(unix)]
mod store;

pub use agent::{
    Agent, AgentBuilder, AgentDirectory, AgentError, DEFAULT_MAX_PARALLEL_TOOLS, DEFAULT_MAX_STEPS,
    DEFAULT_NOTICE_GATHER, JobWait, JobsSettled, LOG_WRITE_FAILED, LOST_JOB_DETAIL, TurnOutcome,
    WaitCut,
};
pub use ending::SessionEnding;
pub use event::{EventRecord, SessionEndReason, SessionEvent, TurnEndReason};
pub use log::{
    LOG_LINE_TOO_LONG, LogEntry, LogLines, LogReadError, LogWriteError, MAX_LINE_BYTES,
    RepairedLine, SessionLog, SessionLogWriter, SkippedLine,
};
pub use model::{
    AssistantToolCall, FinishReason, History, Message, ModelAdapter, ModelError, ModelEvent,
    ModelRequest, ModelStream, Usage,
};
pub use prompt::default_system_prompt;
pub use replay::{CallCards, CardTracker, ReplayedSession, replay_cards, replay_sessions};
#[cfg(unix)]
pub use store::{
    EVENTS_FILE, FsSessionStore, OpenedSession, PRUNE_AT_START_MAX, PrunePolicy, PruneReport,
    Refusal, ResumedSession, SPILL_DIR, SessionInfo, SessionLease, SessionStart, SessionState,
    SessionStore, StoreError, TornTail,
};
