//! [`AgentBuilder`]: an agent's settings, and the build that opens its session (fresh or
//! resumed from a log), its agent scope, its logs and its job listener.
use super::state::{AgentInner, AgentLink, AgentState, Emitter, SchemaCache, Subscriber, lock};
use super::{Agent, AgentError, DEFAULT_MAX_PARALLEL_TOOLS, DEFAULT_MAX_STEPS};
use crate::event::{EventRecord, SessionEvent};
use crate::log::{SessionLog, SessionLogWriter};
use crate::model::{History, Message, ModelAdapter};
use dsh_tools::jobs::{JobRuntime, JobStatus};
use dsh_tools::{Disposer, ToolRegistry};
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

impl Agent {
    /// Starts building an agent over a registry and a model.
    pub fn builder(registry: ToolRegistry, adapter: Arc<dyn ModelAdapter>) -> AgentBuilder {
        AgentBuilder {
            registry,
            adapter,
            session_id: None,
            cwd: None,
            system: String::new(),
            max_steps: DEFAULT_MAX_STEPS,
            max_parallel: DEFAULT_MAX_PARALLEL_TOOLS,
            jobs: None,
            subscribers: Vec::new(),
            logs: Vec::new(),
            resume: None,
            sandbox: None,
        }
    }
}

/// Builds an [`Agent`].
#[must_use]
pub struct AgentBuilder {
    registry: ToolRegistry,
    adapter: Arc<dyn ModelAdapter>,
    session_id: Option<String>,
    cwd: Option<PathBuf>,
    system: String,
    max_steps: u32,
    max_parallel: usize,
    jobs: Option<JobRuntime>,
    subscribers: Vec<Subscriber>,
    logs: Vec<LogTarget>,
    resume: Option<SessionLog>,
    sandbox: Option<serde_json::Value>,
}

/// Where a log goes: a path to open, or a file already open (with its path, for messages).
enum LogTarget {
    Path(PathBuf),
    Open(std::io::Result<std::fs::File>, PathBuf),
}

impl fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("session_id", &self.session_id)
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// The session id (default: a fresh unique one).
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// How the shell's commands are confined, recorded in `session/start` (see
    /// [`SessionEvent::SessionStart`]).
    pub fn sandbox(mut self, report: serde_json::Value) -> Self {
        self.sandbox = Some(report);
        self
    }

    /// The working directory (default: the process's).
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The system prompt.
    pub fn system_prompt(mut self, system: impl Into<String>) -> Self {
        self.system = system.into();
        self
    }

    /// The step limit of a turn (default 50).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// The bound on concurrently running concurrency-safe calls (default 8).
    pub fn max_parallel_tools(mut self, n: usize) -> Self {
        self.max_parallel = n.max(1);
        self
    }

    /// The jobs runtime: the agent records `job/end` for its jobs and cancels them when
    /// disposed.
    pub fn jobs(mut self, jobs: JobRuntime) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// A subscriber that sees every event from `session/start` on. Subscribers run
    /// synchronously while the agent records the event (often under its locks) and must not
    /// call back into the agent: `inject`, `history`, `is_busy`, `run` or `dispose` from a
    /// subscriber deadlocks. Hand work off to a channel or a task instead.
    pub fn subscriber(mut self, subscriber: impl Fn(&EventRecord) + Send + Sync + 'static) -> Self {
        self.subscribers.push(Arc::new(subscriber));
        self
    }

    /// Appends every event to a JSONL session log at `path` (created, or appended to,
    /// following symbolic links as any path does; a store's session log is given with
    /// [`AgentBuilder::session_log`] instead). Called again, it adds a copy: every log gets
    /// every event, and one that fails is closed alone.
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.logs.push(LogTarget::Path(path.into()));
        self
    }

    /// Appends every event to the log of the session `lease` holds: the file its store
    /// opened and checked ([`SessionLease::log_file`](crate::SessionLease::log_file)), so
    /// nothing reopens the log by a name that may have been replaced since. A handle that
    /// cannot be had fails [`AgentBuilder::build`].
    pub fn session_log(mut self, lease: &crate::SessionLease) -> Self {
        let path = lease.log_path().to_owned();
        self.logs.push(LogTarget::Open(lease.log_file(), path));
        self
    }

    /// Continues the session recorded in `log`: same session id, history and pending inbox,
    /// and sequence numbers that carry on.
    pub fn resume(mut self, log: SessionLog) -> Self {
        self.resume = Some(log);
        self
    }

    /// Creates the agent and its agent scope, and records `session/start` (unless resuming).
    pub fn build(mut self) -> Result<Agent, AgentError> {
        // The log read is dropped once restored: a long session's events are not held twice.
        let resumed = self
            .resume
            .take()
            .map(|log| crate::log::Restored::from_log(&log));
        let resuming = resumed.is_some();
        let session_id = self
            .session_id
            .or_else(|| resumed.as_ref().and_then(|r| r.session_id.clone()))
            .unwrap_or_else(fresh_session_id);
        let cwd = self
            .cwd
            .or_else(|| resumed.as_ref().and_then(|r| r.cwd.clone()))
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        // The log first: the scope is registered under the session id, and a failure after
        // creating it would leave the id taken.
        let logs =
            self.logs
                .into_iter()
                .map(|target| match target {
                    LogTarget::Path(path) => SessionLogWriter::open(&path)
                        .map_err(|source| AgentError::Log { path, source }),
                    LogTarget::Open(file, path) => match file {
                        Ok(file) => Ok(SessionLogWriter::from_file(file, path)),
                        Err(source) => Err(AgentError::Log { path, source }),
                    },
                })
                .collect::<Result<Vec<_>, _>>()?;
        let scope = self.registry.agent_scope(session_id.clone())?;
        let schemas = SchemaCache::new(&scope, &session_id);
        let (history, inbox, seq, job_ids, lost_jobs) = match resumed {
            Some(restored) => (
                History::from(restored.history),
                restored.inbox,
                restored.last_seq,
                restored.job_ids,
                restored.lost_jobs,
            ),
            None => (History::new(), Vec::new(), 0, Vec::new(), Vec::new()),
        };
        let call_ids: HashSet<String> = history
            .iter()
            .flat_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                _ => &[],
            })
            .map(|call| call.call_id.clone())
            .collect();
        let calls_made: u64 = history
            .iter()
            .map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls.len() as u64,
                _ => 0,
            })
            .sum();
        let subscribers = self.subscribers.len() as u64;
        let inner = Arc::new_cyclic(|weak: &Weak<AgentInner>| AgentInner {
            link: Arc::new(AgentLink {
                session_id: session_id.clone(),
                cwd: cwd.clone(),
                inner: weak.clone(),
            }),
            session_id: session_id.clone(),
            cwd: cwd.clone(),
            system: self.system,
            max_steps: self.max_steps,
            max_parallel: self.max_parallel,
            registry: self.registry.clone(),
            adapter: self.adapter,
            jobs: self.jobs.clone(),
            scope,
            state: Mutex::new(AgentState {
                history,
                inbox,
                turn: None,
                turns_started: 0,
                disposed: false,
                call_ids,
            }),
            emitter: Mutex::new(Emitter {
                seq,
                subscribers: (0..).zip(self.subscribers).collect(),
                logs,
                log_error: None,
            }),
            idle: Notify::new(),
            inbox_grew: Notify::new(),
            job_listener: Mutex::new(None),
            schemas,
            // Ids of later `subscribe` calls follow the builder's subscribers.
            next_subscriber: AtomicU64::new(subscribers),
            calls_made: AtomicU64::new(calls_made),
        });
        if let Some(jobs) = &self.jobs {
            // The ids a resumed session used are never issued again.
            jobs.continue_numbering(job_ids.iter().map(String::as_str));
            let weak = Arc::downgrade(&inner);
            let session = session_id.clone();
            let started = jobs.on_changed(move |snapshot| {
                if snapshot.owner_session.as_deref() != Some(session.as_str())
                    || snapshot.status != JobStatus::Running
                {
                    return;
                }
                if let Some(inner) = weak.upgrade() {
                    inner.emit(SessionEvent::JobStart {
                        job_id: snapshot.id.to_string(),
                        kind: snapshot.kind.clone(),
                        label: snapshot.label.clone(),
                    });
                }
            });
            let weak = Arc::downgrade(&inner);
            let session = session_id.clone();
            let ended = jobs.on_done(move |snapshot, _owner| {
                if snapshot.owner_session.as_deref() != Some(session.as_str()) {
                    return;
                }
                if let Some(inner) = weak.upgrade() {
                    inner.emit(SessionEvent::JobEnd {
                        job_id: snapshot.id.to_string(),
                        status: snapshot.status,
                        detail: snapshot.detail.clone(),
                    });
                }
            });
            *lock(&inner.job_listener) = Some(Disposer::new(move || {
                started.dispose();
                ended.dispose();
            }));
        }
        let agent = Agent { inner };
        if !resuming {
            agent.inner.emit(SessionEvent::SessionStart {
                session_id: session_id.clone(),
                cwd: cwd.display().to_string(),
                tools: agent
                    .inner
                    .registry
                    .visible(Some(&session_id))
                    .iter()
                    .map(|tool| tool.name().to_owned())
                    .collect(),
                sandbox: self.sandbox.clone(),
            });
        }
        if !lost_jobs.is_empty() {
            agent.report_lost_jobs(&lost_jobs);
        }
        // A log that cannot take its first line is refused at once; dropping the agent gives
        // its session id back.
        if let Some(failure) = agent.log_error() {
            return Err(AgentError::LogWrite(failure));
        }
        Ok(agent)
    }
}

fn fresh_session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "session-{:x}-{:x}-{}",
        nanos,
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
