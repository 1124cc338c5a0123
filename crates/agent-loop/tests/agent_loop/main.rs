//! The agent loop's integration tests, in one binary (each file of `tests/` would link the whole
//! graph again): `turns` (assembly, injected context, cancellation, errors and endings),
//! `scheduling` (a message's calls through the loop), `sessions` (logs, replay, resume, job
//! wake-ups and the pairing property), `promises` (what the loop promises the model and the
//! host) and `store` (the session store). `support` is what they share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod promises;
mod scheduling;
mod sessions;
mod store;
#[path = "../support/mod.rs"]
mod support;
mod turns;
