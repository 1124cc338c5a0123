//! The background-job runtime: preflight, ids, settlement, fencing, lifetimes and notices.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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

// ----- Settlement ---------------------------------------------------------------------------

#[tokio::test]
async fn a_late_outcome_after_a_kill_changes_nothing_and_everyone_hears_once() {
    let jobs = runtime();
    let done_calls = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&done_calls);
    let _listener = jobs.on_done(move |snapshot, _| sink.lock().unwrap().push(snapshot.status));
    let changes = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&changes);
    let _changes = jobs.on_changed(move |snapshot| sink.lock().unwrap().push(snapshot.status));
    // This producer ignores cancellation: the kill watchdog settles it after the grace.
    let (start, control) = producer("bash", "stubborn", false);
    let id = jobs.start(start).unwrap();
    let waiter = {
        let jobs = jobs.clone();
        let id = id.clone();
        tokio::spawn(async move {
            jobs.wait(id.as_str(), Duration::from_secs(10), None, &never())
                .await
                .unwrap()
        })
    };
    assert_eq!(
        jobs.kill(id.as_str(), None, "user asked").unwrap(),
        KillOutcome::Requested
    );
    assert_eq!(
        jobs.get(id.as_str(), None).unwrap().status,
        JobStatus::Stopping
    );
    let settled = waiter.await.unwrap();
    assert_eq!(settled.status, JobStatus::Failed);
    assert_eq!(
        settled.detail.as_deref(),
        Some("did not stop within 300ms of being killed")
    );
    // The producer finally reports success: too late.
    assert!(control.finish(JobOutcome::new(JobEnd::Completed)));
    quiescent().await;
    assert_eq!(jobs.get(id.as_str(), None).unwrap(), settled);
    assert_eq!(*done_calls.lock().unwrap(), vec![JobStatus::Failed]);
    assert_eq!(
        *changes.lock().unwrap(),
        vec![JobStatus::Running, JobStatus::Stopping, JobStatus::Failed]
    );
    assert_eq!(
        jobs.kill(id.as_str(), None, "again").unwrap(),
        KillOutcome::AlreadyFinished
    );
    assert_eq!(control.cancels(), 1);
}

/// The producer's own outcome and the kill's force-fail after the grace really compete: the
/// producer is finished from another thread at delays spread across the grace, so some
/// iterations finish well before it, some well after, and the ones in between race it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_racing_a_natural_exit_settles_once() {
    const GRACE: Duration = Duration::from_millis(10);
    let mut winners = BTreeSet::new();
    for step in 0..=40u32 {
        let jobs = runtime_with(JobsConfig {
            teardown_grace: GRACE,
            ..JobsConfig::default()
        });
        let done_calls = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&done_calls);
        let _listener =
            jobs.on_done(move |snapshot, _| sink.lock().unwrap().push(snapshot.clone()));
        let owner = agent("s1");
        let (id, control) = start_owned(&jobs, &owner, "race", false);
        let delay = GRACE * step / 20;
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let finisher = std::thread::spawn({
            let barrier = Arc::clone(&barrier);
            move || {
                barrier.wait();
                std::thread::sleep(delay);
                control.finish(exit_0())
            }
        });
        assert_eq!(
            jobs.kill(id.as_str(), Some("s1"), "race").unwrap(),
            KillOutcome::Requested
        );
        // The grace and the finisher's delay start together.
        barrier.wait();
        let first = settled(&jobs, id.as_str(), Some("s1")).await;
        assert!(finisher.join().unwrap(), "the producer was already gone");
        // Both contenders have had their say once the settlement task and the watchdog ended.
        quiescent().await;
        let expected_detail = match first.status {
            JobStatus::Completed => "exit code: 0",
            JobStatus::Failed => "did not stop within 10ms of being killed",
            other => panic!("{other:?} cannot win this race"),
        };
        assert_eq!(first.detail.as_deref(), Some(expected_detail), "{first:?}");
        assert!(first.reported, "a kill reports the end: {first:?}");
        assert_eq!(jobs.get(id.as_str(), Some("s1")).unwrap(), first);
        assert_eq!(*done_calls.lock().unwrap(), vec![first.clone()]);
        assert_eq!(notices(&owner), Vec::<String>::new());
        winners.insert(first.status.as_str());
    }
    assert_eq!(
        winners,
        BTreeSet::from(["completed", "failed"]),
        "both contenders should win some iterations"
    );
}

#[tokio::test]
async fn a_panicking_or_failing_done_settles_as_failed_with_detail() {
    let jobs = runtime();
    let panicking = JobStart::new("bash", "p", || {
        Ok(JobHooks::new(|_| {}, async { panic!("done exploded") }))
    });
    let failing = JobStart::new("bash", "f", || {
        Ok(JobHooks::new(|_| {}, async {
            Err("lost the process handle".into())
        }))
    });
    let p = jobs.start(panicking).unwrap();
    let f = jobs.start(failing).unwrap();
    let p = settled(&jobs, p.as_str(), None).await;
    let f = settled(&jobs, f.as_str(), None).await;
    assert_eq!(
        (p.status, p.detail.as_deref()),
        (JobStatus::Failed, Some("producer panicked: done exploded"))
    );
    assert_eq!(
        (f.status, f.detail.as_deref()),
        (
            JobStatus::Failed,
            Some("producer error: lost the process handle")
        )
    );
}

#[tokio::test]
async fn a_settled_job_releases_its_cancel_hook_and_keeps_its_reader() {
    let jobs = runtime();
    // Each hook holds one of these; their counts show which hooks the runtime still keeps.
    let (in_cancel, in_reader) = (Arc::new(()), Arc::new(()));
    let (tx, rx) = oneshot::channel::<JobOutcome>();
    let start = {
        let (in_cancel, in_reader) = (Arc::clone(&in_cancel), Arc::clone(&in_reader));
        JobStart::new("bash", "stream", move || {
            Ok(
                JobHooks::new(move |_| drop(Arc::clone(&in_cancel)), async move {
                    rx.await.map_err(|e| e.into())
                })
                .with_reader(move |_budget| {
                    drop(Arc::clone(&in_reader));
                    String::from("the end")
                }),
            )
        })
    };
    let id = jobs.start(start).unwrap();
    let held = || (Arc::strong_count(&in_cancel), Arc::strong_count(&in_reader));
    assert_eq!(held(), (2, 2));
    tx.send(JobOutcome::new(JobEnd::Completed)).unwrap();
    settled(&jobs, id.as_str(), None).await;
    assert_eq!(held(), (1, 2));
    assert_eq!(jobs.read(id.as_str(), None).unwrap().text, "the end");
}

// ----- Fencing ------------------------------------------------------------------------------

#[tokio::test]
async fn owned_jobs_are_fenced_by_session_and_unowned_jobs_are_open() {
    let jobs = runtime();
    let (owned, _owned) = start_owned(&jobs, &agent("s1"), "secret label", true);
    let (start, _open) = producer("bash", "open", true);
    let open = jobs.start(start).unwrap();
    let ids = |caller| {
        jobs.list(caller)
            .into_iter()
            .map(|s| s.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(Some("s1")), vec!["bash-1", "bash-2"]);
    assert_eq!(ids(Some("s2")), vec!["bash-2"]);
    assert_eq!(ids(None), vec!["bash-2"]);
    let foreign =
        |e: JobError| assert_eq!(e.to_string(), "no job `bash-1` is visible to this session");
    foreign(jobs.get(owned.as_str(), Some("s2")).unwrap_err());
    foreign(jobs.read(owned.as_str(), Some("s2")).unwrap_err());
    foreign(jobs.kill(owned.as_str(), Some("s2"), "x").unwrap_err());
    foreign(
        jobs.wait(
            owned.as_str(),
            Duration::from_millis(10),
            Some("s2"),
            &never(),
        )
        .await
        .unwrap_err(),
    );
    foreign(jobs.get(owned.as_str(), None).unwrap_err());
    assert_eq!(
        jobs.get(owned.as_str(), Some("s1")).unwrap().status,
        JobStatus::Running
    );
    for caller in [None, Some("s1"), Some("s2")] {
        assert_eq!(jobs.get(open.as_str(), caller).unwrap().label, "open");
    }
}

// ----- Waiting ------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn wait_honours_its_timeout_and_its_signal() {
    let jobs = runtime();
    let (start, control) = producer("bash", "long", true);
    let id = jobs.start(start).unwrap();
    let snapshot = jobs
        .wait(id.as_str(), Duration::from_secs(5), None, &never())
        .await
        .unwrap();
    assert_eq!(snapshot.status, JobStatus::Running);
    assert!(!snapshot.reported);

    let signal = CancellationToken::new();
    let trigger = signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let err = jobs
        .wait(id.as_str(), Duration::from_secs(3600), None, &signal)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "the wait for job `bash-1` was cancelled");
    assert_eq!(
        jobs.get(id.as_str(), None).unwrap().status,
        JobStatus::Running
    );

    control.finish(exit_0());
    let snapshot = jobs
        .wait(id.as_str(), Duration::from_secs(5), None, &never())
        .await
        .unwrap();
    assert_eq!(snapshot.status_line(), "[status: completed, exit code: 0]");
    assert!(snapshot.reported);
}

#[tokio::test]
async fn a_wait_dropped_before_the_end_leaves_the_notice_to_the_owner() {
    let jobs = runtime();
    let owner = agent("s1");
    let (id, control) = start_owned(&jobs, &owner, "build", true);
    let outer = timeout(
        Duration::from_millis(10),
        jobs.wait(id.as_str(), Duration::from_secs(60), Some("s1"), &never()),
    )
    .await;
    assert!(outer.is_err(), "the job cannot have settled: {outer:?}");
    control.finish(exit_0());
    let snapshot = settled(&jobs, id.as_str(), Some("s1")).await;
    assert!(snapshot.reported);
    assert_eq!(notices(&owner), vec![completed_notice(1, "build")]);
}

#[tokio::test]
async fn a_wait_dropped_after_the_end_was_claimed_for_it_still_delivers_the_notice() {
    let jobs = runtime();
    let owner = agent("s1");
    let (id, control) = start_owned(&jobs, &owner, "build", true);
    let signal = never();
    let mut wait = Box::pin(jobs.wait(id.as_str(), Duration::from_secs(60), Some("s1"), &signal));
    // One poll registers the waiter; the settlement then counts on it to report the end.
    assert!((&mut wait).now_or_never().is_none());
    control.finish(exit_0());
    let snapshot = settled(&jobs, id.as_str(), Some("s1")).await;
    assert!(snapshot.reported);
    assert_eq!(notices(&owner), Vec::<String>::new());
    // The waiter goes away without ever returning the end: the owner must hear of it.
    drop(wait);
    assert_eq!(notices(&owner), vec![completed_notice(1, "build")]);
    assert!(jobs.get(id.as_str(), Some("s1")).unwrap().reported);
}

// ----- Reads --------------------------------------------------------------------------------

#[tokio::test]
async fn reads_consume_deltas_and_respect_the_output_limit() {
    let jobs = runtime();
    let chunks = Arc::new(Mutex::new(vec![
        "first ".to_owned(),
        "second, with ünïcode at the end".to_owned(),
    ]));
    let (tx, rx) = oneshot::channel::<JobOutcome>();
    let feed = Arc::clone(&chunks);
    let start = JobStart::new("bash", "stream", move || {
        Ok(
            JobHooks::new(|_| {}, async move { rx.await.map_err(|e| e.into()) }).with_reader(
                move |_budget| {
                    let mut chunks = feed.lock().unwrap();
                    if chunks.is_empty() {
                        String::new()
                    } else {
                        chunks.remove(0)
                    }
                },
            ),
        )
    })
    .output_limit_bytes(32);
    let id = jobs.start(start).unwrap();
    assert_eq!(jobs.read(id.as_str(), None).unwrap().text, "first ");
    let bounded = jobs.read(id.as_str(), None).unwrap().text;
    assert!(bounded.len() <= 32, "{bounded:?}");
    assert!(bounded.ends_with("the end"), "{bounded:?}");
    assert!(bounded.starts_with('['), "{bounded:?}");
    assert_eq!(jobs.read(id.as_str(), None).unwrap().text, "");
    assert!(!jobs.get(id.as_str(), None).unwrap().reported);
    tx.send(JobOutcome::new(JobEnd::Completed)).unwrap();
    settled(&jobs, id.as_str(), None).await;
    let last = jobs.read(id.as_str(), None).unwrap();
    assert!(
        last.snapshot.reported,
        "a read that saw the end marks the job reported"
    );

    let final_only = JobStart::new("agent", "summarise", || {
        Ok(JobHooks::new(|_| {}, async {
            Ok(JobOutcome::new(JobEnd::Completed).with_output("the summary"))
        }))
    });
    let id = jobs.start(final_only).unwrap();
    settled(&jobs, id.as_str(), None).await;
    assert_eq!(jobs.read(id.as_str(), None).unwrap().text, "the summary");
    assert_eq!(
        jobs.read(id.as_str(), None).unwrap().text,
        "the summary",
        "final output is idempotent"
    );
}

#[tokio::test]
async fn the_reader_is_given_the_budget_and_a_read_returns_no_more() {
    let jobs = runtime();
    let budgets = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&budgets);
    let (_tx, rx) = oneshot::channel::<JobOutcome>();
    let start = JobStart::new("bash", "chatty", move || {
        Ok(
            JobHooks::new(|_| {}, async move { rx.await.map_err(|e| e.into()) }).with_reader(
                move |budget| {
                    seen.lock().unwrap().push(budget);
                    // A well-behaved producer materialises only what fits.
                    "y".repeat(budget.min(1 << 20))
                },
            ),
        )
    })
    .output_limit_bytes(100);
    let id = jobs.start(start).unwrap();
    assert_eq!(jobs.read(id.as_str(), None).unwrap().text, "y".repeat(100));
    assert_eq!(
        jobs.read_at_most(id.as_str(), None, 10).unwrap().text,
        "y".repeat(10),
        "a caller's smaller budget wins"
    );
    assert_eq!(
        jobs.read_at_most(id.as_str(), None, 1_000).unwrap().text,
        "y".repeat(100),
        "the job's own limit still caps a larger one"
    );
    assert_eq!(*budgets.lock().unwrap(), vec![100, 10, 100]);
}

// ----- Retention ----------------------------------------------------------------------------

fn retaining(retention: Duration) -> JobRuntime {
    runtime_with(JobsConfig {
        teardown_grace: Duration::from_millis(300),
        settled_retention: retention,
        ..JobsConfig::default()
    })
}

fn expired(id: &str) -> String {
    format!(
        "job `{id}` has expired: it finished, its end was reported, and its record was removed after the retention of 60000ms; its output is no longer available"
    )
}

#[tokio::test(start_paused = true)]
async fn a_reported_job_is_evicted_after_the_retention_and_then_reads_as_expired() {
    let jobs = retaining(Duration::from_secs(60));
    let owner = agent("s1");
    let done = run_owned(&jobs, &owner, "npm test", exit_0()).await;
    assert_eq!(notices(&owner), vec![completed_notice(1, "npm test")]);
    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(jobs.get("bash-1", Some("s1")).unwrap(), done);
    assert_eq!(jobs.read("bash-1", Some("s1")).unwrap().text, "");

    tokio::time::advance(Duration::from_secs(2)).await;
    let read = jobs.read("bash-1", Some("s1")).unwrap_err();
    assert!(matches!(read, JobError::Expired { .. }), "{read:?}");
    assert_eq!(read.to_string(), expired("bash-1"));
    assert_eq!(
        jobs.get("bash-1", Some("s1")).unwrap_err().to_string(),
        expired("bash-1")
    );
    assert_eq!(
        jobs.kill("bash-1", Some("s1"), "late")
            .unwrap_err()
            .to_string(),
        expired("bash-1")
    );
    assert_eq!(jobs.list(Some("s1")), Vec::<JobSnapshot>::new());
    // An id the runtime never issued is still unknown, not expired.
    assert_eq!(
        jobs.read("bash-2", Some("s1")).unwrap_err().to_string(),
        "no job `bash-2` is visible to this session"
    );
    assert_eq!(
        jobs.read("bash-01", Some("s1")).unwrap_err().to_string(),
        "no job `bash-01` is visible to this session"
    );
}

#[tokio::test(start_paused = true)]
async fn a_live_job_and_an_unreported_end_are_kept_past_the_retention() {
    let jobs = retaining(Duration::from_secs(60));
    let owner = agent("s1");
    let (live, control) = start_owned(&jobs, &owner, "server", true);
    tokio::time::advance(Duration::from_secs(120)).await;
    assert_eq!(
        jobs.get(live.as_str(), Some("s1")).unwrap().status,
        JobStatus::Running
    );
    assert!(control.finish(exit_0()));
    settled(&jobs, live.as_str(), Some("s1")).await;
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(
        jobs.get(live.as_str(), Some("s1")).unwrap().status,
        JobStatus::Completed,
        "the retention counts from the end, not the start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_job_is_evicted_before_its_notice_is_delivered() {
    let jobs = retaining(Duration::ZERO);
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    // A done listener runs before the notice goes out; holding it open holds the notice back.
    let _listener = jobs.on_done(move |_, _| {
        entered_tx.send(()).unwrap();
        release_rx.lock().unwrap().recv().unwrap();
    });
    let owner = agent("s1");
    let (id, control) = start_owned(&jobs, &owner, "npm test", true);
    assert!(control.finish(exit_0()));
    entered_rx.recv_timeout(BOUND).unwrap();
    assert_eq!(notices(&owner), Vec::<String>::new());
    // Another start runs the eviction sweep; the settled job must survive it.
    let (other, _other) = start_owned(&jobs, &owner, "other", true);
    let held = jobs.get(id.as_str(), Some("s1")).unwrap();
    assert_eq!(held.status, JobStatus::Completed);
    // With no retention the record goes at the first look after its notice, so the host's
    // wait subscribes before the notice is released.
    let mut host = Box::pin(jobs.settled(id.as_str(), Some("s1")));
    assert!(host.as_mut().now_or_never().is_none());
    release_tx.send(()).unwrap();
    let seen = timeout(BOUND, host).await.unwrap().unwrap();
    assert_eq!((seen.status, seen.reported), (JobStatus::Completed, true));
    assert_eq!(notices(&owner), vec![completed_notice(1, "npm test")]);
    assert!(matches!(
        jobs.get(id.as_str(), Some("s1")),
        Err(JobError::Expired { .. })
    ));
    assert_eq!(
        jobs.get(other.as_str(), Some("s1")).unwrap().status,
        JobStatus::Running
    );
    // The other job's settlement passes the listener too.
    release_tx.send(()).unwrap();
    jobs.teardown().await;
}

#[tokio::test(start_paused = true)]
async fn a_disposed_owners_jobs_are_evicted_after_the_retention() {
    let jobs = retaining(Duration::from_secs(60));
    let owner = agent("s1");
    let (id, _control) = start_owned(&jobs, &owner, "server", true);
    owner.dispose();
    jobs.dispose_owner("s1").await;
    assert_eq!(
        jobs.get(id.as_str(), Some("s1")).unwrap().status,
        JobStatus::Killed
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(
        jobs.get(id.as_str(), Some("s1")).unwrap_err().to_string(),
        expired("bash-1")
    );
}

// ----- Lifetimes ----------------------------------------------------------------------------

#[tokio::test]
async fn owner_disposal_cancels_and_awaits_only_that_owners_jobs() {
    let jobs = runtime();
    let s1 = agent("s1");
    let (first, mine) = start_owned(&jobs, &s1, "mine", true);
    let (second, theirs) = start_owned(&jobs, &agent("s2"), "theirs", true);
    jobs.dispose_owner("s1").await;
    let disposed = jobs.get(first.as_str(), Some("s1")).unwrap();
    assert_eq!(
        disposed.status,
        JobStatus::Killed,
        "dispose_owner returned before the job settled"
    );
    assert!(disposed.reported);
    assert_eq!(mine.cancels(), 1);
    assert_eq!(theirs.cancels(), 0);
    assert_eq!(
        jobs.get(second.as_str(), Some("s2")).unwrap().status,
        JobStatus::Running
    );
    assert!(
        s1.injected().is_empty(),
        "a disposed owner's job must not produce a notice"
    );
}

#[tokio::test]
async fn teardown_cancels_and_awaits_everything_within_the_grace() {
    let jobs = runtime();
    let owner = agent("s1");
    let _controls: Vec<_> = (0..5)
        .map(|i| start_owned(&jobs, &owner, &format!("job {i}"), true))
        .collect();
    let (start, stubborn) = producer("bash", "stubborn", false);
    jobs.start(start).unwrap();
    let began = std::time::Instant::now();
    jobs.teardown().await;
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "teardown took {:?}",
        began.elapsed()
    );
    let outcome = |caller| {
        jobs.list(caller)
            .into_iter()
            .map(|s| (s.id.to_string(), s.status, s.detail, s.reported))
            .collect::<Vec<_>>()
    };
    let killed = |n: usize| {
        (
            format!("bash-{n}"),
            JobStatus::Killed,
            Some("signal: SIGTERM".to_owned()),
            true,
        )
    };
    assert_eq!(
        outcome(Some("s1")),
        vec![
            killed(1),
            killed(2),
            killed(3),
            killed(4),
            killed(5),
            (
                "bash-6".to_owned(),
                JobStatus::Failed,
                Some(
                    "did not stop within 300ms of being cancelled (jobs runtime torn down)"
                        .to_owned()
                ),
                true
            ),
        ]
    );
    assert_eq!(stubborn.cancels(), 1);
    assert!(owner.injected().is_empty());
    assert!(matches!(
        jobs.start(producer("bash", "late", true).0),
        Err(JobError::TornDown)
    ));
}

// ----- Notices ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_jobs_settling_together_give_a_thousand_notices() {
    let jobs = runtime_with(JobsConfig {
        max_concurrent_jobs_per_owner: 2_000,
        ..JobsConfig::default()
    });
    let owner = agent("s1");
    let started: Vec<(JobId, Control)> = (0..1_000)
        .map(|i| start_owned(&jobs, &owner, &format!("job {i}"), true))
        .collect();
    let barrier = Arc::new(tokio::sync::Barrier::new(started.len()));
    let finishers: Vec<_> = started
        .iter()
        .map(|(_, control)| {
            let (barrier, control) = (Arc::clone(&barrier), control.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                control.finish(exit_0())
            })
        })
        .collect();
    for finisher in finishers {
        assert!(finisher.await.unwrap());
    }
    for (id, _) in &started {
        settled(&jobs, id.as_str(), Some("s1")).await;
    }
    let mut received = notices(&owner);
    received.sort();
    let mut expected: Vec<String> = (0..1_000)
        .map(|i| completed_notice(i + 1, &format!("job {i}")))
        .collect();
    expected.sort();
    assert!(
        received == expected,
        "a notice was duplicated or lost: {} received",
        received.len()
    );
}

#[tokio::test]
async fn a_host_waiting_for_settlement_resumes_only_after_the_notice() {
    let jobs = runtime();
    let owner = agent("s1");
    // While the listeners run (before the notice), a host's wait must not be able to finish.
    let early_waits = Arc::new(Mutex::new(Vec::new()));
    let _listener = {
        let (jobs, early_waits) = (jobs.clone(), Arc::clone(&early_waits));
        jobs.clone().on_done(move |snapshot, _| {
            let finished = jobs
                .settled(snapshot.id.as_str(), snapshot.owner_session.as_deref())
                .now_or_never()
                .is_some();
            early_waits.lock().unwrap().push(finished);
        })
    };
    let (id, control) = start_owned(&jobs, &owner, "build", true);
    let host = {
        let (jobs, owner) = (jobs.clone(), owner.clone());
        tokio::spawn(async move {
            let snapshot = jobs.settled(id.as_str(), Some("s1")).await.unwrap();
            // What the host sees the moment it resumes, before anything else can run.
            (snapshot, notices(&owner))
        })
    };
    control.finish(exit_0());
    let (snapshot, seen) = timeout(BOUND, host).await.unwrap().unwrap();
    assert_eq!(
        (snapshot.status, snapshot.reported),
        (JobStatus::Completed, true)
    );
    assert_eq!(
        seen,
        vec![completed_notice(1, "build")],
        "the host's wait must leave the notice to the owner and return after it"
    );
    assert_eq!(*early_waits.lock().unwrap(), vec![false]);
}

#[tokio::test]
async fn notices_have_the_documented_wording_and_source() {
    let jobs = runtime();
    let owner = agent("s1");
    run_owned(
        &jobs,
        &owner,
        "npm test",
        JobOutcome::new(JobEnd::Completed).with_detail("exit code: 1"),
    )
    .await;
    assert_eq!(
        owner.injected(),
        vec![InjectedContext {
            source: ContextSource::plugin("bash"),
            content: "background job bash-1 (bash: npm test) finished [status: completed, exit code: 1]. Read its output with job_output.".into(),
        }]
    );
}

#[tokio::test]
async fn killed_or_waited_jobs_produce_no_notice() {
    let jobs = runtime();
    let owner = agent("s1");
    let s1 = Some("s1");

    let (killed, _killed) = start_owned(&jobs, &owner, "killed", true);
    jobs.kill(killed.as_str(), s1, "stop").unwrap();
    settled(&jobs, killed.as_str(), s1).await;

    let (waited, control) = start_owned(&jobs, &owner, "waited", true);
    let signal = never();
    let mut wait = Box::pin(jobs.wait(waited.as_str(), Duration::from_secs(5), s1, &signal));
    // Registered as a waiter before the job ends.
    assert!((&mut wait).now_or_never().is_none());
    control.finish(exit_0());
    assert!(timeout(BOUND, wait).await.unwrap().unwrap().reported);

    run_owned(&jobs, &owner, "unobserved", exit_0()).await;
    assert_eq!(notices(&owner), vec![completed_notice(3, "unobserved")]);
}

#[tokio::test]
async fn a_read_before_the_notice_suppresses_it() {
    // A done-listener runs before the reporter: a read from inside it observes the end
    // first, and the reporter must then stay silent.
    let jobs = runtime();
    let owner = agent("s1");
    let reader = jobs.clone();
    let _listener = jobs.on_done(move |snapshot, _| {
        reader.read(snapshot.id.as_str(), Some("s1")).unwrap();
    });
    let snapshot = run_owned(&jobs, &owner, "observed", exit_0()).await;
    assert!(snapshot.reported);
    assert_eq!(notices(&owner), Vec::<String>::new());
}

#[tokio::test]
async fn a_notice_for_a_disposed_owner_is_dropped_and_the_next_one_arrives() {
    let jobs = runtime();
    let gone = agent("s1");
    let (id, control) = start_owned(&jobs, &gone, "orphan", true);
    gone.dispose();
    control.finish(exit_0());
    let snapshot = settled(&jobs, id.as_str(), Some("s1")).await;
    assert_eq!(
        (snapshot.status, snapshot.reported),
        (JobStatus::Completed, true)
    );
    assert_eq!(notices(&gone), Vec::<String>::new());
    // The runtime keeps delivering to live owners.
    let live = agent("s2");
    let snapshot = run_owned(&jobs, &live, "next", exit_0()).await;
    assert!(snapshot.reported);
    assert_eq!(notices(&live), vec![completed_notice(2, "next")]);
}

#[test]
fn notices_respect_the_output_limit_on_character_boundaries() {
    let notice = |limit| {
        completion_notice(&JobSnapshot {
            id: "bash-7".into(),
            kind: "bash".into(),
            label: "ünïcödé".into(),
            status: JobStatus::Completed,
            detail: Some("exit code: 0 (ünï)".into()),
            started_at: 0,
            finished_at: Some(1),
            owner_session: None,
            reported: false,
            output_limit_bytes: Some(limit),
        })
    };
    let full = "background job bash-7 (bash: ünïcödé) finished [status: completed, exit code: 0 (ünï)]. Read its output with job_output.";
    let short = "background job bash-7 finished [status: completed, exit code: 0 (ünï)]. Read its output with job_output.";
    // `ü` takes bytes 65 and 66 of the short form.
    let head = "background job bash-7 finished [status: completed, exit code: 0 (";
    let cases = [
        (full.len(), full),
        (full.len() - 1, short),
        (short.len(), short),
        (head.len() + 1, head),
        (
            head.len() + 2,
            "background job bash-7 finished [status: completed, exit code: 0 (ü",
        ),
        (0, ""),
    ];
    for (limit, expected) in cases {
        assert_eq!((limit, notice(limit).as_str()), (limit, expected));
    }
}

// ----- Wake-ups -----------------------------------------------------------------------------

struct CountingOpener(AtomicUsize);

impl TurnOpener for CountingOpener {
    fn open_turn(&self, _owner: &AgentRef) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        true
    }
}

fn wakeup_runtime(max_consecutive_wakes: u32) -> JobRuntime {
    runtime_with(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes,
        },
        ..JobsConfig::default()
    })
}

#[tokio::test]
async fn wakeup_delivery_opens_at_most_the_budget_of_turns_without_user_input() {
    let jobs = wakeup_runtime(3);
    let opener = Arc::new(CountingOpener(AtomicUsize::new(0)));
    jobs.set_turn_opener(opener.clone());
    let owner = agent("s1");
    for i in 0..5 {
        run_owned(&jobs, &owner, &format!("job {i}"), exit_0()).await;
    }
    assert_eq!(opener.0.load(Ordering::SeqCst), 3);
    assert_eq!(
        owner.injected().len(),
        5,
        "every notice is injected, woken or not"
    );
    jobs.note_user_input("s1");
    run_owned(&jobs, &owner, "after input", exit_0()).await;
    assert_eq!(opener.0.load(Ordering::SeqCst), 4);
}

/// An opener that resets the owner's budget from inside the call, as a host treating the woken
/// turn as fresh input would.
struct ReentrantOpener {
    jobs: JobRuntime,
    opened: AtomicUsize,
}

impl TurnOpener for ReentrantOpener {
    fn open_turn(&self, owner: &AgentRef) -> bool {
        // Calling back into the runtime must not deadlock: no lock of it is held here.
        self.jobs.note_user_input(owner.session_id());
        self.opened.fetch_add(1, Ordering::SeqCst);
        true
    }
}

#[test]
fn a_turn_opener_may_call_back_into_the_runtime() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let jobs = wakeup_runtime(1);
    let opener = Arc::new(ReentrantOpener {
        jobs: jobs.clone(),
        opened: AtomicUsize::new(0),
    });
    jobs.set_turn_opener(opener.clone());
    let owner = agent("s1");
    let notices_out = async {
        for i in 0..3 {
            let (id, control) = start_owned(&jobs, &owner, &format!("job {i}"), true);
            control.finish(exit_0());
            jobs.settled(id.as_str(), Some("s1")).await?;
        }
        Ok::<(), JobError>(())
    };
    let outcome = tokio.block_on(async { timeout(BOUND, notices_out).await });
    // An opener deadlocked on the runtime's lock would hold its worker forever: leave the
    // workers behind instead of waiting for them, so the failure is reported.
    tokio.shutdown_background();
    assert!(
        matches!(outcome, Ok(Ok(()))),
        "the notices did not go out: {outcome:?}"
    );
    assert_eq!(opener.opened.load(Ordering::SeqCst), 3);
    assert_eq!(notices(&owner).len(), 3);
}

/// An opener that always finds the owner busy.
struct BusyOpener(AtomicUsize);

impl TurnOpener for BusyOpener {
    fn open_turn(&self, _owner: &AgentRef) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        false
    }
}

#[tokio::test]
async fn a_wake_that_opened_no_turn_is_not_spent() {
    let jobs = wakeup_runtime(1);
    let opener = Arc::new(BusyOpener(AtomicUsize::new(0)));
    jobs.set_turn_opener(opener.clone());
    let owner = agent("s1");
    for i in 0..3 {
        run_owned(&jobs, &owner, &format!("job {i}"), exit_0()).await;
    }
    assert_eq!(opener.0.load(Ordering::SeqCst), 3);
}
