//! What [`SessionStore::list`](super::SessionStore::list) says of each session: its log read
//! a line at a time ([`LogSummary`]) and the [`SessionInfo`] made of it.

use super::disk::{DirHow, FileHow, StoreDir, dir_size};
use super::lock::holder_alive;
use super::{
    EVENTS_FILE, FsSessionStore, LOCK_FILE, Meta, SPILL_DIR, SessionInfo, SessionState, StoreError,
    last_activity, read_meta,
};
use crate::event::{EventRecord, SessionEndReason, SessionEvent};
use crate::log::{LogEntry, LogLines, MAX_LINE_BYTES};
use std::fs::File;
use std::io::BufReader;
use std::time::SystemTime;

/// What a session's log says for [`SessionStore::list`](super::SessionStore::list), read
/// one line at a time.
#[derive(Default)]
struct LogSummary {
    turns: u64,
    /// How the last event ended the session, if it is a `session/end`.
    ended: Option<SessionEndReason>,
    first: Option<EventRecord>,
}

impl LogSummary {
    /// Reads the log `file`, keeping what it read before any failure.
    fn read(&mut self, id: &str, file: File) -> Result<(), StoreError> {
        for entry in LogLines::new(BufReader::new(file), MAX_LINE_BYTES) {
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

impl FsSessionStore {
    /// What `list` says of one session. Anything that keeps it from being used (a log that
    /// cannot be read, an entry the store refuses) makes the session `unreadable` with the
    /// reason, never the listing fail.
    pub(super) fn info(&self, id: &str, dir: &StoreDir) -> SessionInfo {
        let mut problem: Option<String> = None;
        let mut note = |error: StoreError| {
            problem.get_or_insert_with(|| error.to_string());
        };
        let mut summary = LogSummary::default();
        match dir.file(EVENTS_FILE, FileHow::Read) {
            Ok(Some(file)) => {
                if let Err(error) = summary.read(id, file) {
                    note(error);
                }
            }
            Ok(None) => {}
            Err(error) => note(error),
        }
        let meta: Meta = match read_meta(dir) {
            Ok((meta, _)) => meta,
            Err(error) => {
                note(error);
                Meta::default()
            }
        };
        let lock = dir.file(LOCK_FILE, FileHow::Read).unwrap_or_else(|error| {
            note(error);
            None
        });
        if let Err(error) = dir.dir(SPILL_DIR, DirHow::Existing) {
            note(error);
        }
        let LogSummary {
            turns,
            ended,
            first,
        } = summary;
        let modified = last_activity(dir).unwrap_or(SystemTime::UNIX_EPOCH);
        let state = if problem.is_some() {
            SessionState::Unreadable
        } else if holder_alive(lock) {
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

    /// What `list` says of a session whose directory the store refuses.
    pub(super) fn refused_info(&self, id: &str, error: &StoreError) -> SessionInfo {
        let never = humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH).to_string();
        SessionInfo {
            id: id.to_owned(),
            started: never.clone(),
            cwd: String::new(),
            turns: 0,
            last_activity: never,
            size_bytes: 0,
            state: SessionState::Unreadable,
            forked_from: None,
            problem: Some(error.to_string()),
        }
    }
}
