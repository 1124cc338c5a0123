//! The integration tests of `dsh-agent`, in one binary (each file of `tests/` would link the
//! whole graph again): one module per area of the command, each driving the built binary;
//! `support` holds what they share, `npm` installs the npm packages some of them need into
//! `target/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acp;
mod cli;
mod conventions;
mod files;
mod mcp;
mod model;
#[path = "../../../dsh-tools/tests/support/npm.rs"]
mod npm;
#[path = "../../../dsh-tools/tests/support/own_process.rs"]
mod own_process;
mod pipes;
#[path = "../../../tool-mcp/tests/support/processes.rs"]
mod processes;
mod promises;
mod sandbox;
mod sessions;
#[path = "../support/mod.rs"]
mod support;
mod terminal;
