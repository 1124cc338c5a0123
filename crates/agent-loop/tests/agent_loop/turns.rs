//! The turn loop: assembly, injected context, cancellation, errors and endings (the scheduling
//! of a message's calls is in `scheduling.rs`).

use crate::support;

use agent_loop::{Agent, AgentError, Message, SessionEvent, TurnEndReason};
use dsh_test_support::{RecordingAgent, echo, tool};
use dsh_tools::{
    ContentBlock, ContextSource, FailureCode, InjectedContext, ToolCall, ToolFailure, ToolRegistry,
    ToolResultRecord,
};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::{Arc, Mutex};
use support::{SYSTEM_PROMPT, agent, assert_paired, builder, recorded, tool_messages};

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
async fn tools_see_the_session_and_working_directory_of_the_agent_calling_them() {
    let registry = ToolRegistry::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let seen = Arc::clone(&seen);
        registry
            .register(tool("whereami", false, move |_, exec| {
                let agent = exec.agent().unwrap();
                seen.lock().unwrap().push((
                    agent.session_id().to_owned(),
                    agent.cwd().map(std::path::Path::to_path_buf),
                    agent.is_alive(),
                ));
                async { Ok(json!("noted")) }
            }))
            .unwrap();
    }
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "whereami",
            json!({}),
        )])),
        Response::text("done").into(),
    ]);
    let (agent, _) = agent(&registry, &mock);
    agent.run("where are we").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(
            String::from("s1"),
            Some(std::path::PathBuf::from("/work")),
            true
        )]
    );
}

#[tokio::test]
async fn run_pending_runs_a_turn_only_for_context_waiting_in_the_inbox() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Response::text("seen")]);
    let (agent, _) = agent(&registry, &mock);
    // Nothing waits: no turn, no request, and the agent is left idle.
    assert_eq!(agent.run_pending().await.unwrap(), None);
    assert!(mock.requests().is_empty());
    assert!(!agent.is_busy());
    agent
        .inject(InjectedContext::from_plugin("bash", "job bash-1 finished"))
        .unwrap();
    let outcome = agent.run_pending().await.unwrap().unwrap();
    assert_eq!(
        (outcome.reason, outcome.steps, outcome.text.as_str()),
        (TurnEndReason::Completed, 1, "seen")
    );
    assert_eq!(
        mock.requests()[0].messages[..],
        [Message::User {
            content: "job bash-1 finished".into(),
            source: Some(ContextSource::plugin("bash")),
        }]
    );
    assert!(agent.pending_contexts().is_empty());
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
    // The call that ran finished; the one running was aborted; the one after it never
    // started.
    let failure =
        |call_id: &str, name: &str, code: FailureCode, message: &str| SessionEvent::ToolResult {
            call_id: call_id.into(),
            name: name.into(),
            is_error: true,
            content: vec![ContentBlock::text(format!("Error: {message}"))],
            error: Some(ToolFailure {
                message: message.into(),
                code,
            }),
            meta: None,
        };
    assert_eq!(
        recorder.of_kind("tool/result"),
        vec![
            SessionEvent::ToolResult {
                call_id: "c1".into(),
                name: "echo".into(),
                is_error: false,
                content: vec![ContentBlock::text("before")],
                error: None,
                meta: None,
            },
            failure(
                "c2",
                "slow",
                FailureCode::Aborted,
                &format!("{ABORTED_WITH}stopped")
            ),
            failure(
                "c3",
                "echo",
                FailureCode::AbortedBeforeDispatch,
                ABORTED_BEFORE_DISPATCH
            ),
        ]
    );
    agent.run("again").await.unwrap();
    let next = &mock.requests()[1].messages;
    assert_paired(next);
    assert_eq!(
        tool_messages(next),
        vec![
            ("c1".into(), "before".into(), false),
            ("c2".into(), format!("Error: {ABORTED_WITH}stopped"), true),
            (
                "c3".into(),
                format!("Error: {ABORTED_BEFORE_DISPATCH}"),
                true
            ),
        ]
    );
}

/// The body still returned a value after the cancellation: its text follows.
const ABORTED_WITH: &str =
    "the call was cancelled while it ran; what it reported before it stopped:\n";
const ABORTED_BEFORE_DISPATCH: &str = "the call was cancelled before it started";

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
    let (agent, recorder) = recorded(builder(&registry, &mock).max_steps(3));
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
    // The last step's calls ran and were answered before the limit ended the turn.
    let history = agent.history();
    assert_eq!(tool_messages(&history).len(), 3);
    assert_paired(&history);
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
async fn wait_idle_returns_once_the_running_turn_has_ended() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Step::Hang]);
    let (agent, recorder) = agent(&registry, &mock);
    // Idle already: nothing to wait for.
    agent.wait_idle().await;
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("one").await })
    };
    while !agent.is_busy() {
        tokio::task::yield_now().await;
    }
    let mut idle = std::pin::pin!(agent.wait_idle());
    assert!(futures::poll!(idle.as_mut()).is_pending());
    agent.cancel_turn();
    idle.await;
    assert!(!agent.is_busy());
    assert_eq!(
        recorder.turn_ends(),
        vec![SessionEvent::TurnEnd {
            reason: TurnEndReason::Cancelled,
            steps: 1
        }]
    );
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_turn_whose_future_is_dropped_leaves_the_agent_idle() {
    let registry = ToolRegistry::new();
    let mock = MockAdapter::new([Step::Hang, Response::text("second").into()]);
    let (agent, _) = agent(&registry, &mock);
    let mut first = Box::pin(agent.run("one"));
    // The model never answers: the turn is running, waiting for it.
    assert!(futures::poll!(first.as_mut()).is_pending());
    assert!(agent.is_busy());
    drop(first);
    assert!(!agent.is_busy());
    let second = agent.run("two").await.unwrap();
    assert_eq!(
        (second.reason, second.text.as_str()),
        (TurnEndReason::Completed, "second")
    );
}

/// Runs the global `ping` tool as the agent of session `s1` would, outside any turn.
async fn ping_as_s1(registry: &ToolRegistry) -> ToolResultRecord {
    registry
        .execute(ToolCall::new("p1", "ping", json!({})).with_agent(RecordingAgent::new("s1")))
        .await
        .record()
}

#[tokio::test]
async fn disposal_cancels_the_turn_and_removes_scoped_tools_and_hooks() {
    let registry = ToolRegistry::new();
    registry
        .register(tool("ping", false, |_, _| async { Ok(json!("pong")) }))
        .unwrap();
    let mock = MockAdapter::new([Step::Hang]);
    let (agent, recorder) = agent(&registry, &mock);
    agent.scope().register(echo()).unwrap();
    agent
        .scope()
        .guard(|_| Some("scoped guard".into()))
        .unwrap();
    let names = |session| -> Vec<String> {
        registry
            .schemas(session)
            .into_iter()
            .map(|schema| schema.name)
            .collect()
    };
    assert_eq!(names(Some("s1")), vec!["echo", "ping"]);
    assert_eq!(
        ping_as_s1(&registry).await,
        ToolResultRecord {
            content: vec![ContentBlock::text("Error: scoped guard")],
            is_error: true,
            error: Some(ToolFailure {
                message: "scoped guard".into(),
                code: FailureCode::Denied,
            }),
            meta: None,
        }
    );
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
    // The scoped tool, the guard and the scope itself are gone.
    assert_eq!(names(Some("s1")), names(None));
    assert!(registry.existing_agent_scope("s1").is_none());
    assert_eq!(
        ping_as_s1(&registry).await,
        ToolResultRecord {
            content: vec![ContentBlock::text("pong")],
            is_error: false,
            error: None,
            meta: None,
        }
    );
    assert_eq!(
        recorder.turn_ends(),
        vec![SessionEvent::TurnEnd {
            reason: TurnEndReason::Cancelled,
            steps: 1
        }]
    );
}

#[tokio::test]
async fn requests_carry_the_system_prompt_and_the_tools_the_agent_sees_at_each_step() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let mock = MockAdapter::new([Response::text("one"), Response::text("two")]);
    let (agent, recorder) = agent(&registry, &mock);
    let note = agent
        .scope()
        .register(tool("note", false, |_, _| async { Ok(json!("noted")) }))
        .unwrap();
    agent.run("one").await.unwrap();
    let with_note = registry.schemas(Some("s1"));
    note.dispose();
    agent.run("two").await.unwrap();
    let without_note = registry.schemas(Some("s1"));
    let names = |schemas: &[dsh_tools::ToolSchema]| -> Vec<String> {
        schemas.iter().map(|s| s.name.clone()).collect()
    };
    assert_eq!(names(&with_note), vec!["echo", "note"]);
    assert_eq!(names(&without_note), vec!["echo"]);
    let requests = mock.requests();
    let sent: Vec<(String, Vec<dsh_tools::ToolSchema>)> = requests
        .iter()
        .map(|r| (r.system.clone(), r.tools.to_vec()))
        .collect();
    assert_eq!(
        sent,
        vec![
            (SYSTEM_PROMPT.to_owned(), with_note.clone()),
            (SYSTEM_PROMPT.to_owned(), without_note.clone()),
        ]
    );
    assert_eq!(
        recorder.of_kind("model/request"),
        vec![
            SessionEvent::ModelRequest {
                step: 1,
                tools: names(&with_note),
                injected: vec![],
            },
            SessionEvent::ModelRequest {
                step: 1,
                tools: names(&without_note),
                injected: vec![],
            },
        ]
    );
}

#[tokio::test]
async fn context_arriving_while_the_model_answers_gets_one_more_step() {
    let registry = ToolRegistry::new();
    let handle: Arc<Mutex<Option<dsh_tools::AgentRef>>> = Arc::default();
    let notice = InjectedContext::from_plugin("bash", "background job bash-1 finished");
    let mock = MockAdapter::with_function({
        let (handle, notice) = (Arc::clone(&handle), notice.clone());
        move |request| {
            if request.step == 1 {
                // The notice lands after the request was assembled, while the model answers.
                let agent = handle.lock().unwrap().clone().unwrap();
                agent.inject(notice.clone()).unwrap();
                Response::text("Nothing more to do.").into()
            } else {
                Response::text("The job finished.").into()
            }
        }
    });
    let (agent, recorder) = agent(&registry, &mock);
    *handle.lock().unwrap() = Some(agent.handle());
    let outcome = agent.run("go").await.unwrap();
    assert_eq!(
        (outcome.reason, outcome.steps, outcome.text.as_str()),
        (TurnEndReason::Completed, 2, "The job finished.")
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].messages.last(), Some(&Message::from(&notice)));
    assert_eq!(
        recorder.turn_ends(),
        vec![SessionEvent::TurnEnd {
            reason: TurnEndReason::Completed,
            steps: 2
        }]
    );
}

/// The ids of every tool call in `history`, in order.
fn call_ids(history: &[Message]) -> Vec<String> {
    history
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().map(|c| c.call_id.clone()).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test]
async fn calls_streamed_without_an_id_get_ids_unique_in_the_session_even_after_resume() {
    let registry = ToolRegistry::new();
    registry.register(echo()).unwrap();
    let unnamed = |texts: &[&str]| -> Step {
        Response::calls(
            texts
                .iter()
                .map(|t| ScriptedCall::json("", "echo", json!({ "text": t }))),
        )
        .into()
    };
    let mock = MockAdapter::new([
        unnamed(&["a", "b"]),
        Response::text("one").into(),
        unnamed(&["c"]),
        Response::text("two").into(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let (agent, _) = recorded(builder(&registry, &mock).log(&path));
    agent.run("one").await.unwrap();
    agent.run("two").await.unwrap();
    mock.assert_exhausted();
    let history = agent.history();
    assert_paired(&history);
    assert_eq!(
        call_ids(&history),
        vec!["call-auto-1", "call-auto-2", "call-auto-3"]
    );
    agent.dispose().await;

    let mock = MockAdapter::new([unnamed(&["d"]), Response::text("three").into()]);
    let resumed = Agent::builder(registry, Arc::new(mock.clone()))
        .resume(agent_loop::SessionLog::read(&path).unwrap())
        .build()
        .unwrap();
    resumed.run("three").await.unwrap();
    assert_eq!(
        call_ids(&resumed.history()),
        vec!["call-auto-1", "call-auto-2", "call-auto-3", "call-auto-4"]
    );
}

#[tokio::test]
async fn argument_text_over_the_registry_limit_is_refused_unparsed() {
    let mut config = dsh_tools::RegistryConfig::default();
    config.max_argument_bytes = 32;
    let registry = ToolRegistry::with_config(config);
    registry.register(echo()).unwrap();
    // Valid JSON, one byte over the limit: the loop must hand it over unparsed, or the
    // registry would receive a value and never measure it.
    let over = format!(r#"{{"text":"{}"}}"#, "a".repeat(32 - 11 + 1));
    assert_eq!(over.len(), 33);
    let mock = MockAdapter::new([
        Step::from(Response::calls([
            ScriptedCall::raw("c1", "echo", over.clone()),
            ScriptedCall::raw("c2", "echo", r#"{"text":"short"}"#),
        ])),
        Response::text("done").into(),
    ]);
    let (agent, recorder) = agent(&registry, &mock);
    agent.run("go").await.unwrap();
    assert_eq!(
        tool_messages(&mock.requests()[1].messages),
        vec![
            (
                "c1".into(),
                "Error: invalid arguments: the argument text is 33 bytes, over the limit of 32 \
                 bytes per call; it was not read. Send shorter arguments (large content belongs \
                 in a file)"
                    .into(),
                true
            ),
            ("c2".into(), "short".into(), false),
        ]
    );
    // The event records the text as received, like any argument text it did not parse.
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
    assert_eq!(recorded, json!(over));
}
