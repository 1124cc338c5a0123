//! The integration tests of `tool-bash`, in one binary (each file of `tests/` would link the
//! whole graph again): one module per area, `support` holding the fixtures they share. Three
//! keep a binary of their own because each changes or counts something of its whole process:
//! `host_signals` (a process-wide SIGTERM handler), `ignored_sigchld` (a process-wide signal
//! disposition) and `orphan_guard` (it counts this process's guard processes); `stress` is
//! the heavy suite behind the `stress` feature.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod arguments;
mod collector_model;
mod containment;
mod crash;
mod custom_executor;
mod env_policy;
#[path = "../support/escapees.rs"]
mod escapees;
mod executor;
mod job_tools;
mod lenient_args;
#[path = "../support/lossy.rs"]
mod lossy;
mod nothing_lost;
mod output_schemas;
mod reliability;
mod runtime_drivers;
mod sandbox;
mod scrub;
mod supervisor;
#[path = "../support/mod.rs"]
mod support;
mod tool;
mod windows;
