//! The stale-read guard and the per-file order of calls.
//!
//! `write` and `edit` may change an existing file only when this plugin (one session) read it
//! with `read`, or wrote it, and it has not changed since: the same size, modification time and
//! content hash. Calls on one file take its lock first, so they run one after another.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What a file was when this session last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) size: u64,
    pub(crate) modified: Option<SystemTime>,
    pub(crate) hash: u64,
}

impl Stamp {
    /// The stamp of a file whose metadata is `metadata` and whose content hashed to `hash`.
    pub(crate) fn new(metadata: &std::fs::Metadata, hash: u64) -> Stamp {
        Stamp {
            size: metadata.len(),
            modified: metadata.modified().ok(),
            hash,
        }
    }
}

/// A streaming content hash (not cryptographic: it tells a change, not an adversary).
#[derive(Debug, Default)]
pub(crate) struct ContentHash(DefaultHasher);

impl ContentHash {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0.finish()
    }

    pub(crate) fn of(bytes: &[u8]) -> u64 {
        let mut hash = ContentHash::default();
        hash.update(bytes);
        hash.finish()
    }
}

/// The files this session has seen, and the locks that order calls on each.
#[derive(Debug, Default)]
pub(crate) struct Guard {
    seen: Mutex<HashMap<PathBuf, Stamp>>,
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

/// The key of a file: its canonical path when it exists, so two spellings are one file.
pub(crate) fn key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Guard {
    /// The lock of the file at `key`.
    pub(crate) fn lock(&self, key: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(key.to_path_buf()).or_default())
    }

    /// Records what the file at `key` is now.
    pub(crate) fn record(&self, key: &Path, stamp: Stamp) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(key.to_path_buf(), stamp);
    }

    /// Refuses a change of an existing file this session has not seen as it is now.
    pub(crate) fn check(&self, key: &Path, shown: &Path, now: Stamp) -> Result<(), String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get(key) {
            None => Err(format!(
                "{} exists and has not been read in this session; read it with `read` first, then write or edit it",
                shown.display()
            )),
            Some(before) if *before != now => Err(format!(
                "{} has changed since it was last read (its {} differ); read it again with `read`, then repeat the change on what it holds now",
                shown.display(),
                if before.size != now.size {
                    "size and content"
                } else if before.hash != now.hash {
                    "contents"
                } else {
                    "modification times"
                }
            )),
            Some(_) => Ok(()),
        }
    }
}
