//! The generic background-job runtime: ids, lifecycle, ownership, and completion notices.
//!
//! A producer (such as the `bash` tool) starts work with [`JobRuntime::start`]; the runtime owns
//! the job's identity, access and lifecycle, the producer owns the execution resources. Model
//! facing controls (`job_output`, `job_list`, `job_kill`) sit on top of [`JobRuntime::read`],
//! [`JobRuntime::list`], [`JobRuntime::kill`] and [`JobRuntime::wait`].
//!
//! Rules worth knowing:
//! - `start` finishes every failable preflight (inside a tokio runtime, not torn down,
//!   controller attached, owner alive, capacity) before calling the producer's `run`; if `run`
//!   fails nothing is registered.
//! - Ids are `<kind>-N`, predictable: authorization by owner session, not secrecy, is the
//!   boundary. Owned jobs are visible only from the owner's session; unowned jobs from anyone.
//! - Settlement is first-wins: one terminal record, waiters released once, listeners notified
//!   once, whatever a late producer outcome says.
//! - When a job settles and nobody has reported it (a kill, a read or wait that saw the end,
//!   or teardown), the owner gets one completion notice through
//!   [`AgentHandle::inject`](crate::AgentHandle::inject): at most one per job, and none lost,
//!   so N jobs finishing together produce N notices. A disposed owner's notice is dropped with
//!   it (nobody is left to read it).
//! - A host awaiting [`JobRuntime::settled`] resumes only after the listeners ran and the
//!   notice was delivered.
//! - A settled record is evicted once its end was reported and
//!   [`JobsConfig::settled_retention`] has passed; its id then reads as
//!   [`JobError::Expired`], derived from the per-kind id counter, so nothing is kept per
//!   evicted job. A stream job's reader is handed the caller's byte budget.

use crate::agent::{AgentRef, InjectedContext};
use crate::definition::contain;
use crate::error::panic_message;
use crate::scope::Disposer;
use crate::text::{bound_keeping_tail, head_bytes};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A job id, `<kind>-N` (`bash-1`, `bash-2`, …).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for JobId {
    fn from(text: &str) -> JobId {
        JobId(text.to_owned())
    }
}

impl From<String> for JobId {
    fn from(text: String) -> JobId {
        JobId(text)
    }
}

/// A job's lifecycle state: `running → (stopping) → completed | killed | failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// The work is running.
    Running,
    /// Cancellation was requested; the producer is releasing its resources.
    Stopping,
    /// The work finished by itself.
    Completed,
    /// The work was cancelled.
    Killed,
    /// The work broke (or its producer did).
    Failed,
}

impl JobStatus {
    /// Every state, in lifecycle order.
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Running,
        JobStatus::Stopping,
        JobStatus::Completed,
        JobStatus::Killed,
        JobStatus::Failed,
    ];

    /// Whether the job has settled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Killed | JobStatus::Failed
        )
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Stopping => "stopping",
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Failed => "failed",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a producer's work ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// Finished by itself.
    Completed,
    /// Cancelled.
    Killed,
    /// Broke.
    Failed,
}

impl From<JobEnd> for JobStatus {
    fn from(end: JobEnd) -> JobStatus {
        match end {
            JobEnd::Completed => JobStatus::Completed,
            JobEnd::Killed => JobStatus::Killed,
            JobEnd::Failed => JobStatus::Failed,
        }
    }
}

/// The terminal result a producer's `done` resolves to, after it released its resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobOutcome {
    /// How the work ended.
    pub status: JobEnd,
    /// Kind-specific detail for status lines (`exit code: 3`).
    pub detail: Option<String>,
    /// The final output of jobs without a reader; stream jobs leave it unset.
    pub output: Option<String>,
}

impl JobOutcome {
    /// An outcome with no detail or output.
    pub fn new(status: JobEnd) -> JobOutcome {
        JobOutcome {
            status,
            detail: None,
            output: None,
        }
    }

    /// Adds the status detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> JobOutcome {
        self.detail = Some(detail.into());
        self
    }

    /// Adds the final output.
    pub fn with_output(mut self, output: impl Into<String>) -> JobOutcome {
        self.output = Some(output.into());
        self
    }
}

/// A producer's failure, turned into a `failed` settlement or a start error.
pub type ProducerError = Box<dyn std::error::Error + Send + Sync>;

type CancelFn = Arc<dyn Fn(&str) + Send + Sync>;
type ReaderFn = Arc<Mutex<Box<dyn FnMut(usize) -> String + Send>>>;

/// The hooks through which the runtime controls and observes a producer's work.
pub struct JobHooks {
    cancel: CancelFn,
    done: BoxFuture<'static, Result<JobOutcome, ProducerError>>,
    reader: Option<ReaderFn>,
}

impl fmt::Debug for JobHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHooks")
            .field("streams_output", &self.reader.is_some())
            .finish_non_exhaustive()
    }
}

impl JobHooks {
    /// `cancel(reason)` must be synchronous and idempotent and must eventually settle `done`;
    /// `done` resolves only after the producer released its resources. A panic or error in
    /// `done` settles the job as `failed` with a detail.
    pub fn new(
        cancel: impl Fn(&str) + Send + Sync + 'static,
        done: impl Future<Output = Result<JobOutcome, ProducerError>> + Send + 'static,
    ) -> JobHooks {
        JobHooks {
            cancel: Arc::new(cancel),
            done: Box::pin(done),
            reader: None,
        }
    }

    /// Makes the job a stream job: `read(budget)` consumes the output produced since its
    /// previous call, at most `budget` bytes of it (the caller's byte budget: the job's
    /// `output_limit_bytes`, or less if the caller asked for less; `usize::MAX` when neither
    /// bounds it). A reader should materialise no more than the budget; the runtime still cuts
    /// a longer text to it, keeping its end. Without a reader the job is final-output-only.
    pub fn with_reader(mut self, read: impl FnMut(usize) -> String + Send + 'static) -> JobHooks {
        self.reader = Some(Arc::new(Mutex::new(Box::new(read))));
        self
    }
}

type RunFn = Box<dyn FnOnce() -> Result<JobHooks, ProducerError> + Send>;

/// What a producer hands to [`JobRuntime::start`].
pub struct JobStart {
    kind: String,
    label: String,
    owner: Option<AgentRef>,
    output_limit_bytes: Option<usize>,
    run: RunFn,
}

impl fmt::Debug for JobStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobStart")
            .field("kind", &self.kind)
            .field("label", &self.label)
            .field(
                "owner",
                &self.owner.as_ref().map(|o| o.session_id().to_owned()),
            )
            .finish_non_exhaustive()
    }
}

impl JobStart {
    /// A job of `kind` (also the id prefix and the notice's plugin source) with a one-line
    /// model-facing label. `run` is called once, after preflight, and starts the work.
    pub fn new(
        kind: impl Into<String>,
        label: impl Into<String>,
        run: impl FnOnce() -> Result<JobHooks, ProducerError> + Send + 'static,
    ) -> JobStart {
        JobStart {
            kind: kind.into(),
            label: label.into(),
            owner: None,
            output_limit_bytes: None,
            run: Box::new(run),
        }
    }

    /// The owning agent: access is fenced by its session, its disposal cancels the job, and
    /// it receives the completion notice. Without an owner the job is open to every caller.
    pub fn owner(mut self, owner: AgentRef) -> JobStart {
        self.owner = Some(owner);
        self
    }

    /// A UTF-8 byte cap for each model-facing read and notice.
    pub fn output_limit_bytes(mut self, limit: usize) -> JobStart {
        self.output_limit_bytes = Some(limit);
        self
    }
}

/// A fresh, read-only copy of a job's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSnapshot {
    /// The id.
    pub id: JobId,
    /// The producer kind.
    pub kind: String,
    /// The one-line label.
    pub label: String,
    /// The lifecycle state.
    pub status: JobStatus,
    /// Kind-specific detail (`exit code: 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When it was registered (Unix epoch milliseconds).
    pub started_at: u64,
    /// When it settled (Unix epoch milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// The owner's session, for owned jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_session: Option<String>,
    /// Whether the terminal state was (or is committed to be) reported to the owner.
    pub reported: bool,
    /// The byte cap for model-facing reads and notices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_limit_bytes: Option<usize>,
}

impl JobSnapshot {
    /// `[status: completed, exit code: 0]`, or `[status: running]` without detail.
    pub fn status_line(&self) -> String {
        status_line(self.status, self.detail.as_deref())
    }
}

/// The model-facing projection of a job ([`JobSnapshot`] without its ownership bookkeeping):
/// what the job-control tools put in their values, and whose schema they publish.
///
/// Any producer's job has this shape, so a tool that reports on jobs can derive its output
/// schema from this type instead of spelling it by hand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct PublicJobSnapshot {
    /// The id.
    #[schemars(with = "String")]
    pub id: JobId,
    /// The producer kind.
    pub kind: String,
    /// The one-line label.
    pub label: String,
    /// The lifecycle state.
    #[schemars(schema_with = "status_schema")]
    pub status: JobStatus,
    /// Kind-specific detail (`exit code: 0`); absent, never `null`, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub detail: Option<String>,
    /// When it was registered (Unix epoch milliseconds).
    #[schemars(with = "i64")]
    pub started_at: u64,
    /// When it settled (Unix epoch milliseconds); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub finished_at: Option<u64>,
}

/// The schema of a status in a [`PublicJobSnapshot`]: a string of [`JobStatus::ALL`]'s
/// spellings, without the per-state prose the doc comments would add.
fn status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
    schemars::json_schema!({"type": "string", "enum": names})
}

/// Removes the descriptions `schemars` takes from doc comments: a tool's value schema is the
/// shape alone, and these docs stay Rust documentation.
fn without_descriptions(schema: &mut schemars::Schema) {
    use schemars::transform::Transform;
    schemars::transform::RecursiveTransform(|schema: &mut schemars::Schema| {
        schema.remove("description");
    })
    .transform(schema);
}

impl PublicJobSnapshot {
    /// `[status: completed, exit code: 0]`, or `[status: running]` without detail.
    pub fn status_line(&self) -> String {
        status_line(self.status, self.detail.as_deref())
    }
}

impl From<&JobSnapshot> for PublicJobSnapshot {
    fn from(snapshot: &JobSnapshot) -> PublicJobSnapshot {
        PublicJobSnapshot {
            id: snapshot.id.clone(),
            kind: snapshot.kind.clone(),
            label: snapshot.label.clone(),
            status: snapshot.status,
            detail: snapshot.detail.clone(),
            started_at: snapshot.started_at,
            finished_at: snapshot.finished_at,
        }
    }
}

/// The status line of a job, spelled once for [`JobSnapshot`] and [`PublicJobSnapshot`].
fn status_line(status: JobStatus, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("[status: {status}, {detail}]"),
        None => format!("[status: {status}]"),
    }
}

/// What a read returns: the output and the state at read time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRead {
    /// Stream jobs: the delta since the previous read. Final-output jobs: empty while live,
    /// the final output once settled.
    pub text: String,
    /// The job's state at read time.
    pub snapshot: JobSnapshot,
}

/// What a kill did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// Cancellation was requested; the job is stopping.
    Requested,
    /// The job had already settled.
    AlreadyFinished,
}

/// How completion notices reach an owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeDelivery {
    /// Injected as context for the owner's next model request; an idle owner stays idle.
    Quiet,
    /// Injected, and an idle owner is given a turn to handle it (through the
    /// [`TurnOpener`]), at most `max_consecutive_wakes` times without intervening user input.
    Wakeup {
        /// The budget of consecutive woken turns (default 3).
        max_consecutive_wakes: u32,
    },
}

/// The host side of `wakeup` delivery: opens a turn on an idle agent.
pub trait TurnOpener: Send + Sync {
    /// Opens a turn on `owner` if it is idle, returning whether it did. The notice is already
    /// in the owner's inbox when this is called.
    ///
    /// It runs on whichever thread delivers the notice (usually the one that settled the job),
    /// with no lock of the runtime held, so it may call back into the [`JobRuntime`]. It should
    /// return quickly: spawn the turn, do not run it here.
    fn open_turn(&self, owner: &AgentRef) -> bool;
}

/// Runtime configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobsConfig {
    /// The most `running` + `stopping` jobs one owner may have (unowned jobs share one
    /// bucket). Default 10.
    pub max_concurrent_jobs_per_owner: usize,
    /// How completion notices are delivered. Default `Quiet`.
    pub delivery: NoticeDelivery,
    /// How long a killed job, owner disposal and teardown wait for cancelled producers to
    /// settle before force-failing their records. Default 10 s (above the shell's 2 s kill
    /// grace).
    pub teardown_grace: Duration,
    /// How long a settled job's record is kept once its end was reported (its notice
    /// delivered, or dropped with its disposed owner, or the end seen by a read, wait or
    /// kill); unowned jobs, which have no notice, count from their settlement. After that
    /// the record is evicted and the id reads as [`JobError::Expired`]. Default 10 minutes.
    pub settled_retention: Duration,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            max_concurrent_jobs_per_owner: 10,
            delivery: NoticeDelivery::Quiet,
            teardown_grace: Duration::from_secs(10),
            settled_retention: Duration::from_secs(600),
        }
    }
}

/// Why a job operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// No job controller is attached, so nobody could read or stop the work.
    #[error(
        "no job controller is attached: background jobs need the job tools (job_output, job_kill) to be loaded"
    )]
    NoController,
    /// The owner was disposed.
    #[error("the owning agent (session `{session}`) is gone; no job was started")]
    OwnerGone {
        /// The owner's session.
        session: String,
    },
    /// The owner is at its limit of live jobs.
    #[error(
        "{owner} already has {limit} running jobs (the limit is {limit}); wait for one to finish or stop one with job_kill"
    )]
    Capacity {
        /// Who is at the limit.
        owner: String,
        /// The limit.
        limit: usize,
    },
    /// `start` was called outside a tokio runtime, which the jobs runtime needs to watch the
    /// producer's `done`.
    #[error("jobs need a tokio runtime to watch their producers; start was called outside one")]
    NoRuntime,
    /// The runtime was torn down.
    #[error("the jobs runtime was torn down; no job was started")]
    TornDown,
    /// The producer's `run` failed or panicked; nothing was registered.
    #[error("the job could not start: {0}")]
    Run(String),
    /// The id is unknown, or belongs to another session.
    #[error("no job `{id}` is visible to this session")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The job existed, settled, was reported and its record was evicted after the
    /// configured `settled_retention`; its output is gone.
    #[error(
        "job `{id}` has expired: it finished, its end was reported, and its record was removed after the retention of {}ms; its output is no longer available",
        retention.as_millis()
    )]
    Expired {
        /// The id asked for.
        id: String,
        /// The retention it outlived.
        retention: Duration,
    },
    /// The producer's `cancel` panicked; the job's state is unchanged.
    #[error("stopping job `{id}` failed: {message}")]
    Cancel {
        /// The job.
        id: String,
        /// What went wrong.
        message: String,
    },
    /// A wait was cancelled by its signal while the job was still live.
    #[error("the wait for job `{id}` was cancelled")]
    WaitCancelled {
        /// The job.
        id: String,
    },
}

type DoneListener = dyn Fn(&JobSnapshot, Option<&AgentRef>) + Send + Sync;
type ChangedListener = dyn Fn(&JobSnapshot) + Send + Sync;

/// The registered listeners of one kind, each removable by the id it was given.
struct Listeners<F: ?Sized> {
    next: AtomicU64,
    list: Mutex<Vec<(u64, Arc<F>)>>,
}

impl<F: ?Sized> Listeners<F> {
    fn new() -> Listeners<F> {
        Listeners {
            next: AtomicU64::new(1),
            list: Mutex::new(Vec::new()),
        }
    }

    fn add(&self, listener: Arc<F>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.list).push((id, listener));
        id
    }

    fn remove(&self, id: u64) {
        lock(&self.list).retain(|(listener, _)| *listener != id);
    }

    /// The listeners at this moment. They are called from this copy, without the lock held,
    /// so a listener may add or remove listeners.
    fn current(&self) -> Vec<Arc<F>> {
        lock(&self.list)
            .iter()
            .map(|(_, listener)| Arc::clone(listener))
            .collect()
    }
}

struct Record {
    snapshot: JobSnapshot,
    owner: Option<AgentRef>,
    /// The producer's cancel hook while the job is live; dropped at settlement, since nothing
    /// may cancel a settled job (the reader stays: the output remains readable).
    cancel: Option<CancelFn>,
    reader: Option<ReaderFn>,
    final_output: Option<String>,
    /// Set once the settlement is complete: recorded, listeners called, notice delivered.
    settled: watch::Sender<bool>,
    /// The tokio runtime `start` ran in, which also runs the job's kill watchdog.
    runtime: Handle,
    /// Callers inside `wait`: each will return the terminal snapshot, so a settlement while
    /// any is waiting counts as reported.
    waiters: usize,
    /// The settlement was marked reported only because waiters were counted, and none of them
    /// has returned it yet. If they all go away without returning it (their futures dropped),
    /// the notice is delivered after all.
    reported_for_waiters: bool,
}

impl Record {
    /// Marks the end as seen by a caller: no notice follows.
    fn mark_reported(&mut self) {
        self.snapshot.reported = true;
        self.reported_for_waiters = false;
    }
}

struct State {
    /// The records by registration number, so listings keep registration order.
    records: BTreeMap<u64, Record>,
    /// The registration number of each held id.
    index: HashMap<String, u64>,
    /// The last registration number given.
    registered: u64,
    /// The last number issued per kind. Ids are issued in order and never reused, so an id
    /// at or below its kind's counter that is no longer held was evicted: "expired" needs no
    /// per-job memory.
    counters: HashMap<String, u64>,
    /// Running and stopping jobs per owner session (zero counts are removed), so the
    /// capacity check does not scan the records.
    live: HashMap<Option<String>, usize>,
    /// Capacity held by starts whose `run` is in progress, per owner session (zero counts
    /// are removed).
    reserved: HashMap<Option<String>, usize>,
    /// Settled records by registration number, each with the instant it may be evicted.
    /// Entries are pushed with `now + retention`, so the queue stays in deadline order and a
    /// sweep only looks at its front.
    evictable: VecDeque<(Instant, u64)>,
    retention: Duration,
    torn_down: bool,
}

impl State {
    fn new(retention: Duration) -> State {
        State {
            records: BTreeMap::new(),
            index: HashMap::new(),
            registered: 0,
            counters: HashMap::new(),
            live: HashMap::new(),
            reserved: HashMap::new(),
            evictable: VecDeque::new(),
            retention,
            torn_down: false,
        }
    }

    fn record(&self, id: &str) -> Option<&Record> {
        self.index.get(id).and_then(|n| self.records.get(n))
    }

    fn record_mut(&mut self, id: &str) -> Option<&mut Record> {
        let n = self.index.get(id)?;
        self.records.get_mut(n)
    }

    /// Why `id` is not found: expired if the runtime issued it (it was evicted), otherwise
    /// unknown. The id says which: `<kind>-N` with `N` at most the kind's counter.
    fn missing(&self, id: &str) -> JobError {
        let issued = issued_parts(id)
            .is_some_and(|(kind, n)| self.counters.get(kind).is_some_and(|last| n <= *last));
        if issued {
            JobError::Expired {
                id: id.to_owned(),
                retention: self.retention,
            }
        } else {
            JobError::NotFound { id: id.to_owned() }
        }
    }

    /// Counts one job more (`up`) or one fewer for `owner` in `counts` (the live or the
    /// reserved jobs), removing a count that reaches zero so sessions that come and go leave
    /// nothing behind.
    fn adjust(counts: &mut HashMap<Option<String>, usize>, owner: &Option<String>, up: bool) {
        if up {
            *counts.entry(owner.clone()).or_insert(0) += 1;
        } else if let Some(count) = counts.get_mut(owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(owner);
            }
        }
    }

    /// Queues a settled record for eviction once the retention has passed. A retention too
    /// long to add to the clock keeps the record for good.
    fn queue_eviction(&mut self, n: u64, now: Instant) {
        if let Some(deadline) = now.checked_add(self.retention) {
            self.evictable.push_back((deadline, n));
        }
    }

    /// Evicts the queued records whose retention has passed and whose end was reported. One
    /// still awaited by a `wait`, or whose end went back to unreported (its waiters left
    /// without returning it), is queued again for a full retention.
    fn evict_due(&mut self, now: Instant) {
        let mut again = Vec::new();
        while let Some(&(deadline, n)) = self.evictable.front() {
            if deadline > now {
                break;
            }
            self.evictable.pop_front();
            let Some(record) = self.records.get(&n) else {
                continue;
            };
            let unreported = record.owner.is_some() && !record.snapshot.reported;
            if record.waiters > 0 || unreported {
                again.push(n);
                continue;
            }
            if let Some(record) = self.records.remove(&n) {
                self.index.remove(record.snapshot.id.as_str());
                tracing::debug!(job = %record.snapshot.id, "settled job evicted");
            }
        }
        for n in again {
            self.queue_eviction(n, now);
        }
    }
}

struct Inner {
    config: JobsConfig,
    state: Mutex<State>,
    controllers: AtomicUsize,
    done_listeners: Listeners<DoneListener>,
    changed_listeners: Listeners<ChangedListener>,
    opener: Mutex<Option<Arc<dyn TurnOpener>>>,
    wakes: Mutex<HashMap<String, u32>>,
}

/// The kind and number of an id as the runtime issues them (`<kind>-N`, `N` from 1 in plain
/// digits); `None` for any other text.
fn issued_parts(id: &str) -> Option<(&str, u64)> {
    let (kind, number) = id.rsplit_once('-')?;
    let n = number.parse::<u64>().ok()?;
    (n >= 1 && n.to_string() == number).then_some((kind, n))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a handful of field updates that cannot leave the state
    // half-written, so a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn visible(record: &Record, caller: Option<&str>) -> bool {
    match &record.snapshot.owner_session {
        None => true,
        Some(owner) => Some(owner.as_str()) == caller,
    }
}

/// The jobs runtime (a shared service; cheap to clone). Provide it to tools with
/// [`Scope::provide`](crate::Scope::provide) and reach it with `exec.service::<JobRuntime>()`.
#[derive(Clone)]
pub struct JobRuntime {
    inner: Arc<Inner>,
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

    fn listen<F: ?Sized + Send + Sync + 'static>(
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

    async fn cancel_and_await(&self, select: impl Fn(&Record) -> bool, reason: &str) {
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

fn find<'a>(state: &'a State, id: &str, caller: Option<&str>) -> Result<&'a Record, JobError> {
    match state.record(id) {
        Some(record) if visible(record, caller) => Ok(record),
        Some(_) => Err(JobError::NotFound { id: id.to_owned() }),
        None => Err(state.missing(id)),
    }
}

fn find_mut<'a>(
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

/// A caller inside [`JobRuntime::wait`], counted on its record. It is uncounted when the wait
/// returns, and also when the wait's future is dropped first (a timeout around it, an aborted
/// task): a dropped wait must not swallow the owner's notice.
struct Waiter<'a> {
    inner: &'a Inner,
    id: JobId,
    counted: bool,
}

impl<'a> Waiter<'a> {
    fn enter(inner: &'a Inner, record: &mut Record) -> Waiter<'a> {
        record.waiters += 1;
        Waiter {
            inner,
            id: record.snapshot.id.clone(),
            counted: true,
        }
    }

    /// The wait returns: uncounts it under the caller's lock.
    fn leave(&mut self, record: &mut Record) {
        if std::mem::take(&mut self.counted) {
            record.waiters -= 1;
        }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let owner = {
            let mut state = lock(&self.inner.state);
            let Some(record) = state.record_mut(self.id.as_str()) else {
                return;
            };
            record.waiters -= 1;
            // The settlement was claimed for waiters, and the last of them is gone without
            // returning it: nobody saw the end, so the owner is told after all.
            if record.waiters == 0 && record.reported_for_waiters {
                record.reported_for_waiters = false;
                record.snapshot.reported = false;
                record.owner.clone()
            } else {
                None
            }
        };
        if let Some(owner) = owner {
            self.inner.report(&self.id, &owner);
        }
    }
}

impl Inner {
    /// The state, locked, after evicting the records whose retention has passed. Every
    /// public operation enters through here, so eviction needs no timer of its own.
    fn current(&self) -> MutexGuard<'_, State> {
        let mut state = lock(&self.state);
        state.evict_due(Instant::now());
        state
    }

    /// Records a terminal outcome, first wins. Then, in order: change listeners, done
    /// listeners, the completion notice, and last the `settled` signal, which releases waiters
    /// and hosts only once everything else has happened.
    fn settle(&self, id: &JobId, outcome: JobOutcome) {
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

    fn changed(&self, snapshot: &JobSnapshot) {
        for listener in self.changed_listeners.current() {
            if let Err(message) = contain("a job-changed listener", || listener(snapshot)) {
                tracing::warn!(job = %snapshot.id, "{message}");
            }
        }
    }

    /// Gives a cancelled job the grace to settle, then force-fails its record: a producer that
    /// never confirms must not leave the job `stopping` forever. `after` names what the job
    /// did not stop after (`being killed`).
    async fn settle_within_grace(
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

    /// Delivers the completion notice unless the end was already reported. Claiming the
    /// `reported` flag under the lock makes delivery at most once per job.
    fn report(&self, id: &JobId, owner: &AgentRef) {
        let snapshot = {
            let mut state = lock(&self.state);
            let Some(record) = state.record_mut(id.as_str()) else {
                return;
            };
            if record.snapshot.reported {
                return;
            }
            record.mark_reported();
            record.snapshot.clone()
        };
        let notice =
            InjectedContext::from_plugin(snapshot.kind.clone(), completion_notice(&snapshot));
        if let Err(gone) = owner.inject(notice) {
            tracing::debug!(job = %id, "completion notice dropped: {gone}");
            return;
        }
        if let NoticeDelivery::Wakeup {
            max_consecutive_wakes,
        } = self.config.delivery
        {
            self.wake(owner, max_consecutive_wakes);
        }
    }

    /// Asks the host to open a turn on `owner`, within its budget of consecutive wakes.
    fn wake(&self, owner: &AgentRef, budget: u32) {
        let Some(opener) = lock(&self.opener).clone() else {
            return;
        };
        let session = owner.session_id();
        {
            // The wake is spent before the opener runs, so two notices cannot both take the
            // last one, and the opener runs without the lock (it may call back into the
            // runtime).
            let mut wakes = lock(&self.wakes);
            let spent = wakes.entry(session.to_owned()).or_insert(0);
            if *spent >= budget {
                return;
            }
            *spent += 1;
        }
        let opened =
            contain("the turn opener", || opener.open_turn(owner)).unwrap_or_else(|message| {
                tracing::warn!("{message}");
                false
            });
        if !opened {
            // No turn was opened: give the wake back. (If user input reset the budget in the
            // meantime there is nothing to give back; at worst a concurrent wake goes
            // uncounted, which only makes the budget one more generous.)
            if let Some(spent) = lock(&self.wakes).get_mut(session) {
                *spent = spent.saturating_sub(1);
            }
        }
    }
}

/// The completion notice: `background job bash-1 (bash: npm test) finished [status:
/// completed, exit code: 1]. Read its output with job_output.`, bounded by the job's
/// `output_limit_bytes` (the label goes first, then the text is cut on a character boundary).
pub fn completion_notice(snapshot: &JobSnapshot) -> String {
    let full = format!(
        "background job {} ({}: {}) finished {}. Read its output with job_output.",
        snapshot.id,
        snapshot.kind,
        snapshot.label,
        snapshot.status_line()
    );
    let Some(limit) = snapshot.output_limit_bytes else {
        return full;
    };
    if full.len() <= limit {
        return full;
    }
    let short = format!(
        "background job {} finished {}. Read its output with job_output.",
        snapshot.id,
        snapshot.status_line()
    );
    if short.len() <= limit {
        return short;
    }
    head_bytes(&short, limit).to_owned()
}
