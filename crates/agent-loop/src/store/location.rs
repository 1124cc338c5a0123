//! Where a host keeps its sessions by default ([`FsSessionStore::default_root`]) and the
//! bounded prune it runs at start ([`FsSessionStore::prune_at_start`]).

use super::{FsSessionStore, PrunePolicy, PruneReport, SessionStore};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// At most this many sessions are removed by [`FsSessionStore::prune_at_start`]; the rest
/// wait for the next start (or a full prune), so starting stays quick however many piled up.
pub const PRUNE_AT_START_MAX: usize = 16;

impl FsSessionStore {
    /// The default store's root, by the XDG base directory rules:
    /// `$XDG_STATE_HOME/dsh/sessions`, else `~/.local/state/dsh/sessions`. A relative value is
    /// invalid and ignored; `None` when neither gives an absolute directory.
    pub fn default_root() -> Option<PathBuf> {
        state_root(|name| std::env::var_os(name))
    }

    /// The bounded prune at start: at most [`PRUNE_AT_START_MAX`] of the sessions idle for
    /// longer than `retention` (none for a zero retention). A session a lease holds is kept
    /// however long it was idle, so a host prunes after opening its own. A failure is only
    /// logged (the run can go on) and gives `None`.
    pub fn prune_at_start(&self, retention: Duration) -> Option<PruneReport> {
        if retention.is_zero() {
            return None;
        }
        match self.prune(PrunePolicy::older_than(retention).at_most(PRUNE_AT_START_MAX)) {
            Ok(report) => {
                if !report.removed.is_empty() {
                    tracing::info!(
                        removed = report.removed.len(),
                        deferred = report.deferred,
                        "pruned old sessions"
                    );
                }
                Some(report)
            }
            Err(error) => {
                tracing::warn!("cannot prune old sessions: {error}");
                None
            }
        }
    }
}

/// [`FsSessionStore::default_root`] with the environment as `var` reads it.
fn state_root(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |name| var(name).map(PathBuf::from).filter(|dir| dir.is_absolute());
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local").join("state")))
        .map(|state| state.join("dsh").join("sessions"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_default_root_follows_the_xdg_rules() {
        let root = |vars: &[(&str, &str)]| {
            state_root(|name| {
                vars.iter()
                    .find(|(var, _)| *var == name)
                    .map(|(_, value)| OsString::from(value))
            })
        };
        let path = |p: &str| Some(PathBuf::from(p));
        assert_eq!(
            root(&[("XDG_STATE_HOME", "/state"), ("HOME", "/home/me")]),
            path("/state/dsh/sessions")
        );
        assert_eq!(
            root(&[("XDG_STATE_HOME", "relative"), ("HOME", "/home/me")]),
            path("/home/me/.local/state/dsh/sessions")
        );
        assert_eq!(root(&[("HOME", "home")]), None);
        assert_eq!(root(&[]), None);
    }

    #[test]
    fn the_prune_at_start_removes_a_bounded_few_of_the_idle_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsSessionStore::new(dir.path());
        for _ in 0..PRUNE_AT_START_MAX + 2 {
            drop(store.create(dir.path()).unwrap());
        }
        assert_eq!(store.prune_at_start(Duration::ZERO), None);
        let report = store.prune_at_start(Duration::from_nanos(1)).unwrap();
        assert_eq!(
            (report.removed.len(), report.deferred),
            (PRUNE_AT_START_MAX, 2)
        );
        assert_eq!(store.list().unwrap().len(), 2);
    }
}
