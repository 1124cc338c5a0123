//! Writing to stdout and stderr without panicking.
//!
//! `println!` panics when stdout fails: `dsh-agent run --json | head -c 10` would end in a
//! panic message and a backtrace, and `> /dev/full` in a panic too. Every write to stdout goes
//! through [`line()`] or [`text()`] instead. The first failure is remembered, later writes are
//! skipped, and [`closed`] fires, so the session stops starting commands and `main` ends the
//! program the Unix way: quietly with status 141 when the reader went away (`EPIPE`), with one
//! line on stderr and status 1 for any other failure (`ENOSPC` from `/dev/full`).

use std::io::{self, Write};
use std::sync::{LazyLock, OnceLock};
use tokio_util::sync::CancellationToken;

/// The first failure writing to stdout.
static FAILURE: OnceLock<io::Error> = OnceLock::new();
/// Fires at the first failure writing to stdout.
static CLOSED: LazyLock<CancellationToken> = LazyLock::new(CancellationToken::new);

/// The exit status for a stdout whose reader went away: what a shell reports for a process
/// killed by `SIGPIPE` (128 + 13), which Rust programs ignore.
pub(crate) const BROKEN_PIPE_STATUS: u8 = 141;

/// Stdout failed (or had failed before); the failure itself is in [`failure`].
#[derive(Debug)]
pub(crate) struct StdoutFailed;

/// Writes `text` and a newline to stdout, and flushes.
pub(crate) fn line(text: &str) -> Result<(), StdoutFailed> {
    write_all(&[text.as_bytes(), b"\n"])
}

/// Writes `text` to stdout as it is, and flushes.
pub(crate) fn text(text: &str) -> Result<(), StdoutFailed> {
    write_all(&[text.as_bytes()])
}

fn write_all(parts: &[&[u8]]) -> Result<(), StdoutFailed> {
    if CLOSED.is_cancelled() {
        return Err(StdoutFailed);
    }
    let mut stdout = io::stdout().lock();
    let written = parts
        .iter()
        .try_for_each(|part| stdout.write_all(part))
        .and_then(|()| stdout.flush());
    written.map_err(|error| {
        let _ = FAILURE.set(error);
        CLOSED.cancel();
        StdoutFailed
    })
}

/// Fires once a write to stdout has failed: nobody reads what the session prints any more.
pub(crate) fn closed() -> &'static CancellationToken {
    &CLOSED
}

/// The first failure writing to stdout, if any.
pub(crate) fn failure() -> Option<&'static io::Error> {
    FAILURE.get()
}

/// Writes one line to stderr. A failure is ignored: there is nowhere left to report it.
pub(crate) fn say(message: &str) {
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "{message}");
}
