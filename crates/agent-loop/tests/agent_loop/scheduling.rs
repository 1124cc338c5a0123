//! Scheduling of one message's tool calls through the loop: concurrency-safe calls overlap up
//! to `max_parallel_tools`, every other call is a barrier, and results and deferred contexts
//! land in call order.

use crate::support;

use agent_loop::{Message, SessionEvent, TurnEndReason};
use dsh_test_support::tool;
use dsh_tools::{ContentBlock, ContextSource, InjectedContext, ToolRegistry};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{agent, builder, logging_tool, recorded, tool_messages};
use tokio::sync::{Barrier, Notify};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_calls_overlap_exclusive_calls_are_barriers_and_results_keep_call_order() {
    let registry = ToolRegistry::new();
    let barrier = Arc::new(Barrier::new(2));
    let b_ended = Arc::new(Notify::new());
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let (barrier, b_ended, log) =
            (Arc::clone(&barrier), Arc::clone(&b_ended), Arc::clone(&log));
        registry
            .register(tool("meet", true, move |args, _| {
                let (barrier, b_ended, log) =
                    (Arc::clone(&barrier), Arc::clone(&b_ended), Arc::clone(&log));
                async move {
                    let me = args["id"].as_str().unwrap().to_owned();
                    log.lock().unwrap().push(format!("start {me}"));
                    // Both calls must be running at once to get past this point.
                    barrier.wait().await;
                    // The first call finishes last: it waits for the second to end.
                    if me == "a" {
                        b_ended.notified().await;
                    }
                    log.lock().unwrap().push(format!("end {me}"));
                    if me == "b" {
                        b_ended.notify_one();
                    }
                    Ok(json!(me))
                }
            }))
            .unwrap();
    }
    registry
        .register(logging_tool("solo", true, &log, |_| "solo".into()))
        .unwrap();
    registry
        .register(logging_tool("write", false, &log, |args| {
            format!("write {}", args["n"])
        }))
        .unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::json("c1", "meet", json!({"id": "a"})),
            ScriptedCall::json("c2", "meet", json!({"id": "b"})),
            ScriptedCall::json("c3", "write", json!({"n": 1})),
            ScriptedCall::json("c4", "solo", json!({})),
        ])),
        Response::text("ok").into(),
    ]);
    let (agent, _) = agent(&registry, &mock);
    tokio::time::timeout(Duration::from_secs(10), agent.run("go"))
        .await
        .expect("the safe calls did not overlap (barrier never released)")
        .unwrap();
    let order = log.lock().unwrap().clone();
    let position = |entry: &str| order.iter().position(|e| e == entry).unwrap();
    // The exclusive write waits for both calls of the group before it, and the call after it
    // waits for the write.
    assert!(position("write 1") > position("end a"), "{order:?}");
    assert!(position("write 1") > position("end b"), "{order:?}");
    assert!(position("solo") > position("write 1"), "{order:?}");
    assert!(position("end b") < position("end a"), "{order:?}");
    let results = tool_messages(&mock.requests()[1].messages);
    let ids: Vec<&str> = results.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, vec!["c1", "c2", "c3", "c4"]);
}

#[tokio::test]
async fn at_most_max_parallel_tools_safe_calls_run_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let registry = ToolRegistry::new();
    let started = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    // Every call holds until the test opens the gate.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    {
        let (started, running, peak, gate) = (
            Arc::clone(&started),
            Arc::clone(&running),
            Arc::clone(&peak),
            Arc::clone(&gate),
        );
        registry
            .register(tool("held", true, move |_, _| {
                let (started, running, peak, gate) = (
                    Arc::clone(&started),
                    Arc::clone(&running),
                    Arc::clone(&peak),
                    Arc::clone(&gate),
                );
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    gate.acquire().await.unwrap().forget();
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(json!("released"))
                }
            }))
            .unwrap();
    }
    let mock = MockAdapter::new([
        Step::from(Response::calls(
            (1..=4).map(|i| ScriptedCall::json(format!("c{i}"), "held", json!({}))),
        )),
        Response::text("done").into(),
    ]);
    let (agent, _) = recorded(builder(&registry, &mock).max_parallel_tools(2));
    let run = tokio::spawn({
        let agent = agent.clone();
        async move { agent.run("go").await }
    });
    // On this single-threaded runtime the loop's task starts every call it admits in one poll
    // before this task runs again, so the count seen here is all that were let in.
    while started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(started.load(Ordering::SeqCst), 2);
    gate.add_permits(4);
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(
        (started.load(Ordering::SeqCst), peak.load(Ordering::SeqCst)),
        (4, 2)
    );
}

#[tokio::test]
async fn deferred_contexts_follow_the_results_in_call_order() {
    let registry = ToolRegistry::new();
    registry
        .register(tool("later", true, |args, exec| async move {
            let text = args["text"].as_str().unwrap_or_default().to_owned();
            exec.defer_context(InjectedContext::from_plugin(
                "notes",
                format!("after {text}"),
            ));
            Ok(json!(text))
        }))
        .unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::json("c1", "later", json!({"text": "one"})),
            ScriptedCall::json("c2", "later", json!({"text": "two"})),
        ])),
        Response::text("done").into(),
    ]);
    let (agent, recorder) = agent(&registry, &mock);
    agent.run("go").await.unwrap();
    let after = |text: &str| InjectedContext::from_plugin("notes", format!("after {text}"));
    let recorded: Vec<SessionEvent> = recorder
        .events()
        .into_iter()
        .map(|r| r.event)
        .skip_while(|e| e.kind() != "tool/result")
        .take(5)
        .collect();
    let result = |call_id: &str, text: &str| SessionEvent::ToolResult {
        call_id: call_id.into(),
        name: "later".into(),
        is_error: false,
        content: vec![ContentBlock::text(text)],
        error: None,
        meta: None,
    };
    let inject = |text: &str| SessionEvent::ContextInject {
        source: ContextSource::plugin("notes"),
        content: format!("after {text}"),
    };
    assert_eq!(
        recorded,
        vec![
            result("c1", "one"),
            result("c2", "two"),
            inject("one"),
            inject("two"),
            SessionEvent::ModelRequest {
                step: 2,
                tools: vec!["later".into()],
                injected: vec![after("one"), after("two")],
            },
        ]
    );
    let messages = &mock.requests()[1].messages;
    assert_eq!(
        messages[messages.len() - 2..],
        [Message::from(&after("one")), Message::from(&after("two"))]
    );
}
