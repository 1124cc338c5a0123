//! The turn loop: assembly, scheduling, injected context, cancellation, errors and endings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use agent_loop::{AgentError, Message, SessionEvent, TurnEndReason};
use dsh_tools::{ContentBlock, ContextSource, InjectedContext, ToolRegistry};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{agent, assert_paired, echo, tool};
use tokio::sync::Barrier;

fn tool_messages(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                call_id,
                content,
                is_error,
            } => Some((call_id.clone(), dsh_tools::content_text(content), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn arguments_streamed_byte_by_byte_across_parallel_calls_assemble() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::json("c1", "echo", json!({"text": "first ünïcode"})),
            ScriptedCall::json("c2", "echo", json!({"text": "second"})),
        ])),
        Response::text("done").into(),
    ])
    .chunk_bytes(1);
    let (agent, _) = agent(&registry, &mock);
    let outcome = agent.run("go").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let requests = mock.requests();
    let Message::Assistant { tool_calls, .. } = &requests[1].messages[1] else {
        panic!("expected the assistant message: {:?}", requests[1].messages);
    };
    assert_eq!(tool_calls[0].arguments, r#"{"text":"first ünïcode"}"#);
    assert_eq!(tool_calls[1].arguments, r#"{"text":"second"}"#);
    assert_eq!(
        tool_messages(&requests[1].messages),
        vec![
            ("c1".into(), "first ünïcode".into(), false),
            ("c2".into(), "second".into(), false)
        ]
    );
    mock.assert_exhausted();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_calls_overlap_exclusive_calls_are_barriers_and_results_keep_call_order() {
    let registry = ToolRegistry::new();
    let barrier = Arc::new(Barrier::new(2));
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let (barrier, log) = (Arc::clone(&barrier), Arc::clone(&log));
        registry
            .register(tool("meet", true, move |args, _| {
                let (barrier, log) = (Arc::clone(&barrier), Arc::clone(&log));
                async move {
                    let me = args["id"].as_str().unwrap().to_owned();
                    log.lock().unwrap().push(format!("start {me}"));
                    // Both calls must be running at once to get past this point.
                    barrier.wait().await;
                    // The first call finishes last.
                    if me == "a" {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                    log.lock().unwrap().push(format!("end {me}"));
                    Ok(json!(me))
                }
            }))
            .unwrap();
    }
    {
        let log = Arc::clone(&log);
        registry
            .register(tool("solo", true, move |_, _| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().unwrap().push("solo".into());
                    Ok(json!("solo"))
                }
            }))
            .unwrap();
    }
    {
        let log = Arc::clone(&log);
        registry
            .register(tool("write", false, move |args, _| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().unwrap().push(format!("write {}", args["n"]));
                    Ok(json!("written"))
                }
            }))
            .unwrap();
    }
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
async fn injected_context_reaches_the_next_request_and_is_recorded() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([
        Step::from(Response::text("first")),
        Response::text("second").into(),
    ]);
    let (agent, recorder) = agent(&registry, &mock);
    agent.run("one").await.unwrap();
    let context = InjectedContext::from_plugin("bash", "background job bash-1 finished");
    agent.handle().inject(context.clone()).unwrap();
    // Not a wake-up: nothing was requested yet.
    assert_eq!(mock.requests().len(), 1);
    agent.run("two").await.unwrap();
    let second = &mock.requests()[1];
    assert_eq!(
        second.messages[2..],
        [
            Message::user("two"),
            Message::User {
                content: "background job bash-1 finished".into(),
                source: Some(ContextSource::plugin("bash")),
            }
        ]
    );
    let events = recorder.events();
    assert!(events.iter().any(|r| r.event
        == SessionEvent::ContextInject {
            source: ContextSource::plugin("bash"),
            content: "background job bash-1 finished".into()
        }));
    let request = events
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::ModelRequest { injected, .. } => Some(injected.clone()),
            _ => None,
        })
        .nth(1)
        .unwrap();
    assert_eq!(request, vec![context.clone()]);

    agent.dispose().await;
    let err = agent.handle().inject(context).unwrap_err();
    assert_eq!(err.to_string(), "agent for session `s1` is gone");
    assert!(!agent.handle().is_alive());
    assert!(matches!(
        agent.run("three").await,
        Err(AgentError::Disposed(_))
    ));
}

#[tokio::test]
async fn cancelling_mid_tool_ends_cancelled_and_keeps_every_call_paired() {
    let registry = ToolRegistry::new();
    let started = Arc::new(tokio::sync::Notify::new());
    {
        let started = Arc::clone(&started);
        registry
            .register(tool("slow", false, move |_, exec| {
                let started = Arc::clone(&started);
                async move {
                    started.notify_one();
                    exec.signal().cancelled().await;
                    Ok(json!("stopped"))
                }
            }))
            .unwrap();
    }
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::json("c1", "echo", json!({"text": "before"})),
            ScriptedCall::json("c2", "slow", json!({})),
            ScriptedCall::json("c3", "echo", json!({"text": "after"})),
        ])),
        Response::text("next turn").into(),
    ]);
    let (agent, recorder) = agent(&registry, &mock);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("go").await })
    };
    started.notified().await;
    agent.cancel_turn();
    let outcome = running.await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    assert_eq!(
        recorder.turn_ends(),
        vec![SessionEvent::TurnEnd {
            reason: TurnEndReason::Cancelled,
            steps: 1
        }]
    );
    agent.run("again").await.unwrap();
    let next = &mock.requests()[1].messages;
    assert_paired(next);
    let results = tool_messages(next);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0], ("c1".into(), "before".into(), false));
    assert_eq!(results[1].0, "c2");
    assert!(results[1].2, "a cancelled call is an error result");
    assert_eq!(results[2].0, "c3");
    assert!(
        results[2].1.contains("cancelled before it started"),
        "{:?}",
        results[2]
    );
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_become_error_results() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::raw("c1", "echo", "{not json"),
            ScriptedCall::json("c2", "teleport", json!({})),
        ])),
        Response::text("sorry").into(),
    ]);
    let (agent, recorder) = agent(&registry, &mock);
    let outcome = agent.run("go").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let results = tool_messages(&mock.requests()[1].messages);
    assert_eq!(results[0].0, "c1");
    assert!(
        results[0].1.contains("not JSON") && results[0].2,
        "{results:?}"
    );
    assert_eq!(
        results[1],
        (
            "c2".into(),
            "Error: unknown tool `teleport`; available tools: echo".into(),
            true
        )
    );
    // The raw text is what the tool/call event records for unparsable arguments.
    let recorded = recorder
        .events()
        .into_iter()
        .find_map(|r| match r.event {
            SessionEvent::ToolCall {
                call_id, arguments, ..
            } if call_id == "c1" => Some(arguments),
            _ => None,
        })
        .unwrap();
    assert_eq!(recorded, json!("{not json"));
}

#[tokio::test]
async fn a_looping_script_ends_at_max_steps() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::with_function(|request| {
        Step::Respond(Response::calls([ScriptedCall::json(
            format!("c{}", request.step),
            "echo",
            json!({"text": "again"}),
        )]))
    });
    let recorder = support::Recorder::default();
    let sink = recorder.clone();
    let agent = agent_loop::Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .max_steps(3)
        .subscriber(move |r| sink.0.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    let outcome = agent.run("loop").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps);
    assert_eq!(outcome.steps, 3);
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(
        recorder.turn_ends(),
        vec![SessionEvent::TurnEnd {
            reason: TurnEndReason::MaxSteps,
            steps: 3
        }]
    );
}

#[tokio::test]
async fn a_concluding_result_ends_the_turn() {
    let registry = ToolRegistry::new();
    registry
        .register(tool("finish", false, |_, exec| async move {
            exec.conclude_turn();
            Ok(json!("final answer delivered"))
        }))
        .unwrap();
    let mock = MockAdapter::new([Step::from(Response::calls([ScriptedCall::json(
        "c1",
        "finish",
        json!({}),
    )]))]);
    let (agent, _) = agent(&registry, &mock);
    let outcome = agent.run("go").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Concluded);
    mock.assert_exhausted();
}

#[tokio::test]
async fn adapter_errors_end_the_turn_with_error_and_underflow_names_the_request() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Step::Error("provider overloaded".into())]);
    let (agent, recorder) = agent(&registry, &mock);
    let outcome = agent.run("one").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Error);
    let outcome = agent.run("two").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Error);
    let errors: Vec<SessionEvent> = recorder
        .events()
        .into_iter()
        .filter(|r| r.event.kind() == "error")
        .map(|r| r.event)
        .collect();
    assert_eq!(
        errors,
        vec![
            SessionEvent::Error {
                message: "provider overloaded".into(),
                code: Some("MODEL_ERROR".into())
            },
            SessionEvent::Error {
                message: "script exhausted at request 2".into(),
                code: Some("MODEL_ERROR".into())
            },
        ]
    );
}

#[tokio::test]
async fn reasoning_is_kept_and_sent_back() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([
        Step::from(
            Response::calls([ScriptedCall::json("c1", "echo", json!({"text": "x"}))])
                .with_reasoning("I should echo first."),
        ),
        Response::text("done").into(),
    ])
    .chunk_bytes(2);
    let (agent, _) = agent(&registry, &mock);
    agent.run("go").await.unwrap();
    let Message::Assistant { reasoning, .. } = &mock.requests()[1].messages[1] else {
        panic!("no assistant message");
    };
    assert_eq!(reasoning.as_deref(), Some("I should echo first."));
}

#[tokio::test]
async fn a_second_turn_while_one_runs_is_refused() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Step::Hang]);
    let (agent, _) = agent(&registry, &mock);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("one").await })
    };
    while !agent.is_busy() {
        tokio::task::yield_now().await;
    }
    assert!(matches!(agent.run("two").await, Err(AgentError::Busy(_))));
    agent.cancel_turn();
    assert_eq!(
        running.await.unwrap().unwrap().reason,
        TurnEndReason::Cancelled
    );
}

#[tokio::test]
async fn disposal_cancels_the_turn_and_removes_scoped_tools_and_hooks() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Step::Hang]);
    let (agent, recorder) = agent(&registry, &mock);
    agent.scope().register(echo()).unwrap();
    agent
        .scope()
        .guard(|_| Some("scoped guard".into()))
        .unwrap();
    assert_eq!(registry.schemas(Some("s1")).len(), 1);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("go").await })
    };
    while !agent.is_busy() {
        tokio::task::yield_now().await;
    }
    agent.dispose().await;
    assert_eq!(
        running.await.unwrap().unwrap().reason,
        TurnEndReason::Cancelled
    );
    assert!(registry.schemas(Some("s1")).is_empty());
    assert!(registry.existing_agent_scope("s1").is_none());
    assert_eq!(recorder.turn_ends().len(), 1);
    let _ = ContentBlock::text("");
}
