//! The agent: session identity, history, inbox, agent scope, and the turn loop.

use crate::event::{EventRecord, RecordedToolCall, SessionEvent, TurnEndReason};
use crate::log::{SessionLog, SessionLogWriter};
use crate::model::{AssistantToolCall, Message, ModelAdapter, ModelEvent, ModelRequest};
use dsh_tools::jobs::{JobRuntime, TurnOpener};
use dsh_tools::{
    AgentGone, AgentHandle, AgentRef, Arguments, Disposer, FailureCode, InjectedContext, Scope,
    ScopeError, ToolCall, ToolRegistry, ToolResult,
};
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The default step limit of a turn.
pub const DEFAULT_MAX_STEPS: u32 = 50;
/// The default bound on concurrently running concurrency-safe calls.
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 8;

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
    #[error("cannot open the session log: {0}")]
    Log(#[from] std::io::Error),
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
    log: Option<SessionLogWriter>,
}

struct AgentState {
    history: Vec<Message>,
    inbox: Vec<InjectedContext>,
    turn: Option<CancellationToken>,
    disposed: bool,
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
    busy: watch::Sender<bool>,
    job_listener: Mutex<Option<Disposer>>,
    next_subscriber: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only push, drain or swap fields; a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
    /// Appends context to the inbox and records it. The state lock is held while emitting, so
    /// the log orders injections and the requests that drain them exactly as they happened.
    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        let mut state = lock(&self.state);
        if state.disposed {
            return Err(AgentGone {
                session_id: self.session_id.clone(),
            });
        }
        self.emit(SessionEvent::ContextInject {
            source: context.source.clone(),
            content: context.content.clone(),
        });
        state.inbox.push(context);
        Ok(())
    }

    fn emit(&self, event: SessionEvent) {
        let mut emitter = lock(&self.emitter);
        emitter.seq += 1;
        let record = EventRecord::now(emitter.seq, event);
        if let Some(log) = &mut emitter.log
            && let Err(error) = log.append(&record)
        {
            tracing::warn!(session = %self.session_id, "writing the session log failed: {error}");
        }
        for (_, subscriber) in &emitter.subscribers {
            if std::panic::catch_unwind(AssertUnwindSafe(|| subscriber(&record))).is_err() {
                tracing::warn!(session = %self.session_id, "a session-event subscriber panicked; ignored");
            }
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
    log: Option<PathBuf>,
    resume: Option<SessionLog>,
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

    /// A subscriber that sees every event from `session/start` on.
    pub fn subscriber(mut self, subscriber: impl Fn(&EventRecord) + Send + Sync + 'static) -> Self {
        self.subscribers.push(Arc::new(subscriber));
        self
    }

    /// Appends every event to a JSONL session log at `path`.
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// Continues the session recorded in `log`: same session id, history and pending inbox,
    /// and sequence numbers that carry on.
    pub fn resume(mut self, log: SessionLog) -> Self {
        self.resume = Some(log);
        self
    }

    /// Creates the agent and its agent scope, and records `session/start` (unless resuming).
    pub fn build(self) -> Result<Agent, AgentError> {
        let resumed = self.resume.as_ref().map(crate::log::Restored::from_log);
        let session_id = self
            .session_id
            .or_else(|| resumed.as_ref().and_then(|r| r.session_id.clone()))
            .unwrap_or_else(fresh_session_id);
        let cwd = self
            .cwd
            .or_else(|| resumed.as_ref().and_then(|r| r.cwd.clone()))
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        let scope = self.registry.agent_scope(session_id.clone())?;
        let log = match &self.log {
            Some(path) => Some(SessionLogWriter::open(path)?),
            None => None,
        };
        let (history, inbox, seq) = match resumed {
            Some(restored) => (restored.history, restored.inbox, restored.last_seq),
            None => (Vec::new(), Vec::new(), 0),
        };
        let (busy, _) = watch::channel(false);
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
                disposed: false,
            }),
            emitter: Mutex::new(Emitter {
                seq,
                subscribers: self
                    .subscribers
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| (i as u64, s))
                    .collect(),
                log,
            }),
            busy,
            job_listener: Mutex::new(None),
            next_subscriber: AtomicU64::new(1_000),
        });
        if let Some(jobs) = &self.jobs {
            let weak = Arc::downgrade(&inner);
            let session = session_id.clone();
            let listener = jobs.on_done(move |snapshot, _owner| {
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
            *lock(&inner.job_listener) = Some(listener);
        }
        let agent = Agent { inner };
        if self.resume.is_none() {
            agent.inner.emit(SessionEvent::SessionStart {
                session_id: session_id.clone(),
                cwd: cwd.display().to_string(),
                tools: agent
                    .inner
                    .registry
                    .schemas(Some(&session_id))
                    .into_iter()
                    .map(|s| s.name)
                    .collect(),
            });
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
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("session_id", &self.inner.session_id)
            .field("busy", &*self.inner.busy.borrow())
            .finish()
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

/// Clears the busy flag and the turn token however the turn ends (even by a panic).
struct TurnGuard<'a>(&'a AgentInner);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).turn = None;
        self.0.busy.send_replace(false);
    }
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
            log: None,
            resume: None,
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
        lock(&self.inner.state).history.clone()
    }

    /// Whether a turn is running.
    pub fn is_busy(&self) -> bool {
        *self.inner.busy.borrow()
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

    /// Injects durable context for the next model request (recorded as `context/inject`).
    /// Not a wake-up: an idle agent stays idle.
    pub fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        self.inner.inject(context)
    }

    /// Runs one turn for real user input.
    pub async fn run(&self, input: impl Into<String>) -> Result<TurnOutcome, AgentError> {
        let input = input.into();
        let signal = self.begin_turn()?;
        let _guard = TurnGuard(&self.inner);
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
        Ok(self.turn(signal).await)
    }

    /// Runs a turn for pending injected context (a job notice woke the agent). Returns
    /// `None` when the inbox is empty.
    pub async fn run_pending(&self) -> Result<Option<TurnOutcome>, AgentError> {
        let signal = self.begin_turn()?;
        let _guard = TurnGuard(&self.inner);
        if lock(&self.inner.state).inbox.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.turn(signal).await))
    }

    /// Cancels the running turn, if any: in-flight tool calls see their signal fire, and every
    /// call still gets exactly one result.
    pub fn cancel_turn(&self) {
        if let Some(turn) = &lock(&self.inner.state).turn {
            turn.cancel();
        }
    }

    /// Waits until no turn is running.
    pub async fn wait_idle(&self) {
        let mut busy = self.inner.busy.subscribe();
        let _ = busy.wait_for(|busy| !*busy).await;
    }

    /// Disposes the agent: cancels its turn and waits for it, disposes its scope (scoped
    /// tools, hooks, guards, restrictions), and cancels and awaits the jobs it owns. Afterwards
    /// `inject` fails. Idempotent.
    pub async fn dispose(&self) {
        {
            let mut state = lock(&self.inner.state);
            if state.disposed {
                return;
            }
            state.disposed = true;
            if let Some(turn) = &state.turn {
                turn.cancel();
            }
        }
        self.wait_idle().await;
        self.inner.scope.dispose();
        if let Some(listener) = lock(&self.inner.job_listener).take() {
            listener.dispose();
        }
        if let Some(jobs) = &self.inner.jobs {
            jobs.dispose_owner(&self.inner.session_id).await;
        }
    }

    fn begin_turn(&self) -> Result<CancellationToken, AgentError> {
        let mut state = lock(&self.inner.state);
        if state.disposed {
            return Err(AgentError::Disposed(self.inner.session_id.clone()));
        }
        if state.turn.is_some() {
            return Err(AgentError::Busy(self.inner.session_id.clone()));
        }
        let signal = CancellationToken::new();
        state.turn = Some(signal.clone());
        self.inner.busy.send_replace(true);
        Ok(signal)
    }

    async fn turn(&self, signal: CancellationToken) -> TurnOutcome {
        let inner = &self.inner;
        let mut steps = 0;
        let mut text = String::new();
        let end = |reason: TurnEndReason, steps: u32, text: String| {
            inner.emit(SessionEvent::TurnEnd { reason, steps });
            TurnOutcome {
                reason,
                steps,
                text,
            }
        };
        loop {
            if signal.is_cancelled() {
                return end(TurnEndReason::Cancelled, steps, text);
            }
            if steps >= inner.max_steps {
                return end(TurnEndReason::MaxSteps, steps, text);
            }
            steps += 1;
            let request = self.next_request(steps);
            let assembled = match self.stream(request, &signal).await {
                Ok(assembled) => assembled,
                Err(StreamEnd::Cancelled) => return end(TurnEndReason::Cancelled, steps, text),
                Err(StreamEnd::Failed(message)) => {
                    inner.emit(SessionEvent::Error {
                        message,
                        code: Some(String::from("MODEL_ERROR")),
                    });
                    return end(TurnEndReason::Error, steps, text);
                }
            };
            text.clone_from(&assembled.text);
            let calls = assembled.calls.clone();
            {
                let mut state = lock(&inner.state);
                inner.emit(SessionEvent::AssistantMessage {
                    text: assembled.text.clone(),
                    reasoning: assembled.reasoning.clone(),
                    tool_calls: assembled
                        .calls
                        .iter()
                        .map(|c| RecordedToolCall {
                            call_id: c.call_id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                });
                state.history.push(Message::Assistant {
                    text: assembled.text,
                    reasoning: assembled.reasoning,
                    tool_calls: assembled.calls,
                });
            }
            if calls.is_empty() {
                // Context that arrived while the model answered (a job notice) must not be
                // closed over: give the model a step to see it.
                let pending = !lock(&inner.state).inbox.is_empty();
                if pending && !signal.is_cancelled() {
                    continue;
                }
                return end(TurnEndReason::Completed, steps, text);
            }
            let concluded = self.run_tools(&calls, &signal).await;
            if signal.is_cancelled() {
                return end(TurnEndReason::Cancelled, steps, text);
            }
            if concluded {
                return end(TurnEndReason::Concluded, steps, text);
            }
        }
    }

    /// Drains the inbox into the history and assembles the request, recording it.
    fn next_request(&self, step: u32) -> ModelRequest {
        let inner = &self.inner;
        let tools = inner.registry.schemas(Some(&inner.session_id));
        let mut state = lock(&inner.state);
        let injected = std::mem::take(&mut state.inbox);
        for context in &injected {
            state.history.push(Message::User {
                content: context.content.clone(),
                source: Some(context.source.clone()),
            });
        }
        inner.emit(SessionEvent::ModelRequest {
            step,
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            injected,
        });
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
        let step = request.step;
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
        Ok(Assembled {
            text,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            calls: calls
                .into_iter()
                .map(|(index, call)| AssistantToolCall {
                    call_id: if call.id.is_empty() {
                        format!("call-{step}-{index}")
                    } else {
                        call.id
                    },
                    name: call.name,
                    arguments: call.arguments,
                })
                .collect(),
        })
    }

    /// Runs the calls of one assistant message: consecutive concurrency-safe calls overlap
    /// (bounded), every other call is an exclusive barrier, and results are committed in call
    /// order. Returns whether a result concluded the turn.
    async fn run_tools(&self, calls: &[AssistantToolCall], signal: &CancellationToken) -> bool {
        let inner = &self.inner;
        let session = inner.session_id.as_str();
        let parsed: Vec<Option<Value>> = calls
            .iter()
            .map(|c| serde_json::from_str::<Value>(&c.arguments).ok())
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
                .map(|&i| self.execute(&calls[i], signal).boxed())
                .collect();
            let results: Vec<ToolResult> = futures::stream::iter(pending)
                .buffered(inner.max_parallel)
                .collect()
                .await;
            let mut contexts = Vec::new();
            {
                let mut state = lock(&inner.state);
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
            }
            // Deferred and additional contexts follow the results: they go through the inbox,
            // which the next request drains right after these results.
            for context in contexts {
                let _ = inner.inject(context);
            }
        }
        concluded
    }

    async fn execute(&self, call: &AssistantToolCall, signal: &CancellationToken) -> ToolResult {
        let request = ToolCall::new(
            call.call_id.clone(),
            call.name.clone(),
            Arguments::Text(call.arguments.clone()),
            signal.child_token(),
        )
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
#[derive(Clone, Default)]
pub struct AgentDirectory {
    agents: Arc<Mutex<HashMap<String, Weak<AgentInner>>>>,
    woken: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl fmt::Debug for AgentDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentDirectory")
            .field("agents", &lock(&self.agents).len())
            .finish()
    }
}

impl AgentDirectory {
    /// An empty directory.
    pub fn new() -> AgentDirectory {
        AgentDirectory::default()
    }

    /// Adds an agent (held weakly).
    pub fn insert(&self, agent: &Agent) {
        lock(&self.agents).insert(agent.session_id().to_owned(), Arc::downgrade(&agent.inner));
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
        let agent = Agent { inner };
        if agent.is_busy() || lock(&agent.inner.state).disposed {
            return false;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let handle = runtime.spawn(async move {
            match agent.run_pending().await {
                Ok(_) => {}
                Err(error) => tracing::debug!("a woken turn did not run: {error}"),
            }
        });
        lock(&self.woken).push(handle);
        true
    }
}
