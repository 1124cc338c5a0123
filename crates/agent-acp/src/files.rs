//! The editor's files: the client's `fs/read_text_file` and `fs/write_text_file`, offered to a
//! session's host when the client advertised them in `initialize` (`clientCapabilities.fs`),
//! so that file tools read and write the editor's buffers, unsaved changes included.

use crate::rpc::Outbox;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the editor may take to answer one file request before the call fails: a file
/// request never waits for ever.
pub const EDITOR_FILE_TIMEOUT: Duration = Duration::from_secs(60);

/// Which of the client's file methods it advertised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClientFs {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

impl ClientFs {
    /// The `fs` capabilities of an `initialize` request's `clientCapabilities`; anything but
    /// `true` is not advertised.
    pub(crate) fn from_initialize(params: &Value) -> ClientFs {
        let fs = &params["clientCapabilities"]["fs"];
        ClientFs {
            read: fs["readTextFile"] == json!(true),
            write: fs["writeTextFile"] == json!(true),
        }
    }
}

/// The files of the editor behind one session: reads and writes go to the client as
/// `fs/read_text_file` and `fs/write_text_file` requests. Given to the host in
/// [`SessionSetup::editor_files`](crate::SessionSetup::editor_files) when the client offers at
/// least one of them.
#[derive(Clone)]
pub struct EditorFiles {
    outbox: Outbox,
    session_id: String,
    offered: ClientFs,
}

impl std::fmt::Debug for EditorFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EditorFiles")
            .field("session_id", &self.session_id)
            .field("read", &self.offered.read)
            .field("write", &self.offered.write)
            .finish_non_exhaustive()
    }
}

/// Why a request for the editor's file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditorFileError {
    /// The client did not advertise the method in `initialize`.
    #[error("the editor does not offer `{0}`")]
    NotOffered(&'static str),
    /// ACP file paths are absolute.
    #[error("the editor's files are named by absolute paths, not `{}`", .0.display())]
    Relative(PathBuf),
    /// The editor answered with an error, or the connection closed first.
    #[error("the editor failed `{method}` for `{}`: {message}", path.display())]
    Editor {
        /// The method asked.
        method: &'static str,
        /// The file.
        path: PathBuf,
        /// The editor's message.
        message: String,
    },
    /// The editor did not answer within [`EDITOR_FILE_TIMEOUT`].
    #[error("the editor did not answer `{method}` for `{}` within {} s", path.display(), EDITOR_FILE_TIMEOUT.as_secs())]
    TimedOut {
        /// The method asked.
        method: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The answer to a read carried no text `content`.
    #[error("the editor's answer to `fs/read_text_file` for `{}` has no text `content`", .0.display())]
    Malformed(PathBuf),
}

const READ: &str = "fs/read_text_file";
const WRITE: &str = "fs/write_text_file";

impl EditorFiles {
    /// The editor files of `session_id`, `None` when the client offers neither method.
    pub(crate) fn offered(outbox: Outbox, session_id: &str, offered: ClientFs) -> Option<Self> {
        (offered.read || offered.write).then(|| EditorFiles {
            outbox,
            session_id: session_id.to_owned(),
            offered,
        })
    }

    /// Whether the editor reads files for the agent (`fs.readTextFile`).
    pub fn can_read(&self) -> bool {
        self.offered.read
    }

    /// Whether the editor writes files for the agent (`fs.writeTextFile`).
    pub fn can_write(&self) -> bool {
        self.offered.write
    }

    /// The whole text of the file at `path` (absolute) as the editor has it: its buffer when
    /// it has the file open, unsaved changes included.
    pub async fn read_text_file(&self, path: &Path) -> Result<String, EditorFileError> {
        if !self.offered.read {
            return Err(EditorFileError::NotOffered(READ));
        }
        let answer = self.ask(READ, path, json!({})).await?;
        match answer.get("content").and_then(Value::as_str) {
            Some(content) => Ok(content.to_owned()),
            None => Err(EditorFileError::Malformed(path.to_owned())),
        }
    }

    /// Replaces the text of the file at `path` (absolute) with `content`, through the editor
    /// (which creates the file when it does not exist).
    pub async fn write_text_file(&self, path: &Path, content: &str) -> Result<(), EditorFileError> {
        if !self.offered.write {
            return Err(EditorFileError::NotOffered(WRITE));
        }
        self.ask(WRITE, path, json!({"content": content}))
            .await
            .map(drop)
    }

    async fn ask(
        &self,
        method: &'static str,
        path: &Path,
        mut params: Value,
    ) -> Result<Value, EditorFileError> {
        if !path.is_absolute() {
            return Err(EditorFileError::Relative(path.to_owned()));
        }
        params["sessionId"] = json!(self.session_id);
        params["path"] = json!(path.to_string_lossy());
        let asked = self.outbox.request(method, params);
        match tokio::time::timeout(EDITOR_FILE_TIMEOUT, asked).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(EditorFileError::Editor {
                method,
                path: path.to_owned(),
                message: error.message,
            }),
            Err(_) => Err(EditorFileError::TimedOut {
                method,
                path: path.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_true_capability_is_advertised() {
        let caps =
            |fs: Value| ClientFs::from_initialize(&json!({"clientCapabilities": {"fs": fs}}));
        assert_eq!(
            caps(json!({"readTextFile": true, "writeTextFile": false})),
            ClientFs {
                read: true,
                write: false
            }
        );
        assert_eq!(
            caps(json!({"readTextFile": "yes", "writeTextFile": 1})),
            ClientFs::default()
        );
        assert_eq!(ClientFs::from_initialize(&json!({})), ClientFs::default());
    }
}
