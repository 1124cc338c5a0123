//! The job vocabulary: ids, states, outcomes, the hooks and start request a producer hands
//! over, snapshots, and the runtime's configuration.

use crate::agent::AgentRef;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A job id, `<kind>-N` (`bash-1`, `bash-2`, …).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct JobId(pub(super) String);

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

pub(super) type CancelFn = Arc<dyn Fn(&str) + Send + Sync>;
pub(super) type ReaderFn = Arc<Mutex<Box<dyn FnMut(usize) -> String + Send>>>;

/// The hooks through which the runtime controls and observes a producer's work.
pub struct JobHooks {
    pub(super) cancel: CancelFn,
    pub(super) done: BoxFuture<'static, Result<JobOutcome, ProducerError>>,
    pub(super) reader: Option<ReaderFn>,
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

pub(super) type RunFn = Box<dyn FnOnce() -> Result<JobHooks, ProducerError> + Send>;

/// What a producer hands to [`JobRuntime::start`](super::JobRuntime::start).
pub struct JobStart {
    pub(super) kind: String,
    pub(super) label: String,
    pub(super) owner: Option<AgentRef>,
    pub(super) output_limit_bytes: Option<usize>,
    pub(super) run: RunFn,
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
pub(super) fn status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
    schemars::json_schema!({"type": "string", "enum": names})
}

/// Removes the descriptions `schemars` takes from doc comments: a tool's value schema is the
/// shape alone, and these docs stay Rust documentation.
pub(super) fn without_descriptions(schema: &mut schemars::Schema) {
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
pub(super) fn status_line(status: JobStatus, detail: Option<&str>) -> String {
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
    /// with no lock of the runtime held, so it may call back into the [`JobRuntime`](super::JobRuntime). It should
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
    /// the record is evicted and the id reads as [`JobError::Expired`](super::JobError::Expired). Default 10 minutes.
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
