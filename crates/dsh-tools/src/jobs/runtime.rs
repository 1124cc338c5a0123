//! The jobs runtime: starting, reading, listing, waiting for and killing jobs, and
//! settling them first-wins.

use super::error::JobError;
use super::state::{
    ChangedListener, DoneListener, Inner, Listeners, Record, State, issued_parts, lock, now_ms,
    visible,
};
use super::types::{
    CancelFn, JobEnd, JobId, JobOutcome, JobRead, JobSnapshot, JobStart, JobStatus, JobsConfig,
    KillOutcome, TurnOpener,
};
use super::waiter::Waiter;
use crate::agent::AgentRef;
use crate::definition::contain;
use crate::error::panic_message;
use crate::scope::Disposer;
use crate::text::bound_keeping_tail;
use futures::FutureExt;
use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The jobs runtime (a shared service; cheap to clone). Provide it to tools with
/// [`Scope::provide`](crate::Scope::provide) and reach it with `exec.service::<JobRuntime>()`.
#[derive(Clone)]
pub struct JobRuntime {
    pub(super) inner: Arc<Inner>,
}

impl fmt::Debug for JobRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("JobRuntime")
            .field("jobs", &state.records.len())
            .field("torn_down", &state.torn_down)
            .finish()
    }
}

impl Default for JobRuntime {
    fn default() -> Self {
        JobRuntime::new(JobsConfig::default())
    }
}

impl JobRuntime {
    /// A runtime with the given configuration.
    pub fn new(config: JobsConfig) -> JobRuntime {
        JobRuntime {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State::new(config.settled_retention)),
                controllers: AtomicUsize::new(0),
                done_listeners: Listeners::new(),
                changed_listeners: Listeners::new(),
                opener: Mutex::new(None),
                wakes: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Declares that a job controller (the model-facing job tools) is loaded. Producers can
    /// start work only while at least one is attached. Disposing the returned handle detaches.
    pub fn attach_controller(&self) -> Disposer {
        self.inner.controllers.fetch_add(1, Ordering::SeqCst);
        let inner = Arc::clone(&self.inner);
        Disposer::new(move || {
            inner.controllers.fetch_sub(1, Ordering::SeqCst);
        })
    }

    /// Installs the host's turn opener for `wakeup` delivery.
    pub fn set_turn_opener(&self, opener: Arc<dyn TurnOpener>) {
        *lock(&self.inner.opener) = Some(opener);
    }

    /// Continues numbering after job ids issued elsewhere (by the process that ran a session
    /// before it was resumed): the next job of each kind gets a number above every `<kind>-N`
    /// given, so a resumed session never sees an id twice. Ids the runtime could not have
    /// issued (another shape, or the last number of the range, which leaves none above it) are
    /// ignored; numbering never goes back.
    pub fn continue_numbering<'a>(&self, issued: impl IntoIterator<Item = &'a str>) {
        let mut state = lock(&self.inner.state);
        for (kind, n) in issued.into_iter().filter_map(issued_parts) {
            if n == u64::MAX {
                continue;
            }
            let counter = state.counters.entry(kind.to_owned()).or_insert(0);
            *counter = (*counter).max(n);
        }
    }

    /// Real user input reached the agent of `session`: its wake budget is full again.
    pub fn note_user_input(&self, session: &str) {
        lock(&self.inner.wakes).remove(session);
    }

    /// Starts a job after full preflight. If the producer's `run` fails (or panics), nothing is
    /// registered and no id is used. Must be called within a tokio runtime, which then watches
    /// the job.
    pub fn start(&self, start: JobStart) -> Result<JobId, JobError> {
        let JobStart {
            kind,
            label,
            owner,
            output_limit_bytes,
            run,
        } = start;
        let owner_session = owner.as_ref().map(|o| o.session_id().to_owned());
        let Ok(runtime) = Handle::try_current() else {
            return Err(JobError::NoRuntime);
        };
        {
            // Preflight and capacity reservation in one critical section, so concurrent starts
            // cannot overshoot the limit; `run` itself runs outside the lock.
            let mut state = self.inner.current();
            if state.torn_down {
                return Err(JobError::TornDown);
            }
            if self.inner.controllers.load(Ordering::SeqCst) == 0 {
                return Err(JobError::NoController);
            }
            if let Some(owner) = &owner
                && !owner.is_alive()
            {
                return Err(JobError::OwnerGone {
                    session: owner.session_id().to_owned(),
                });
            }
            let live = state.live.get(&owner_session).copied().unwrap_or(0)
                + state.reserved.get(&owner_session).copied().unwrap_or(0);
            let limit = self.inner.config.max_concurrent_jobs_per_owner;
            if live >= limit {
                return Err(JobError::Capacity {
                    owner: owner_session.as_deref().map_or_else(
                        || String::from("the unowned pool"),
                        |s| format!("session `{s}`"),
                    ),
                    limit,
                });
            }
            State::adjust(&mut state.reserved, &owner_session, true);
        }
        let started = contain("the producer", run);
        let mut state = lock(&self.inner.state);
        State::adjust(&mut state.reserved, &owner_session, false);
        let hooks = match started {
            Ok(Ok(hooks)) => hooks,
            Ok(Err(error)) => return Err(JobError::Run(error.to_string())),
            Err(message) => return Err(JobError::Run(message)),
        };
        if state.torn_down {
            // Teardown began while the producer was starting: stop the work at once.
            drop(state);
            let cancel = hooks.cancel;
            if let Err(message) =
                contain("the producer's cancel", || cancel("jobs runtime torn down"))
            {
                tracing::warn!("{message}");
            }
            runtime.spawn(hooks.done);
            return Err(JobError::TornDown);
        }
        State::adjust(&mut state.live, &owner_session, true);
        let counter = state.counters.entry(kind.clone()).or_insert(0);
        *counter += 1;
        let id = JobId(format!("{kind}-{counter}"));
        let (settled, _) = watch::channel(false);
        let snapshot = JobSnapshot {
            id: id.clone(),
            kind,
            label,
            status: JobStatus::Running,
            detail: None,
            started_at: now_ms(),
            finished_at: None,
            owner_session,
            reported: false,
            output_limit_bytes,
        };
        state.registered += 1;
        let n = state.registered;
        state.index.insert(id.as_str().to_owned(), n);
        state.records.insert(
            n,
            Record {
                snapshot: snapshot.clone(),
                owner,
                cancel: Some(hooks.cancel),
                reader: hooks.reader,
                final_output: None,
                settled,
                runtime: runtime.clone(),
                waiters: 0,
                reported_for_waiters: false,
            },
        );
        drop(state);

        // Told before the watcher is spawned: on a multi-threaded runtime the watcher may
        // settle a quick job at once, and listeners must see it running before they see it end.
        self.inner.changed(&snapshot);
        let inner = Arc::clone(&self.inner);
        let settle_id = id.clone();
        let done = hooks.done;
        runtime.spawn(async move {
            // `contain` is for synchronous code; a future's panic surfaces when it is polled.
            let outcome = match AssertUnwindSafe(done).catch_unwind().await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(error)) => {
                    JobOutcome::new(JobEnd::Failed).with_detail(format!("producer error: {error}"))
                }
                Err(payload) => JobOutcome::new(JobEnd::Failed).with_detail(format!(
                    "producer panicked: {}",
                    panic_message(payload.as_ref())
                )),
            };
            inner.settle(&settle_id, outcome);
        });
        tracing::debug!(job = %id, "job started");
        Ok(id)
    }

    /// The jobs visible to `caller` (a session id; `None` sees only unowned jobs), in
    /// registration order.
    pub fn list(&self, caller: Option<&str>) -> Vec<JobSnapshot> {
        self.inner
            .current()
            .records
            .values()
            .filter(|r| visible(r, caller))
            .map(|r| r.snapshot.clone())
            .collect()
    }

    /// A snapshot, without consuming output or marking anything reported.
    pub fn get(&self, id: &str, caller: Option<&str>) -> Result<JobSnapshot, JobError> {
        let state = self.inner.current();
        find(&state, id, caller).map(|r| r.snapshot.clone())
    }

    /// Reads output: the delta since the previous read for stream jobs, the final output for
    /// settled final-output jobs. A read that sees the job settled marks it reported (no
    /// notice follows). The text is bounded by the job's `output_limit_bytes`, keeping its end.
    pub fn read(&self, id: &str, caller: Option<&str>) -> Result<JobRead, JobError> {
        self.read_at_most(id, caller, usize::MAX)
    }

    /// [`JobRuntime::read`] with the caller's own byte budget: the text is at most
    /// `max_bytes` (and at most the job's `output_limit_bytes`), and a stream job's reader is
    /// handed that budget, so it materialises no more than the read returns.
    pub fn read_at_most(
        &self,
        id: &str,
        caller: Option<&str>,
        max_bytes: usize,
    ) -> Result<JobRead, JobError> {
        let (reader, settled_before, final_output, budget) = {
            let state = self.inner.current();
            let record = find(&state, id, caller)?;
            let budget = record
                .snapshot
                .output_limit_bytes
                .map_or(max_bytes, |limit| limit.min(max_bytes));
            (
                record.reader.clone(),
                record.snapshot.status.is_terminal(),
                record.final_output.clone(),
                budget,
            )
        };
        let text = match reader {
            // Producer code runs outside the state lock.
            Some(reader) => {
                let mut read = lock(&reader);
                contain("the output reader", || (*read)(budget)).unwrap_or_else(|message| {
                    tracing::warn!(job = %id, "{message}");
                    format!("[{message}]")
                })
            }
            None if settled_before => final_output.unwrap_or_default(),
            None => String::new(),
        };
        let mut state = lock(&self.inner.state);
        let record = find_mut(&mut state, id, caller)?;
        if settled_before {
            record.mark_reported();
        }
        let text = if budget < usize::MAX {
            bound_keeping_tail(&text, budget)
        } else {
            text
        };
        Ok(JobRead {
            text,
            snapshot: record.snapshot.clone(),
        })
    }

    /// Requests cancellation: the job becomes `stopping` and reported (the caller will see its
    /// end, so no notice follows); the producer settles it. A producer that has not settled
    /// within the configured `teardown_grace` is force-failed. Killing a settled job marks it
    /// reported and says so.
    pub fn kill(
        &self,
        id: &str,
        caller: Option<&str>,
        reason: &str,
    ) -> Result<KillOutcome, JobError> {
        let cancel = {
            let mut state = self.inner.current();
            let record = find_mut(&mut state, id, caller)?;
            let Some(cancel) = record.cancel.clone() else {
                record.mark_reported();
                return Ok(KillOutcome::AlreadyFinished);
            };
            cancel
        };
        if let Err(message) = contain("the producer's cancel", || cancel(reason)) {
            return Err(JobError::Cancel {
                id: id.to_owned(),
                message,
            });
        }
        let (changed, settled, runtime) = {
            let mut state = lock(&self.inner.state);
            let record = find_mut(&mut state, id, caller)?;
            record.mark_reported();
            let changed = (record.snapshot.status == JobStatus::Running).then(|| {
                record.snapshot.status = JobStatus::Stopping;
                record.snapshot.clone()
            });
            (changed, record.settled.subscribe(), record.runtime.clone())
        };
        if let Some(snapshot) = changed {
            self.inner.changed(&snapshot);
        }
        let inner = Arc::clone(&self.inner);
        let job = JobId(id.to_owned());
        runtime.spawn(async move {
            inner
                .settle_within_grace(&job, settled, "being killed")
                .await;
        });
        Ok(KillOutcome::Requested)
    }

    /// Waits for the job to settle, at most `timeout`, without cancelling it. Returns the
    /// snapshot at settlement (marking it reported) or at the timeout. Cancelling `signal`
    /// ends the wait with an error while the job is still live. Dropping the future before it
    /// resolves leaves the notice to the owner.
    pub async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        caller: Option<&str>,
        signal: &CancellationToken,
    ) -> Result<JobSnapshot, JobError> {
        let (mut settled, mut waiter) = {
            let mut state = self.inner.current();
            let record = find_mut(&mut state, id, caller)?;
            if record.snapshot.status.is_terminal() {
                record.mark_reported();
                return Ok(record.snapshot.clone());
            }
            (
                record.settled.subscribe(),
                Waiter::enter(&self.inner, record),
            )
        };
        let cancelled = tokio::select! {
            _ = settled.wait_for(|done| *done) => false,
            () = tokio::time::sleep(timeout) => false,
            () = signal.cancelled() => true,
        };
        let mut state = lock(&self.inner.state);
        let record = find_mut(&mut state, id, caller)?;
        // Leaving and looking at the status happen under one lock: a settlement after this
        // point no longer counts this caller as a reader.
        waiter.leave(record);
        if record.snapshot.status.is_terminal() {
            record.mark_reported();
            return Ok(record.snapshot.clone());
        }
        if cancelled {
            return Err(JobError::WaitCancelled { id: id.to_owned() });
        }
        Ok(record.snapshot.clone())
    }

    /// Waits (host side) until the job has settled, without counting as a reader: unlike
    /// [`JobRuntime::wait`], the completion notice still goes to the owner. It returns after
    /// the listeners ran and the notice was delivered, so a host may dispose the owner right
    /// after. For hosts that must not exit while work runs; a model-facing wait uses `wait`.
    pub async fn settled(&self, id: &str, caller: Option<&str>) -> Result<JobSnapshot, JobError> {
        let mut settled = {
            let state = self.inner.current();
            find(&state, id, caller)?.settled.subscribe()
        };
        let _ = settled.wait_for(|done| *done).await;
        // No eviction sweep here: a record whose retention is zero would otherwise be gone
        // before the host that waited for it could see it.
        let state = lock(&self.inner.state);
        find(&state, id, caller).map(|r| r.snapshot.clone())
    }

    /// Listens to settlements: each terminal snapshot once, with its owner. Failures are
    /// contained. Disposing the returned handle removes the listener.
    pub fn on_done(
        &self,
        listener: impl Fn(&JobSnapshot, Option<&AgentRef>) + Send + Sync + 'static,
    ) -> Disposer {
        let listener: Arc<DoneListener> = Arc::new(listener);
        self.listen(|inner| &inner.done_listeners, listener)
    }

    /// Listens to every change: start, stopping, settlement. The start is told before the job
    /// can settle, so a listener never sees a job end before it sees it start. Failures are
    /// contained. Disposing the returned handle removes the listener.
    pub fn on_changed(&self, listener: impl Fn(&JobSnapshot) + Send + Sync + 'static) -> Disposer {
        let listener: Arc<ChangedListener> = Arc::new(listener);
        self.listen(|inner| &inner.changed_listeners, listener)
    }

    pub(super) fn listen<F: ?Sized + Send + Sync + 'static>(
        &self,
        listeners: fn(&Inner) -> &Listeners<F>,
        listener: Arc<F>,
    ) -> Disposer {
        let id = listeners(&self.inner).add(listener);
        let inner = Arc::downgrade(&self.inner);
        Disposer::new(move || {
            if let Some(inner) = inner.upgrade() {
                listeners(&inner).remove(id);
            }
        })
    }

    /// Owner disposal: cancels the live jobs of `session`, marks them reported (their reader is
    /// gone) and waits for them to settle, force-failing any that outlive the grace.
    pub async fn dispose_owner(&self, session: &str) {
        self.cancel_and_await(
            |r| r.snapshot.owner_session.as_deref() == Some(session),
            "owner disposed",
        )
        .await;
    }

    /// Service teardown: refuses new jobs, cancels every live job, marks all records reported
    /// and waits for them to settle, force-failing any that outlive the grace.
    pub async fn teardown(&self) {
        lock(&self.inner.state).torn_down = true;
        self.cancel_and_await(|_| true, "jobs runtime torn down")
            .await;
        let mut state = lock(&self.inner.state);
        for record in state.records.values_mut() {
            record.mark_reported();
        }
    }

    pub(super) async fn cancel_and_await(&self, select: impl Fn(&Record) -> bool, reason: &str) {
        let targets: Vec<(JobId, CancelFn, watch::Receiver<bool>)> = {
            let mut state = lock(&self.inner.state);
            state
                .records
                .values_mut()
                .filter(|r| select(r))
                .filter_map(|r| {
                    // Only live jobs still hold their cancel hook.
                    let cancel = r.cancel.clone()?;
                    r.mark_reported();
                    Some((r.snapshot.id.clone(), cancel, r.settled.subscribe()))
                })
                .collect()
        };
        for (id, cancel, _) in &targets {
            if let Err(message) = contain("the producer's cancel", || cancel(reason)) {
                tracing::warn!(job = %id, "{message} while stopping the job ({reason})");
            }
        }
        let after = format!("being cancelled ({reason})");
        let after = after.as_str();
        let waits = targets.into_iter().map(|(id, _, settled)| async move {
            self.inner.settle_within_grace(&id, settled, after).await;
        });
        futures::future::join_all(waits).await;
    }
}

pub(super) fn find<'a>(
    state: &'a State,
    id: &str,
    caller: Option<&str>,
) -> Result<&'a Record, JobError> {
    match state.record(id) {
        Some(record) if visible(record, caller) => Ok(record),
        Some(_) => Err(JobError::NotFound { id: id.to_owned() }),
        None => Err(state.missing(id)),
    }
}

pub(super) fn find_mut<'a>(
    state: &'a mut State,
    id: &str,
    caller: Option<&str>,
) -> Result<&'a mut Record, JobError> {
    let Some(n) = state.index.get(id).copied() else {
        return Err(state.missing(id));
    };
    match state.records.get_mut(&n) {
        Some(record) if visible(record, caller) => Ok(record),
        _ => Err(JobError::NotFound { id: id.to_owned() }),
    }
}

impl Inner {
    /// The state, locked, after evicting the records whose retention has passed. Every
    /// public operation enters through here, so eviction needs no timer of its own.
    pub(super) fn current(&self) -> MutexGuard<'_, State> {
        let mut state = lock(&self.state);
        state.evict_due(Instant::now());
        state
    }

    /// Records a terminal outcome, first wins. Then, in order: change listeners, done
    /// listeners, the completion notice, and last the `settled` signal, which releases waiters
    /// and hosts only once everything else has happened.
    pub(super) fn settle(&self, id: &JobId, outcome: JobOutcome) {
        let (snapshot, owner) = {
            let mut state = lock(&self.state);
            let Some(record) = state.record_mut(id.as_str()) else {
                return;
            };
            if record.snapshot.status.is_terminal() {
                tracing::debug!(job = %id, ?outcome, "late producer outcome ignored");
                return;
            }
            record.snapshot.status = outcome.status.into();
            record.snapshot.detail = outcome.detail;
            record.snapshot.finished_at = Some(now_ms());
            record.final_output = outcome.output;
            record.cancel = None;
            if record.waiters > 0 && !record.snapshot.reported {
                // The waiters will return the end; claim it now so no notice goes out.
                record.snapshot.reported = true;
                record.reported_for_waiters = true;
            }
            let taken = (record.snapshot.clone(), record.owner.clone());
            State::adjust(&mut state.live, &taken.0.owner_session, false);
            taken
        };
        tracing::debug!(job = %id, status = %snapshot.status, "job settled");
        self.changed(&snapshot);
        for listener in self.done_listeners.current() {
            if let Err(message) = contain("a job-done listener", || {
                listener(&snapshot, owner.as_ref())
            }) {
                tracing::warn!(job = %id, "{message}");
            }
        }
        if let Some(owner) = owner {
            self.report(id, &owner);
        }
        let mut state = lock(&self.state);
        if let Some(record) = state.record_mut(id.as_str()) {
            record.settled.send_replace(true);
            // Only now, with the notice delivered (or dropped with its owner), does the
            // retention start.
            if let Some(&n) = state.index.get(id.as_str()) {
                state.queue_eviction(n, Instant::now());
            }
        }
    }

    pub(super) fn changed(&self, snapshot: &JobSnapshot) {
        for listener in self.changed_listeners.current() {
            if let Err(message) = contain("a job-changed listener", || listener(snapshot)) {
                tracing::warn!(job = %snapshot.id, "{message}");
            }
        }
    }

    /// Gives a cancelled job the grace to settle, then force-fails its record: a producer that
    /// never confirms must not leave the job `stopping` forever. `after` names what the job
    /// did not stop after (`being killed`).
    pub(super) async fn settle_within_grace(
        &self,
        id: &JobId,
        mut settled: watch::Receiver<bool>,
        after: &str,
    ) {
        let grace = self.config.teardown_grace;
        if tokio::time::timeout(grace, settled.wait_for(|done| *done))
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!(job = %id, "job did not stop within {grace:?} of {after}; its record is force-failed");
        self.settle(
            id,
            JobOutcome::new(JobEnd::Failed).with_detail(format!(
                "did not stop within {}ms of {after}",
                grace.as_millis()
            )),
        );
    }
}
