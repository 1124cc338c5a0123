//! The loop's promises to the model and the host: every job notice reaches a model request,
//! call ids are unique in a session, a session log that cannot be written is an error, and
//! replay keeps what a live session showed.

use crate::support;

use agent_loop::{
    Agent, AgentDirectory, AgentError, CallCards, CardTracker, LOG_WRITE_FAILED, LogEntry,
    LogLines, LogReadError, MAX_LINE_BYTES, Message, SessionEvent, SessionLog, replay_cards,
    replay_sessions,
};
use dsh_test_support::echo;
use dsh_tools::card::TerminalResultView;
use dsh_tools::jobs::{
    JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart, JobsConfig, NoticeDelivery, TurnOpener,
};
use dsh_tools::{
    ContentBlock, InjectedContext, ToolDefinition, ToolOutput, ToolRegistry, ToolResultView,
    ValueSchema,
};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::{assert_paired, builder, recorded};

// ----- Every notice reaches the model -------------------------------------------------------

/// `n` jobs of one agent finish a millisecond apart (in paused time), as a batch of commands
/// started together does; every notice must reach exactly one model request, in settlement
/// order, however few turns the wake-up budget allows.
async fn every_notice_of_a_burst_reaches_one_request(n: usize) {
    let jobs = JobRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: n,
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let _controller = jobs.attach_controller();
    let directory = AgentDirectory::new();
    jobs.set_turn_opener(Arc::new(directory.clone()));
    let registry = ToolRegistry::new();
    let mock = MockAdapter::with_function(|_| Step::from(Response::text("noted")));
    let (agent, recorder) = recorded(builder(&registry, &mock).jobs(jobs.clone()));
    directory.insert(&agent);
    let ids: Vec<String> = (0..n)
        .map(|i| {
            jobs.start(
                JobStart::new("task", format!("task {i}"), move || {
                    Ok(JobHooks::new(|_| {}, async move {
                        tokio::time::sleep(Duration::from_millis(i as u64 + 1)).await;
                        Ok(JobOutcome::new(JobEnd::Completed))
                    }))
                })
                .owner(agent.handle()),
            )
            .unwrap()
            .to_string()
        })
        .collect();
    for id in &ids {
        jobs.settled(id, Some("s1")).await.unwrap();
    }
    directory.wait_woken().await;
    agent.wait_idle().await;

    let injected: Vec<String> = recorder
        .of_kind("context/inject")
        .into_iter()
        .map(|event| match event {
            SessionEvent::ContextInject { content, .. } => content,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(injected.len(), n);
    let drained: Vec<String> = recorder
        .of_kind("model/request")
        .into_iter()
        .flat_map(|event| match event {
            SessionEvent::ModelRequest { injected, .. } => injected,
            other => panic!("{other:?}"),
        })
        .map(|context| context.content)
        .collect();
    assert_eq!(
        drained, injected,
        "each notice in exactly one request, in settlement order"
    );
    // And the model saw each exactly once: the last request's history holds every notice once.
    let last = mock.requests().pop().unwrap();
    let seen: Vec<&String> = last
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User {
                content,
                source: Some(_),
            } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(seen, injected.iter().collect::<Vec<_>>());
    assert_eq!(agent.pending_contexts(), vec![]);
    agent.dispose().await;
    assert_eq!(recorder.of_kind("context/undelivered"), vec![]);
}

#[tokio::test(start_paused = true)]
async fn ten_notices_settling_together_each_reach_one_request() {
    every_notice_of_a_burst_reaches_one_request(10).await;
}

#[tokio::test(start_paused = true)]
async fn two_hundred_notices_settling_together_each_reach_one_request() {
    every_notice_of_a_burst_reaches_one_request(200).await;
}

#[tokio::test(start_paused = true)]
async fn disposing_an_agent_while_its_woken_turn_gathers_reports_the_notices() {
    let jobs = JobRuntime::new(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let _controller = jobs.attach_controller();
    let directory = AgentDirectory::new();
    jobs.set_turn_opener(Arc::new(directory.clone()));
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new(Vec::<Step>::new());
    let (agent, recorder) = recorded(builder(&registry, &mock).jobs(jobs.clone()));
    directory.insert(&agent);
    let id = jobs
        .start(
            JobStart::new("task", "quick", || {
                Ok(JobHooks::new(|_| {}, async {
                    Ok(JobOutcome::new(JobEnd::Completed))
                }))
            })
            .owner(agent.handle()),
        )
        .unwrap();
    jobs.settled(id.as_str(), Some("s1")).await.unwrap();
    // The woken turn is gathering (the agent is busy, nothing was asked yet).
    assert!(agent.is_busy());
    agent.dispose().await;
    directory.wait_woken().await;
    assert_eq!(mock.requests().len(), 0);
    assert_eq!(
        recorder.kinds(),
        vec![
            "session/start",
            "job/start",
            "job/end",
            "context/inject",
            "context/undelivered"
        ]
    );
}

/// When a model request was made (from the test's start) and the notices it carried.
type Request = (Duration, Vec<String>);

/// Injects a notice at each of `times` (from the test's start, in paused time) into an idle
/// agent, opening a woken turn with the first one as the jobs runtime does, and returns when
/// the turn's first request was made (from the start) and the notices it carried.
async fn first_woken_request(gather: Duration, times: &[u64]) -> Request {
    let start = tokio::time::Instant::now();
    let directory = AgentDirectory::new().gather_window(gather);
    let registry = ToolRegistry::new();
    let mock = MockAdapter::with_function(|_| Step::from(Response::text("noted")));
    let (agent, _) = recorded(builder(&registry, &mock));
    directory.insert(&agent);
    let requests: Arc<std::sync::Mutex<Vec<Request>>> = Arc::default();
    let _subscription = agent.subscribe({
        let requests = Arc::clone(&requests);
        move |record| {
            if let SessionEvent::ModelRequest { injected, .. } = &record.event {
                let notices = injected.iter().map(|c| c.content.clone()).collect();
                requests.lock().unwrap().push((start.elapsed(), notices));
            }
        }
    });
    for (i, at) in times.iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_millis(*at)).await;
        agent
            .inject(InjectedContext::from_plugin("jobs", format!("notice {i}")))
            .unwrap();
        if i == 0 {
            assert!(directory.open_turn(&agent.handle()));
        }
    }
    directory.wait_woken().await;
    agent.dispose().await;
    let first = requests.lock().unwrap().first().cloned();
    first.unwrap()
}

fn notices(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("notice {i}")).collect()
}

#[tokio::test(start_paused = true)]
async fn a_woken_turn_asks_once_a_quiet_period_passes_without_a_notice() {
    assert_eq!(
        first_woken_request(Duration::from_millis(100), &[0, 30, 60]).await,
        (Duration::from_millis(160), notices(0..3))
    );
}

#[tokio::test(start_paused = true)]
async fn a_woken_turn_gathers_for_at_most_ten_quiet_periods() {
    // A notice every 30 ms, for longer than ten periods of 100 ms: the turn asks at 1 s, with
    // the 34 notices that arrived by then (at 0, 30, …, 990 ms).
    let times: Vec<u64> = (0..50).map(|i| i * 30).collect();
    assert_eq!(
        first_woken_request(Duration::from_millis(100), &times).await,
        (Duration::from_millis(1000), notices(0..34))
    );
}

#[tokio::test(start_paused = true)]
async fn a_woken_turn_without_a_gather_window_asks_at_once() {
    assert_eq!(
        first_woken_request(Duration::ZERO, &[0, 30]).await,
        (Duration::ZERO, notices(0..1))
    );
}

#[tokio::test]
async fn a_woken_turn_that_finds_no_notice_asks_nothing_and_leaves_the_agent_idle() {
    let directory = AgentDirectory::new();
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new(Vec::<Step>::new());
    let (agent, recorder) = recorded(builder(&registry, &mock));
    directory.insert(&agent);
    assert!(directory.open_turn(&agent.handle()));
    directory.wait_woken().await;
    assert_eq!(mock.requests().len(), 0);
    assert_eq!(recorder.kinds(), vec!["session/start"]);
    assert!(!agent.is_busy());
}

// ----- Unique call ids ----------------------------------------------------------------------

/// The ids of every tool call in `history`, in order, and the ids the tool messages answer.
fn ids(history: &[Message]) -> (Vec<String>, Vec<(String, String)>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in history {
        match message {
            Message::Assistant { tool_calls, .. } => {
                calls.extend(tool_calls.iter().map(|c| c.call_id.clone()));
            }
            Message::Tool {
                call_id, content, ..
            } => results.push((call_id.clone(), dsh_tools::content_text(content))),
            _ => {}
        }
    }
    (calls, results)
}

fn echoes(calls: &[(&str, &str)]) -> Step {
    Response::calls(
        calls
            .iter()
            .map(|(id, text)| ScriptedCall::json(*id, "echo", json!({ "text": text }))),
    )
    .into()
}

/// The cards a tracker builds from `events`: call id, the echoed argument, the result text.
fn card_summary(registry: &ToolRegistry, events: &[SessionEvent]) -> Vec<(String, String)> {
    let mut tracker = CardTracker::new(registry.clone(), None);
    for event in events {
        tracker.observe(event);
    }
    tracker
        .cards()
        .iter()
        .map(|card| {
            let result = serde_json::to_value(&card.result).unwrap();
            (card.call_id.clone(), result.to_string())
        })
        .collect()
}

#[tokio::test]
async fn a_call_id_repeated_in_one_step_gets_a_fresh_id() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([
        echoes(&[("dup", "a"), ("dup", "b")]),
        Response::text("done").into(),
    ]);
    let (agent, recorder) = recorded(builder(&registry, &mock));
    agent.run("go").await.unwrap();
    let history = agent.history();
    assert_paired(&history);
    assert_eq!(
        ids(&history),
        (
            vec!["dup".into(), "call-auto-2".into()],
            vec![
                ("dup".into(), "a".into()),
                ("call-auto-2".into(), "b".into())
            ]
        )
    );
    // The assistant message and every later event carry the fresh id.
    let SessionEvent::AssistantMessage { tool_calls, .. } =
        &recorder.of_kind("assistant/message")[0]
    else {
        unreachable!()
    };
    let recorded: Vec<&str> = tool_calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(recorded, ["dup", "call-auto-2"]);
    let events: Vec<SessionEvent> = recorder.events().into_iter().map(|r| r.event).collect();
    let cards = card_summary(&registry, &events);
    assert_eq!(cards.len(), 2);
    assert_eq!(cards[0].0, "dup");
    assert!(cards[0].1.contains("\"a\""), "{cards:?}");
    assert_eq!(cards[1].0, "call-auto-2");
    assert!(cards[1].1.contains("\"b\""), "{cards:?}");
}

/// A fresh id never takes one the model streams itself: neither one it streamed earlier in the
/// step nor one it streams later, and not the id the duplicate would have been given first.
#[tokio::test]
async fn a_fresh_id_never_collides_with_an_id_the_model_streams() {
    for (calls, expected) in [
        (
            &[("call-auto-2", "a"), ("call-auto-2", "b")][..],
            &["call-auto-2", "call-auto-3"][..],
        ),
        (
            &[("dup", "a"), ("dup", "b"), ("call-auto-2", "c"), ("", "d")][..],
            &["dup", "call-auto-2", "call-auto-3", "call-auto-4"][..],
        ),
        (
            &[
                ("", "a"),
                ("call-auto-1", "b"),
                ("call-auto-3", "c"),
                ("", "d"),
            ][..],
            &["call-auto-1", "call-auto-2", "call-auto-3", "call-auto-4"][..],
        ),
    ] {
        let registry = ToolRegistry::new();
        registry.register(echo()).unwrap();
        let mock = MockAdapter::new([echoes(calls), Response::text("done").into()]);
        let (agent, _) = recorded(builder(&registry, &mock));
        agent.run("go").await.unwrap();
        let history = agent.history();
        assert_paired(&history);
        let texts: Vec<String> = calls.iter().map(|(_, text)| (*text).to_owned()).collect();
        let (ids, results) = ids(&history);
        assert_eq!(ids, expected, "{calls:?}");
        assert_eq!(
            results,
            expected
                .iter()
                .map(|id| (*id).to_owned())
                .zip(texts)
                .collect::<Vec<_>>(),
            "{calls:?}"
        );
    }
}

#[tokio::test]
async fn a_call_id_repeated_in_a_later_step_or_after_resume_gets_a_fresh_id() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([
        echoes(&[("c1", "a")]),
        echoes(&[("c1", "b")]),
        Response::text("done").into(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let (agent, _) = recorded(builder(&registry, &mock).log(&path));
    agent.run("go").await.unwrap();
    assert_eq!(
        ids(&agent.history()).1,
        vec![
            ("c1".into(), "a".into()),
            ("call-auto-2".into(), "b".into())
        ]
    );
    agent.dispose().await;

    let mock = MockAdapter::new([
        echoes(&[("c1", "c"), ("call-auto-2", "d")]),
        Response::text("done").into(),
    ]);
    let resumed = Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .resume(SessionLog::read(&path).unwrap())
        .log(&path)
        .build()
        .unwrap();
    resumed.run("again").await.unwrap();
    let history = resumed.history();
    assert_paired(&history);
    let (calls, _) = ids(&history);
    let unique: std::collections::BTreeSet<&String> = calls.iter().collect();
    assert_eq!(unique.len(), 4, "{calls:?}");
    resumed.dispose().await;
    // Replaying the whole log gives four cards, each with its own result.
    let log = SessionLog::read(&path).unwrap();
    let events: Vec<SessionEvent> = log.events.into_iter().map(|r| r.event).collect();
    let cards = card_summary(&registry, &events);
    let texts: Vec<bool> = cards
        .iter()
        .zip(["a", "b", "c", "d"])
        .map(|((_, result), text)| result.contains(&format!("\"{text}\"")))
        .collect();
    assert_eq!(texts, [true; 4], "{cards:?}");
}

#[tokio::test]
async fn notices_no_turn_took_are_reported_when_the_agent_is_disposed() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Response::text("hi")]);
    let (agent, recorder) = recorded(builder(&registry, &mock));
    agent.run("hello").await.unwrap();
    let late = InjectedContext::from_plugin("bash", "background job bash-4 finished");
    agent.inject(late.clone()).unwrap();
    assert_eq!(agent.pending_contexts(), vec![late.clone()]);
    agent.dispose().await;
    assert_eq!(
        recorder.of_kind("context/undelivered"),
        vec![SessionEvent::ContextUndelivered {
            contexts: vec![late]
        }]
    );
    assert_eq!(recorder.kinds().last(), Some(&"context/undelivered"));
}

// ----- The session log ----------------------------------------------------------------------

#[tokio::test]
async fn a_log_that_cannot_be_written_fails_the_build_and_frees_the_session() {
    let registry = ToolRegistry::new();
    let mock = Arc::new(MockAdapter::new(Vec::<Step>::new()));
    let error = Agent::builder(registry.clone(), mock.clone())
        .session_id("s1")
        .log("/dev/full")
        .build()
        .unwrap_err();
    let AgentError::LogWrite(failure) = &error else {
        panic!("expected a log write error, got {error:?}");
    };
    assert_eq!(failure.path, std::path::Path::new("/dev/full"));
    assert_eq!(failure.kind, std::io::ErrorKind::StorageFull);
    assert!(
        error
            .to_string()
            .starts_with("cannot write the session log /dev/full: No space left on device"),
        "{error}"
    );
    assert!(registry.existing_agent_scope("s1").is_none());
    Agent::builder(registry, mock)
        .session_id("s1")
        .build()
        .unwrap();
}

#[tokio::test]
async fn a_log_that_fails_mid_session_is_reported_to_the_host_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let registry = ToolRegistry::new();
    let first = MockAdapter::new([Response::text("one")]);
    let (agent, _) = recorded(builder(&registry, &first).log(&path));
    agent.run("one").await.unwrap();
    agent.dispose().await;
    // Resuming writes nothing until the next event, so the build succeeds; the turn's first
    // event then fails to reach `/dev/full`.
    let mock = MockAdapter::new([Response::text("two")]);
    let (resumed, recorder) = recorded(
        Agent::builder(registry, Arc::new(mock.clone()))
            .resume(SessionLog::read(&path).unwrap())
            .log("/dev/full"),
    );
    assert_eq!(resumed.log_error(), None);
    let outcome = resumed.run("two").await.unwrap();
    assert_eq!(outcome.text, "two");
    let failure = resumed
        .log_error()
        .expect("the failure is kept for the host");
    assert_eq!(failure.kind, std::io::ErrorKind::StorageFull);
    // One `error` event, right after the event that could not be written; the log is closed.
    let kinds = recorder.kinds();
    assert_eq!(&kinds[..2], ["user/message", "error"]);
    assert_eq!(
        recorder.of_kind("error"),
        vec![SessionEvent::Error {
            message: failure.to_string(),
            code: Some(LOG_WRITE_FAILED.into()),
        }]
    );
}

// ----- Reading logs -------------------------------------------------------------------------

#[test]
fn an_endless_line_is_a_clear_error_not_an_allocation_of_the_file() {
    let error = SessionLog::read("/dev/zero").unwrap_err();
    assert!(
        matches!(error, LogReadError::LineTooLong { line: 1, limit } if limit == MAX_LINE_BYTES),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "line 1 is longer than 33554432 bytes");
    // A 1 GiB log (sparse, so it costs no disk): the same error after reading one limit's worth.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.jsonl");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 30).unwrap();
    let error = SessionLog::read(&path).unwrap_err();
    assert!(
        matches!(error, LogReadError::LineTooLong { line: 1, .. }),
        "{error:?}"
    );
}

#[test]
fn the_line_limit_counts_the_line_without_its_newline() {
    let line = r#"{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"user/message","content":"hi"}"#;
    let text = format!("\n{line}\n{line}");
    let read = |limit: usize| -> Vec<Result<LogEntry, String>> {
        LogLines::new(std::io::Cursor::new(text.clone()), limit)
            .map(|entry| entry.map_err(|e| e.to_string()))
            .collect()
    };
    let entries = read(line.len());
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries.iter().all(|e| matches!(e, Ok(LogEntry::Event(_)))));
    // Too long: line 2 (line 1 is blank), and the reader stops there.
    assert_eq!(
        read(line.len() - 1),
        vec![Err(format!(
            "line 2 is longer than {} bytes",
            line.len() - 1
        ))]
    );
}

#[test]
fn a_result_with_a_failure_code_from_the_future_is_kept_and_still_renders() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let text = [
        r#"{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"tool/call","callId":"c1","name":"echo","arguments":{"text":"hi"}}"#,
        r#"{"seq":2,"ts":"2026-01-01T00:00:00.000Z","type":"tool/result","callId":"c1","name":"echo","isError":true,"content":[{"type":"text","text":"Error: the quota ran out"}],"error":{"message":"the quota ran out","code":"QUOTA_EXCEEDED"}}"#,
    ]
    .join("\n");
    let log = SessionLog::parse(&text);
    assert_eq!(log.skipped, vec![]);
    assert_eq!(log.events.len(), 2);
    assert_eq!(log.repaired.len(), 1);
    assert_eq!(log.repaired[0].line, 2);
    assert_eq!(log.repaired[0].pointer, "/error");
    assert_eq!(
        log.repaired[0].text,
        r#"{"message":"the quota ran out","code":"QUOTA_EXCEEDED"}"#
    );
    let cards = replay_cards(&registry, &log.events);
    let result = serde_json::to_value(&cards[0].result).unwrap();
    assert!(
        result.to_string().contains("Error: the quota ran out"),
        "{result}"
    );
}

#[test]
fn a_result_with_a_content_block_from_the_future_is_kept_and_still_renders() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let call = r#"{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"tool/call","callId":"c1","name":"echo","arguments":{"text":"hi"}}"#;
    // An image block this version has no variant for, then the text; and the same with a
    // failure code from the future too: both fields are set aside, the text stays.
    let image = r#"{"type":"image","data":"AAAA","mimeType":"image/png"}"#;
    let plain = format!(
        r#"{{"seq":2,"ts":"2026-01-01T00:00:00.000Z","type":"tool/result","callId":"c1","name":"echo","isError":false,"content":[{image},{{"type":"text","text":"hi"}}]}}"#
    );
    let failed = format!(
        r#"{{"seq":2,"ts":"2026-01-01T00:00:00.000Z","type":"tool/result","callId":"c1","name":"echo","isError":true,"content":[{{"type":"text","text":"Error: no"}},{image}],"error":{{"message":"no","code":"QUOTA_EXCEEDED"}}}}"#
    );
    for (result, pointer, text, shown) in [
        (plain, "/content/0", image.to_owned(), "hi"),
        (
            failed,
            "/error, /content/1",
            format!(r#"{{"message":"no","code":"QUOTA_EXCEEDED"}}, {image}"#),
            "Error: no",
        ),
    ] {
        let log = SessionLog::parse(&format!("{call}\n{result}"));
        assert_eq!(log.skipped, vec![], "{result}");
        assert_eq!(log.events.len(), 2, "{result}");
        let repaired: Vec<(usize, &str, &str)> = log
            .repaired
            .iter()
            .map(|r| (r.line, r.pointer.as_str(), r.text.as_str()))
            .collect();
        assert_eq!(repaired, vec![(2, pointer, text.as_str())]);
        let SessionEvent::ToolResult { content, .. } = &log.events[1].event else {
            panic!("{:?}", log.events[1]);
        };
        assert_eq!(content, &vec![ContentBlock::text(shown)]);
        let cards = replay_cards(&registry, &log.events);
        let card = serde_json::to_value(&cards[0].result).unwrap();
        assert!(card.to_string().contains(shown), "{card}");
    }
}

#[test]
fn a_log_with_crlf_line_ends_or_invalid_utf8_reads_line_by_line() {
    // Written with CRLF line ends by an editor, and with a byte that is not UTF-8 in line 2.
    let lines: [&[u8]; 3] = [
        br#"{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"user/message","content":"hi"}"#,
        b"{\"seq\":2,\"ts\":\"2026-01-01T00:00:00.000Z\",\"type\":\"user/message\",\"content\":\"a\xffb\"}",
        br#"{"seq":3,"ts":"2026-01-01T00:00:00.000Z","type":"user/message","content":"bye"}"#,
    ];
    let bytes: Vec<u8> = lines
        .iter()
        .flat_map(|line| [*line, b"\r\n"].concat())
        .collect();
    let contents: Vec<String> = LogLines::new(std::io::Cursor::new(bytes), MAX_LINE_BYTES)
        .map(|entry| match entry.unwrap() {
            LogEntry::Event(record) => match record.event {
                SessionEvent::UserMessage { content } => content,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(contents, ["hi", "a\u{fffd}b", "bye"]);
}

#[tokio::test]
async fn two_sessions_appended_to_one_log_replay_as_two_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    for (session, text) in [("s1", "first"), ("s2", "second")] {
        let mock = MockAdapter::new([echoes(&[("c1", text)]), Response::text("ok").into()]);
        let agent = Agent::builder(registry.clone(), Arc::new(mock))
            .session_id(session)
            .log(&path)
            .build()
            .unwrap();
        agent.run("go").await.unwrap();
        agent.dispose().await;
    }
    let log = SessionLog::read(&path).unwrap();
    let sessions = replay_sessions(&registry, &log.events);
    let summary: Vec<(Option<String>, Vec<String>)> = sessions
        .iter()
        .map(|session| {
            (
                session.session_id.clone(),
                session
                    .cards
                    .iter()
                    .map(|card| serde_json::to_value(&card.result).unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(summary.len(), 2, "{summary:?}");
    assert_eq!(summary[0].0.as_deref(), Some("s1"));
    assert_eq!(summary[1].0.as_deref(), Some("s2"));
    assert!(
        summary[0].1.len() == 1 && summary[0].1[0].contains("first"),
        "{summary:?}"
    );
    assert!(
        summary[1].1.len() == 1 && summary[1].1[0].contains("second"),
        "{summary:?}"
    );
}

// ----- Presentation meta, end to end --------------------------------------------------------

/// A tool whose value carries an exit code the text cannot show: the card needs the meta.
/// Its text always ends with `[exit code: 7]` (the command's own output), while the real exit
/// code travels only in the value and, from there, in the presentation meta.
fn probe() -> ToolDefinition {
    ToolDefinition::builder("probe", "Run the probe.")
        .output(
            ToolOutput::new(ValueSchema::json(), |_, _| {
                vec![ContentBlock::text("checking\n[exit code: 7]")]
            })
            .with_presentation_meta(|_, value| Some(json!({ "exitCode": value["exitCode"] }))),
        )
        .present_result(|_, record| {
            let meta = record.meta.as_ref()?;
            Some(ToolResultView::Terminal(TerminalResultView {
                title: Some("probe".into()),
                output: Some(dsh_tools::content_text(&record.content)),
                exit_code: meta["exitCode"].as_i64(),
                signal: None,
            }))
        })
        .execute(|_, _| async { Ok(json!({ "exitCode": 0 })) })
        .build()
        .unwrap()
}

#[tokio::test]
async fn presentation_meta_reaches_the_log_and_replay_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let registry = ToolRegistry::new();
    registry.register(probe()).unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "probe",
            json!({}),
        )])),
        Response::text("done").into(),
    ]);
    let live = Arc::new(std::sync::Mutex::new(CardTracker::new(
        registry.clone(),
        None,
    )));
    let sink = Arc::clone(&live);
    let agent = builder(&registry, &mock)
        .log(&path)
        .subscriber(move |record| sink.lock().unwrap().observe(&record.event))
        .build()
        .unwrap();
    agent.run("probe").await.unwrap();
    agent.dispose().await;
    let live: Vec<CallCards> = live.lock().unwrap().cards().to_vec();
    let terminal = ToolResultView::Terminal(TerminalResultView {
        title: Some("probe".into()),
        output: Some("checking\n[exit code: 7]".into()),
        exit_code: Some(0),
        signal: None,
    });
    assert_eq!(live[0].result, Some(terminal));

    // The log carries the meta, and the replayed card is the live one.
    let text = std::fs::read_to_string(&path).unwrap();
    let log = SessionLog::parse(&text);
    let result_meta: Vec<serde_json::Value> = log
        .events
        .iter()
        .filter_map(|record| match &record.event {
            SessionEvent::ToolResult { meta, .. } => meta.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(result_meta, vec![json!({ "exitCode": 0 })]);
    assert_eq!(replay_cards(&registry, &log.events), live);

    // Without the meta, replay falls back to the generic card.
    let stripped: String = text
        .lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            value.as_object_mut().unwrap().remove("meta");
            value.to_string() + "\n"
        })
        .collect();
    let log = SessionLog::parse(&stripped);
    let cards = replay_cards(&registry, &log.events);
    assert_ne!(cards, live);
    let SessionEvent::ToolResult {
        content, is_error, ..
    } = &log
        .events
        .iter()
        .find(|r| r.event.kind() == "tool/result")
        .unwrap()
        .event
    else {
        unreachable!()
    };
    assert_eq!(
        cards[0].result,
        Some(ToolResultView::fallback(&dsh_tools::ToolResultRecord {
            content: content.clone(),
            is_error: *is_error,
            error: None,
            meta: None,
        }))
    );
}
