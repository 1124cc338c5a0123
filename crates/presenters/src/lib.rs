//! UI cards for the built-in dsh tools, and the host side of cards: terminal text and ACP.
//!
//! `presenters` is the one crate (besides `dsh-tools`, which owns the card vocabulary) a UI
//! host needs to show a live session or replay a log. It holds:
//!
//! - the presenter functions of the built-in tools, [`bash`], [`job_output`], [`job_list`] and
//!   [`job_kill`]: each reads the call's arguments softly and returns `None` (the generic
//!   fallback) for anything malformed, never an error or a panic;
//! - the shell output [`markers`], spelled once and shared by the model-visible text and the
//!   cards: the `bash` tool renders its model text with [`render_shell_output`] (and a
//!   background read with [`markers::render_background_read`]), and [`parse_exit_status`]
//!   reads the exit status back for a log without [`bash::BashExitMeta`];
//! - [`bash::BashArgs`], the `bash` tool's arguments: the type its schema is derived from,
//!   and [`bash::BashArgs::read`], the lenient reader of them in logs;
//! - [`render_text`] for terminals, which shows every control character of the untrusted tool
//!   output and arguments as a visible escape ([`escape_controls`]), and the [`acp`] projection
//!   onto Agent Client Protocol `ToolCall` / `ToolCallUpdate` JSON, which keeps the text as it is.
//!
//! It deliberately does no I/O and keeps no state: no files, processes, environment, clock or
//! randomness, so the same card comes out live and on replay. It never changes what the model
//! sees either: card formatting stays on the UI side. It does not depend on the tools it
//! presents (`tool-bash` depends on it, not the other way round).
//!
//! # Example
//!
//! ```
//! use dsh_tools::{ContentBlock, ToolResultRecord};
//! use presenters::{ExitOutcome, render_shell_output, render_text};
//! use serde_json::json;
//!
//! let args = json!({"command": "cargo test", "description": "Run the tests"});
//! let text = render_shell_output("ok\n", "", &[], None, &ExitOutcome::exited(101));
//! assert_eq!(text, "ok\n[exit code: 101]");
//!
//! let record = ToolResultRecord {
//!     content: vec![ContentBlock::text(text)],
//!     ..ToolResultRecord::default()
//! };
//! let card = presenters::bash::present_result(&args, &record).expect("well-formed arguments");
//! assert_eq!(render_text(&card), "$ cargo test\nok\n[exit code: 101]");
//!
//! let update = presenters::acp::tool_call_update("call-1", &card, false);
//! assert_eq!(update["status"], "completed");
//! ```
//!
//! # Features
//!
//! This crate has no cargo features.
//!
//! Unsafe budget: 0 — none.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod acp;
mod args;
pub mod bash;
pub mod job_kill;
pub mod job_list;
pub mod job_output;
pub mod markers;
pub mod text;

pub use markers::{
    ExitOutcome, ExitStatus, Truncation, parse_exit_status, render_markers, render_shell_output,
};
pub use text::{Card, escape_controls, render_call_text, render_result_text, render_text};
