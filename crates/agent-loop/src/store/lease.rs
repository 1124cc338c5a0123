//! [`SessionLease`]: a session this process holds, with its log open as the store checked it,
//! and the discarding of a session that never started.

use super::{StoreError, io_error};
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A session this process holds: where its log and spill files go, and, from
/// [`FsSessionStore`](crate::FsSessionStore), the log itself, open as the store checked it. The session stays locked
/// until the lease is dropped.
pub struct SessionLease {
    id: String,
    log_path: PathBuf,
    spill_dir: PathBuf,
    /// The log, opened and checked by the store: what the agent writes to, so nothing reopens
    /// it by its name (which may have been replaced since).
    log_file: Option<File>,
    /// The session directory, when the store call that gave the lease made it (create, fork):
    /// what [`SessionLease::discard`] removes.
    made: Option<PathBuf>,
    /// Whether dropping the lease discards the session ([`SessionLease::set_discard_on_drop`]).
    discard_on_drop: bool,
    /// What keeps the session locked (the locked file, for [`FsSessionStore`](crate::FsSessionStore)); released when
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
            log_file: None,
            made: None,
            discard_on_drop: false,
            _hold: hold,
        }
    }

    /// The same lease, carrying the log `file` already open (for appending): what
    /// [`SessionLease::log_file`] hands out instead of opening the path.
    #[must_use]
    pub fn with_log_file(mut self, file: File) -> SessionLease {
        self.log_file = Some(file);
        self
    }

    /// Marks the session as made by the call that gave this lease, in directory `dir`, so
    /// [`SessionLease::discard`] removes it.
    pub(super) fn made_in(mut self, dir: PathBuf) -> SessionLease {
        self.made = Some(dir);
        self
    }

    /// The session id (give it to [`AgentBuilder::session_id`](crate::AgentBuilder::session_id)).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The event log's path, for messages. To write the log, give the lease to
    /// [`AgentBuilder::session_log`](crate::AgentBuilder::session_log), which writes to the
    /// file the store checked; [`AgentBuilder::log`](crate::AgentBuilder::log) with this path
    /// would open whatever the name holds by then, following links.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The event log, open for appending: the file the store opened and checked (a second
    /// handle to it), or, for a lease of a host's own store made without
    /// [`SessionLease::with_log_file`], [`SessionLease::log_path`] opened (created, appended
    /// to, following links as any path does).
    pub fn log_file(&self) -> io::Result<File> {
        match &self.log_file {
            Some(file) => file.try_clone(),
            None => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log_path),
        }
    }

    /// The spill directory, kept with the session (point the shell executor's kept spill
    /// directory at it).
    pub fn spill_dir(&self) -> &Path {
        &self.spill_dir
    }

    /// Gives the session up, removing it when the store call that gave this lease made it
    /// ([`SessionStore::create`](crate::SessionStore::create), [`SessionStore::fork`](crate::SessionStore::fork)): for a session that never started
    /// (the run failed before its first turn), so failed starts leave no sessions behind. A
    /// resumed session is only released: its history is not this run's to drop. Returns
    /// whether the session was removed.
    pub fn discard(mut self) -> Result<bool, StoreError> {
        self.discard_on_drop = false;
        self.remove_made()
    }

    /// Whether dropping the lease [discards](SessionLease::discard) the session (off until
    /// set): set it while a run that made the session prepares (so a start that fails, on any
    /// path, leaves no session behind), and clear it once the session has started. A removal
    /// that fails on drop is logged (`tracing`).
    pub fn set_discard_on_drop(&mut self, discard: bool) {
        self.discard_on_drop = discard;
    }

    fn remove_made(&mut self) -> Result<bool, StoreError> {
        let Some(dir) = self.made.take() else {
            return Ok(false);
        };
        // Removed while still locked (the hold goes after this), so no other process opens
        // it meanwhile; nothing inside is followed.
        std::fs::remove_dir_all(&dir).map_err(io_error(&dir))?;
        tracing::debug!(session = %self.id, "discarded a session that never started");
        Ok(true)
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        if self.discard_on_drop
            && let Err(error) = self.remove_made()
        {
            tracing::warn!("cannot discard a session that never started: {error}");
        }
    }
}
