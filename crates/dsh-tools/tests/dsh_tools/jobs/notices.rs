//! Completion notices (exactly once, never lost, their wording and limits) and wake-ups.

use super::*;
use pretty_assertions::assert_eq;

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
