//! The session store of `dsh-agent`: where it is, `sessions list` and `sessions prune`,
//! opening the session a run writes to, and the signals that end it.

use crate::Failure;
use crate::output;
use agent_loop::{
    FsSessionStore, OpenedSession, PrunePolicy, SessionInfo, SessionStart, SessionStore, StoreError,
};
use anyhow::Context;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The store: `--session-dir` (or `DSH_SESSION_DIR`), else `$XDG_STATE_HOME/dsh/sessions`,
/// else `~/.local/state/dsh/sessions`.
pub(crate) fn store(session_dir: Option<&str>) -> Result<FsSessionStore, Failure> {
    if let Some(dir) = session_dir.filter(|dir| !dir.is_empty()) {
        return Ok(FsSessionStore::new(dir));
    }
    let root = FsSessionStore::default_root().ok_or_else(|| {
        Failure::new(
            2,
            "no place for sessions: set --session-dir, DSH_SESSION_DIR, XDG_STATE_HOME or HOME",
        )
    })?;
    Ok(FsSessionStore::new(root))
}

fn store_failure(error: StoreError) -> Failure {
    let status = match error {
        StoreError::NotFound { .. } | StoreError::InvalidId { .. } => 2,
        _ => 1,
    };
    Failure::new(status, error.to_string())
}

/// `sessions list`: a table, or one JSON object per line.
pub(crate) fn list(store: &FsSessionStore, json: bool) -> Result<(), Failure> {
    let sessions = store.list().map_err(store_failure)?;
    if json {
        for session in &sessions {
            let text = serde_json::to_string(session).context("serialising a session")?;
            output::line(&text)?;
        }
        return Ok(());
    }
    if sessions.is_empty() {
        output::say(&format!(
            "dsh-agent: no sessions in {}",
            store.root().display()
        ));
        return Ok(());
    }
    let rows: Vec<[String; 7]> = sessions.iter().map(row).collect();
    let header = [
        "ID",
        "STARTED",
        "STATE",
        "TURNS",
        "SIZE",
        "LAST ACTIVITY",
        "WORKING DIRECTORY",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, width))| {
                // The last column is not padded, so no line ends in spaces.
                if i + 1 == row.len() {
                    cell.clone()
                } else {
                    format!("{cell:width$}")
                }
            })
            .collect();
        output::line(&cells.join("  "))?;
    }
    for problem in sessions.iter().filter_map(|s| s.problem.as_deref()) {
        output::say(&format!("dsh-agent: {problem}"));
    }
    Ok(())
}

fn row(session: &SessionInfo) -> [String; 7] {
    [
        session.id.clone(),
        session.started.clone(),
        session.state.as_str().to_owned(),
        session.turns.to_string(),
        size(session.size_bytes),
        session.last_activity.clone(),
        presenters::escape_controls(&session.cwd).into_owned(),
    ]
}

/// Bytes in the largest unit that keeps a whole number in front (`512 B`, `4.2 KiB`).
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `sessions prune`: removes every session idle for longer than `older_than`, and says what
/// it did on stderr.
pub(crate) fn prune(store: &FsSessionStore, older_than: Duration) -> Result<(), Failure> {
    let report = store
        .prune(PrunePolicy::older_than(older_than))
        .map_err(store_failure)?;
    for id in &report.removed {
        output::line(&format!("removed {id}"))?;
    }
    for id in &report.in_use {
        output::say(&format!("dsh-agent: kept {id}: it is in use"));
    }
    Ok(())
}

/// Opens the session of a run, saying on stderr what a continued log lost (a torn last line
/// cut, malformed lines skipped).
pub(crate) fn open(
    store: &FsSessionStore,
    start: &SessionStart,
    cwd: &Path,
) -> Result<OpenedSession, Failure> {
    let opened = store.open(start, cwd).map_err(store_failure)?;
    for repair in opened.repairs() {
        output::say(&format!(
            "dsh-agent: session {}: {repair}",
            opened.lease.id()
        ));
    }
    Ok(opened)
}

/// The signals that end a session: SIGTERM always, SIGINT until [`Interrupts::release_sigint`]
/// (`run` and `resume` catch it while their turn runs; in `chat` Ctrl-C cancels the running
/// turn and the session goes on, and while `run` waits for background jobs it stops them).
#[derive(Debug)]
pub(crate) struct Interrupts {
    /// Fires at the first signal caught.
    pub(crate) token: CancellationToken,
    sigint: Option<tokio::task::JoinHandle<()>>,
}

impl Interrupts {
    /// Starts catching SIGTERM, and SIGINT unless `chat`. The tasks end with the runtime.
    pub(crate) fn catch(chat: bool) -> Interrupts {
        use tokio::signal::unix::{SignalKind, signal};
        let token = CancellationToken::new();
        let watch = |kind: SignalKind| {
            let mut stream = signal(kind).ok()?;
            let fire = token.clone();
            Some(tokio::spawn(async move {
                if stream.recv().await.is_some() {
                    fire.cancel();
                }
            }))
        };
        // Never released: it ends with the runtime.
        let _sigterm = watch(SignalKind::terminate());
        let sigint = if chat {
            None
        } else {
            watch(SignalKind::interrupt())
        };
        Interrupts { token, sigint }
    }

    /// Stops catching SIGINT: from now on it means what the phase after the turn makes of it.
    pub(crate) fn release_sigint(&mut self) {
        if let Some(task) = self.sigint.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn sizes_read_in_the_largest_whole_unit() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (4300, "4.2 KiB"),
            (5 * 1024 * 1024, "5.0 MiB"),
        ];
        for (bytes, expected) in cases {
            assert_eq!(size(bytes), expected, "{bytes}");
        }
    }
}
