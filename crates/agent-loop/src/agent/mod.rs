//! The agent: session identity, history, inbox, agent scope, and the turn loop.
//!
//! This module holds [`Agent`] and its turn loop (a turn's steps, each a request, a streamed
//! response and the tools it calls); the parts it is built from are its submodules:
//!
//! - `builder`: [`AgentBuilder`], which opens a session (fresh or resumed);
//! - `state`: the shared state behind the agent (history, inbox, running turn, emitter,
//!   cached schemas, the weak link tools see) and the guards that release a turn;
//! - `assembly`: the pure assembler of a streamed response (text, reasoning, tool calls by
//!   index) and the rule for unique call ids;
//! - `scheduling`: how one message's tool calls run (safe runs overlap, others are barriers,
//!   results land in call order);
//! - `directory`: [`AgentDirectory`], which opens woken turns for job notices;
//! - `cancelling`: [`Agent::cancel_turn_on`] and [`Agent::run_until_cancelled`], a turn
//!   cancelled when a host's token fires;
//! - `settling`: [`Agent::settle_jobs`], the wait for the jobs still running after the turns.

mod assembly;
mod builder;
mod cancelling;
mod directory;
mod scheduling;
mod settling;
mod state;

pub use builder::AgentBuilder;
pub use directory::AgentDirectory;
pub use settling::{JobWait, JobsSettled, WaitCut};

use assembly::{Progress, ResponseAssembler, unique_call_id};
use state::{ActiveTurn, AgentInner, AgentState, TurnGuard, TurnTicket, WokenTurnGuard, lock};

use crate::event::{EventRecord, SessionEndReason, SessionEvent, TurnEndReason};
use crate::log::{LogWriteError, LostJob};
use crate::model::{AssistantToolCall, Message, ModelRequest};
use dsh_tools::jobs::JobStatus;
use dsh_tools::{AgentGone, AgentRef, ContextSource, Disposer, InjectedContext, Scope, ScopeError};
use futures::StreamExt;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;
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

impl Agent {
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
}

/// How a response stream ended early.
enum StreamEnd {
    Cancelled,
    Failed(String),
}

/// A streamed response with its calls' ids made unique in the session.
struct Assembled {
    text: String,
    reasoning: Option<String>,
    calls: Vec<AssistantToolCall>,
}

impl Agent {
    /// Streams one response and assembles text, reasoning and tool calls (see `assembly`),
    /// giving each call an id unique in the session.
    async fn stream(
        &self,
        request: ModelRequest,
        signal: &CancellationToken,
    ) -> Result<Assembled, StreamEnd> {
        let mut stream = self.inner.adapter.stream(request, signal.clone());
        let mut assembler = ResponseAssembler::default();
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
                Some(Ok(event)) => {
                    if assembler.push(event) == Progress::Finished {
                        break;
                    }
                }
            }
        }
        let response = assembler.finish();
        let calls = {
            let mut state = lock(&self.inner.state);
            response
                .calls
                .into_iter()
                .map(|call| AssistantToolCall {
                    call_id: unique_call_id(&self.inner.calls_made, &mut state.call_ids, call.id),
                    name: call.name,
                    arguments: call.arguments,
                })
                .collect()
        };
        Ok(Assembled {
            text: response.text,
            reasoning: response.reasoning,
            calls,
        })
    }
}
