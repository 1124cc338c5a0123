//! The integration tests of `tool-mcp`, one binary: the client against the reference servers
//! (`everything`, `filesystem`), fault injection with in-process and hand-written servers
//! (`faults`, `faults/hostile`), and, with the `server` feature, a registry served to rmcp's
//! client and to raw lines (`serving`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod everything;
mod faults;
mod filesystem;
#[cfg(feature = "server")]
mod serving;
