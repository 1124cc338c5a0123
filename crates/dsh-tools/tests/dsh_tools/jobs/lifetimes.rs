//! Retention of settled jobs, and the lifetimes of owners and of the runtime.

use super::*;
use pretty_assertions::assert_eq;

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
