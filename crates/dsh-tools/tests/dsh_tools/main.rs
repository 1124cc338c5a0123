//! The integration tests of `dsh-tools`, in one binary (each file of `tests/` would link the
//! whole graph again): one module per area, `support` holding the fixtures they share. The
//! tracing test (`tests/spans.rs`) keeps a binary of its own: it needs a process in which no
//! other test reaches its callsites.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod argument_limit;
mod cancellation;
mod code_mode;
mod jobs;
#[path = "../support/npm.rs"]
mod npm;
mod pipeline;
mod policy;
mod presentation;
mod raw_schemas;
mod runtime_drivers;
mod schema_differential;
mod scopes;
#[path = "../support/mod.rs"]
mod support;
mod tool_macro;
mod tool_macro_errors;
