//! File tools for dsh-rs agents: `read`, `write`, `edit`, `glob` and `grep`, with the
//! TypeScript harness's names and arguments, so prompts written for it work unchanged.
//!
//! - `read { file_path, offset?, limit? }`: numbered lines, 2000 by default, long lines cut
//!   with a marker, 50 KiB a page with the `offset` that continues it; look-alike characters
//!   (U+00A0, zero-width characters, a lone CR) shown as tokens and counted in the value. The
//!   file is streamed: the last page of a huge file costs one scan, not the file in memory.
//! - `write { file_path, content }`: atomic (a temporary file in the same directory, fsync,
//!   rename), parents created, the replaced file's permissions kept.
//! - `edit { file_path, old_string, new_string, replace_all? }`: literal, exactly once unless
//!   `replace_all`, in the file's line endings; a miss quotes the closest region and names the
//!   first character that differs (tab against spaces, U+00A0, CRLF).
//! - `glob { pattern, path? }` and `grep { pattern, path?, include? }`: ripgrep's own crates
//!   in-process (`ignore`, `globset`, `grep-regex`, `grep-searcher`), honouring `.gitignore`;
//!   capped results save the complete list in the host's spill directory.
//!
//! `write` and `edit` of an existing file need a `read` of it in the same session (or its
//! creation by the session), with the file unchanged since (size, modification time, content
//! hash); calls on one file run one after another. Writes follow the host's [`WritePolicy`]:
//! under [`WritePolicy::Roots`] every write opens beneath a directory handle of a root
//! (`cap-std`), so no symlink, `..` or race leads it out.
//!
//! Values are types ([`ReadValue`], [`WriteValue`], [`EditValue`], [`GlobValue`],
//! [`GrepValue`]) from which the output schemas are generated; the model's text is rendered
//! from them ([`render`]). Cards ([`cards`]): `read` a read card with its location, `write` and
//! `edit` a diff card built from the presentation meta alone (so a replayed session shows the
//! same diff without the disk), `glob` and `grep` a search card.
//!
//! With [`FsPlugin::keeping_history`], every `write` and `edit` first keeps the content it
//! replaces (and the one it writes) in a [`history::FileHistory`] of the session's, from which
//! [`history::FileHistory::undo`] restores a change, refusing when the file changed again
//! after it. It does not talk to an editor (an ACP client's buffers): the host adds that.
//!
//! # Example
//!
//! ```
//! use dsh_tools::{ToolCall, ToolRegistry};
//! use tool_fs::{FsOptions, FsPlugin, WritePolicy};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let options = FsOptions::new(dir.path().to_path_buf(), WritePolicy::Roots(vec![dir.path().to_path_buf()]), None);
//! let registry = ToolRegistry::new();
//! registry.global_scope().load(FsPlugin::new(options))?;
//! let write = r#"{"file_path": "notes.txt", "content": "hello\n"}"#;
//! let result = registry.execute(ToolCall::new("c1", "write", write)).await;
//! assert!(!result.is_error);
//! let result = registry.execute(ToolCall::new("c2", "read", r#"{"file_path": "notes.txt"}"#)).await;
//! assert_eq!(dsh_tools::content_text(&result.content), "     1\thello");
//! # Ok::<(), dsh_tools::PluginError>(())
//! # }).unwrap();
//! ```
//!
//! # Features
//!
//! This crate has no cargo features. Permissions (`0644` for a new file, `0700`/`0600` for
//! spill directories and files) apply on Unix; elsewhere the platform's defaults do.
//!
//! Unsafe budget: 0 — none.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod args;
pub mod cards;
mod change;
mod confine;
mod edit;
mod error;
mod guard;
pub mod history;
mod missing;
mod open;
mod options;
mod plugin;
mod pool;
mod read;
pub mod render;
mod schema;
mod search;
mod value;
mod visible;

pub use args::{EditArgs, GlobArgs, GrepArgs, ReadArgs, WriteArgs};
pub use error::FsError;
pub use options::{FsLimits, FsOptions, WritePolicy};
pub use plugin::{FS_TOOL_NAMES, FS_TOOLS, FsPlugin};
pub use value::{
    EditValue, FileChange, GlobValue, GrepFile, GrepMatch, GrepValue, ReadLine, ReadValue,
    WriteValue,
};
pub use visible::InvisibleCounts;
