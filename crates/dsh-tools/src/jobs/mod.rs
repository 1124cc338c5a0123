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
//!
//! The module's parts: `types` (ids, states, outcomes, hooks, the start request, snapshots and
//! the configuration), `error` ([`JobError`]), `state` (the records, listeners and locked
//! state), `runtime` ([`JobRuntime`] and settlement), `waiter` (the count of callers inside a
//! wait) and `notice` (completion notices and wake-ups, [`completion_notice`]).

mod error;
mod notice;
mod runtime;
mod state;
mod types;
mod waiter;

pub use error::JobError;
pub use notice::completion_notice;
pub use runtime::JobRuntime;
pub use types::*;
