//! The presenters' integration tests, in one binary (each file of `tests/` would link the whole
//! graph again): `cards` (the presenter functions of the built-in tools), `markers` (the shell
//! output markers), `render` (the text rendering), `wire` (the cards' wire form) and
//! `boundaries` (the crate's purity). `support` holds the card fixtures and strategies they
//! share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod boundaries;
mod cards;
mod markers;
mod render;
#[path = "../support/mod.rs"]
mod support;
mod wire;
