//! [`StoreError`], why a store operation failed, and the helpers that make one.

use super::Refusal;
use crate::log::LogReadError;
use std::io;
use std::path::{Path, PathBuf};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another live process holds the session.
    #[error("session {id} is in use by PID {pid}")]
    SessionInUse {
        /// The session.
        id: String,
        /// The process holding it.
        pid: u32,
    },
    /// No such session.
    #[error("no session {id} in {}", root.display())]
    NotFound {
        /// The id asked for.
        id: String,
        /// The store's directory.
        root: PathBuf,
    },
    /// The text cannot be a session id (ids are letters, digits, `.`, `_` and `-`, not
    /// starting with `.`).
    #[error("`{id}` is not a session id")]
    InvalidId {
        /// The text given.
        id: String,
    },
    /// A file or directory of the store could not be used.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The event log could not be read.
    #[error("cannot read the log of session {id}: {source}")]
    Log {
        /// The session.
        id: String,
        /// Why.
        source: LogReadError,
    },
    /// Something in a place of the store is not what the store keeps there: a symbolic link
    /// (none is followed), another kind of entry, one owned by another user, or a directory
    /// other users may write. It is left as it is.
    #[error("{}: {reason}{}", path.display(), fix_text(reason, path))]
    Refused {
        /// The file or directory.
        path: PathBuf,
        /// Why it is not used.
        reason: Refusal,
    },
    /// The log ends in more bytes without a newline than one line may hold
    /// ([`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES)): not a line torn by a crash, so nothing is
    /// cut and the session is not resumed.
    #[error(
        "cannot resume session {id}: {} ends in more than {limit} bytes without a newline, more \
         than any log line holds, so it is not a line torn by a crash; the log is left as it is",
        path.display()
    )]
    UnendedTail {
        /// The session.
        id: String,
        /// Its log.
        path: PathBuf,
        /// The longest line a log holds, in bytes.
        limit: usize,
    },
    /// A spill file could not be copied into a fork.
    #[error("cannot copy {} to {}: {source}", from.display(), to.display())]
    Copy {
        /// The parent's spill file.
        from: PathBuf,
        /// The fork's copy.
        to: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The fix a refusal names, as the end of its message.
fn fix_text(reason: &Refusal, path: &Path) -> String {
    reason
        .fix(path)
        .map(|fix| format!(": {fix}"))
        .unwrap_or_default()
}

pub(super) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}
