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

mod disk;
mod lock;

use disk::{cut_torn_tail, dir_size, private_dir, private_file};
use lock::{holder_alive, lock_session};

use crate::event::{EventRecord, SessionEndReason, SessionEvent};
use crate::log::{LogEntry, LogReadError, SessionLog};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The event log's file name in a session directory.
pub const EVENTS_FILE: &str = "events.jsonl";
/// The spill directory's name in a session directory.
pub const SPILL_DIR: &str = "spill";
const META_FILE: &str = "session.json";
const LOCK_FILE: &str = "lock";

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
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A session this process holds: where its log and spill files go. The session stays locked
/// until the lease is dropped.
pub struct SessionLease {
    id: String,
    log_path: PathBuf,
    spill_dir: PathBuf,
    /// What keeps the session locked (the locked file, for [`FsSessionStore`]); released when
    /// dropped.
    _hold: Box<dyn Send + Sync>,
}

impl fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionLease")
            .field("id", &self.id)
            .field("log_path", &self.log_path)
            .field("spill_dir", &self.spill_dir)
            .finish_non_exhaustive()
    }
}

impl SessionLease {
    /// A lease for a store of a host's own: `hold` keeps the session locked while it lives.
    pub fn new(
        id: impl Into<String>,
        log_path: impl Into<PathBuf>,
        spill_dir: impl Into<PathBuf>,
        hold: Box<dyn Send + Sync>,
    ) -> SessionLease {
        SessionLease {
            id: id.into(),
            log_path: log_path.into(),
            spill_dir: spill_dir.into(),
            _hold: hold,
        }
    }

    /// The session id (give it to [`AgentBuilder::session_id`](crate::AgentBuilder::session_id)).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The event log (give it to [`AgentBuilder::log`](crate::AgentBuilder::log)).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The spill directory, kept with the session (point the shell executor's kept spill
    /// directory at it).
    pub fn spill_dir(&self) -> &Path {
        &self.spill_dir
    }
}

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

/// What a session's log says for [`SessionStore::list`], read one line at a time.
#[derive(Default)]
struct LogSummary {
    turns: u64,
    /// How the last event ended the session, if it is a `session/end`.
    ended: Option<SessionEndReason>,
    first: Option<EventRecord>,
}

impl LogSummary {
    /// Reads the log at `path`, keeping what it read before any failure.
    fn read(&mut self, id: &str, path: &Path) -> Result<(), StoreError> {
        for entry in SessionLog::lines(path).map_err(io_error(path))? {
            let entry = entry.map_err(|source| StoreError::Log {
                id: id.to_owned(),
                source,
            })?;
            let (LogEntry::Event(record) | LogEntry::Repaired(record, _)) = entry else {
                continue;
            };
            self.ended = match record.event {
                SessionEvent::TurnEnd { .. } => {
                    self.turns += 1;
                    None
                }
                SessionEvent::SessionEnd { reason } => Some(reason),
                _ => None,
            };
            self.first.get_or_insert(record);
        }
        Ok(())
    }
}

/// The file-system session store: one directory per session under a root (see the module
/// docs for the layout). Directories are `0700` and files `0600`.
#[derive(Clone, Debug)]
pub struct FsSessionStore {
    root: PathBuf,
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

    fn existing(&self, id: &str) -> Result<PathBuf, StoreError> {
        let dir = self.session_dir(id)?;
        if !is_session(&dir) {
            return Err(StoreError::NotFound {
                id: id.to_owned(),
                root: self.root.clone(),
            });
        }
        Ok(dir)
    }

    /// Makes a fresh session directory, locked, with its metadata, an empty log and a spill
    /// directory.
    fn make(&self, cwd: &Path, forked_from: Option<&str>) -> Result<SessionLease, StoreError> {
        private_dir(&self.root, true)?;
        let (id, dir) = loop {
            let id = fresh_id();
            let dir = self.root.join(&id);
            match private_dir(&dir, false) {
                Ok(()) => break (id, dir),
                // Another process (or thread) took the name in the same millisecond.
                Err(StoreError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
        };
        let hold = lock_session(&id, &dir)?;
        let meta = Meta {
            id: id.clone(),
            started: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            cwd: cwd.display().to_string(),
            forked_from: forked_from.map(str::to_owned),
        };
        let meta_path = dir.join(META_FILE);
        let text = serde_json::to_string(&meta).unwrap_or_else(|_| String::from("{}"));
        private_file(&meta_path, false)?
            .write_all(text.as_bytes())
            .map_err(io_error(&meta_path))?;
        let log_path = dir.join(EVENTS_FILE);
        private_file(&log_path, true)?;
        let spill_dir = dir.join(SPILL_DIR);
        private_dir(&spill_dir, false)?;
        Ok(SessionLease::new(id, log_path, spill_dir, Box::new(hold)))
    }

    /// What `list` says of one session. A log that cannot be read makes the session
    /// `unreadable` with the reason, never the listing fail.
    fn info(&self, id: &str, dir: &Path) -> SessionInfo {
        let meta: Meta = std::fs::read_to_string(dir.join(META_FILE))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        let log_path = dir.join(EVENTS_FILE);
        let mut summary = LogSummary::default();
        let problem = if log_path.is_file() {
            summary
                .read(id, &log_path)
                .err()
                .map(|error| error.to_string())
        } else {
            None
        };
        let LogSummary {
            turns,
            ended,
            first,
        } = summary;
        let modified = last_activity(dir).unwrap_or(SystemTime::UNIX_EPOCH);
        let state = if problem.is_some() {
            SessionState::Unreadable
        } else if holder_alive(dir) {
            SessionState::Running
        } else {
            match ended {
                Some(SessionEndReason::Interrupted) => SessionState::Interrupted,
                Some(_) => SessionState::Ended,
                None => SessionState::Crashed,
            }
        };
        let (started, cwd) = match (&first, meta.started.is_empty()) {
            (_, false) => (meta.started, meta.cwd),
            (Some(record), true) => {
                let cwd = match &record.event {
                    SessionEvent::SessionStart { cwd, .. } => cwd.clone(),
                    _ => String::new(),
                };
                (record.ts.clone(), cwd)
            }
            (None, true) => (
                humantime::format_rfc3339_seconds(modified).to_string(),
                String::new(),
            ),
        };
        SessionInfo {
            id: id.to_owned(),
            started,
            cwd,
            turns,
            last_activity: humantime::format_rfc3339_seconds(modified).to_string(),
            size_bytes: dir_size(dir),
            state,
            forked_from: meta.forked_from,
            problem,
        }
    }

    /// The session ids under the root, sorted (ids sort by creation time).
    fn ids(&self) -> Result<Vec<String>, StoreError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io_error(&self.root)(error)),
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| check_id(name).is_ok())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

impl SessionStore for FsSessionStore {
    fn create(&self, cwd: &Path) -> Result<SessionLease, StoreError> {
        self.make(cwd, None)
    }

    fn resume(&self, id: &str) -> Result<ResumedSession, StoreError> {
        let dir = self.existing(id)?;
        let hold = lock_session(id, &dir)?;
        let log_path = dir.join(EVENTS_FILE);
        if !log_path.exists() {
            private_file(&log_path, true)?;
        }
        let torn_tail = cut_torn_tail(&log_path)?;
        let log = SessionLog::read(&log_path).map_err(|source| StoreError::Log {
            id: id.to_owned(),
            source,
        })?;
        let spill_dir = dir.join(SPILL_DIR);
        private_dir(&spill_dir, true)?;
        Ok(ResumedSession {
            lease: SessionLease::new(id, log_path, spill_dir, Box::new(hold)),
            log,
            torn_tail,
        })
    }

    fn fork(&self, id: &str) -> Result<ResumedSession, StoreError> {
        let parent = self.existing(id)?;
        let parent_log =
            SessionLog::read(parent.join(EVENTS_FILE)).map_err(|source| StoreError::Log {
                id: id.to_owned(),
                source,
            })?;
        let cwd = parent_log
            .events
            .iter()
            .find_map(|record| match &record.event {
                SessionEvent::SessionStart { cwd, .. } => Some(PathBuf::from(cwd)),
                _ => None,
            })
            .unwrap_or_default();
        let lease = self.make(&cwd, Some(id))?;
        // The parent's spill files, linked (copied where links fail) into the fork's spill
        // directory, and the seeded events pointing there: removing the parent later leaves
        // the fork's locators readable.
        let from = parent.join(SPILL_DIR);
        if let Ok(entries) = std::fs::read_dir(&from) {
            for entry in entries.flatten() {
                let target = lease.spill_dir().join(entry.file_name());
                if std::fs::hard_link(entry.path(), &target).is_err() {
                    std::fs::copy(entry.path(), &target).map_err(io_error(&target))?;
                }
            }
        }
        let escaped = |dir: &Path| {
            let text = serde_json::to_string(&format!("{}/", dir.display())).unwrap_or_default();
            text.trim_matches('"').to_owned()
        };
        let (old_prefix, new_prefix) = (escaped(&from), escaped(lease.spill_dir()));
        let mut seeded = SessionLog::default();
        let mut text = String::new();
        for record in parent_log.events {
            let mut record = record;
            match &mut record.event {
                // The parent's end is not the fork's.
                SessionEvent::SessionEnd { .. } => continue,
                SessionEvent::SessionStart { session_id, .. } => {
                    lease.id().clone_into(session_id);
                }
                _ => {}
            }
            let line = record.to_json_line().replace(&old_prefix, &new_prefix);
            if let Ok(record) = EventRecord::from_json_line(&line) {
                seeded.events.push(record);
            }
            text.push_str(&line);
            text.push('\n');
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(lease.log_path())
            .map_err(io_error(lease.log_path()))?;
        file.write_all(text.as_bytes())
            .map_err(io_error(lease.log_path()))?;
        Ok(ResumedSession {
            lease,
            log: seeded,
            torn_tail: None,
        })
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut sessions = Vec::new();
        for id in self.ids()? {
            let dir = self.root.join(&id);
            if !is_session(&dir) {
                continue;
            }
            sessions.push(self.info(&id, &dir));
        }
        Ok(sessions)
    }

    fn prune(&self, policy: PrunePolicy) -> Result<PruneReport, StoreError> {
        let mut report = PruneReport::default();
        let Some(cutoff) = SystemTime::now().checked_sub(policy.older_than) else {
            return Ok(report);
        };
        for id in self.ids()? {
            let dir = self.root.join(&id);
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
                Err(error) => return Err(error),
            };
            std::fs::remove_dir_all(&dir).map_err(io_error(&dir))?;
            drop(hold);
            tracing::debug!(session = %id, "pruned");
            report.removed.push(id);
        }
        Ok(report)
    }
}

/// Whether `dir` holds a session: its log or its metadata.
fn is_session(dir: &Path) -> bool {
    dir.join(EVENTS_FILE).is_file() || dir.join(META_FILE).is_file()
}

/// When a session last changed: the latest change to its log, its metadata or its directory.
fn last_activity(dir: &Path) -> Option<SystemTime> {
    [dir.join(EVENTS_FILE), dir.join(META_FILE), dir.to_owned()]
        .iter()
        .filter_map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
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
