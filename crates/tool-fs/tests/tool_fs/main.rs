//! The integration tests of `tool-fs`, in one binary: every tool through a `ToolRegistry`, one
//! module per area, `support` holding the fixture they share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod arguments;
mod cards;
mod confinement;
mod history;
mod hostile;
mod property;
mod read;
mod search;
mod stale;
mod support;
mod write_edit;
