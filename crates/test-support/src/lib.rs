//! Test fixtures shared by the workspace's tests, kept out of the published libraries.
//!
//! Every crate takes this one as a dev-dependency (`dsh-test-support.workspace = true` under
//! `[dev-dependencies]`); it is `publish = false`, and a path-only dev-dependency is left out of
//! a published manifest. It holds what more than one crate's tests need:
//!
//! - [`RecordingAgent`]: an in-memory [`AgentHandle`](dsh_tools::AgentHandle) that records
//!   what it is told and can be disposed;
//! - the echo tools: [`echo`] (typed `text` in, the same text out) and [`raw_echo`] (raw JSON
//!   Schema, returns its arguments unchanged);
//! - [`tool`]: a raw tool of any body, for tests that only need something to call;
//! - [`peak_rss_of_test`] and [`report_peak_rss`]: one test's peak memory, measured in a child
//!   process (Linux).
//!
//! Helpers that only one test suite uses stay in that suite's `tests/support/`. The modules:
//! `agent` holds [`RecordingAgent`], `tools` the tools, `memory` the peak-memory pair.
//!
//! Unsafe budget: 0 — none.

// A fixture that cannot be built is a broken test, and a panic says so where it happens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod memory;
mod tools;

pub use agent::RecordingAgent;
pub use memory::{peak_rss_of_test, report_peak_rss};
pub use tools::{echo, raw_echo, tool};
