//! The background-job runtime: preflight and ids here, with the shared helpers; settlement,
//! fencing, waiting and reads in `settlement.rs`; retention and lifetimes in `lifetimes.rs`;
//! notices and wake-ups in `notices.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lifetimes;
mod notices;
mod settlement;

use dsh_test_support::RecordingAgent;
use dsh_tools::jobs::{
    JobEnd, JobError, JobHooks, JobId, JobOutcome, JobRuntime, JobSnapshot, JobStart, JobStatus,
    JobsConfig, KillOutcome, NoticeDelivery, TurnOpener, completion_notice,
};
use dsh_tools::{AgentHandle, AgentRef, ContextSource, InjectedContext};
use futures::FutureExt;
use pretty_assertions::assert_eq;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

/// How long any single settlement may take before a test gives up on it.
const BOUND: Duration = Duration::from_secs(5);

/// Remote control of one producer: finish it, and see whether it was cancelled.
#[derive(Clone)]
struct Control {
    finish: Arc<Mutex<Option<oneshot::Sender<JobOutcome>>>>,
    cancelled: Arc<AtomicUsize>,
}

impl Control {
    fn finish(&self, outcome: JobOutcome) -> bool {
        match self.finish.lock().unwrap().take() {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    fn cancels(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// A producer that settles when told to, or as `killed` when cancelled if `obey` is set.
fn producer(kind: &str, label: &str, obey: bool) -> (JobStart, Control) {
    let (tx, rx) = oneshot::channel::<JobOutcome>();
    let control = Control {
        finish: Arc::new(Mutex::new(Some(tx))),
        cancelled: Arc::new(AtomicUsize::new(0)),
    };
    let on_cancel = control.clone();
    let start = JobStart::new(kind, label, move || {
        Ok(JobHooks::new(
            move |_reason| {
                on_cancel.cancelled.fetch_add(1, Ordering::SeqCst);
                if obey {
                    on_cancel
                        .finish(JobOutcome::new(JobEnd::Killed).with_detail("signal: SIGTERM"));
                }
            },
            async move { rx.await.map_err(|e| e.into()) },
        ))
    });
    (start, control)
}

fn runtime_with(config: JobsConfig) -> JobRuntime {
    let jobs = JobRuntime::new(config);
    // The controller stays attached for the test's lifetime (a `Disposer` does nothing when
    // dropped).
    let _ = jobs.attach_controller();
    jobs
}

fn runtime() -> JobRuntime {
    runtime_with(JobsConfig {
        teardown_grace: Duration::from_millis(300),
        ..JobsConfig::default()
    })
}

fn agent(session: &str) -> Arc<RecordingAgent> {
    RecordingAgent::new(session)
}

fn never() -> CancellationToken {
    CancellationToken::new()
}

/// Waits for a settlement the way a host does, without counting as a reader. When it returns,
/// the listeners have run and the owner's notice (if any) has been delivered.
async fn settled(jobs: &JobRuntime, id: &str, caller: Option<&str>) -> JobSnapshot {
    timeout(BOUND, jobs.settled(id, caller))
        .await
        .unwrap_or_else(|_| panic!("job {id} did not settle"))
        .unwrap()
}

/// Starts a stubborn or obedient producer owned by `owner`.
fn start_owned(
    jobs: &JobRuntime,
    owner: &Arc<RecordingAgent>,
    label: &str,
    obey: bool,
) -> (JobId, Control) {
    let (start, control) = producer("bash", label, obey);
    let owner: AgentRef = owner.clone();
    (jobs.start(start.owner(owner)).unwrap(), control)
}

/// Starts a job owned by `owner`, finishes it with `outcome` and waits for its settlement.
async fn run_owned(
    jobs: &JobRuntime,
    owner: &Arc<RecordingAgent>,
    label: &str,
    outcome: JobOutcome,
) -> JobSnapshot {
    let (id, control) = start_owned(jobs, owner, label, true);
    assert!(control.finish(outcome));
    settled(jobs, id.as_str(), Some(owner.session_id())).await
}

/// The notice texts `agent` received so far.
fn notices(agent: &RecordingAgent) -> Vec<String> {
    agent.injected().into_iter().map(|n| n.content).collect()
}

/// The notice of a `bash` job with the given number and label that completed with exit 0.
fn completed_notice(n: usize, label: &str) -> String {
    format!(
        "background job bash-{n} (bash: {label}) finished [status: completed, exit code: 0]. Read its output with job_output."
    )
}

fn exit_0() -> JobOutcome {
    JobOutcome::new(JobEnd::Completed).with_detail("exit code: 0")
}

/// Waits until no task is left on the test's runtime: every producer's settlement task and
/// every kill watchdog has finished, so nothing can change a job any more.
async fn quiescent() {
    let metrics = tokio::runtime::Handle::current().metrics();
    timeout(BOUND, async {
        while metrics.num_alive_tasks() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the runtime's tasks did not finish");
}

// ----- Preflight ----------------------------------------------------------------------------

#[tokio::test]
async fn a_failing_run_registers_nothing_and_uses_no_id() {
    let jobs = runtime();
    let err = jobs
        .start(JobStart::new("bash", "false", || {
            Err("spawn failed: no such file".into())
        }))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the job could not start: spawn failed: no such file"
    );
    let err = jobs
        .start(JobStart::new("bash", "boom", || {
            panic!("producer exploded")
        }))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the job could not start: the producer panicked: producer exploded"
    );
    assert!(jobs.list(None).is_empty());
    let (start, _control) = producer("bash", "ok", true);
    assert_eq!(jobs.start(start).unwrap().as_str(), "bash-1");
}

#[tokio::test]
async fn preflight_refuses_without_a_controller_for_a_dead_owner_and_past_capacity() {
    let ran = Arc::new(AtomicBool::new(false));
    let probe = |ran: &Arc<AtomicBool>| {
        let ran = Arc::clone(ran);
        move || -> Result<JobHooks, dsh_tools::jobs::ProducerError> {
            ran.store(true, Ordering::SeqCst);
            Err("should not run".into())
        }
    };

    let bare = JobRuntime::new(JobsConfig::default());
    assert!(matches!(
        bare.start(JobStart::new("bash", "x", probe(&ran))),
        Err(JobError::NoController)
    ));

    let jobs = runtime_with(JobsConfig {
        max_concurrent_jobs_per_owner: 2,
        ..JobsConfig::default()
    });
    let gone = agent("gone");
    gone.dispose();
    let err = jobs
        .start(JobStart::new("bash", "x", probe(&ran)).owner(gone))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the owning agent (session `gone`) is gone; no job was started"
    );

    let owner = agent("s1");
    let (first, first_control) = start_owned(&jobs, &owner, "sleep", true);
    let _second = start_owned(&jobs, &owner, "sleep", true);
    let err = jobs
        .start(JobStart::new("bash", "x", probe(&ran)).owner(owner.clone()))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "session `s1` already has 2 running jobs (the limit is 2); wait for one to finish or stop one with job_kill"
    );
    assert!(
        !ran.load(Ordering::SeqCst),
        "run was called despite a failed preflight"
    );
    // Another owner has its own bucket; a settled job frees capacity.
    let _other = start_owned(&jobs, &agent("s2"), "other", true);
    first_control.finish(exit_0());
    settled(&jobs, first.as_str(), Some("s1")).await;
    let _third = start_owned(&jobs, &owner, "third", true);
}

#[tokio::test]
async fn a_start_whose_producer_is_still_starting_holds_its_place_against_the_limit() {
    // The producer of the second job starts a third job of the same owner before it returns:
    // the second is not running yet, but its place is taken, so the third finds the owner at
    // the limit instead of slipping past it.
    let jobs = runtime_with(JobsConfig {
        max_concurrent_jobs_per_owner: 2,
        ..JobsConfig::default()
    });
    let owner = agent("s1");
    let (first, _first) = start_owned(&jobs, &owner, "first", true);
    let (third, _third) = producer("bash", "third", true);
    let nested = Arc::new(Mutex::new(None));
    let (_finish_second, second_done) = oneshot::channel::<JobOutcome>();
    let second = {
        let (jobs, nested) = (jobs.clone(), Arc::clone(&nested));
        let third_owner: AgentRef = owner.clone();
        JobStart::new("bash", "second", move || {
            let started = jobs.start(third.owner(third_owner));
            *nested.lock().unwrap() = Some(started.map(|id| id.to_string()));
            Ok(JobHooks::new(|_| {}, async move {
                second_done.await.map_err(|e| e.into())
            }))
        })
    };
    let owner_ref: AgentRef = owner.clone();
    let second = jobs.start(second.owner(owner_ref)).unwrap();
    let nested = nested.lock().unwrap().take().expect("the producer ran");
    assert_eq!(
        nested.map_err(|e| e.to_string()),
        Err(String::from(
            "session `s1` already has 2 running jobs (the limit is 2); wait for one to finish or stop one with job_kill"
        ))
    );
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("bash-1", "bash-2"),
        "the refused start used no id"
    );
}

#[tokio::test]
async fn the_runtimes_debug_form_counts_its_jobs_and_says_whether_it_is_torn_down() {
    let jobs = runtime();
    assert_eq!(
        format!("{jobs:?}"),
        "JobRuntime { jobs: 0, torn_down: false }"
    );
    let (start, _control) = producer("bash", "label", true);
    jobs.start(start).unwrap();
    jobs.teardown().await;
    assert_eq!(
        format!("{jobs:?}"),
        "JobRuntime { jobs: 1, torn_down: true }"
    );
}

#[test]
fn start_outside_a_tokio_runtime_is_refused_before_run() {
    let jobs = runtime();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let err = jobs
        .start(JobStart::new("bash", "x", move || {
            flag.store(true, Ordering::SeqCst);
            Err("should not run".into())
        }))
        .unwrap_err();
    assert!(matches!(err, JobError::NoRuntime), "{err:?}");
    assert_eq!(
        err.to_string(),
        "jobs need a tokio runtime to watch their producers; start was called outside one"
    );
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn kill_works_from_outside_the_runtime_that_started_the_job() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let jobs = runtime();
    // This producer ignores cancellation, so only the kill's watchdog can settle it.
    let (start, control) = producer("bash", "stubborn", false);
    let id = tokio.block_on(async { jobs.start(start) }).unwrap();
    // No tokio context here: the watchdog goes to the runtime the job was started in.
    assert_eq!(
        jobs.kill(id.as_str(), None, "stop").unwrap(),
        KillOutcome::Requested
    );
    let snapshot = tokio.block_on(settled(&jobs, id.as_str(), None));
    assert_eq!(
        (snapshot.status, snapshot.detail.as_deref()),
        (
            JobStatus::Failed,
            Some("did not stop within 300ms of being killed")
        )
    );
    assert_eq!(control.cancels(), 1);
}

// ----- Ids ----------------------------------------------------------------------------------

#[tokio::test]
async fn ids_count_per_kind() {
    let jobs = runtime();
    let mut ids = Vec::new();
    let mut controls = Vec::new();
    for kind in ["bash", "bash", "agent", "bash"] {
        let (start, control) = producer(kind, "label", true);
        ids.push(jobs.start(start).unwrap().to_string());
        controls.push(control);
    }
    assert_eq!(ids, vec!["bash-1", "bash-2", "agent-1", "bash-3"]);
}

#[tokio::test]
async fn numbering_continues_after_ids_issued_elsewhere_and_never_goes_back() {
    let jobs = runtime();
    jobs.continue_numbering(["bash-4", "bash-2", "agent-1", "odd", "x-y"]);
    let mut ids = Vec::new();
    let mut controls = Vec::new();
    for kind in ["bash", "agent", "other"] {
        let (start, control) = producer(kind, "label", true);
        ids.push(jobs.start(start).unwrap().to_string());
        controls.push(control);
    }
    jobs.continue_numbering(["bash-1"]);
    let (start, control) = producer("bash", "label", true);
    ids.push(jobs.start(start).unwrap().to_string());
    controls.push(control);
    assert_eq!(ids, vec!["bash-5", "agent-2", "other-1", "bash-6"]);
}

#[tokio::test]
async fn numbering_ignores_ids_the_runtime_could_not_have_issued() {
    // A session log is a file a user can edit: an id at the top of the range leaves no number
    // above it, and spellings the runtime never writes (`bash-07`, `bash-+9`, `bash-0`) are
    // not its ids. None of them moves the numbering or stops the next start.
    let jobs = runtime();
    jobs.continue_numbering([
        "bash-18446744073709551615",
        "bash-07",
        "bash-+9",
        "bash-0",
        "bash-3",
    ]);
    let (start, _control) = producer("bash", "label", true);
    assert_eq!(jobs.start(start).unwrap().to_string(), "bash-4");
}
