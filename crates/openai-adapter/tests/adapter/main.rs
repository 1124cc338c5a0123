//! The adapter's integration tests, one binary: `stream` replays streams written from the
//! providers' documented formats, `hostile` answers as a hostile server would (odd headers,
//! bodies past every limit, keep-alives forever, HTML pages, odd ids and usage counts), and
//! `secrets` checks that the key never shows. `support` runs the server on 127.0.0.1. Each
//! test compares the whole sequence of events or the whole error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hostile;
mod secrets;
mod stream;
mod support;
