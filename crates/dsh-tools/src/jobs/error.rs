//! Why a job operation failed.

use std::time::Duration;

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
