//! `dsh-agent undo`: the changes the file tools made in a session, listed or undone one at a
//! time (`tool_fs::history`), never over a later change of the file.

use crate::{Failure, output};
use agent_loop::{FsSessionStore, SessionStore, StoreError};
use tool_fs::history::{FileHistory, HistoryError};

/// Where a session's file changes are kept, inside its directory.
pub(crate) const CHANGES_DIR: &str = "changes";

/// `undo [SESSION] [--list] [--change N]`: the session given, else the one last active.
pub(crate) fn undo(
    store: &FsSessionStore,
    session: Option<&str>,
    list: bool,
    change: Option<u64>,
) -> Result<(), Failure> {
    let id = match session {
        Some(id) => id.to_owned(),
        None => last_active(store)?,
    };
    let dir = store.session_dir(&id).map_err(|error| match error {
        StoreError::NotFound { .. } | StoreError::InvalidId { .. } => {
            Failure::new(2, error.to_string())
        }
        other => Failure::new(1, other.to_string()),
    })?;
    let history = FileHistory::new(dir.join(CHANGES_DIR));
    if list {
        let changes = history.list().map_err(failure)?;
        if changes.is_empty() {
            output::say(&format!("dsh-agent: session {id} changed no file"));
        }
        for change in changes {
            let state = if change.undone { "undone" } else { "applied" };
            let made = if change.before.is_none() {
                " (created)"
            } else {
                ""
            };
            output::line(&format!(
                "{:>4}  {:<7}  {:<5}  {}{made}",
                change.change,
                state,
                change.tool,
                presenters::escape_controls(&change.path.display().to_string()),
            ))?;
        }
        return Ok(());
    }
    let undone = history.undo(change).map_err(failure)?;
    let what = if undone.before.is_none() {
        "removed the file it created"
    } else {
        "restored the content before it"
    };
    output::line(&format!(
        "undid change {} ({} of {}): {what}",
        undone.change,
        undone.tool,
        presenters::escape_controls(&undone.path.display().to_string()),
    ))?;
    Ok(())
}

/// The session of the store active last.
fn last_active(store: &FsSessionStore) -> Result<String, Failure> {
    let sessions = store.list().map_err(|e| Failure::new(1, e.to_string()))?;
    sessions
        .into_iter()
        .max_by(|a, b| a.last_activity.cmp(&b.last_activity))
        .map(|session| session.id)
        .ok_or_else(|| Failure::new(2, format!("no sessions in {}", store.root().display())))
}

/// A refusal is the user's to read (status 1 with the difference); a missing change a usage
/// error.
fn failure(error: HistoryError) -> Failure {
    let status = match error {
        HistoryError::NoSuchChange(_) | HistoryError::AlreadyUndone(_) => 2,
        _ => 1,
    };
    Failure::new(status, error.to_string())
}
