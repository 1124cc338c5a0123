//! The session store: directories and modes, the writer's lock, list and prune, resume
//! (torn last line, lost jobs, ids that continue) and fork. [`tampering`] is a store someone
//! else has changed: links, modes, an unended tail, other users' writes and forks of entries
//! the store did not make; [`links`] is hard links, what a refusal leaves, the log the lease
//! holds open and sessions discarded before they start.

mod links;
mod tampering;

use crate::support;
use agent_loop::{
    Agent, AssistantToolCall, EventRecord, FsSessionStore, LOST_JOB_DETAIL, Message, PrunePolicy,
    SessionEndReason, SessionEvent, SessionState, SessionStore, StoreError, TurnEndReason,
};
use dsh_test_support::tool;
use dsh_tools::jobs::{JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart, JobStatus, JobsConfig};
use dsh_tools::{ContentBlock, ContextSource, InjectedContext, ToolError, ToolRegistry};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn store() -> (tempfile::TempDir, FsSessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = FsSessionStore::new(dir.path().join("sessions"));
    (dir, store)
}

/// The text of a log holding `events`, numbered from 1.
fn log_text(events: impl IntoIterator<Item = SessionEvent>) -> String {
    events
        .into_iter()
        .zip(1..)
        .map(|(event, seq)| {
            let record = EventRecord {
                seq,
                ts: String::from("2026-01-01T00:00:00.000Z"),
                event,
            };
            record.to_json_line() + "\n"
        })
        .collect()
}

/// The PID of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn a_session_is_a_private_directory_of_private_files_with_a_sortable_id() {
    let (_dir, store) = store();
    let first = store.create(Path::new("/work")).unwrap();
    let second = store.create(Path::new("/work")).unwrap();
    assert!(first.id() < second.id(), "{} {}", first.id(), second.id());
    let session = store.session_dir(first.id()).unwrap();
    assert_eq!(mode(store.root()), 0o700);
    assert_eq!(mode(&session), 0o700);
    assert_eq!(mode(first.spill_dir()), 0o700);
    for name in ["events.jsonl", "session.json", "lock"] {
        assert_eq!(mode(&session.join(name)), 0o600, "{name}");
    }
    assert_eq!(first.log_path(), session.join("events.jsonl"));
    assert_eq!(first.spill_dir(), session.join("spill"));
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![first.id().to_owned(), second.id().to_owned()]);
    assert!(matches!(
        store.resume("../escape"),
        Err(StoreError::InvalidId { .. })
    ));
    assert!(matches!(
        store.resume("20200101-000000-000-1-1"),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn a_second_opener_is_told_the_holders_pid_and_a_dead_holders_lock_is_taken_over() {
    let (_dir, store) = store();
    let lease = store.create(Path::new("/work")).unwrap();
    let id = lease.id().to_owned();
    let error = store.resume(&id).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("session {id} is in use by PID {}", std::process::id())
    );
    assert!(matches!(error, StoreError::SessionInUse { pid, .. } if pid == std::process::id()));
    assert_eq!(store.list().unwrap()[0].state, SessionState::Running);

    // The holder dies (its lock goes with it) leaving its PID behind.
    drop(lease);
    let lock = store.session_dir(&id).unwrap().join("lock");
    std::fs::write(&lock, format!("{} 12345\n", dead_pid())).unwrap();
    assert_eq!(store.list().unwrap()[0].state, SessionState::Crashed);
    // A live PID whose start time differs is another process that reused the PID.
    std::fs::write(&lock, format!("{} 1\n", std::process::id())).unwrap();
    assert_eq!(store.list().unwrap()[0].state, SessionState::Crashed);

    let resumed = store.resume(&id).unwrap();
    let holder = std::fs::read_to_string(&lock).unwrap();
    assert_eq!(
        holder.split_whitespace().next(),
        Some(std::process::id().to_string().as_str())
    );
    drop(resumed);
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "");
}

#[test]
fn list_tells_turns_and_how_each_session_ended() {
    let (_dir, store) = store();
    let mut ids = Vec::new();
    for end in [
        Some(SessionEndReason::Completed),
        Some(SessionEndReason::Interrupted),
        None,
    ] {
        let lease = store.create(Path::new("/work")).unwrap();
        let turn_end = SessionEvent::TurnEnd {
            reason: TurnEndReason::Completed,
            steps: 1,
        };
        let mut events = vec![
            SessionEvent::SessionStart {
                session_id: lease.id().into(),
                cwd: "/work".into(),
                tools: vec![],
                sandbox: None,
            },
            turn_end.clone(),
            turn_end,
        ];
        events.extend(end.map(|reason| SessionEvent::SessionEnd { reason }));
        std::fs::write(lease.log_path(), log_text(events)).unwrap();
        ids.push(lease.id().to_owned());
    }
    let listed = store.list().unwrap();
    let seen: Vec<(String, u64, SessionState, String)> = listed
        .iter()
        .map(|s| (s.id.clone(), s.turns, s.state, s.cwd.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (ids[0].clone(), 2, SessionState::Ended, "/work".into()),
            (ids[1].clone(), 2, SessionState::Interrupted, "/work".into()),
            (ids[2].clone(), 2, SessionState::Crashed, "/work".into()),
        ]
    );
    assert!(listed.iter().all(|s| s.size_bytes > 0));
}

#[test]
fn prune_removes_old_sessions_oldest_first_never_one_in_use_and_is_bounded() {
    let (_dir, store) = store();
    let held = store.create(Path::new("/work")).unwrap();
    let ids: Vec<String> = (0..3)
        .map(|_| store.create(Path::new("/work")).unwrap().id().to_owned())
        .collect();
    // Nothing is idle for a day.
    let report = store
        .prune(PrunePolicy::older_than(Duration::from_secs(86_400)))
        .unwrap();
    assert_eq!(report.removed, Vec::<String>::new());
    // Everything is idle for longer than zero; two removals at most.
    std::thread::sleep(Duration::from_millis(20));
    let report = store
        .prune(PrunePolicy::older_than(Duration::ZERO).at_most(2))
        .unwrap();
    assert_eq!(report.removed, ids[..2].to_vec());
    assert_eq!(report.in_use, vec![held.id().to_owned()]);
    assert_eq!(report.deferred, 1);
    let report = store
        .prune(PrunePolicy::older_than(Duration::ZERO))
        .unwrap();
    assert_eq!(report.removed, ids[2..].to_vec());
    assert_eq!(report.in_use, vec![held.id().to_owned()]);
    let left: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(left, vec![held.id().to_owned()]);
}

/// A `spawn` tool starting a `bash` job that runs until cancelled.
fn spawning_registry(jobs: &JobRuntime) -> ToolRegistry {
    job_registry(jobs, false)
}

/// A `spawn` tool starting a `bash` job that runs until cancelled or, when `quick`, has ended
/// by the time anything polls it.
fn job_registry(jobs: &JobRuntime, quick: bool) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .provide(Arc::new(jobs.clone()))
        .unwrap();
    std::mem::forget(jobs.attach_controller());
    registry
        .register(tool("spawn", false, move |_, exec| async move {
            let jobs = exec.service::<JobRuntime>().unwrap();
            let cancelled = Arc::new(tokio::sync::Notify::new());
            let on_cancel = Arc::clone(&cancelled);
            let id = jobs
                .start(
                    JobStart::new("bash", "sleep 100", move || {
                        Ok(JobHooks::new(move |_| on_cancel.notify_one(), async move {
                            if quick {
                                return Ok(JobOutcome::new(JobEnd::Completed));
                            }
                            cancelled.notified().await;
                            Ok(JobOutcome::new(JobEnd::Killed))
                        }))
                    })
                    .owner(exec.agent().unwrap().clone()),
                )
                .map_err(ToolError::from_error)?;
            Ok(json!(format!("started {id}")))
        }))
        .unwrap();
    registry
}

/// The log of a process killed mid-session: a call whose job was still running, an injected
/// context, reasoning, and a last line cut off mid-write.
fn crashed_log(id: &str) -> String {
    let events = [
        SessionEvent::SessionStart {
            session_id: id.into(),
            cwd: "/work".into(),
            tools: vec!["spawn".into()],
            sandbox: None,
        },
        SessionEvent::UserMessage {
            content: "start it".into(),
        },
        SessionEvent::ModelRequest {
            step: 1,
            tools: vec!["spawn".into()],
            injected: vec![],
        },
        SessionEvent::AssistantMessage {
            text: String::new(),
            reasoning: Some("a job, then".into()),
            tool_calls: vec![AssistantToolCall {
                call_id: "c1".into(),
                name: "spawn".into(),
                arguments: "{}".into(),
            }],
        },
        SessionEvent::ToolCall {
            call_id: "c1".into(),
            name: "spawn".into(),
            arguments: json!({}),
        },
        SessionEvent::JobStart {
            job_id: "bash-1".into(),
            kind: "bash".into(),
            label: "sleep 100".into(),
        },
        SessionEvent::ToolResult {
            call_id: "c1".into(),
            name: "spawn".into(),
            is_error: false,
            content: vec![ContentBlock::text("started bash-1")],
            error: None,
            meta: None,
        },
        SessionEvent::ContextInject {
            source: ContextSource::plugin("bash"),
            content: "a note".into(),
        },
        SessionEvent::ModelRequest {
            step: 2,
            tools: vec!["spawn".into()],
            injected: vec![InjectedContext::from_plugin("bash", "a note")],
        },
    ];
    let mut text = log_text(events);
    text.push_str(TORN);
    text
}

/// A last line cut off mid-write.
const TORN: &str = r#"{"seq":10,"ts":"2026-01-01T00:00:00.000Z","type":"assis"#;

#[tokio::test]
async fn a_crashed_session_resumes_once_with_its_lost_job_reported_and_ids_continued() {
    let (_dir, store) = store();
    let lease = store.create(Path::new("/work")).unwrap();
    let id = lease.id().to_owned();
    std::fs::write(lease.log_path(), crashed_log(&id)).unwrap();
    drop(lease);

    let resumed = store.resume(&id).unwrap();
    let torn = resumed.torn_tail.clone().unwrap();
    assert_eq!((torn.line, torn.bytes), (10, TORN.len() as u64));
    assert_eq!(resumed.log.skipped, vec![]);
    assert_eq!(resumed.log.events.len(), 9);

    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = spawning_registry(&jobs);
    // The model streams `c1` again: the call gets a fresh id.
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "spawn",
            json!({}),
        )])),
        Step::from(Response::text("done")),
    ]);
    let agent = Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .session_id(resumed.lease.id())
        .log(resumed.lease.log_path())
        .jobs(jobs.clone())
        .resume(resumed.log)
        .build()
        .unwrap();
    assert_eq!(agent.cwd(), Path::new("/work"));
    let outcome = agent.run("go on").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let first = &mock.requests()[0];
    // The history came back whole: reasoning, the injected context, then the lost-job notice
    // and the new input.
    assert_eq!(
        first.messages,
        vec![
            Message::user("start it"),
            Message::Assistant {
                text: String::new(),
                reasoning: Some("a job, then".into()),
                tool_calls: vec![AssistantToolCall {
                    call_id: "c1".into(),
                    name: "spawn".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                content: vec![ContentBlock::text("started bash-1")],
                is_error: false,
            },
            Message::from(&InjectedContext::from_plugin("bash", "a note")),
            Message::user("go on"),
            Message::from(&InjectedContext {
                source: ContextSource::Host,
                content: String::from(
                    "The session was resumed. Background job bash-1 (bash: sleep 100) was still \
                     running when the previous process ended, and was lost with it: no more \
                     output and no exit status will come. Start again what is still needed."
                ),
            }),
        ]
    );
    agent.dispose().await;
    agent.end_session(SessionEndReason::Completed);
    drop(agent);
    drop(resumed.lease);

    // A second resume reports nothing lost: the first one recorded the loss, and the job it
    // started itself ended with it.
    let again = store.resume(&id).unwrap();
    let jobs = JobRuntime::new(JobsConfig::default());
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "spawn",
            json!({}),
        )])),
        Step::from(Response::text("done")),
    ]);
    let agent = Agent::builder(spawning_registry(&jobs), Arc::new(mock.clone()))
        .session_id(again.lease.id())
        .log(again.lease.log_path())
        .jobs(jobs.clone())
        .resume(again.log)
        .build()
        .unwrap();
    assert_eq!(agent.pending_contexts(), vec![]);
    agent.run("once more").await.unwrap();
    agent.dispose().await;
    agent.end_session(SessionEndReason::Completed);

    let log = agent_loop::SessionLog::read(again.lease.log_path()).unwrap();
    assert_eq!(log.skipped, vec![]);
    let calls: Vec<String> = log
        .events
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::ToolCall { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, vec!["c1", "call-auto-2", "call-auto-3"]);
    let started: Vec<String> = log
        .events
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::JobStart { job_id, .. } => Some(job_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec!["bash-1", "bash-2", "bash-3"]);
    let ended: Vec<(String, JobStatus, Option<String>)> = log
        .events
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::JobEnd {
                job_id,
                status,
                detail,
            } => Some((job_id.clone(), *status, detail.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        vec![
            (
                "bash-1".into(),
                JobStatus::Failed,
                Some(LOST_JOB_DETAIL.into())
            ),
            ("bash-2".into(), JobStatus::Killed, None),
            ("bash-3".into(), JobStatus::Killed, None),
        ]
    );
    let sequence: Vec<u64> = log.events.iter().map(|r| r.seq).collect();
    let unique: BTreeSet<u64> = sequence.iter().copied().collect();
    assert_eq!(unique.len(), sequence.len(), "sequence numbers repeat");
    assert_eq!(store.list().unwrap()[0].state, SessionState::Running);
    drop(again.lease);
    assert_eq!(store.list().unwrap()[0].state, SessionState::Ended);
}

#[tokio::test]
async fn a_quick_job_recorded_as_ended_before_its_start_is_not_lost() {
    let (_dir, store) = store();
    let lease = store.create(Path::new("/work")).unwrap();
    let id = lease.id().to_owned();
    let events = [
        SessionEvent::SessionStart {
            session_id: id.clone(),
            cwd: "/work".into(),
            tools: vec![],
            sandbox: None,
        },
        SessionEvent::JobEnd {
            job_id: "bash-1".into(),
            status: JobStatus::Completed,
            detail: None,
        },
        SessionEvent::JobStart {
            job_id: "bash-1".into(),
            kind: "bash".into(),
            label: "true".into(),
        },
    ];
    let text = log_text(events);
    std::fs::write(lease.log_path(), text).unwrap();
    drop(lease);
    let resumed = store.resume(&id).unwrap();
    let jobs = JobRuntime::new(JobsConfig::default());
    let agent = Agent::builder(
        spawning_registry(&jobs),
        Arc::new(MockAdapter::new(Vec::<Step>::new())),
    )
    .session_id(resumed.lease.id())
    .jobs(jobs)
    .resume(resumed.log)
    .build()
    .unwrap();
    assert_eq!(agent.pending_contexts(), vec![]);
    agent.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_job_is_logged_as_started_before_it_is_logged_as_ended() {
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = job_registry(&jobs, true);
    // A job-changed listener ahead of the agent's holds the start back until the job has
    // ended, as a busy thread may: the runtime must not let the job end before its start has
    // been told. The wait is bounded because, with the start told first, the end never comes
    // while the listener waits.
    let (ended, has_ended) = std::sync::mpsc::channel();
    let _told_end = jobs.on_done(move |_, _| {
        let _ = ended.send(());
    });
    let has_ended = std::sync::Mutex::new(has_ended);
    let _held_start = jobs.on_changed(move |snapshot| {
        if snapshot.status == JobStatus::Running {
            let _ = has_ended
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_millis(300));
        }
    });
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "spawn",
            json!({}),
        )])),
        Step::from(Response::text("done")),
    ]);
    let (agent, recorder) =
        support::recorded(support::builder(&registry, &mock).jobs(jobs.clone()));
    agent.run("go").await.unwrap();
    jobs.settled("bash-1", Some("s1")).await.unwrap();
    agent.dispose().await;
    let job_events: Vec<&str> = recorder
        .kinds()
        .into_iter()
        .filter(|kind| kind.starts_with("job/"))
        .collect();
    assert_eq!(job_events, vec!["job/start", "job/end"]);
}

#[tokio::test]
async fn a_fork_starts_a_new_session_whose_seeded_locators_outlive_the_parent() {
    let (_dir, store) = store();
    let parent = store.create(Path::new("/work")).unwrap();
    let spill = parent.spill_dir().join("stdout-abc.out");
    std::fs::write(&spill, "the whole output").unwrap();
    let events = [
        SessionEvent::SessionStart {
            session_id: parent.id().into(),
            cwd: "/work".into(),
            tools: vec![],
            sandbox: None,
        },
        SessionEvent::UserMessage {
            content: "look".into(),
        },
        SessionEvent::AssistantMessage {
            text: format!("full output: {}", spill.display()),
            reasoning: None,
            tool_calls: vec![],
        },
        SessionEvent::SessionEnd {
            reason: SessionEndReason::Completed,
        },
    ];
    let text = log_text(events);
    std::fs::write(parent.log_path(), text).unwrap();
    let parent_id = parent.id().to_owned();

    // The parent may be in use: a fork only reads it.
    let fork = store.fork(&parent_id).unwrap();
    assert_ne!(fork.lease.id(), parent_id);
    let seeded = fork.lease.spill_dir().join("stdout-abc.out");
    let kinds: Vec<&str> = fork.log.events.iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds,
        vec!["session/start", "user/message", "assistant/message"]
    );
    assert_eq!(
        fork.log.events[0].event,
        SessionEvent::SessionStart {
            session_id: fork.lease.id().into(),
            cwd: "/work".into(),
            tools: vec![],
            sandbox: None,
        }
    );
    let SessionEvent::AssistantMessage { text, .. } = &fork.log.events[2].event else {
        panic!("{:?}", fork.log.events[2]);
    };
    assert_eq!(text, &format!("full output: {}", seeded.display()));
    // What the fork's file holds is what it was seeded with.
    let on_disk = agent_loop::SessionLog::read(fork.lease.log_path()).unwrap();
    assert_eq!(on_disk.events, fork.log.events);

    let agent = Agent::builder(
        ToolRegistry::new(),
        Arc::new(MockAdapter::new([Response::text("ok")])),
    )
    .session_id(fork.lease.id())
    .log(fork.lease.log_path())
    .resume(fork.log)
    .build()
    .unwrap();
    assert_eq!(agent.history().len(), 2);
    agent.dispose().await;

    drop(parent);
    std::fs::remove_dir_all(store.session_dir(&parent_id).unwrap()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&seeded).unwrap(),
        "the whole output"
    );
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].forked_from.as_deref(), Some(parent_id.as_str()));
}
