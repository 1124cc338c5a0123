//! Cancellation on the execute path: a call cancelled before dispatch never runs, a body
//! cancelled mid-flight is awaited and reported `ABORTED` (unless it panicked or refused its
//! arguments), and a definition's timeout fires the signal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_tools::{
    ContentBlock, ExecContext, FailureCode, ToolCall, ToolDefinition, ToolError, ToolFailure,
    ToolOutput, ToolRegistry, ValueSchema,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::{expect_failure, run};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn cancelled_before_dispatch_never_runs_the_body() {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let registry = ToolRegistry::new();
    let def = ToolDefinition::builder("t", "Record that it ran.")
        .output(ToolOutput::new(ValueSchema::null(), |_, _| Vec::new()))
        .execute(move |_, _| {
            let flag = Arc::clone(&flag);
            async move {
                flag.store(true, Ordering::SeqCst);
                Ok(Value::Null)
            }
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let signal = CancellationToken::new();
    signal.cancel();
    let result = registry
        .execute(ToolCall::new("c", "t", json!({})).with_signal(signal))
        .await;
    expect_failure(&result, FailureCode::AbortedBeforeDispatch);
    assert!(!ran.load(Ordering::SeqCst));
}

/// How a body that sees the caller's signal ends, and the code its call then gets.
type Ending = fn() -> Result<Value, ToolError>;

/// Runs a body that waits for the caller's cancellation, lets the registry's cancellation
/// rule see how it ended, and checks the body's future was driven to its end.
async fn cancelled_mid_flight(ending: Ending) -> dsh_tools::ToolResult {
    let finished = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let (flag, notify) = (Arc::clone(&finished), Arc::clone(&started));
    let registry = ToolRegistry::new();
    let def = ToolDefinition::builder("slow", "Finish after the signal fires.")
        .output(ToolOutput::new(ValueSchema::string(), |_, value| {
            vec![ContentBlock::text(value.as_str().unwrap_or_default())]
        }))
        .execute(move |_, exec: ExecContext| {
            let (flag, notify) = (Arc::clone(&flag), Arc::clone(&notify));
            async move {
                notify.notify_one();
                exec.signal().cancelled().await;
                // Cleanup after cancellation must still be awaited by the registry.
                tokio::task::yield_now().await;
                flag.store(true, Ordering::SeqCst);
                ending()
            }
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let signal = CancellationToken::new();
    let call = ToolCall::new("c", "slow", json!({})).with_signal(signal.clone());
    let running = tokio::spawn({
        let registry = registry.clone();
        async move { registry.execute(call).await }
    });
    started.notified().await;
    signal.cancel();
    let result = running.await.unwrap();
    assert!(
        finished.load(Ordering::SeqCst),
        "the body's future was abandoned"
    );
    result
}

#[tokio::test]
async fn a_body_cancelled_mid_flight_is_aborted_unless_it_panicked_or_refused_its_arguments() {
    // What the body may have made of the cancellation (a value, the error it returned on
    // seeing the signal, a value its schema rejects) is an abort; a panic and an
    // invalid-arguments refusal say something else and keep their codes.
    let cases: [(&str, Ending, FailureCode); 5] = [
        ("a value", || Ok(json!("done anyway")), FailureCode::Aborted),
        (
            "an error",
            || Err(ToolError::failed("the read was cancelled")),
            FailureCode::Aborted,
        ),
        (
            "bad arguments",
            || Err(ToolError::invalid_args("the count must be positive")),
            FailureCode::InvalidArgs,
        ),
        (
            "a panic",
            || panic!("cleanup exploded"),
            FailureCode::ToolPanic,
        ),
        ("a rejected value", || Ok(json!(42)), FailureCode::Aborted),
    ];
    let mut outcomes = Vec::new();
    let mut expected = Vec::new();
    for (ending, finish, code) in cases {
        outcomes.push((ending, cancelled_mid_flight(finish).await.code()));
        expected.push((ending, Some(code)));
    }
    assert_eq!(outcomes, expected);
}

#[tokio::test]
async fn an_aborted_body_that_still_returned_a_value_keeps_its_text() {
    // What a body finished with after the signal fired may be something the model has to find
    // again (a job it started, a file it wrote), so an abort keeps a value's text; an error's
    // text says nothing the abort does not.
    let cases: [(&str, Ending, &str); 3] = [
        (
            "a value",
            || Ok(json!("saved to /tmp/out-1")),
            "the call was cancelled while it ran; what it reported before it stopped:\nsaved to /tmp/out-1",
        ),
        (
            "an empty value",
            || Ok(json!("")),
            "the call was cancelled while it ran",
        ),
        (
            "an error",
            || Err(ToolError::failed("the read was cancelled")),
            "the call was cancelled while it ran",
        ),
    ];
    let mut outcomes = Vec::new();
    let mut expected = Vec::new();
    for (ending, finish, message) in cases {
        let result = cancelled_mid_flight(finish).await;
        outcomes.push((
            ending,
            result.error,
            dsh_tools::content_text(&result.content),
        ));
        expected.push((
            ending,
            Some(ToolFailure {
                message: message.to_owned(),
                code: FailureCode::Aborted,
            }),
            format!("Error: {message}"),
        ));
    }
    assert_eq!(outcomes, expected);
}

#[tokio::test(start_paused = true)]
async fn the_definition_timeout_fires_the_signal_and_reports_timeout() {
    let registry = ToolRegistry::new();
    let def = ToolDefinition::builder("sleepy", "Wait for the signal.")
        .output(ToolOutput::new(ValueSchema::string(), |_, _| Vec::new()))
        .timeout(Duration::from_millis(50))
        .execute(|_, exec: ExecContext| async move {
            exec.signal().cancelled().await;
            Ok(json!("stopped"))
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let message = expect_failure(
        &run(&registry, "sleepy", json!({})).await,
        FailureCode::Timeout,
    );
    assert!(message.contains("50ms"), "{message}");
}
