//! Every overwritten byte recoverable: the changes `write` and `edit` made in a session, each
//! with the file's content before and after it, kept in a directory of the session's
//! ([`FileHistory`]), and undone one at a time, never over a later change.
//!
//! The directory holds `index.jsonl` (one line per change, and one per undo) and `blobs/`, the
//! contents by their SHA-256, so a file edited ten times keeps each version once.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The history of one session's file changes, in `dir` (made when the first change is
/// recorded).
#[derive(Debug)]
pub struct FileHistory {
    dir: PathBuf,
    /// Serialises the appends to the index, so numbers are given once; holds the last number
    /// given, read from the index at the first change (not again at every one).
    writing: Mutex<Option<u64>>,
}

/// One recorded change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Its number in the session, from 1.
    pub change: u64,
    /// The tool that made it (`write`, `edit`).
    pub tool: String,
    /// The file, absolute.
    pub path: PathBuf,
    /// The SHA-256 of the content before (hex); `None` when the change created the file.
    pub before: Option<String>,
    /// The SHA-256 of the content the change left (hex).
    pub after: String,
    /// Whether it was undone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
}

/// A line of the index: a change, or the undoing of one.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Undo { undo: u64 },
    Change(Change),
}

/// What went wrong with the history.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The history could not be read or written.
    #[error("the file history in {}: {source}", dir.display())]
    Io {
        /// The history's directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A line of the index is not a change.
    #[error("the file history in {} has a bad line {line}: {why}", dir.display())]
    Corrupt {
        /// The history's directory.
        dir: PathBuf,
        /// Its number, from 1.
        line: usize,
        /// Why it does not read.
        why: String,
    },
    /// No change has that number, or nothing is left to undo.
    #[error("{0}")]
    NoSuchChange(String),
    /// The change was undone already.
    #[error("change {0} was undone already")]
    AlreadyUndone(u64),
    /// The file changed after the change: undoing it would lose that. The difference from
    /// what the change left to what is there now is given.
    #[error(
        "{} changed after change {change}; undoing it would lose that, so it is left as it is. \
         What changed since:\n{difference}",
        path.display()
    )]
    ChangedSince {
        /// The change.
        change: u64,
        /// The file.
        path: PathBuf,
        /// A unified diff from what the change left to the file now.
        difference: String,
    },
}

/// The SHA-256 of `bytes`, in hex.
pub fn content_hash(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = Sha256::digest(bytes);
    digest
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

impl FileHistory {
    /// The history kept in `dir`. One session has one `FileHistory` (it numbers the changes
    /// it records); another opened on the same directory meanwhile would give the same numbers.
    pub fn new(dir: impl Into<PathBuf>) -> FileHistory {
        FileHistory {
            dir: dir.into(),
            writing: Mutex::new(None),
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self) -> impl FnOnce(std::io::Error) -> HistoryError + '_ {
        |source| HistoryError::Io {
            dir: self.dir.clone(),
            source,
        }
    }

    /// Saves `bytes` under its hash, once.
    fn keep(&self, bytes: &[u8]) -> Result<String, HistoryError> {
        let hash = content_hash(bytes);
        let blobs = self.dir.join("blobs");
        let path = blobs.join(&hash);
        if path.exists() {
            return Ok(hash);
        }
        std::fs::create_dir_all(&blobs).map_err(self.io())?;
        let mut file = tempfile::NamedTempFile::new_in(&blobs).map_err(self.io())?;
        file.write_all(bytes).map_err(self.io())?;
        file.as_file().sync_all().map_err(self.io())?;
        file.persist(&path).map_err(|e| (self.io())(e.error))?;
        Ok(hash)
    }

    fn append(&self, line: &Line) -> Result<(), HistoryError> {
        let mut text = serde_json::to_string(line).map_err(|e| (self.io())(e.into()))?;
        text.push('\n');
        let mut index = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("index.jsonl"))
            .map_err(self.io())?;
        index.write_all(text.as_bytes()).map_err(self.io())?;
        index.sync_data().map_err(self.io())
    }

    /// Records that `tool` replaced the content of `path` (`before`, `None` for a file it
    /// created) with `after`, keeping both; the change's number.
    pub fn record(
        &self,
        tool: &str,
        path: &Path,
        before: Option<&[u8]>,
        after: &[u8],
    ) -> Result<u64, HistoryError> {
        let mut last = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        std::fs::create_dir_all(&self.dir).map_err(self.io())?;
        let before = before.map(|bytes| self.keep(bytes)).transpose()?;
        let after = self.keep(after)?;
        let given = match *last {
            Some(given) => given,
            None => self.read()?.iter().map(|c| c.change).max().unwrap_or(0),
        };
        let change = given + 1;
        self.append(&Line::Change(Change {
            change,
            tool: tool.to_owned(),
            path: path.to_owned(),
            before,
            after,
            undone: false,
        }))?;
        *last = Some(change);
        Ok(change)
    }

    /// Every change, in order, each marked when it was undone; none when nothing was
    /// recorded.
    pub fn list(&self) -> Result<Vec<Change>, HistoryError> {
        self.read()
    }

    fn read(&self) -> Result<Vec<Change>, HistoryError> {
        let text = match std::fs::read_to_string(self.dir.join("index.jsonl")) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err((self.io())(e)),
        };
        let mut changes: Vec<Change> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let corrupt = |why: String| HistoryError::Corrupt {
                dir: self.dir.clone(),
                line: n + 1,
                why,
            };
            match serde_json::from_str::<Line>(line).map_err(|e| corrupt(e.to_string()))? {
                Line::Change(change) => changes.push(change),
                Line::Undo { undo } => match changes.iter_mut().find(|c| c.change == undo) {
                    Some(change) => change.undone = true,
                    None => return Err(corrupt(format!("an undo of no change ({undo})"))),
                },
            }
        }
        Ok(changes)
    }

    /// A kept content.
    pub fn content(&self, hash: &str) -> Result<Vec<u8>, HistoryError> {
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(HistoryError::NoSuchChange(format!("no content {hash}")));
        }
        std::fs::read(self.dir.join("blobs").join(hash)).map_err(self.io())
    }

    /// Undoes change `number`, or the last change not undone: puts the content back that the
    /// file had before it (removes the file it created), unless the file changed after it;
    /// the change undone.
    pub fn undo(&self, number: Option<u64>) -> Result<Change, HistoryError> {
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let changes = self.read()?;
        let change = match number {
            Some(n) => changes
                .iter()
                .find(|c| c.change == n)
                .ok_or_else(|| HistoryError::NoSuchChange(format!("no change {n}")))?,
            None => changes.iter().rev().find(|c| !c.undone).ok_or_else(|| {
                HistoryError::NoSuchChange(String::from("no change is left to undo"))
            })?,
        };
        if change.undone {
            return Err(HistoryError::AlreadyUndone(change.change));
        }
        let left = self.content(&change.after)?;
        let now = match std::fs::read(&change.path) {
            Ok(now) => Some(now),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err((self.io())(e)),
        };
        if now.as_deref() != Some(left.as_slice()) {
            return Err(HistoryError::ChangedSince {
                change: change.change,
                path: change.path.clone(),
                difference: difference(&left, now.as_deref()),
            });
        }
        match &change.before {
            None => std::fs::remove_file(&change.path).map_err(self.io())?,
            Some(hash) => {
                let before = self.content(hash)?;
                put_back(&change.path, &before).map_err(self.io())?;
            }
        }
        self.append(&Line::Undo {
            undo: change.change,
        })?;
        let mut undone = change.clone();
        undone.undone = true;
        Ok(undone)
    }
}

/// A unified diff from what a change left to what the file holds now (`None`: removed).
fn difference(left: &[u8], now: Option<&[u8]>) -> String {
    let Some(now) = now else {
        return String::from("(the file was removed)\n");
    };
    let (left, now) = (String::from_utf8_lossy(left), String::from_utf8_lossy(now));
    similar::TextDiff::from_lines(left.as_ref(), now.as_ref())
        .unified_diff()
        .header("left by the change", "now")
        .to_string()
}

/// Replaces `path`'s content with `bytes` atomically, keeping its permissions.
fn put_back(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let permissions = std::fs::metadata(path)?.permissions();
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().set_permissions(permissions)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_change_is_undone_to_the_bytes_before_it_and_a_created_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let history = FileHistory::new(dir.path().join("changes"));
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "one\r\ntwo").unwrap();
        std::fs::write(&file, "one\r\n2").unwrap();
        assert_eq!(
            history
                .record("edit", &file, Some(b"one\r\ntwo"), b"one\r\n2")
                .unwrap(),
            1
        );
        let made = dir.path().join("b.txt");
        std::fs::write(&made, "new").unwrap();
        assert_eq!(history.record("write", &made, None, b"new").unwrap(), 2);

        let undone = history.undo(None).unwrap();
        assert_eq!((undone.change, undone.undone), (2, true));
        assert!(!made.exists(), "the file the change created is gone");
        assert_eq!(history.undo(None).unwrap().change, 1);
        assert_eq!(std::fs::read(&file).unwrap(), b"one\r\ntwo");
        assert!(matches!(
            history.undo(None),
            Err(HistoryError::NoSuchChange(_))
        ));
        assert!(matches!(
            history.undo(Some(1)),
            Err(HistoryError::AlreadyUndone(1))
        ));
        let listed = history.list().unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|c| c.undone));
    }

    #[test]
    fn a_file_changed_after_the_change_is_left_alone_with_the_difference_shown() {
        let dir = tempfile::tempdir().unwrap();
        let history = FileHistory::new(dir.path().join("changes"));
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "after\n").unwrap();
        history
            .record("write", &file, Some(b"before\n"), b"after\n")
            .unwrap();
        std::fs::write(&file, "after\nand more\n").unwrap();
        let refused = history.undo(Some(1)).unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("changed after change 1"), "{text}");
        assert!(text.contains("+and more"), "{text}");
        assert_eq!(std::fs::read(&file).unwrap(), b"after\nand more\n");
        assert!(!history.list().unwrap()[0].undone);
    }

    #[test]
    fn each_version_is_kept_once_and_a_bad_index_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let history = FileHistory::new(dir.path().join("changes"));
        let file = dir.path().join("a.txt");
        history.record("edit", &file, Some(b"v1"), b"v2").unwrap();
        history.record("edit", &file, Some(b"v2"), b"v3").unwrap();
        let blobs = std::fs::read_dir(history.dir().join("blobs"))
            .unwrap()
            .count();
        assert_eq!(blobs, 3);
        // A history opened again on the same directory numbers on from its index.
        let again = FileHistory::new(history.dir());
        assert_eq!(again.record("edit", &file, Some(b"v3"), b"v4").unwrap(), 3);
        assert_eq!(again.record("edit", &file, Some(b"v4"), b"v5").unwrap(), 4);
        let mut index = std::fs::OpenOptions::new()
            .append(true)
            .open(history.dir().join("index.jsonl"))
            .unwrap();
        index.write_all(b"not json\n").unwrap();
        assert!(matches!(
            history.list(),
            Err(HistoryError::Corrupt { line: 5, .. })
        ));
        assert!(matches!(
            history.content("../../etc/passwd"),
            Err(HistoryError::NoSuchChange(_))
        ));
    }
}
