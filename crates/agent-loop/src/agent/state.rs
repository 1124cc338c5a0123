//! The agent's shared state: the session's history, inbox and running turn behind one lock,
//! the event emitter (sequence numbers, subscribers, session logs), the cached tool schemas, the
//! weak link tools see as `exec.agent()`, and the guards that release a turn however it ends.

use super::{Agent, LOG_WRITE_FAILED};
use crate::event::{EventRecord, SessionEvent};
use crate::log::{LogWriteError, SessionLogWriter};
use crate::model::{History, ModelAdapter};
use dsh_tools::jobs::JobRuntime;
use dsh_tools::{
    AgentGone, AgentHandle, Disposer, InjectedContext, Scope, ToolRegistry, ToolSchema,
};
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub(super) type Subscriber = Arc<dyn Fn(&EventRecord) + Send + Sync>;

pub(super) struct Emitter {
    pub(super) seq: u64,
    pub(super) subscribers: Vec<(u64, Subscriber)>,
    /// The session log and its copies ([`AgentBuilder::log`] once per file).
    pub(super) logs: Vec<SessionLogWriter>,
    /// The first write to a log that failed. That log is closed then: a later line that did
    /// get written would leave a hole in the middle of the session instead of a clean end.
    pub(super) log_error: Option<LogWriteError>,
}

/// The running turn. It is the one record of whether the agent is busy: starting a turn,
/// deciding that it is complete and opening a woken one all read and write it under the state
/// lock, together with the inbox.
pub(super) struct ActiveTurn {
    /// Which turn this is, so a finished turn's guard never clears a newer one.
    pub(super) id: u64,
    pub(super) signal: CancellationToken,
}

pub(super) struct AgentState {
    /// Shared with the requests built from it (see [`History`]): appended to in place, and
    /// copied only while an adapter still holds an earlier request.
    pub(super) history: History,
    pub(super) inbox: Vec<InjectedContext>,
    pub(super) turn: Option<ActiveTurn>,
    pub(super) turns_started: u64,
    pub(super) disposed: bool,
    /// Every call id used in the session (restored ones included): a call streamed with one
    /// of these gets a fresh id, so results, cards and history never mix two calls.
    pub(super) call_ids: HashSet<String>,
}

pub(super) struct AgentInner {
    pub(super) session_id: String,
    pub(super) cwd: PathBuf,
    pub(super) system: String,
    pub(super) max_steps: u32,
    pub(super) max_parallel: usize,
    pub(super) registry: ToolRegistry,
    pub(super) adapter: Arc<dyn ModelAdapter>,
    pub(super) jobs: Option<JobRuntime>,
    pub(super) scope: Scope,
    pub(super) link: Arc<AgentLink>,
    pub(super) state: Mutex<AgentState>,
    pub(super) emitter: Mutex<Emitter>,
    /// Woken whenever a turn ends (`wait_idle`); it carries no state of its own.
    pub(super) idle: Notify,
    /// Woken whenever context enters the inbox (a woken turn gathering notices listens).
    pub(super) inbox_grew: Notify,
    pub(super) job_listener: Mutex<Option<Disposer>>,
    /// The tool schemas of the agent's requests, rebuilt only after `tools/change`.
    pub(super) schemas: SchemaCache,
    pub(super) next_subscriber: AtomicU64,
    /// The tool calls of the session so far (restored ones included), for fallback call ids.
    pub(super) calls_made: AtomicU64,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only push, drain or swap fields; a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tool schemas the agent sees, built once and shared by every request until the visible
/// tool set changes. A `tools/change` listener on the agent scope marks them stale; the next
/// request rebuilds them. The flag is cleared before the registry is read, and the registry
/// notifies only after a change is in place, so a change racing with a rebuild leaves the flag
/// set and is picked up by the request after.
pub(super) struct SchemaCache {
    pub(super) stale: Arc<AtomicBool>,
    /// Whether the listener is in place; without it every request reads the registry.
    pub(super) listening: bool,
    pub(super) schemas: Mutex<Option<Arc<[ToolSchema]>>>,
}

impl SchemaCache {
    /// A cache for the agent of `session`, listening on its scope.
    pub(super) fn new(scope: &Scope, session: &str) -> SchemaCache {
        let stale = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&stale);
        let session = session.to_owned();
        // The listener is an effect of the agent scope, so it goes when the scope is disposed.
        let listening = scope
            .on_change(move |change| {
                if change.session.as_deref().is_none_or(|s| s == session) {
                    flag.store(true, Ordering::Release);
                }
            })
            .is_ok();
        SchemaCache {
            stale,
            listening,
            schemas: Mutex::new(None),
        }
    }

    /// The current schemas of the agent of `session`.
    pub(super) fn get(&self, registry: &ToolRegistry, session: &str) -> Arc<[ToolSchema]> {
        let mut cached = lock(&self.schemas);
        let stale = self.stale.swap(false, Ordering::AcqRel) || !self.listening;
        match &*cached {
            Some(schemas) if !stale => Arc::clone(schemas),
            _ => {
                let schemas: Arc<[ToolSchema]> = registry.schemas(Some(session)).into();
                *cached = Some(Arc::clone(&schemas));
                schemas
            }
        }
    }
}

/// What tools see of the agent (`exec.agent()`): a weak link that fails once the agent is gone.
#[derive(Debug)]
pub(super) struct AgentLink {
    pub(super) session_id: String,
    pub(super) cwd: PathBuf,
    pub(super) inner: Weak<AgentInner>,
}

impl AgentHandle for AgentLink {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        match self.inner.upgrade() {
            Some(inner) => inner.inject(context),
            None => Err(AgentGone {
                session_id: self.session_id.clone(),
            }),
        }
    }

    fn is_alive(&self) -> bool {
        self.inner
            .upgrade()
            .is_some_and(|inner| !lock(&inner.state).disposed)
    }

    fn cwd(&self) -> Option<&Path> {
        Some(&self.cwd)
    }
}

impl AgentInner {
    /// Appends context to the inbox and records it.
    pub(super) fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        let mut state = lock(&self.state);
        if state.disposed {
            return Err(AgentGone {
                session_id: self.session_id.clone(),
            });
        }
        self.enqueue(&mut state, context);
        Ok(())
    }

    /// Records `context/inject` and appends to the inbox. The caller holds the state lock
    /// while emitting, so the log orders injections and the requests that drain them exactly
    /// as they happened.
    pub(super) fn enqueue(&self, state: &mut AgentState, context: InjectedContext) {
        self.emit(SessionEvent::ContextInject {
            source: context.source.clone(),
            content: context.content.clone(),
        });
        state.inbox.push(context);
        self.inbox_grew.notify_waiters();
    }

    pub(super) fn emit(&self, event: SessionEvent) {
        self.emit_locked(&mut lock(&self.emitter), event);
    }

    /// Numbers, logs and delivers one event; the caller holds the emitter lock, which keeps
    /// subscribers seeing events in sequence order.
    pub(super) fn emit_locked(&self, emitter: &mut Emitter, event: SessionEvent) {
        emitter.seq += 1;
        let record = EventRecord::now(emitter.seq, event);
        let mut failed = None;
        let mut i = 0;
        while i < emitter.logs.len() {
            let log = &mut emitter.logs[i];
            match log.append(&record) {
                Ok(()) => i += 1,
                Err(error) => {
                    let failure = LogWriteError::new(log.path(), &error);
                    tracing::warn!(session = %self.session_id, "{failure}");
                    emitter.logs.remove(i);
                    emitter.log_error.get_or_insert_with(|| failure.clone());
                    failed.get_or_insert(failure);
                }
            }
        }
        for (_, subscriber) in &emitter.subscribers {
            if std::panic::catch_unwind(AssertUnwindSafe(|| subscriber(&record))).is_err() {
                tracing::warn!(session = %self.session_id, "a session-event subscriber panicked; ignored");
            }
        }
        // Subscribers hear of the failure right after the event that could not be written (the
        // log is closed by now, so this one is not attempted there).
        if let Some(failure) = failed {
            self.emit_locked(
                emitter,
                SessionEvent::Error {
                    message: failure.to_string(),
                    code: Some(String::from(LOG_WRITE_FAILED)),
                },
            );
        }
    }

    /// Ends turn `id`: clears it and records `turn/end`. The caller passes the state lock it
    /// took to decide the turn is over (for `completed`: that the inbox is empty), so a notice
    /// injected from then on finds the agent idle and can open a turn of its own; none can slip
    /// in between the decision and the agent becoming idle. The emitter lock is taken before
    /// the state lock is released, so `turn/end` is numbered before anything a new turn
    /// records.
    pub(super) fn close_turn(
        &self,
        mut state: MutexGuard<'_, AgentState>,
        id: u64,
        event: SessionEvent,
    ) {
        if state.turn.as_ref().is_some_and(|turn| turn.id == id) {
            state.turn = None;
        }
        let mut emitter = lock(&self.emitter);
        drop(state);
        self.emit_locked(&mut emitter, event);
        drop(emitter);
        self.idle.notify_waiters();
    }
}

impl Drop for AgentInner {
    /// An agent dropped without [`Agent::dispose`] still gives back what it holds: its agent
    /// scope (so the session id can be used again) and its job listener, synchronously, and
    /// the jobs it owns through a task on the current tokio runtime (their disposal is async).
    /// Outside a runtime those jobs run on until the jobs runtime is torn down.
    fn drop(&mut self) {
        self.scope.dispose();
        if let Some(listener) = lock(&self.job_listener).take() {
            listener.dispose();
        }
        // After `dispose()` the jobs are gone already, and the session id may belong to a new
        // agent by now, whose jobs are not this one's to cancel.
        if lock(&self.state).disposed {
            return;
        }
        let Some(jobs) = &self.jobs else {
            return;
        };
        let live = jobs
            .list(Some(&self.session_id))
            .iter()
            .any(|job| !job.status.is_terminal());
        if !live {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let jobs = jobs.clone();
                let session = std::mem::take(&mut self.session_id);
                runtime.spawn(async move { jobs.dispose_owner(&session).await });
            }
            Err(_) => tracing::warn!(
                session = %self.session_id,
                "an agent was dropped outside a tokio runtime without dispose(); its jobs keep running"
            ),
        }
    }
}

/// Clears turn `id` however the turn stops without closing (a panic, a dropped future); a
/// turn that closed normally is already cleared, and a newer turn is left alone.
pub(super) struct TurnGuard<'a> {
    pub(super) inner: &'a AgentInner,
    pub(super) id: u64,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        release_turn(self.inner, self.id);
    }
}

/// The guard of a woken turn, made before its task is spawned and owned by the task's future:
/// the turn began in `open_turn`, so it must be released even if the task never runs (its
/// runtime shut down first).
pub(super) struct WokenTurnGuard {
    pub(super) agent: Agent,
    pub(super) id: u64,
}

impl Drop for WokenTurnGuard {
    fn drop(&mut self) {
        release_turn(&self.agent.inner, self.id);
    }
}

/// Clears turn `id` if it is still the running one, and wakes `wait_idle`.
pub(super) fn release_turn(inner: &AgentInner, id: u64) {
    let mut state = lock(&inner.state);
    if state.turn.as_ref().is_some_and(|turn| turn.id == id) {
        state.turn = None;
        drop(state);
        inner.idle.notify_waiters();
    }
}

/// A started turn: its id and its cancellation signal.
pub(super) struct TurnTicket {
    pub(super) id: u64,
    pub(super) signal: CancellationToken,
}
