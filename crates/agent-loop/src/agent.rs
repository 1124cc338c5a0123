//! The agent: session identity, history, inbox, agent scope, and the turn loop.

use crate::event::{EventRecord, SessionEndReason, SessionEvent, TurnEndReason};
use crate::log::{LogWriteError, LostJob, SessionLog, SessionLogWriter};
use crate::model::{AssistantToolCall, History, Message, ModelAdapter, ModelEvent, ModelRequest};
use dsh_tools::jobs::{JobRuntime, JobStatus, TurnOpener};
use dsh_tools::{
    AgentGone, AgentHandle, AgentRef, Arguments, ContextSource, Disposer, FailureCode,
    InjectedContext, Scope, ScopeError, ToolCall, ToolRegistry, ToolResult, ToolSchema,
};
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use std::collections::HashSet;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The default step limit of a turn.
pub const DEFAULT_MAX_STEPS: u32 = 50;
/// The default bound on concurrently running concurrency-safe calls.
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 8;
/// The default quiet period a woken turn waits for more notices before its first request (see
/// [`AgentDirectory::gather_window`]).
pub const DEFAULT_NOTICE_GATHER: Duration = Duration::from_millis(200);
/// How many quiet periods a woken turn gathers notices at most before it asks the model anyway.
const GATHER_PERIODS_MAX: u32 = 10;
/// The longest quiet period [`AgentDirectory::gather_window`] accepts.
const GATHER_WINDOW_MAX: Duration = Duration::from_secs(60);
/// The `detail` of the `job/end` recorded for a job lost with the process that ran it.
pub const LOST_JOB_DETAIL: &str = "lost: the process running it ended";
/// The `code` of the `error` event that reports a session log write failure.
pub const LOG_WRITE_FAILED: &str = "LOG_WRITE_FAILED";

/// Why an agent operation was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent was disposed.
    #[error("agent `{0}` was disposed")]
    Disposed(String),
    /// A turn is already running.
    #[error("agent `{0}` is already running a turn")]
    Busy(String),
    /// The agent scope could not be created.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The session log could not be opened.
    #[error("cannot open the session log {}: {source}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why it could not be opened.
        source: std::io::Error,
    },
    /// The session log could not be written (a full disk, `/dev/full`, a closed descriptor).
    #[error(transparent)]
    LogWrite(#[from] LogWriteError),
}

/// How a turn went.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TurnOutcome {
    /// Why it ended.
    pub reason: TurnEndReason,
    /// How many model requests it made.
    pub steps: u32,
    /// The last assistant text.
    pub text: String,
}

type Subscriber = Arc<dyn Fn(&EventRecord) + Send + Sync>;

struct Emitter {
    seq: u64,
    subscribers: Vec<(u64, Subscriber)>,
    /// The session log and its copies ([`AgentBuilder::log`] once per file).
    logs: Vec<SessionLogWriter>,
    /// The first write to a log that failed. That log is closed then: a later line that did
    /// get written would leave a hole in the middle of the session instead of a clean end.
    log_error: Option<LogWriteError>,
}

/// The running turn. It is the one record of whether the agent is busy: starting a turn,
/// deciding that it is complete and opening a woken one all read and write it under the state
/// lock, together with the inbox.
struct ActiveTurn {
    /// Which turn this is, so a finished turn's guard never clears a newer one.
    id: u64,
    signal: CancellationToken,
}

struct AgentState {
    /// Shared with the requests built from it (see [`History`]): appended to in place, and
    /// copied only while an adapter still holds an earlier request.
    history: History,
    inbox: Vec<InjectedContext>,
    turn: Option<ActiveTurn>,
    turns_started: u64,
    disposed: bool,
    /// Every call id used in the session (restored ones included): a call streamed with one
    /// of these gets a fresh id, so results, cards and history never mix two calls.
    call_ids: HashSet<String>,
}

struct AgentInner {
    session_id: String,
    cwd: PathBuf,
    system: String,
    max_steps: u32,
    max_parallel: usize,
    registry: ToolRegistry,
    adapter: Arc<dyn ModelAdapter>,
    jobs: Option<JobRuntime>,
    scope: Scope,
    link: Arc<AgentLink>,
    state: Mutex<AgentState>,
    emitter: Mutex<Emitter>,
    /// Woken whenever a turn ends (`wait_idle`); it carries no state of its own.
    idle: Notify,
    /// Woken whenever context enters the inbox (a woken turn gathering notices listens).
    inbox_grew: Notify,
    job_listener: Mutex<Option<Disposer>>,
    /// The tool schemas of the agent's requests, rebuilt only after `tools/change`.
    schemas: SchemaCache,
    next_subscriber: AtomicU64,
    /// The tool calls of the session so far (restored ones included), for fallback call ids.
    calls_made: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only push, drain or swap fields; a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tool schemas the agent sees, built once and shared by every request until the visible
/// tool set changes. A `tools/change` listener on the agent scope marks them stale; the next
/// request rebuilds them. The flag is cleared before the registry is read, and the registry
/// notifies only after a change is in place, so a change racing with a rebuild leaves the flag
/// set and is picked up by the request after.
struct SchemaCache {
    stale: Arc<AtomicBool>,
    /// Whether the listener is in place; without it every request reads the registry.
    listening: bool,
    schemas: Mutex<Option<Arc<[ToolSchema]>>>,
}

impl SchemaCache {
    /// A cache for the agent of `session`, listening on its scope.
    fn new(scope: &Scope, session: &str) -> SchemaCache {
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
    fn get(&self, registry: &ToolRegistry, session: &str) -> Arc<[ToolSchema]> {
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
struct AgentLink {
    session_id: String,
    cwd: PathBuf,
    inner: Weak<AgentInner>,
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
    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
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
    fn enqueue(&self, state: &mut AgentState, context: InjectedContext) {
        self.emit(SessionEvent::ContextInject {
            source: context.source.clone(),
            content: context.content.clone(),
        });
        state.inbox.push(context);
        self.inbox_grew.notify_waiters();
    }

    fn emit(&self, event: SessionEvent) {
        self.emit_locked(&mut lock(&self.emitter), event);
    }

    /// Numbers, logs and delivers one event; the caller holds the emitter lock, which keeps
    /// subscribers seeing events in sequence order.
    fn emit_locked(&self, emitter: &mut Emitter, event: SessionEvent) {
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
    fn close_turn(&self, mut state: MutexGuard<'_, AgentState>, id: u64, event: SessionEvent) {
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
    logs: Vec<PathBuf>,
    resume: Option<SessionLog>,
    sandbox: Option<serde_json::Value>,
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

    /// Appends every event to a JSONL session log at `path`. Called again, it adds a copy:
    /// every log gets every event, and one that fails is closed alone.
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.logs.push(path.into());
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
        let logs = self
            .logs
            .iter()
            .map(|path| {
                SessionLogWriter::open(path).map_err(|source| AgentError::Log {
                    path: path.clone(),
                    source,
                })
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

/// An agent: a session with a history, an inbox of injected contexts and an agent scope,
/// driven turn by turn against a model. Cheap to clone.
///
/// End it with [`Agent::dispose`], which also waits for its turn and its jobs. Dropping the
/// last clone without disposing still removes the agent scope and cancels its jobs (from a task
/// on the current tokio runtime), but nothing waits for them.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("session_id", &self.inner.session_id)
            .finish_non_exhaustive()
    }
}

/// A tool call as assembled from the stream.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

enum StreamEnd {
    Cancelled,
    Failed(String),
}

struct Assembled {
    text: String,
    reasoning: Option<String>,
    calls: Vec<AssistantToolCall>,
}

/// Clears turn `id` however the turn stops without closing (a panic, a dropped future); a
/// turn that closed normally is already cleared, and a newer turn is left alone.
struct TurnGuard<'a> {
    inner: &'a AgentInner,
    id: u64,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        release_turn(self.inner, self.id);
    }
}

/// The guard of a woken turn, made before its task is spawned and owned by the task's future:
/// the turn began in `open_turn`, so it must be released even if the task never runs (its
/// runtime shut down first).
struct WokenTurnGuard {
    agent: Agent,
    id: u64,
}

impl Drop for WokenTurnGuard {
    fn drop(&mut self) {
        release_turn(&self.agent.inner, self.id);
    }
}

/// Clears turn `id` if it is still the running one, and wakes `wait_idle`.
fn release_turn(inner: &AgentInner, id: u64) {
    let mut state = lock(&inner.state);
    if state.turn.as_ref().is_some_and(|turn| turn.id == id) {
        state.turn = None;
        drop(state);
        inner.idle.notify_waiters();
    }
}

/// A started turn: its id and its cancellation signal.
struct TurnTicket {
    id: u64,
    signal: CancellationToken,
}

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

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// The agent's scope: register agent-only tools, hooks, guards and restrictions here.
    pub fn scope(&self) -> &Scope {
        &self.inner.scope
    }

    /// The handle tools see (`exec.agent()`); it fails once the agent is disposed.
    pub fn handle(&self) -> AgentRef {
        self.inner.link.clone()
    }

    /// A copy of the history.
    pub fn history(&self) -> Vec<Message> {
        lock(&self.inner.state).history.to_vec()
    }

    /// Whether a turn is running.
    pub fn is_busy(&self) -> bool {
        lock(&self.inner.state).turn.is_some()
    }

    /// The contexts waiting in the inbox for the next model request (job notices that no turn
    /// has taken yet, for instance), in the order they arrived.
    pub fn pending_contexts(&self) -> Vec<InjectedContext> {
        lock(&self.inner.state).inbox.clone()
    }

    /// The first failure to write the session log, if any. The log is closed at that point
    /// (it ends with the last line that was written whole); the session itself goes on, and
    /// subscribers were told with an `error` event whose code is [`LOG_WRITE_FAILED`].
    pub fn log_error(&self) -> Option<LogWriteError> {
        lock(&self.inner.emitter).log_error.clone()
    }

    /// Subscribes to session events from now on. Subscribers run synchronously while the
    /// agent records the event and must not call back into the agent.
    pub fn subscribe(&self, subscriber: impl Fn(&EventRecord) + Send + Sync + 'static) -> Disposer {
        let id = self.inner.next_subscriber.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.emitter)
            .subscribers
            .push((id, Arc::new(subscriber)));
        let weak = Arc::downgrade(&self.inner);
        Disposer::new(move || {
            if let Some(inner) = weak.upgrade() {
                lock(&inner.emitter)
                    .subscribers
                    .retain(|(owner, _)| *owner != id);
            }
        })
    }

    /// Records `session/end` with `reason`: the host is done with the session (a store lists
    /// it as ended, or interrupted). Call it last, after [`Agent::dispose`], so the event is
    /// the log's last line; a resumed session may carry on after it.
    pub fn end_session(&self, reason: SessionEndReason) {
        self.inner.emit(SessionEvent::SessionEnd { reason });
    }

    /// Tells the model, once, about the jobs a resumed log shows started and never ended:
    /// each is recorded as failed (`job/end`, so resuming again does not repeat it), and one
    /// notice naming them all waits in the inbox for the next request.
    fn report_lost_jobs(&self, lost: &[LostJob]) {
        let inner = &self.inner;
        let mut state = lock(&inner.state);
        for job in lost {
            inner.emit(SessionEvent::JobEnd {
                job_id: job.id.clone(),
                status: JobStatus::Failed,
                detail: Some(String::from(LOST_JOB_DETAIL)),
            });
        }
        let listed = lost
            .iter()
            .map(|job| format!("{} ({}: {})", job.id, job.kind, job.label))
            .collect::<Vec<_>>()
            .join(", ");
        let (noun, verb) = if lost.len() == 1 {
            ("job", "was")
        } else {
            ("jobs", "were")
        };
        inner.enqueue(
            &mut state,
            InjectedContext {
                source: ContextSource::Host,
                content: format!(
                    "The session was resumed. Background {noun} {listed} {verb} still running \
                     when the previous process ended, and {verb} lost with it: no more output \
                     and no exit status will come. Start again what is still needed."
                ),
            },
        );
    }

    /// Injects durable context for the next model request (recorded as `context/inject`).
    /// Not a wake-up: an idle agent stays idle.
    pub fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        self.inner.inject(context)
    }

    /// Runs one turn for real user input.
    pub async fn run(&self, input: impl Into<String>) -> Result<TurnOutcome, AgentError> {
        let input = input.into();
        let ticket = self.begin_turn()?;
        let _guard = TurnGuard {
            inner: &self.inner,
            id: ticket.id,
        };
        {
            let mut state = lock(&self.inner.state);
            self.inner.emit(SessionEvent::UserMessage {
                content: input.clone(),
            });
            state.history.push(Message::user(input));
        }
        if let Some(jobs) = &self.inner.jobs {
            jobs.note_user_input(&self.inner.session_id);
        }
        Ok(self.turn(ticket).await)
    }

    /// Runs a turn for pending injected context (a job notice woke the agent). Returns
    /// `None` when the inbox is empty.
    pub async fn run_pending(&self) -> Result<Option<TurnOutcome>, AgentError> {
        let ticket = self.begin_turn()?;
        let _guard = TurnGuard {
            inner: &self.inner,
            id: ticket.id,
        };
        if lock(&self.inner.state).inbox.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.turn(ticket).await))
    }

    /// Cancels the running turn, if any: in-flight tool calls see their signal fire, and every
    /// call still gets exactly one result.
    pub fn cancel_turn(&self) {
        if let Some(turn) = &lock(&self.inner.state).turn {
            turn.signal.cancel();
        }
    }

    /// Waits until no turn is running.
    pub async fn wait_idle(&self) {
        loop {
            // Registered before the check, so a turn ending in between still wakes us.
            let mut ended = std::pin::pin!(self.inner.idle.notified());
            ended.as_mut().enable();
            if !self.is_busy() {
                return;
            }
            ended.await;
        }
    }

    /// Disposes the agent: cancels its turn and waits for it, disposes its scope (scoped
    /// tools, hooks, guards, restrictions), and cancels and awaits the jobs it owns. Afterwards
    /// `inject` fails. Contexts still waiting in the inbox never reached the model: they are
    /// recorded as `context/undelivered` (and stay pending in the log, so resuming it delivers
    /// them). Idempotent.
    pub async fn dispose(&self) {
        {
            let mut state = lock(&self.inner.state);
            if state.disposed {
                return;
            }
            state.disposed = true;
            if let Some(turn) = &state.turn {
                turn.signal.cancel();
            }
        }
        self.wait_idle().await;
        self.inner.scope.dispose();
        if let Some(jobs) = &self.inner.jobs {
            jobs.dispose_owner(&self.inner.session_id).await;
        }
        // Only now: the jobs just killed still record their `job/end`.
        if let Some(listener) = lock(&self.inner.job_listener).take() {
            listener.dispose();
        }
        let state = lock(&self.inner.state);
        if !state.inbox.is_empty() {
            self.inner.emit(SessionEvent::ContextUndelivered {
                contexts: state.inbox.clone(),
            });
        }
    }

    /// A turn opened by a job notice: it gathers the notices settling together (each quiet
    /// period without a new one ends the gathering, and it never lasts more than
    /// `GATHER_PERIODS_MAX` periods), then runs like [`Agent::run_pending`].
    async fn woken_turn(guard: WokenTurnGuard, ticket: TurnTicket, quiet: Duration) {
        let this = &guard.agent;
        if !quiet.is_zero() {
            let deadline = tokio::time::Instant::now() + quiet * GATHER_PERIODS_MAX;
            loop {
                // Registered before the wait starts, so a notice arriving in between counts.
                let mut grew = std::pin::pin!(this.inner.inbox_grew.notified());
                grew.as_mut().enable();
                let until = (tokio::time::Instant::now() + quiet).min(deadline);
                tokio::select! {
                    () = ticket.signal.cancelled() => break,
                    () = tokio::time::sleep_until(until) => break,
                    () = grew => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
            }
        }
        // Disposal cancels a gathering turn before it asked anything: it ends without a trace,
        // and the notices it gathered are reported as undelivered.
        if ticket.signal.is_cancelled() || lock(&this.inner.state).inbox.is_empty() {
            return;
        }
        this.turn(ticket).await;
    }

    fn begin_turn(&self) -> Result<TurnTicket, AgentError> {
        let mut state = lock(&self.inner.state);
        if state.disposed {
            return Err(AgentError::Disposed(self.inner.session_id.clone()));
        }
        if state.turn.is_some() {
            return Err(AgentError::Busy(self.inner.session_id.clone()));
        }
        state.turns_started += 1;
        let ticket = TurnTicket {
            id: state.turns_started,
            signal: CancellationToken::new(),
        };
        state.turn = Some(ActiveTurn {
            id: ticket.id,
            signal: ticket.signal.clone(),
        });
        Ok(ticket)
    }

    async fn turn(&self, ticket: TurnTicket) -> TurnOutcome {
        let inner = &self.inner;
        let TurnTicket { id, signal } = ticket;
        let mut steps = 0;
        let mut text = String::new();
        let end =
            |state: MutexGuard<'_, AgentState>, reason: TurnEndReason, steps: u32, text: String| {
                inner.close_turn(state, id, SessionEvent::TurnEnd { reason, steps });
                TurnOutcome {
                    reason,
                    steps,
                    text,
                }
            };
        loop {
            if signal.is_cancelled() {
                return end(lock(&inner.state), TurnEndReason::Cancelled, steps, text);
            }
            if steps >= inner.max_steps {
                return end(lock(&inner.state), TurnEndReason::MaxSteps, steps, text);
            }
            steps += 1;
            let request = self.next_request(steps);
            let assembled = match self.stream(request, &signal).await {
                Ok(assembled) => assembled,
                Err(StreamEnd::Cancelled) => {
                    return end(lock(&inner.state), TurnEndReason::Cancelled, steps, text);
                }
                Err(StreamEnd::Failed(message)) => {
                    inner.emit(SessionEvent::Error {
                        message,
                        code: Some(String::from("MODEL_ERROR")),
                    });
                    return end(lock(&inner.state), TurnEndReason::Error, steps, text);
                }
            };
            text.clone_from(&assembled.text);
            let calls = assembled.calls.clone();
            let state = {
                let mut state = lock(&inner.state);
                inner.emit(SessionEvent::AssistantMessage {
                    text: assembled.text.clone(),
                    reasoning: assembled.reasoning.clone(),
                    tool_calls: assembled.calls.clone(),
                });
                state.history.push(Message::Assistant {
                    text: assembled.text,
                    reasoning: assembled.reasoning,
                    tool_calls: assembled.calls,
                });
                state
            };
            if calls.is_empty() {
                // Context that arrived while the model answered (a job notice) must not be
                // closed over: give the model a step to see it. The check and the end of the
                // turn share one hold of the state lock (see `close_turn`).
                if !state.inbox.is_empty() && !signal.is_cancelled() {
                    continue;
                }
                return end(state, TurnEndReason::Completed, steps, text);
            }
            drop(state);
            let concluded = self.run_tools(calls, &signal).await;
            if signal.is_cancelled() {
                return end(lock(&inner.state), TurnEndReason::Cancelled, steps, text);
            }
            if concluded {
                return end(lock(&inner.state), TurnEndReason::Concluded, steps, text);
            }
        }
    }

    /// Drains the inbox into the history and assembles the request, recording it.
    fn next_request(&self, step: u32) -> ModelRequest {
        let inner = &self.inner;
        let tools = inner.schemas.get(&inner.registry, &inner.session_id);
        let mut state = lock(&inner.state);
        let injected = std::mem::take(&mut state.inbox);
        state.history.extend(injected.iter().map(Message::from));
        inner.emit(SessionEvent::ModelRequest {
            step,
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            injected,
        });
        // The request shares the history and the schemas: a clone of each is a reference count,
        // so a step costs the same however long the session is (see `History`).
        ModelRequest {
            step,
            system: inner.system.clone(),
            messages: state.history.clone(),
            tools,
        }
    }

    /// Streams one response and assembles text, reasoning and tool calls (fragments are
    /// joined per call index; ids and names arrive once).
    async fn stream(
        &self,
        request: ModelRequest,
        signal: &CancellationToken,
    ) -> Result<Assembled, StreamEnd> {
        let mut stream = self.inner.adapter.stream(request, signal.clone());
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls: BTreeMap<usize, PartialCall> = BTreeMap::new();
        loop {
            let next = tokio::select! {
                biased;
                () = signal.cancelled() => return Err(StreamEnd::Cancelled),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(error)) => {
                    if signal.is_cancelled() {
                        return Err(StreamEnd::Cancelled);
                    }
                    return Err(StreamEnd::Failed(error.message));
                }
                Some(Ok(event)) => match event {
                    ModelEvent::TextDelta(delta) => text.push_str(&delta),
                    ModelEvent::ReasoningDelta(delta) => reasoning.push_str(&delta),
                    ModelEvent::ToolCallStart { index, id, name } => {
                        let call = calls.entry(index).or_default();
                        if call.id.is_empty() {
                            call.id = id;
                        }
                        if call.name.is_empty() {
                            call.name = name;
                        }
                    }
                    ModelEvent::ToolCallArguments { index, fragment } => {
                        calls
                            .entry(index)
                            .or_default()
                            .arguments
                            .push_str(&fragment);
                    }
                    ModelEvent::Finish { .. } => break,
                },
            }
        }
        let calls = {
            let mut state = lock(&self.inner.state);
            calls
                .into_values()
                .map(|call| AssistantToolCall {
                    call_id: self.unique_call_id(&mut state.call_ids, call.id),
                    name: call.name,
                    arguments: call.arguments,
                })
                .collect()
        };
        Ok(Assembled {
            text,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            calls,
        })
    }

    /// The id a streamed call is recorded under: its own, unless it is empty or already used
    /// in the session, and then `call-auto-N`. N counts the session's calls (restored ones
    /// included) and skips any number whose id is taken (a model may stream `call-auto-2`
    /// itself), so a fallback id never repeats, whichever turn or step it is made in.
    fn unique_call_id(&self, used: &mut HashSet<String>, streamed: String) -> String {
        let mut n = self.inner.calls_made.fetch_add(1, Ordering::Relaxed) + 1;
        let mut id = streamed;
        if id.is_empty() || used.contains(&id) {
            id = format!("call-auto-{n}");
            while used.contains(&id) {
                n = self.inner.calls_made.fetch_add(1, Ordering::Relaxed) + 1;
                id = format!("call-auto-{n}");
            }
        }
        used.insert(id.clone());
        id
    }

    /// Runs the calls of one assistant message: consecutive concurrency-safe calls overlap
    /// (bounded), every other call is an exclusive barrier, and results are committed in call
    /// order. Returns whether a result concluded the turn.
    async fn run_tools(&self, calls: Vec<AssistantToolCall>, signal: &CancellationToken) -> bool {
        let inner = &self.inner;
        let session = inner.session_id.as_str();
        // Parsed once here; the registry gets the value, or the raw text when it is not JSON
        // (and then names the parse error in its result). Text over the registry's limit is
        // never parsed: the registry refuses it unread, which keeps memory bounded.
        let limit = inner.registry.config().max_argument_bytes;
        let mut parsed: Vec<Option<Value>> = calls
            .iter()
            .map(|c| {
                (c.arguments.len() <= limit)
                    .then(|| serde_json::from_str::<Value>(&c.arguments).ok())
                    .flatten()
            })
            .collect();
        for (call, args) in calls.iter().zip(&parsed) {
            inner.emit(SessionEvent::ToolCall {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                arguments: args
                    .clone()
                    .unwrap_or_else(|| Value::String(call.arguments.clone())),
            });
        }
        // Group: a run of concurrency-safe calls, or one exclusive call.
        let mut groups: Vec<(bool, Vec<usize>)> = Vec::new();
        for (i, (call, args)) in calls.iter().zip(&parsed).enumerate() {
            let safe = args.as_ref().is_some_and(|args| {
                inner
                    .registry
                    .is_concurrency_safe(&call.name, args, Some(session))
            });
            match groups.last_mut() {
                Some((true, members)) if safe => members.push(i),
                _ => groups.push((safe, vec![i])),
            }
        }
        let mut concluded = false;
        for (_, members) in groups {
            let pending: Vec<_> = members
                .iter()
                .map(|&i| {
                    let arguments = match parsed[i].take() {
                        Some(value) => Arguments::Value(value),
                        None => Arguments::Text(calls[i].arguments.clone()),
                    };
                    self.execute(&calls[i], arguments, signal)
                })
                .collect();
            let results: Vec<ToolResult> = futures::stream::iter(pending)
                .buffered(inner.max_parallel)
                .collect()
                .await;
            // One hold of the state lock for the group: the results, then each call's deferred
            // and additional contexts in call order, with nothing (a job notice) in between.
            // The contexts go through the inbox, which the next request drains right after
            // these results.
            let mut state = lock(&inner.state);
            let mut contexts = Vec::new();
            for (&i, result) in members.iter().zip(results) {
                let call = &calls[i];
                concluded |= result.concludes_turn;
                inner.emit(SessionEvent::ToolResult {
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    is_error: result.is_error,
                    content: result.content.clone(),
                    error: result.error.clone(),
                    meta: result.meta.clone(),
                });
                state.history.push(Message::Tool {
                    call_id: call.call_id.clone(),
                    content: result.content,
                    is_error: result.is_error,
                });
                contexts.extend(result.additional_contexts);
            }
            if !state.disposed {
                for context in contexts {
                    inner.enqueue(&mut state, context);
                }
            }
        }
        concluded
    }

    async fn execute(
        &self,
        call: &AssistantToolCall,
        arguments: Arguments,
        signal: &CancellationToken,
    ) -> ToolResult {
        let request = ToolCall::new(call.call_id.clone(), call.name.clone(), arguments)
            .with_signal(signal.child_token())
            .with_agent(self.handle());
        // The registry contains every failure it knows of; this guard keeps the pairing
        // invariant (one result per call) even if something below it panics anyway.
        match AssertUnwindSafe(self.inner.registry.execute(request))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(_) => ToolResult::failure(FailureCode::ToolPanic, "the tool call crashed"),
        }
    }
}

/// The host side of `wakeup` delivery: a directory of live agents that opens a turn on an idle
/// one when a job notice arrives. Install it with
/// [`JobRuntime::set_turn_opener`](dsh_tools::jobs::JobRuntime::set_turn_opener).
///
/// The wake-up budget of the jobs runtime limits *turns*, never notices: the directory opens a
/// turn by making the agent busy at once, so every notice arriving while that turn gathers or
/// runs joins it (no wake is spent on it), and the turn waits for a quiet period
/// ([`AgentDirectory::gather_window`], default [`DEFAULT_NOTICE_GATHER`]) before its first
/// request, so notices of jobs settling together reach the model in one request, in settlement
/// order. Notices that still find the budget spent wait in the inbox for the next turn, and
/// [`Agent::dispose`] reports those no turn took (`context/undelivered`).
#[derive(Clone)]
pub struct AgentDirectory {
    agents: Arc<Mutex<HashMap<String, Weak<AgentInner>>>>,
    woken: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    gather: Duration,
}

impl Default for AgentDirectory {
    fn default() -> AgentDirectory {
        AgentDirectory {
            agents: Arc::default(),
            woken: Arc::default(),
            gather: DEFAULT_NOTICE_GATHER,
        }
    }
}

impl fmt::Debug for AgentDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentDirectory")
            .field("agents", &lock(&self.agents).len())
            .field("gather", &self.gather)
            .finish()
    }
}

impl AgentDirectory {
    /// An empty directory.
    pub fn new() -> AgentDirectory {
        AgentDirectory::default()
    }

    /// How long a woken turn waits without a new notice before its first request (default
    /// [`DEFAULT_NOTICE_GATHER`]; it gathers for at most ten such periods). `Duration::ZERO`
    /// asks at once, with whatever is in the inbox then. Longer than a minute counts as a
    /// minute.
    #[must_use]
    pub fn gather_window(mut self, quiet: Duration) -> AgentDirectory {
        self.gather = quiet.min(GATHER_WINDOW_MAX);
        self
    }

    /// Adds an agent (held weakly). Agents dropped since the last insert are forgotten.
    pub fn insert(&self, agent: &Agent) {
        let mut agents = lock(&self.agents);
        agents.retain(|_, inner| inner.strong_count() > 0);
        agents.insert(agent.session_id().to_owned(), Arc::downgrade(&agent.inner));
    }

    /// Waits for every turn this directory opened so far to finish.
    pub async fn wait_woken(&self) {
        loop {
            let pending: Vec<_> = std::mem::take(&mut *lock(&self.woken));
            if pending.is_empty() {
                return;
            }
            for handle in pending {
                let _ = handle.await;
            }
        }
    }
}

impl TurnOpener for AgentDirectory {
    fn open_turn(&self, owner: &AgentRef) -> bool {
        let Some(inner) = lock(&self.agents)
            .get(owner.session_id())
            .and_then(Weak::upgrade)
        else {
            return false;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let agent = Agent { inner };
        // The turn begins here, not in the task: from now on the agent is busy, so the notices
        // that follow join this turn instead of spending a wake each on turns that would find
        // nothing left to do. A busy or disposed agent opens nothing (the running turn takes
        // the notice: it checks the inbox under the same lock before it ends).
        let Ok(ticket) = agent.begin_turn() else {
            return false;
        };
        let guard = WokenTurnGuard {
            agent,
            id: ticket.id,
        };
        let gather = self.gather;
        let handle = runtime.spawn(Agent::woken_turn(guard, ticket, gather));
        let mut woken = lock(&self.woken);
        // Finished turns need no waiting for; only the running ones are kept.
        woken.retain(|handle| !handle.is_finished());
        woken.push(handle);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelStream;

    /// A model that answers every request with an empty text.
    struct Silent;

    impl ModelAdapter for Silent {
        fn stream(&self, _request: ModelRequest, _signal: CancellationToken) -> ModelStream {
            Box::pin(futures::stream::empty())
        }
    }

    fn agent(registry: &ToolRegistry, session: &str) -> Agent {
        Agent::builder(registry.clone(), Arc::new(Silent))
            .session_id(session)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn the_directory_forgets_dropped_agents_and_finished_turns() {
        let registry = ToolRegistry::new();
        let directory = AgentDirectory::new();
        directory.insert(&agent(&registry, "gone"));
        let live = agent(&registry, "live");
        directory.insert(&live);
        assert_eq!(
            lock(&directory.agents).keys().collect::<Vec<_>>(),
            vec!["live"]
        );

        // Two woken turns, one after the other: only the running one is kept.
        assert!(directory.open_turn(&live.handle()));
        while !lock(&directory.woken).iter().all(|h| h.is_finished()) {
            tokio::task::yield_now().await;
        }
        assert!(directory.open_turn(&live.handle()));
        assert_eq!(lock(&directory.woken).len(), 1);
        directory.wait_woken().await;
    }

    #[test]
    fn a_woken_turn_whose_task_never_runs_leaves_the_agent_idle() {
        let registry = ToolRegistry::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let live = agent(&registry, "live");
        let directory = AgentDirectory::new();
        directory.insert(&live);
        {
            let _entered = runtime.enter();
            assert!(directory.open_turn(&live.handle()));
        }
        assert!(live.is_busy());
        // Shutting the runtime down drops the task before it ever ran.
        drop(runtime);
        assert!(!live.is_busy());
    }
}
