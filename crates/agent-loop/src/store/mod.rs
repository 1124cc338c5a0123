//! Sessions that outlive the process: a [`SessionStore`] keeps each session's event log and
//! spill files together, one writer at a time, so a session can be listed, resumed, forked
//! and pruned later. [`FsSessionStore`] is the file-system implementation.
//!
//! A session directory (`0700`) holds:
//!
//! - `session.json`: the id, when it started, its working directory, and the session it was
//!   forked from;
//! - `events.jsonl`: the append-only event log (`0600`), one [`EventRecord`] per line;
//! - `spill/`: the spill directory (`0700`, files `0600`) to point the shell executor at, so
//!   the `full output` paths given to the model stay valid after the process exits;
//! - `lock`: the writer's lock, naming its PID.
//!
//! What the store holds is untrusted input like any other, so:
//!
//! - nothing beneath the root is opened through a symbolic link: each name is opened with
//!   `O_NOFOLLOW` relative to the handle of the directory holding it, and a link, a FIFO or
//!   another kind of entry where a file or directory of the store belongs is refused
//!   ([`StoreError::Refused`], naming the path and why). The root's own path may pass through
//!   links (it is the user's choice);
//! - what another user owns, and a directory its group or others may write (the root
//!   included), is refused with the fix named (`chmod go-w PATH`); a file of ours that others
//!   could read or write is set back to `0600` by a resume once everything is checked, never
//!   by a read-only look (list, a fork reading its parent);
//! - `events.jsonl`, `lock` and `session.json` must be the only names of their files: one
//!   with a hard link elsewhere (`ln` done instead of `ln -s`) is refused
//!   ([`Refusal::HardLinks`]), so the store never truncates, appends to or `chmod`s a file
//!   outside it. Spill files may have several names (a fork links them) and are only read;
//! - [`SessionStore::resume`] checks `session.json`, `spill/` and `events.jsonl` read-only,
//!   reads the log, and only then takes the lock, makes files private, creates what is
//!   missing and cuts a torn last line, which it cuts only when it is at most
//!   [`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES) long (a longer unended tail is no line a writer
//!   wrote: [`StoreError::UnendedTail`]); a refusal or a read error leaves every file as it
//!   was (no lock file, no spill directory, no mode changed);
//! - the [`SessionLease`] carries the log open as checked, and
//!   [`AgentBuilder::session_log`](crate::AgentBuilder::session_log) writes to that file, so
//!   nothing reopens it by a name that may have been replaced since;
//! - [`SessionStore::fork`] copies only what the store made: the log's events and the
//!   parent's regular spill files (linked, or copied); any other entry of the spill directory
//!   (a sandbox's leftover temporary directory, a link, a FIFO, another user's file) is left
//!   out with a warning; a spill file others could read is copied (`0600`) rather than
//!   linked. A fork that fails removes the session it was making, and
//!   [`SessionLease::discard`] (or [`SessionLease::set_discard_on_drop`]) removes a created or
//!   forked session that never started.

mod disk;
mod error;
mod info;
mod lease;
mod location;
mod lock;
mod opening;

pub use disk::Refusal;
use disk::{DirHow, FileHow, Kind, StoreDir, Tail, count_lines, find_tail, make_private};
pub use error::StoreError;
use error::io_error;
pub use lease::SessionLease;
pub use location::PRUNE_AT_START_MAX;
use lock::lock_session;
pub use opening::{OpenedSession, SessionStart};

use crate::event::{EventRecord, SessionEvent};
use crate::log::{LogLines, LogReadError, MAX_LINE_BYTES, SessionLog, log_line};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The event log's file name in a session directory.
pub const EVENTS_FILE: &str = "events.jsonl";
/// The spill directory's name in a session directory.
pub const SPILL_DIR: &str = "spill";
const META_FILE: &str = "session.json";
const LOCK_FILE: &str = "lock";
/// The most of `session.json` that is read: what the store writes there is a few hundred
/// bytes.
const META_MAX_BYTES: u64 = 64 * 1024;

/// A session opened to carry on: the lease, the log as read, and what was dropped from it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ResumedSession {
    /// The session, locked.
    pub lease: SessionLease,
    /// The events so far (give them to [`AgentBuilder::resume`](crate::AgentBuilder::resume)).
    pub log: SessionLog,
    /// A torn last line (the writer died mid-line) cut from the file, so appending starts on
    /// a line of its own.
    pub torn_tail: Option<TornTail>,
}

/// The part of a last line cut from a log because the writer died while writing it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TornTail {
    /// Its 1-based line number.
    pub line: usize,
    /// How many bytes were dropped.
    pub bytes: u64,
}

/// Whether a session is live, and how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionState {
    /// A live process holds it.
    Running,
    /// It ended normally (`session/end`, completed or failed).
    Ended,
    /// A signal ended it (`session/end`, interrupted).
    Interrupted,
    /// Its process died without ending it (no `session/end` last, no live holder).
    Crashed,
    /// Its log could not be read; [`SessionInfo::problem`] says why.
    Unreadable,
}

impl SessionState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Ended => "ended",
            SessionState::Interrupted => "interrupted",
            SessionState::Crashed => "crashed",
            SessionState::Unreadable => "unreadable",
        }
    }
}

/// What [`SessionStore::list`] tells about a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionInfo {
    /// The id.
    pub id: String,
    /// When it started (RFC 3339, UTC).
    pub started: String,
    /// Its working directory.
    pub cwd: String,
    /// How many turns ended in it.
    pub turns: u64,
    /// When its log last changed (RFC 3339, UTC).
    pub last_activity: String,
    /// The bytes its directory holds (log and spill files).
    pub size_bytes: u64,
    /// Whether it is live, and how it ended.
    pub state: SessionState,
    /// The session it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// Why its log could not be read (its state is then `unreadable`, and its turns and start
    /// are what could be read before the failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Which sessions [`SessionStore::prune`] removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrunePolicy {
    /// Sessions whose last activity is older than this go.
    pub older_than: Duration,
    /// At most this many are removed in one call (the rest wait for the next), so a prune at
    /// start-up costs little however many sessions piled up.
    pub max_removals: usize,
}

impl PrunePolicy {
    /// Every session idle for longer than `older_than`.
    pub fn older_than(older_than: Duration) -> PrunePolicy {
        PrunePolicy {
            older_than,
            max_removals: usize::MAX,
        }
    }

    /// At most `n` removals.
    #[must_use]
    pub fn at_most(mut self, n: usize) -> PrunePolicy {
        self.max_removals = n;
        self
    }
}

/// What a prune did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PruneReport {
    /// The sessions removed, oldest first.
    pub removed: Vec<String>,
    /// Old enough, but in use by a live process: kept.
    pub in_use: Vec<String>,
    /// Old enough, but left for a later prune by [`PrunePolicy::max_removals`].
    pub deferred: usize,
}

/// Where sessions are kept. Small and object-safe, so a host can keep sessions elsewhere;
/// [`FsSessionStore`] keeps them in directories. Every method that returns a
/// [`SessionLease`] locks the session for this process ([`StoreError::SessionInUse`] when a
/// live process holds it).
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// Creates a new session, working in `cwd`.
    fn create(&self, cwd: &Path) -> Result<SessionLease, StoreError>;

    /// Opens session `id` to carry on: locks it, cuts a torn last line, reads its log.
    fn resume(&self, id: &str) -> Result<ResumedSession, StoreError>;

    /// Creates a new session seeded with the history of `id` (which is only read). The seeded
    /// spill locators stay readable whatever becomes of `id`; later spills are the fork's own.
    fn fork(&self, id: &str) -> Result<ResumedSession, StoreError>;

    /// Every session, oldest first. A session whose log cannot be read is listed as
    /// [`SessionState::Unreadable`] with the reason; only a root that cannot be read fails the
    /// listing.
    fn list(&self) -> Result<Vec<SessionInfo>, StoreError>;

    /// Removes the sessions idle for longer than the policy says, oldest first, never one in
    /// use.
    fn prune(&self, policy: PrunePolicy) -> Result<PruneReport, StoreError>;

    /// Opens the session a run writes to: [`SessionStore::create`]s a new one, or
    /// [`SessionStore::resume`]s or [`SessionStore::fork`]s one as `start` says.
    fn open(&self, start: &SessionStart, cwd: &Path) -> Result<OpenedSession, StoreError> {
        opening::open(self, start, cwd)
    }
}

/// What `session.json` says.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    id: String,
    started: String,
    cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forked_from: Option<String>,
}

/// The file-system session store: one directory per session under a root (see the module
/// docs for the layout). Directories are `0700` and files `0600`; nothing beneath the root is
/// opened through a symbolic link, and what is not a plain file or directory of this user, or
/// is a directory other users may write, is refused ([`StoreError::Refused`]).
#[derive(Clone, Debug)]
pub struct FsSessionStore {
    root: PathBuf,
}

/// A session directory just made, with its log open.
struct Made {
    lease: SessionLease,
    dir: StoreDir,
    log: File,
}

impl FsSessionStore {
    /// A store under `root` (created, `0700`, on first use).
    pub fn new(root: impl Into<PathBuf>) -> FsSessionStore {
        FsSessionStore { root: root.into() }
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of session `id`.
    pub fn session_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        check_id(id)?;
        Ok(self.root.join(id))
    }

    fn not_found(&self, id: &str) -> StoreError {
        StoreError::NotFound {
            id: id.to_owned(),
            root: self.root.clone(),
        }
    }

    /// The directory of an existing session, opened and checked.
    fn existing(&self, id: &str) -> Result<StoreDir, StoreError> {
        check_id(id)?;
        let root = StoreDir::root(&self.root, false)?.ok_or_else(|| self.not_found(id))?;
        let dir = root
            .dir(id, DirHow::Existing)?
            .ok_or_else(|| self.not_found(id))?;
        if !is_session(&dir) {
            return Err(self.not_found(id));
        }
        Ok(dir)
    }

    /// Makes a fresh session directory, locked, with its metadata, an empty log and a spill
    /// directory. What it made is removed again when a step fails.
    fn make(&self, cwd: &Path, forked_from: Option<&str>) -> Result<Made, StoreError> {
        let root = StoreDir::root(&self.root, true)?.ok_or_else(|| self.not_found(""))?;
        let (id, dir) = loop {
            let id = fresh_id();
            match root.dir(&id, DirHow::CreateNew) {
                Ok(Some(dir)) => break (id, dir),
                // Another process (or thread) took the name in the same millisecond.
                Err(StoreError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists => {}
                Ok(None) => return Err(self.not_found(&id)),
                Err(error) => return Err(error),
            }
        };
        let filled = (|| {
            let hold = lock_session(&id, &dir)?;
            let meta = Meta {
                id: id.clone(),
                started: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
                cwd: cwd.display().to_string(),
                forked_from: forked_from.map(str::to_owned),
            };
            let meta_path = dir.join(META_FILE);
            let text = serde_json::to_string(&meta).unwrap_or_else(|_| String::from("{}"));
            created(&dir, META_FILE)?
                .write_all(text.as_bytes())
                .map_err(io_error(&meta_path))?;
            let log = created(&dir, EVENTS_FILE)?;
            dir.dir(SPILL_DIR, DirHow::CreateNew)?;
            Ok((hold, log))
        })();
        match filled {
            Ok((hold, log)) => {
                let handed = log.try_clone().map_err(io_error(&dir.join(EVENTS_FILE)));
                let handed = match handed {
                    Ok(handed) => handed,
                    Err(error) => {
                        remove_made(&dir);
                        return Err(error);
                    }
                };
                Ok(Made {
                    lease: SessionLease::new(
                        id,
                        dir.join(EVENTS_FILE),
                        dir.join(SPILL_DIR),
                        Box::new(hold),
                    )
                    .with_log_file(handed)
                    .made_in(dir.path().to_owned()),
                    dir,
                    log,
                })
            }
            Err(error) => {
                remove_made(&dir);
                Err(error)
            }
        }
    }

    /// The root, and the session ids under it, sorted (ids sort by creation time): the
    /// directories (not links to one) whose names are ids.
    fn ids(&self) -> Result<Option<(StoreDir, Vec<String>)>, StoreError> {
        let Some(root) = StoreDir::root(&self.root, false)? else {
            return Ok(None);
        };
        let mut ids: Vec<String> = root
            .entries()?
            .into_iter()
            .filter(|(name, kind)| *kind == Some(Kind::Dir) && check_id(name).is_ok())
            .map(|(name, _)| name)
            .collect();
        ids.sort();
        Ok(Some((root, ids)))
    }

    /// Seeds a fork made as `made` with the parent's spill files and events.
    fn seed(
        &self,
        parent: &StoreDir,
        made: &mut Made,
        events: Vec<EventRecord>,
    ) -> Result<SessionLog, StoreError> {
        let to = made
            .dir
            .dir(SPILL_DIR, DirHow::Existing)?
            .ok_or_else(|| io_error(made.lease.spill_dir())(io::ErrorKind::NotFound.into()))?;
        // The parent's spill files, linked (copied where links fail) into the fork's spill
        // directory, and the seeded events pointing there: removing the parent later leaves
        // the fork's locators readable. Only the regular files of this user are the store's;
        // anything else (a directory such as a sandbox's leftover temporary one, a link, a
        // FIFO, another user's file) is left out.
        if let Some(from) = parent.dir(SPILL_DIR, DirHow::Existing)? {
            for (name, kind) in from.entries()? {
                if kind != Some(Kind::File) {
                    tracing::warn!(
                        path = %from.join(&name).display(),
                        "not a spill file of the store; the fork leaves it out"
                    );
                    continue;
                }
                let source = match from.file(&name, FileHow::ReadLinked) {
                    Ok(Some(source)) => source,
                    Ok(None) => continue,
                    Err(error @ StoreError::Refused { .. }) => {
                        tracing::warn!("{error}; the fork leaves it out");
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                to.take_file(&from, &name, &source)?;
            }
        }
        let escaped = |dir: &Path| {
            let text = serde_json::to_string(&format!("{}/", dir.display())).unwrap_or_default();
            text.trim_matches('"').to_owned()
        };
        let old_prefix = escaped(&parent.join(SPILL_DIR));
        let new_prefix = escaped(made.lease.spill_dir());
        let mut seeded = SessionLog::default();
        let mut text = String::new();
        for mut record in events {
            match &mut record.event {
                // The parent's end is not the fork's.
                SessionEvent::SessionEnd { .. } => continue,
                SessionEvent::SessionStart { session_id, .. } => {
                    made.lease.id().clone_into(session_id);
                }
                _ => {}
            }
            let line = record.to_json_line().replace(&old_prefix, &new_prefix);
            let Ok(record) = EventRecord::from_json_line(&line) else {
                continue;
            };
            // A longer spill path can make a line longer: bounded like every line written.
            text.push_str(&log_line(&record));
            text.push('\n');
            seeded.events.push(record);
        }
        made.log
            .write_all(text.as_bytes())
            .map_err(io_error(made.lease.log_path()))?;
        Ok(seeded)
    }
}

impl SessionStore for FsSessionStore {
    fn create(&self, cwd: &Path) -> Result<SessionLease, StoreError> {
        self.make(cwd, None).map(|made| made.lease)
    }

    fn resume(&self, id: &str) -> Result<ResumedSession, StoreError> {
        let dir = self.existing(id)?;
        // Everything is checked, read-only, before anything changes: a refusal leaves every
        // file as it was (no lock made, no spill directory, no mode changed).
        let (_, meta) = read_meta(&dir)?;
        dir.dir(SPILL_DIR, DirHow::Existing)?;
        let log_path = dir.join(EVENTS_FILE);
        let found = dir.file(EVENTS_FILE, FileHow::Append)?;
        let mut read = match &found {
            Some(file) => Some(read_to_tail(id, file, &log_path)?),
            None => None,
        };
        let hold = lock_session(id, &dir)?;
        let file = match found {
            Some(file) => {
                // Read before the lock: a writer that appended before letting go changed it,
                // and it is read again, now that no one else may write it.
                let len = file.metadata().map_err(io_error(&log_path))?.len();
                if read.as_ref().is_none_or(|read| read.len != len) {
                    read = Some(read_to_tail(id, &file, &log_path)?);
                }
                file
            }
            None => created(&dir, EVENTS_FILE)?,
        };
        make_private(&file, &log_path)?;
        if let Some(meta) = &meta {
            make_private(meta, &dir.join(META_FILE))?;
        }
        dir.dir(SPILL_DIR, DirHow::Ensure)?;
        let (log, torn_tail) = match read {
            Some(ReadLog { log, len, end }) if end < len => {
                // Only a log read whole loses its torn line, so appending starts on a line of
                // its own.
                let line = count_lines(&file, end).map_err(io_error(&log_path))? + 1;
                file.set_len(end).map_err(io_error(&log_path))?;
                tracing::debug!(log = %log_path.display(), bytes = len - end, "cut a torn last line");
                let torn = TornTail {
                    line,
                    bytes: len - end,
                };
                (log, Some(torn))
            }
            Some(ReadLog { log, .. }) => (log, None),
            None => (SessionLog::default(), None),
        };
        let lease = SessionLease::new(id, log_path, dir.join(SPILL_DIR), Box::new(hold))
            .with_log_file(file);
        Ok(ResumedSession {
            lease,
            log,
            torn_tail,
        })
    }

    fn fork(&self, id: &str) -> Result<ResumedSession, StoreError> {
        let parent = self.existing(id)?;
        read_meta(&parent)?;
        let parent_log = match parent.file(EVENTS_FILE, FileHow::Read)? {
            Some(file) => read_log(id, &file, u64::MAX)?,
            None => SessionLog::default(),
        };
        let cwd = parent_log
            .events
            .iter()
            .find_map(|record| match &record.event {
                SessionEvent::SessionStart { cwd, .. } => Some(PathBuf::from(cwd)),
                _ => None,
            })
            .unwrap_or_default();
        let mut made = self.make(&cwd, Some(id))?;
        match self.seed(&parent, &mut made, parent_log.events) {
            Ok(log) => Ok(ResumedSession {
                lease: made.lease,
                log,
                torn_tail: None,
            }),
            Err(error) => {
                // Removed while still locked: a failed fork leaves no session behind.
                remove_made(&made.dir);
                Err(error)
            }
        }
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let Some((root, ids)) = self.ids()? else {
            return Ok(Vec::new());
        };
        let mut sessions = Vec::new();
        for id in ids {
            match root.dir(&id, DirHow::Existing) {
                Ok(Some(dir)) if is_session(&dir) => sessions.push(self.info(&id, &dir)),
                Ok(_) => {}
                Err(error) => sessions.push(self.refused_info(&id, &error)),
            }
        }
        Ok(sessions)
    }

    fn prune(&self, policy: PrunePolicy) -> Result<PruneReport, StoreError> {
        let mut report = PruneReport::default();
        let Some(cutoff) = SystemTime::now().checked_sub(policy.older_than) else {
            return Ok(report);
        };
        let Some((root, ids)) = self.ids()? else {
            return Ok(report);
        };
        for id in ids {
            // A directory the store refuses is not its to remove either.
            let dir = match root.dir(&id, DirHow::Existing) {
                Ok(Some(dir)) => dir,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!("not pruned: {error}");
                    continue;
                }
            };
            let modified = last_activity(&dir);
            if modified.is_none_or(|modified| modified >= cutoff) {
                continue;
            }
            if report.removed.len() >= policy.max_removals {
                report.deferred += 1;
                continue;
            }
            // Held while removing: a process opening the session meanwhile finds it in use.
            let hold = match lock_session(&id, &dir) {
                Ok(hold) => hold,
                Err(StoreError::SessionInUse { .. }) => {
                    report.in_use.push(id);
                    continue;
                }
                Err(error @ StoreError::Refused { .. }) => {
                    tracing::warn!("not pruned: {error}");
                    continue;
                }
                Err(error) => return Err(error),
            };
            // `remove_dir_all` follows no symbolic link: a link inside is removed, not its
            // target.
            std::fs::remove_dir_all(dir.path()).map_err(io_error(dir.path()))?;
            drop(hold);
            tracing::debug!(session = %id, "pruned");
            report.removed.push(id);
        }
        Ok(report)
    }
}

/// A file the store makes (`0600`, never one that exists).
fn created(dir: &StoreDir, name: &str) -> Result<File, StoreError> {
    dir.file(name, FileHow::CreateNew)?
        .ok_or_else(|| io_error(&dir.join(name))(io::ErrorKind::NotFound.into()))
}

/// Removes a session directory this process just made, after a failure.
fn remove_made(dir: &StoreDir) {
    if let Err(error) = std::fs::remove_dir_all(dir.path()) {
        tracing::warn!(path = %dir.path().display(), "cannot remove a failed session: {error}");
    }
}

/// The first `end` bytes of a log (all of it for `u64::MAX`), read a line at a time.
fn read_log(id: &str, file: &File, end: u64) -> Result<SessionLog, StoreError> {
    let as_log_error = |source| StoreError::Log {
        id: id.to_owned(),
        source,
    };
    let mut reader = file;
    io::Seek::rewind(&mut reader).map_err(|e| as_log_error(LogReadError::Io(e)))?;
    let mut log = SessionLog::default();
    for entry in LogLines::new(BufReader::new(reader.take(end)), MAX_LINE_BYTES) {
        log.push(entry.map_err(as_log_error)?);
    }
    Ok(log)
}

/// What `session.json` says (the default when there is none), read beneath the session's
/// directory and bounded; text that is not metadata reads as none.
fn read_meta(dir: &StoreDir) -> Result<(Meta, Option<File>), StoreError> {
    let Some(file) = dir.file(META_FILE, FileHow::Read)? else {
        return Ok((Meta::default(), None));
    };
    let mut text = String::new();
    // Not UTF-8, or cut at the bound: no metadata, as with any other text that is not.
    let _ = (&file).take(META_MAX_BYTES).read_to_string(&mut text);
    Ok((serde_json::from_str(&text).unwrap_or_default(), Some(file)))
}

/// A log read up to its last whole line.
struct ReadLog {
    log: SessionLog,
    /// The file's length when read.
    len: u64,
    /// Where its last whole line ends (`len` unless the tail is torn).
    end: u64,
}

/// Reads a log up to its last whole line; a longer unended tail than a line is refused.
fn read_to_tail(id: &str, file: &File, log_path: &Path) -> Result<ReadLog, StoreError> {
    let len = file.metadata().map_err(io_error(log_path))?.len();
    let limit = MAX_LINE_BYTES as u64;
    let end = match find_tail(file, len, limit).map_err(io_error(log_path))? {
        Tail::Ended => len,
        Tail::Torn { at } => at,
        Tail::TooLong => {
            return Err(StoreError::UnendedTail {
                id: id.to_owned(),
                path: log_path.to_owned(),
                limit: MAX_LINE_BYTES,
            });
        }
    };
    let log = read_log(id, file, end)?;
    Ok(ReadLog { log, len, end })
}

/// Whether `dir` holds a session: its log or its metadata (of any kind: opening it tells a
/// link or a FIFO apart, with the reason).
fn is_session(dir: &StoreDir) -> bool {
    dir.has(EVENTS_FILE) || dir.has(META_FILE)
}

/// When a session last changed: the latest change to its log, its metadata or its directory.
fn last_activity(dir: &StoreDir) -> Option<SystemTime> {
    let file_changed = |name| {
        dir.file(name, FileHow::Read)
            .ok()
            .flatten()
            .and_then(|file| file.metadata().and_then(|m| m.modified()).ok())
    };
    [
        file_changed(EVENTS_FILE),
        file_changed(META_FILE),
        dir.modified(),
    ]
    .into_iter()
    .flatten()
    .max()
}

/// Ids are path components of their own: letters, digits, `.`, `_`, `-`, not starting with a
/// dot.
fn check_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidId { id: id.to_owned() })
    }
}

/// A new id: the UTC time to the millisecond (so ids sort by creation), the PID and a
/// counter (so two made in the same millisecond differ; the directory's exclusive creation
/// settles any remaining tie).
fn fresh_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let stamp: String = humantime::format_rfc3339_millis(SystemTime::now())
        .to_string()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    // `YYYYMMDDhhmmssmmm` → `YYYYMMDD-hhmmss-mmm`.
    let (date, rest) = stamp.split_at(8.min(stamp.len()));
    let (time, millis) = rest.split_at(6.min(rest.len()));
    // Fixed widths, so ids made in the same millisecond sort by process, then in order.
    format!(
        "{date}-{time}-{millis}-{:08x}-{:06}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed) % 1_000_000
    )
}
