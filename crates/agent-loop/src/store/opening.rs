//! Opening the session a run writes to, whichever way it starts ([`SessionStart`],
//! [`SessionStore::open`]).

use super::{SessionLease, SessionStore, StoreError, TornTail};
use crate::event::SessionEvent;
use crate::log::SessionLog;
use std::path::{Path, PathBuf};

/// Which session a run writes to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStart {
    /// A new one.
    New,
    /// This one, continued ([`SessionStore::resume`]).
    Resume(String),
    /// A new one seeded with this one's history ([`SessionStore::fork`]).
    Fork(String),
}

/// The session a run writes to: the lease (held until the run ends) and, when continuing, the
/// events so far and what was cut from them.
#[derive(Debug)]
#[non_exhaustive]
pub struct OpenedSession {
    /// The session, locked.
    pub lease: SessionLease,
    /// The events so far, when continuing (give them to
    /// [`AgentBuilder::resume`](crate::AgentBuilder::resume)).
    pub log: Option<SessionLog>,
    /// A torn last line cut from a continued log.
    pub torn_tail: Option<TornTail>,
}

impl OpenedSession {
    /// What a continued log lost, one clause each, for the person running the host: a torn
    /// last line cut, malformed lines skipped.
    pub fn repairs(&self) -> Vec<String> {
        let mut repairs = Vec::new();
        if let Some(torn) = &self.torn_tail {
            repairs.push(format!(
                "dropped the torn last line {} of its log ({} bytes; the process writing it died mid-line)",
                torn.line, torn.bytes
            ));
        }
        if let Some(log) = self.log.as_ref().filter(|log| !log.skipped.is_empty()) {
            let lines: Vec<String> = log.skipped.iter().map(|s| s.line.to_string()).collect();
            repairs.push(format!(
                "skipped {} malformed line(s) of its log: {}",
                lines.len(),
                lines.join(", ")
            ));
        }
        repairs
    }

    /// The working directory a continued session recorded at its start.
    pub fn recorded_cwd(&self) -> Option<PathBuf> {
        self.log
            .as_ref()?
            .events
            .iter()
            .find_map(|record| match &record.event {
                SessionEvent::SessionStart { cwd, .. } => Some(PathBuf::from(cwd)),
                _ => None,
            })
    }
}

/// [`SessionStore::open`] for any store.
pub(super) fn open(
    store: &(impl SessionStore + ?Sized),
    start: &SessionStart,
    cwd: &Path,
) -> Result<OpenedSession, StoreError> {
    let resumed = match start {
        SessionStart::New => {
            return Ok(OpenedSession {
                lease: store.create(cwd)?,
                log: None,
                torn_tail: None,
            });
        }
        SessionStart::Resume(id) => store.resume(id)?,
        SessionStart::Fork(id) => store.fork(id)?,
    };
    Ok(OpenedSession {
        lease: resumed.lease,
        log: Some(resumed.log),
        torn_tail: resumed.torn_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FsSessionStore;
    use pretty_assertions::assert_eq;
    use std::io::Write;

    /// A model that answers nothing.
    struct Silent;

    impl crate::ModelAdapter for Silent {
        fn stream(
            &self,
            _request: crate::ModelRequest,
            _signal: tokio_util::sync::CancellationToken,
        ) -> crate::ModelStream {
            Box::pin(futures::stream::empty())
        }
    }

    #[tokio::test]
    async fn a_continued_session_says_what_its_log_lost_and_where_it_worked() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsSessionStore::new(dir.path().join("sessions"));
        let new = store
            .open(&SessionStart::New, Path::new("/work/p"))
            .unwrap();
        let id = new.lease.id().to_owned();
        assert_eq!((new.repairs(), new.recorded_cwd()), (vec![], None));
        let agent =
            crate::Agent::builder(dsh_tools::ToolRegistry::new(), std::sync::Arc::new(Silent))
                .cwd("/work/p")
                .session_id(&id)
                .session_log(&new.lease)
                .build()
                .unwrap();
        agent.dispose().await;
        drop(new);
        let log = store
            .session_dir(&id)
            .unwrap()
            .join(crate::store::EVENTS_FILE);
        let lines = std::fs::read_to_string(&log).unwrap().lines().count();
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        writeln!(file, "not json").unwrap();
        write!(file, "{{\"torn").unwrap();
        drop(file);
        let resumed = store
            .open(&SessionStart::Resume(id), Path::new("/elsewhere"))
            .unwrap();
        assert_eq!(
            (resumed.repairs(), resumed.recorded_cwd()),
            (
                vec![
                    format!(
                        "dropped the torn last line {} of its log (6 bytes; the process \
                         writing it died mid-line)",
                        lines + 2
                    ),
                    format!("skipped 1 malformed line(s) of its log: {}", lines + 1),
                ],
                Some(PathBuf::from("/work/p"))
            )
        );
    }
}
