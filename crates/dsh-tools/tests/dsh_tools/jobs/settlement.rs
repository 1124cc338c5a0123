//! Settlement (first wins, once), fencing by owner, waiting and reads.

use super::*;
use pretty_assertions::assert_eq;

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
