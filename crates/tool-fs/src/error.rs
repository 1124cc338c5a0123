//! The file tools' failures, each in words the model can act on.

use dsh_tools::ToolError;
use std::path::PathBuf;

/// Why a file tool could not do its work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A file tool was pointed at a directory.
    #[error(
        "{} is a directory, not a file; list its files with `glob` (path: \"{}\", pattern: \"*\")",
        .0.display(),
        .0.display()
    )]
    IsDirectory(PathBuf),
    /// The file is not UTF-8 text.
    #[error(
        "{} looks like a binary file ({why}); the file tools read UTF-8 text only. Inspect it with `bash` (`file`, `xxd | head`)",
        path.display()
    )]
    Binary {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        why: String,
    },
    /// The file is over a size limit.
    #[error("{0}")]
    TooLarge(String),
    /// The policy does not allow the write.
    #[error(
        "refused: writing {} is not allowed by the sandbox policy {policy}; the file was not changed. Write beneath an allowed directory; a write outside it needs the user's approval, which was asked for where the host can ask",
        path.display()
    )]
    Refused {
        /// The file.
        path: PathBuf,
        /// The policy, as shown.
        policy: String,
    },
    /// The file changed, or was never read, before a write or edit.
    #[error("{0}")]
    Stale(String),
    /// An edit's `old_string` was not found, or found too often.
    #[error("{0}")]
    Edit(String),
    /// The previous content could not be kept, so the file was not changed.
    #[error("the file was not changed: its previous content could not be kept ({0})")]
    History(#[from] crate::history::HistoryError),
    /// Any other I/O failure.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl FsError {
    /// An I/O failure while doing `what` to `path`.
    pub(crate) fn io(
        what: &'static str,
        path: &std::path::Path,
        source: std::io::Error,
    ) -> FsError {
        FsError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<FsError> for ToolError {
    fn from(error: FsError) -> ToolError {
        ToolError::from_error(error)
    }
}
