//! The background-job runtime: preflight, ids, settlement, fencing, lifetimes and notices.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::jobs::{
    JobEnd, JobError, JobHooks, JobOutcome, JobRuntime, JobStart, JobStatus, JobsConfig,
    KillOutcome, NoticeDelivery, TurnOpener, completion_notice,
};
use dsh_tools::testing::RecordingAgent;
use dsh_tools::{AgentRef, ContextSource, InjectedContext};
use pretty_assertions::assert_eq;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

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
    // The controller stays attached for the test's lifetime.
    std::mem::forget(jobs.attach_controller());
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

async fn settle(jobs: &JobRuntime, id: &str, caller: Option<&str>) -> dsh_tools::jobs::JobSnapshot {
    // Observing through `get` does not mark anything reported.
    for _ in 0..500 {
        let snapshot = jobs.get(id, caller).unwrap();
        if snapshot.status.is_terminal() {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("job {id} did not settle");
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

    let owner: AgentRef = agent("s1");
    let mut controls = Vec::new();
    for _ in 0..2 {
        let (start, control) = producer("bash", "sleep", true);
        jobs.start(start.owner(owner.clone())).unwrap();
        controls.push(control);
    }
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
    let (start, _other) = producer("bash", "other", true);
    jobs.start(start.owner(agent("s2"))).unwrap();
    controls[0].finish(JobOutcome::new(JobEnd::Completed));
    settle(&jobs, "bash-1", Some("s1")).await;
    let (start, _third) = producer("bash", "third", true);
    jobs.start(start.owner(owner)).unwrap();
}

// ----- Ids and snapshots --------------------------------------------------------------------

#[tokio::test]
async fn ids_count_per_kind_and_snapshots_are_copies() {
    let jobs = runtime();
    let mut ids = Vec::new();
    let mut controls = Vec::new();
    for kind in ["bash", "bash", "agent", "bash"] {
        let (start, control) = producer(kind, "label", true);
        ids.push(jobs.start(start).unwrap().to_string());
        controls.push(control);
    }
    assert_eq!(ids, vec!["bash-1", "bash-2", "agent-1", "bash-3"]);
    let mut snapshot = jobs.get("bash-1", None).unwrap();
    snapshot.status = JobStatus::Failed;
    snapshot.label = "tampered".into();
    let fresh = jobs.get("bash-1", None).unwrap();
    assert_eq!(fresh.status, JobStatus::Running);
    assert_eq!(fresh.label, "label");
}

// ----- Settlement ---------------------------------------------------------------------------

#[tokio::test]
async fn a_late_outcome_after_a_kill_changes_nothing_and_everyone_hears_once() {
    let jobs = runtime();
    let done_calls = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&done_calls);
    let _listener = jobs.on_done(move |snapshot, _| sink.lock().unwrap().push(snapshot.status));
    let changed = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&changed);
    let _changes = jobs.on_changed(move |_| {
        count.fetch_add(1, Ordering::SeqCst);
    });
    // This producer ignores cancellation: the kill watchdog settles it after the grace.
    let (start, control) = producer("bash", "stubborn", false);
    let id = jobs.start(start).unwrap();
    let waiter = {
        let jobs = jobs.clone();
        let id = id.clone();
        tokio::spawn(async move {
            jobs.wait(
                id.as_str(),
                Duration::from_secs(10),
                None,
                &CancellationToken::new(),
            )
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
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(jobs.get(id.as_str(), None).unwrap(), settled);
    assert_eq!(*done_calls.lock().unwrap(), vec![JobStatus::Failed]);
    // start, stopping, settled.
    assert_eq!(changed.load(Ordering::SeqCst), 3);
    assert_eq!(
        jobs.kill(id.as_str(), None, "again").unwrap(),
        KillOutcome::AlreadyFinished
    );
    assert_eq!(control.cancels(), 1);
}

#[tokio::test]
async fn a_kill_racing_a_natural_exit_settles_once() {
    for _ in 0..50 {
        let jobs = runtime();
        let done = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&done);
        let _listener = jobs.on_done(move |_, _| {
            count.fetch_add(1, Ordering::SeqCst);
        });
        let (start, control) = producer("bash", "race", true);
        let id = jobs.start(start).unwrap();
        let finisher = {
            let control = control.clone();
            tokio::spawn(async move {
                control.finish(JobOutcome::new(JobEnd::Completed).with_detail("exit code: 0"))
            })
        };
        let _ = jobs.kill(id.as_str(), None, "race");
        finisher.await.unwrap();
        let snapshot = settle(&jobs, id.as_str(), None).await;
        assert!(matches!(
            snapshot.status,
            JobStatus::Completed | JobStatus::Killed
        ));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(done.load(Ordering::SeqCst), 1);
    }
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
    let p = settle(&jobs, p.as_str(), None).await;
    let f = settle(&jobs, f.as_str(), None).await;
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

// ----- Fencing ------------------------------------------------------------------------------

#[tokio::test]
async fn owned_jobs_are_fenced_by_session_and_unowned_jobs_are_open() {
    let jobs = runtime();
    let (start, _owned) = producer("bash", "secret label", true);
    let owned = jobs.start(start.owner(agent("s1"))).unwrap();
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
            &CancellationToken::new(),
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
        .wait(
            id.as_str(),
            Duration::from_secs(5),
            None,
            &CancellationToken::new(),
        )
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

    control.finish(JobOutcome::new(JobEnd::Completed).with_detail("exit code: 0"));
    let snapshot = jobs
        .wait(
            id.as_str(),
            Duration::from_secs(5),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(snapshot.status_line(), "[status: completed, exit code: 0]");
    assert!(snapshot.reported);
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
                move || {
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
    settle(&jobs, id.as_str(), None).await;
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
    settle(&jobs, id.as_str(), None).await;
    assert_eq!(jobs.read(id.as_str(), None).unwrap().text, "the summary");
    assert_eq!(
        jobs.read(id.as_str(), None).unwrap().text,
        "the summary",
        "final output is idempotent"
    );
}

// ----- Lifetimes ----------------------------------------------------------------------------

#[tokio::test]
async fn owner_disposal_cancels_and_awaits_only_that_owners_jobs() {
    let jobs = runtime();
    let (start, mine) = producer("bash", "mine", true);
    let s1 = agent("s1");
    let first = jobs.start(start.owner(s1.clone())).unwrap();
    let (start, theirs) = producer("bash", "theirs", true);
    let second = jobs.start(start.owner(agent("s2"))).unwrap();
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
    let mut controls = Vec::new();
    for i in 0..5 {
        let (start, control) = producer("bash", &format!("job {i}"), true);
        jobs.start(start.owner(owner.clone())).unwrap();
        controls.push(control);
    }
    let (start, stubborn) = producer("bash", "stubborn", false);
    jobs.start(start).unwrap();
    let began = std::time::Instant::now();
    jobs.teardown().await;
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "teardown took {:?}",
        began.elapsed()
    );
    for snapshot in jobs.list(Some("s1")) {
        assert!(snapshot.status.is_terminal(), "{snapshot:?}");
        assert!(snapshot.reported, "{snapshot:?}");
    }
    let stubborn_snapshot = jobs.get("bash-6", None).unwrap();
    assert_eq!(stubborn_snapshot.status, JobStatus::Failed);
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
    let mut controls = Vec::new();
    for i in 0..1_000 {
        let (start, control) = producer("bash", &format!("job {i}"), true);
        jobs.start(start.owner(owner.clone())).unwrap();
        controls.push(control);
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(controls.len()));
    let finishers: Vec<_> = controls
        .into_iter()
        .map(|control| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                control.finish(JobOutcome::new(JobEnd::Completed).with_detail("exit code: 0"))
            })
        })
        .collect();
    for finisher in finishers {
        assert!(finisher.await.unwrap());
    }
    for i in 1..=1_000 {
        settle(&jobs, &format!("bash-{i}"), Some("s1")).await;
    }
    // Notices are delivered right after settlement; give the last ones a moment.
    for _ in 0..100 {
        if owner.injected().len() >= 1_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let notices = owner.injected();
    assert_eq!(notices.len(), 1_000);
    let mut ids: Vec<String> = notices
        .iter()
        .map(|n| n.content.split_whitespace().nth(2).unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 1_000, "a notice was duplicated or one was lost");
}

#[tokio::test]
async fn a_host_waiting_for_settlement_does_not_swallow_the_notice() {
    let jobs = runtime();
    let owner = agent("s1");
    let (start, control) = producer("bash", "build", true);
    jobs.start(start.owner(owner.clone())).unwrap();
    let host = {
        let jobs = jobs.clone();
        tokio::spawn(async move { jobs.settled("bash-1", Some("s1")).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    control.finish(JobOutcome::new(JobEnd::Completed));
    let snapshot = host.await.unwrap();
    assert_eq!(snapshot.status, JobStatus::Completed);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        owner.injected().len(),
        1,
        "the host's wait must leave the notice to the owner"
    );
}

#[tokio::test]
async fn notices_have_the_documented_wording_and_source() {
    let jobs = runtime();
    let owner = agent("s1");
    let (start, control) = producer("bash", "npm test", true);
    jobs.start(start.owner(owner.clone())).unwrap();
    control.finish(JobOutcome::new(JobEnd::Completed).with_detail("exit code: 1"));
    settle(&jobs, "bash-1", Some("s1")).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        owner.injected(),
        vec![InjectedContext {
            source: ContextSource::plugin("bash"),
            content: "background job bash-1 (bash: npm test) finished [status: completed, exit code: 1]. Read its output with job_output.".into(),
        }]
    );
}

#[tokio::test]
async fn killed_or_observed_jobs_produce_no_notice() {
    let jobs = runtime();
    let owner = agent("s1");
    let s1 = Some("s1");

    let (start, _killed) = producer("bash", "killed", true);
    let killed = jobs.start(start.owner(owner.clone())).unwrap();
    jobs.kill(killed.as_str(), s1, "stop").unwrap();
    settle(&jobs, killed.as_str(), s1).await;

    let (start, waited) = producer("bash", "waited", true);
    let waited_id = jobs.start(start.owner(owner.clone())).unwrap();
    let waiter = {
        let jobs = jobs.clone();
        let id = waited_id.clone();
        tokio::spawn(async move {
            jobs.wait(
                id.as_str(),
                Duration::from_secs(5),
                Some("s1"),
                &CancellationToken::new(),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    waited.finish(JobOutcome::new(JobEnd::Completed));
    assert!(waiter.await.unwrap().unwrap().reported);

    let (start, read) = producer("bash", "read", true);
    let read_id = jobs.start(start.owner(owner.clone())).unwrap();
    read.finish(JobOutcome::new(JobEnd::Completed));
    // The notice may already be out by the time a read sees the end; in that case the read
    // cannot suppress it. Only a read that wins the race counts here.
    let (start, unobserved) = producer("bash", "unobserved", true);
    jobs.start(start.owner(owner.clone())).unwrap();
    unobserved.finish(JobOutcome::new(JobEnd::Completed));
    settle(&jobs, "bash-4", s1).await;
    settle(&jobs, read_id.as_str(), s1).await;
    jobs.read(read_id.as_str(), s1).unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let labels: Vec<String> = owner.injected().into_iter().map(|n| n.content).collect();
    assert!(
        labels
            .iter()
            .all(|n| !n.contains("(bash: killed)") && !n.contains("(bash: waited)")),
        "{labels:?}"
    );
    assert!(
        labels.iter().any(|n| n.contains("(bash: unobserved)")),
        "{labels:?}"
    );
}

#[tokio::test]
async fn a_read_before_the_notice_suppresses_it() {
    // Hold the settlement inside a done-listener (which runs before the reporter) while a
    // read observes the end: the reporter must then stay silent.
    let jobs = runtime();
    let owner = agent("s1");
    let reader = jobs.clone();
    let _listener = jobs.on_done(move |snapshot, _| {
        reader.read(snapshot.id.as_str(), Some("s1")).unwrap();
    });
    let (start, control) = producer("bash", "observed", true);
    jobs.start(start.owner(owner.clone())).unwrap();
    control.finish(JobOutcome::new(JobEnd::Completed));
    settle(&jobs, "bash-1", Some("s1")).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(owner.injected().is_empty(), "{:?}", owner.injected());
}

#[tokio::test]
async fn a_notice_for_a_disposed_owner_is_dropped_without_panic() {
    let jobs = runtime();
    let owner = agent("s1");
    let (start, control) = producer("bash", "orphan", true);
    jobs.start(start.owner(owner.clone())).unwrap();
    owner.dispose();
    control.finish(JobOutcome::new(JobEnd::Completed));
    let snapshot = settle(&jobs, "bash-1", Some("s1")).await;
    assert_eq!(snapshot.status, JobStatus::Completed);
    assert!(owner.injected().is_empty());
    // The runtime keeps working.
    let (start, _next) = producer("bash", "next", true);
    jobs.start(start).unwrap();
}

#[test]
fn notices_respect_the_output_limit_on_character_boundaries() {
    let jobs_snapshot = |limit| dsh_tools::jobs::JobSnapshot {
        id: "bash-7".into(),
        kind: "bash".into(),
        label: "ünïcödé ".repeat(20),
        status: JobStatus::Completed,
        detail: Some("exit code: 0".into()),
        started_at: 0,
        finished_at: Some(1),
        owner_session: None,
        reported: false,
        output_limit_bytes: Some(limit),
    };
    assert_eq!(
        completion_notice(&jobs_snapshot(100)),
        "background job bash-7 finished [status: completed, exit code: 0]. Read its output with job_output."
    );
    for limit in [0, 1, 7, 20, 33] {
        let notice = completion_notice(&jobs_snapshot(limit));
        assert!(notice.len() <= limit, "{limit}: {notice}");
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

#[tokio::test]
async fn wakeup_delivery_opens_at_most_the_budget_of_turns_without_user_input() {
    let jobs = runtime_with(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let opener = Arc::new(CountingOpener(AtomicUsize::new(0)));
    jobs.set_turn_opener(opener.clone());
    let owner = agent("s1");
    let run_one = |label: String| {
        let jobs = jobs.clone();
        let owner = owner.clone();
        async move {
            let (start, control) = producer("bash", &label, true);
            let id = jobs.start(start.owner(owner)).unwrap();
            control.finish(JobOutcome::new(JobEnd::Completed));
            settle(&jobs, id.as_str(), Some("s1")).await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    for i in 0..5 {
        run_one(format!("job {i}")).await;
    }
    assert_eq!(opener.0.load(Ordering::SeqCst), 3);
    assert_eq!(
        owner.injected().len(),
        5,
        "every notice is injected, woken or not"
    );
    jobs.note_user_input("s1");
    run_one("after input".into()).await;
    assert_eq!(opener.0.load(Ordering::SeqCst), 4);
}
