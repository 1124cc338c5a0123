//! The policy pipeline: pre-execute, approval, guards, execute wrappers, post-execute and
//! result observers, including contained failures at every hook.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_test_support::RecordingAgent;
use dsh_tools::{
    AgentRef, Approval, ApprovalRequest, Approver, ContentBlock, ExecContext, FailureCode,
    InjectedContext, PostDecision, PreDecision, ToolDefinition, ToolOutput, ToolRegistry,
    ToolResult, ValueSchema,
};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{constant_tool, expect_failure, expect_value, run, run_as, text};
use tokio_util::sync::CancellationToken;

/// A tool that counts its runs and returns `{"n": <run number>}`.
fn counting(name: &str, runs: &Arc<AtomicUsize>) -> ToolDefinition {
    let runs = Arc::clone(runs);
    ToolDefinition::builder(name, "Count runs.")
        .output(ToolOutput::new(
            ValueSchema::closed_object().required("n", ValueSchema::integer()),
            |_, v| vec![ContentBlock::text(format!("run {}", v["n"]))],
        ))
        .execute(move |_, _| {
            let runs = Arc::clone(&runs);
            async move { Ok(json!({"n": runs.fetch_add(1, Ordering::SeqCst) + 1})) }
        })
        .build()
        .unwrap()
}

fn agent(session: &str) -> AgentRef {
    RecordingAgent::new(session)
}

// ----- tools/pre-execute --------------------------------------------------------------------

#[tokio::test]
async fn pre_execute_listeners_run_in_order_and_next_defaults_to_allow() {
    let registry = ToolRegistry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    registry.register(counting("t", &runs)).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    for label in ["first", "second", "third"] {
        let order = Arc::clone(&order);
        registry
            .global_scope()
            .on_pre_execute(move |_, next| {
                order.lock().unwrap().push(label);
                next.run()
            })
            .unwrap();
    }
    expect_value(&run(&registry, "t", json!({})).await);
    assert_eq!(*order.lock().unwrap(), vec!["first", "second", "third"]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_denial_short_circuits_with_denied_and_its_reason() {
    let registry = ToolRegistry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    registry.register(counting("t", &runs)).unwrap();
    let later = Arc::new(AtomicUsize::new(0));
    let scope = registry.global_scope();
    scope
        .on_pre_execute(|_, _| async { PreDecision::deny("writes are frozen") })
        .unwrap();
    let later_count = Arc::clone(&later);
    scope
        .on_pre_execute(move |_, next| {
            later_count.fetch_add(1, Ordering::SeqCst);
            next.run()
        })
        .unwrap();
    let result = run(&registry, "t", json!({})).await;
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "writes are frozen"
    );
    assert_eq!(text(&result), "Error: writes are frozen");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        later.load(Ordering::SeqCst),
        0,
        "the waterfall did not stop"
    );
}

#[tokio::test]
async fn listeners_see_frozen_arguments_and_the_body_sees_the_same() {
    // The API hands listeners an `Arc<ToolExecution>` whose arguments are an `Arc<Value>`:
    // there is no way to rewrite them. The body receives the very same allocation.
    let registry = ToolRegistry::new();
    let seen = Arc::new(Mutex::new(None::<Arc<Value>>));
    let seen_by_hook = Arc::clone(&seen);
    registry
        .global_scope()
        .on_pre_execute(move |exec, next| {
            *seen_by_hook.lock().unwrap() = exec.args().cloned();
            next.run()
        })
        .unwrap();
    let seen_by_body = Arc::clone(&seen);
    let def = ToolDefinition::builder("same", "Compare argument identity.")
        .output(ToolOutput::new(ValueSchema::boolean(), |_, _| Vec::new()))
        .execute(move |args, _| {
            let seen = Arc::clone(&seen_by_body);
            async move {
                let hooked = seen.lock().unwrap().clone().unwrap();
                Ok(json!(Arc::ptr_eq(&hooked, &args)))
            }
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    assert_eq!(
        expect_value(&run(&registry, "same", json!({"x": 1})).await),
        json!(true)
    );
}

// ----- Ask and the approver -----------------------------------------------------------------

struct Scripted(Approval, Arc<AtomicUsize>);

impl Approver for Scripted {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval> {
        self.1.fetch_add(1, Ordering::SeqCst);
        assert_eq!(request.reason.as_deref(), Some("writes need a human"));
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

/// Never answers; only the caller's cancellation ends the wait.
struct Silent;

impl Approver for Silent {
    fn approve(&self, _: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(futures::future::pending())
    }
}

async fn ask_with(approver: Option<Arc<dyn Approver>>, with_agent: bool) -> (ToolResult, usize) {
    let registry = ToolRegistry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    registry.register(counting("w", &runs)).unwrap();
    registry
        .global_scope()
        .on_pre_execute(|_, _| async { PreDecision::ask("writes need a human") })
        .unwrap();
    if let Some(approver) = approver {
        registry.global_scope().set_approver(approver).unwrap();
    }
    let result = if with_agent {
        run_as(&registry, &agent("s1"), "w", json!({})).await
    } else {
        run(&registry, "w", json!({})).await
    };
    (result, runs.load(Ordering::SeqCst))
}

#[tokio::test]
async fn ask_proceeds_only_on_an_explicit_grant() {
    let asked = Arc::new(AtomicUsize::new(0));
    let approver =
        |answer| Some(Arc::new(Scripted(answer, Arc::clone(&asked))) as Arc<dyn Approver>);

    let (result, runs) = ask_with(approver(Approval::Grant), true).await;
    assert_eq!(expect_value(&result), json!({"n": 1}));
    assert_eq!(runs, 1);

    let (result, runs) = ask_with(
        approver(Approval::Refuse {
            reason: Some("not now".into()),
        }),
        true,
    )
    .await;
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "approval refused: not now"
    );
    assert_eq!(runs, 0);

    let (result, runs) = ask_with(approver(Approval::Cancel), true).await;
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "approval was cancelled"
    );
    assert_eq!(runs, 0);
    assert_eq!(asked.load(Ordering::SeqCst), 3);

    let (result, runs) = ask_with(None, true).await;
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "writes need a human; no approval service is available"
    );
    assert_eq!(runs, 0);

    let (result, runs) = ask_with(approver(Approval::Grant), false).await;
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "writes need a human; the call has no agent to ask for approval"
    );
    assert_eq!(runs, 0);
    assert_eq!(
        asked.load(Ordering::SeqCst),
        3,
        "an agent-less call must not reach the approver"
    );
}

#[tokio::test]
async fn cancelling_while_waiting_for_approval_denies() {
    let registry = ToolRegistry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    registry.register(counting("w", &runs)).unwrap();
    let scope = registry.global_scope();
    scope
        .on_pre_execute(|_, _| async { PreDecision::ask("human?") })
        .unwrap();
    scope.set_approver(Arc::new(Silent)).unwrap();
    let signal = CancellationToken::new();
    let call = dsh_tools::ToolCall::new("c", "w", json!({}))
        .with_signal(signal.clone())
        .with_agent(agent("s"));
    let cancel = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        signal.cancel();
    });
    let result = registry.execute(call).await;
    cancel.await.unwrap();
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "approval was cancelled"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Answers with its approval and records the reason of every request.
struct Recording(Approval, Arc<Mutex<Vec<Option<String>>>>);

impl Approver for Recording {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval> {
        self.1.lock().unwrap().push(request.reason.clone());
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn a_body_asks_the_approver_of_its_calls_layer() {
    let registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("escape", "Ask to leave the sandbox.")
                .raw_output(json!({}), |_, _| Vec::new())
                .execute(|_, exec| async move {
                    Ok(json!(exec.request_approval("leave the sandbox").await))
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    let outcome = |result: ToolResult| expect_value(&result);

    // No approval service yet.
    assert_eq!(
        outcome(run_as(&registry, &agent("s1"), "escape", json!({})).await),
        json!({"Err": "leave the sandbox; no approval service is available"})
    );

    let global_asked = Arc::new(Mutex::new(Vec::new()));
    let agent_asked = Arc::new(Mutex::new(Vec::new()));
    let refuse = Approval::Refuse {
        reason: Some("stay in".into()),
    };
    registry
        .global_scope()
        .set_approver(Arc::new(Recording(refuse, Arc::clone(&global_asked))))
        .unwrap();
    registry
        .agent_scope("s1")
        .unwrap()
        .set_approver(Arc::new(Recording(
            Approval::Grant,
            Arc::clone(&agent_asked),
        )))
        .unwrap();

    // The agent layer's approver answers for its agent, the global one for any other.
    assert_eq!(
        outcome(run_as(&registry, &agent("s1"), "escape", json!({})).await),
        json!({"Ok": null})
    );
    assert_eq!(
        outcome(run_as(&registry, &agent("s2"), "escape", json!({})).await),
        json!({"Err": "approval refused: stay in"})
    );
    // A call without an agent has nobody to ask.
    assert_eq!(
        outcome(run(&registry, "escape", json!({})).await),
        json!({"Err": "leave the sandbox; the call has no agent to ask for approval"})
    );
    let reason = Some(String::from("leave the sandbox"));
    assert_eq!(*agent_asked.lock().unwrap(), vec![reason.clone()]);
    assert_eq!(*global_asked.lock().unwrap(), vec![reason]);
}

// ----- Guards -------------------------------------------------------------------------------

#[tokio::test]
async fn guard_denials_stand_whatever_the_listener_order() {
    for guard_first in [true, false] {
        let registry = ToolRegistry::new();
        let runs = Arc::new(AtomicUsize::new(0));
        registry.register(counting("rm", &runs)).unwrap();
        let scope = registry.global_scope();
        let allow_all = |scope: &dsh_tools::Scope| {
            scope
                .on_pre_execute(|_, _| async { PreDecision::Allow })
                .unwrap();
        };
        if !guard_first {
            allow_all(scope);
        }
        scope
            .guard(|exec| (exec.name() == "rm").then(|| "rm is never allowed".to_owned()))
            .unwrap();
        if guard_first {
            allow_all(scope);
        }
        let result = run(&registry, "rm", json!({})).await;
        assert_eq!(
            expect_failure(&result, FailureCode::Denied),
            "rm is never allowed"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0, "guard_first={guard_first}");
    }
}

#[tokio::test]
async fn guards_do_not_run_after_a_pre_execute_denial() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("t", "v")).unwrap();
    let guarded = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&guarded);
    let scope = registry.global_scope();
    scope
        .guard(move |_| {
            count.fetch_add(1, Ordering::SeqCst);
            None
        })
        .unwrap();
    scope
        .on_pre_execute(|_, _| async { PreDecision::deny("no") })
        .unwrap();
    expect_failure(&run(&registry, "t", json!({})).await, FailureCode::Denied);
    assert_eq!(guarded.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn global_guards_run_before_agent_guards() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("t", "v")).unwrap();
    let agent_scope = registry.agent_scope("s1").unwrap();
    agent_scope.guard(|_| Some("agent guard".into())).unwrap();
    registry
        .global_scope()
        .guard(|_| Some("global guard".into()))
        .unwrap();
    let result = run_as(&registry, &agent("s1"), "t", json!({})).await;
    assert_eq!(expect_failure(&result, FailureCode::Denied), "global guard");
}

// ----- tools/execute wrappers ---------------------------------------------------------------

fn cooperative(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name, "Wait for cancellation, then say so.")
        .output(ToolOutput::new(ValueSchema::string(), |_, v| {
            vec![ContentBlock::text(v.as_str().unwrap_or_default())]
        }))
        .execute(|_, exec: ExecContext| async move {
            exec.signal().cancelled().await;
            Ok(json!("observed cancellation"))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_wrapper_can_impose_a_deadline_through_the_signal() {
    let registry = ToolRegistry::new();
    registry.register(cooperative("wait")).unwrap();
    registry
        .global_scope()
        .wrap_execute(|stage, next| async move {
            let deadline = stage.signal.child_token();
            let timer = deadline.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                timer.cancel();
            });
            next.run_with_signal(deadline).await
        })
        .unwrap();
    let result = run(&registry, "wait", json!({})).await;
    assert_eq!(expect_value(&result), json!("observed cancellation"));
}

#[tokio::test]
async fn caller_cancellation_reaches_a_body_under_a_replaced_signal() {
    let registry = ToolRegistry::new();
    registry.register(cooperative("wait")).unwrap();
    registry
        .global_scope()
        // The replacement is detached from everything: only fusion can cancel the body.
        .wrap_execute(|_, next| async move { next.run_with_signal(CancellationToken::new()).await })
        .unwrap();
    let signal = CancellationToken::new();
    let call = dsh_tools::ToolCall::new("c", "wait", json!({})).with_signal(signal.clone());
    let trigger = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        signal.cancel();
    });
    let result = tokio::time::timeout(Duration::from_secs(5), registry.execute(call))
        .await
        .expect("the body never saw the caller's cancellation");
    trigger.await.unwrap();
    expect_failure(&result, FailureCode::Aborted);
}

#[tokio::test]
async fn a_retry_wrapper_can_run_next_twice() {
    let registry = ToolRegistry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let attempts = Arc::clone(&runs);
    let flaky = ToolDefinition::builder("flaky", "Fail once, then succeed.")
        .output(ToolOutput::new(ValueSchema::integer(), |_, _| Vec::new()))
        .execute(move |_, _| {
            let attempts = Arc::clone(&attempts);
            async move {
                match attempts.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(dsh_tools::ToolError::failed("transient")),
                    n => Ok(json!(n + 1)),
                }
            }
        })
        .build()
        .unwrap();
    registry.register(flaky).unwrap();
    registry
        .global_scope()
        .wrap_execute(|_, next| async move {
            let first = next.run().await;
            if first.is_error {
                next.run().await
            } else {
                first
            }
        })
        .unwrap();
    assert_eq!(
        expect_value(&run(&registry, "flaky", json!({})).await),
        json!(2)
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

// ----- tools/post-execute -------------------------------------------------------------------

fn post(
    registry: &ToolRegistry,
    decide: impl Fn(&ToolResult) -> PostDecision + Send + Sync + 'static,
) {
    let decide = Arc::new(decide);
    registry
        .global_scope()
        .on_post_execute(move |_, result| {
            let decision = decide(&result);
            async move { decision }
        })
        .unwrap();
}

fn object_tool() -> ToolDefinition {
    ToolDefinition::builder("obj", "Return an object.")
        .output(ToolOutput::new(
            ValueSchema::closed_object().required("id", ValueSchema::integer()),
            |_, v| vec![ContentBlock::text(format!("id {}", v["id"]))],
        ))
        .execute(|_, _| async { Ok(json!({"id": 1})) })
        .build()
        .unwrap()
}

#[tokio::test]
async fn post_execute_content_replacement_keeps_the_value() {
    let registry = ToolRegistry::new();
    registry.register(object_tool()).unwrap();
    post(&registry, |_| {
        PostDecision::replace_content(vec![ContentBlock::text("redacted")])
    });
    let result = run(&registry, "obj", json!({})).await;
    assert_eq!(expect_value(&result), json!({"id": 1}));
    assert_eq!(text(&result), "redacted");
}

#[tokio::test]
async fn post_execute_value_replacement_is_validated_and_rendered() {
    let registry = ToolRegistry::new();
    registry.register(object_tool()).unwrap();
    post(&registry, |_| PostDecision::replace_value(json!({"id": 2})));
    let result = run(&registry, "obj", json!({})).await;
    assert_eq!(expect_value(&result), json!({"id": 2}));
    assert_eq!(text(&result), "id 2");

    let registry = ToolRegistry::new();
    registry.register(object_tool()).unwrap();
    post(&registry, |_| {
        PostDecision::replace_value(json!({"id": "two"}))
    });
    let message = expect_failure(
        &run(&registry, "obj", json!({})).await,
        FailureCode::InvalidToolOutput,
    );
    assert!(message.contains("/id: expected integer"), "{message}");
}

#[tokio::test]
async fn post_execute_block_turns_the_result_into_an_error_without_value() {
    let registry = ToolRegistry::new();
    registry.register(object_tool()).unwrap();
    post(&registry, |_| {
        PostDecision::block("this output leaks a secret")
            .with_context(InjectedContext::from_plugin("dlp", "a result was blocked"))
    });
    let result = run(&registry, "obj", json!({})).await;
    assert_eq!(
        expect_failure(&result, FailureCode::Denied),
        "this output leaks a secret"
    );
    assert_eq!(
        result.additional_contexts,
        vec![InjectedContext::from_plugin("dlp", "a result was blocked")]
    );
}

#[tokio::test]
async fn replacing_the_value_of_a_failed_result_is_refused() {
    let registry = ToolRegistry::new();
    post(&registry, |_| PostDecision::replace_value(json!("rescued")));
    let result = run(&registry, "missing", json!({})).await;
    expect_failure(&result, FailureCode::UnknownTool);

    let registry = ToolRegistry::new();
    registry.register(constant_tool("t", "v")).unwrap();
    registry
        .global_scope()
        .on_pre_execute(|_, _| async { PreDecision::deny("no") })
        .unwrap();
    post(&registry, |_| PostDecision::replace_value(json!("rescued")));
    let result = run(&registry, "t", json!({})).await;
    assert_eq!(expect_failure(&result, FailureCode::Denied), "no");
}

#[tokio::test]
async fn denials_pass_through_post_execute_finalize_and_observers() {
    let registry = ToolRegistry::new();
    let finalized = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&finalized);
    let def = ToolDefinition::builder("t", "x")
        .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
        .finalize_content(move |_, result| {
            count.fetch_add(1, Ordering::SeqCst);
            Some(vec![ContentBlock::text(format!(
                "finalized: {}",
                dsh_tools::content_text(&result.content)
            ))])
        })
        .execute(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let scope = registry.global_scope();
    scope.guard(|_| Some("guarded".into())).unwrap();
    let posted = Arc::new(Mutex::new(Vec::new()));
    let posted_in = Arc::clone(&posted);
    scope
        .on_post_execute(move |_, result| {
            posted_in.lock().unwrap().push(result.code());
            async { PostDecision::accept() }
        })
        .unwrap();
    let observed = Arc::new(Mutex::new(Vec::new()));
    let observed_in = Arc::clone(&observed);
    scope
        .on_result(move |_, result| {
            observed_in
                .lock()
                .unwrap()
                .push(dsh_tools::content_text(&result.content))
        })
        .unwrap();
    let result = run(&registry, "t", json!({})).await;
    expect_failure(&result, FailureCode::Denied);
    assert_eq!(*posted.lock().unwrap(), vec![Some(FailureCode::Denied)]);
    assert_eq!(finalized.load(Ordering::SeqCst), 1);
    assert_eq!(
        *observed.lock().unwrap(),
        vec!["finalized: Error: guarded".to_owned()]
    );
}

// ----- Contained failures at every hook -----------------------------------------------------

#[tokio::test]
async fn panicking_hooks_are_contained_and_the_next_call_works() {
    #[derive(Clone, Copy, Debug)]
    enum Hook {
        Pre,
        Guard,
        Wrapper,
        Post,
        Observer,
    }
    for hook in [
        Hook::Observer,
        Hook::Pre,
        Hook::Guard,
        Hook::Wrapper,
        Hook::Post,
    ] {
        let registry = ToolRegistry::new();
        let runs = Arc::new(AtomicUsize::new(0));
        registry.register(counting("t", &runs)).unwrap();
        let scope = registry.global_scope();
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let fire = {
            let armed = Arc::clone(&armed);
            move || {
                if armed.swap(false, Ordering::SeqCst) {
                    panic!("{hook:?} exploded");
                }
            }
        };
        let disposer = match hook {
            Hook::Pre => scope.on_pre_execute(move |_, next| {
                fire();
                next.run()
            }),
            Hook::Guard => scope.guard(move |_| {
                fire();
                None
            }),
            Hook::Wrapper => scope.wrap_execute(move |_, next| {
                fire();
                next.run()
            }),
            Hook::Post => scope.on_post_execute(move |_, _| {
                fire();
                async { PostDecision::accept() }
            }),
            Hook::Observer => scope.on_result(move |_, _| fire()),
        };
        disposer.unwrap();
        let first = run(&registry, "t", json!({})).await;
        match hook {
            Hook::Observer => {
                expect_value(&first);
            }
            Hook::Pre | Hook::Guard | Hook::Wrapper => {
                let message = expect_failure(&first, FailureCode::Denied);
                assert!(message.contains(&format!("{hook:?} exploded")), "{message}");
                assert_eq!(
                    runs.load(Ordering::SeqCst),
                    0,
                    "{hook:?}: the body ran after a failure before dispatch"
                );
            }
            Hook::Post => {
                let message = expect_failure(&first, FailureCode::Denied);
                assert!(message.contains("Post exploded"), "{message}");
            }
        }
        let second = run(&registry, "t", json!({})).await;
        assert!(
            !second.is_error,
            "{hook:?}: the next call failed: {second:?}"
        );
    }
}

#[tokio::test]
async fn a_panicking_inner_listener_fails_closed_even_if_an_outer_one_allows() {
    let registry = ToolRegistry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    registry.register(counting("t", &runs)).unwrap();
    let scope = registry.global_scope();
    scope
        .on_pre_execute(|_, next| async move {
            // Ignores the inner verdict on purpose.
            let _ = next.run().await;
            PreDecision::Allow
        })
        .unwrap();
    scope
        .on_pre_execute(|_, _| async { panic!("inner listener exploded") })
        .unwrap();
    let message = expect_failure(&run(&registry, "t", json!({})).await, FailureCode::Denied);
    assert!(message.contains("inner listener exploded"), "{message}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}
