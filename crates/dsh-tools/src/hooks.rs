//! The policy hooks of the execution pipeline.
//!
//! | need | hook |
//! |---|---|
//! | extensible allow / deny / ask policy | `tools/pre-execute` ([`Scope::on_pre_execute`]) |
//! | a final, monotonic denial no listener can undo | guards ([`Scope::guard`]) |
//! | wrap the dispatch: timeout, retry, metrics (the only stage that may replace the signal) | `tools/execute` ([`Scope::wrap_execute`]) |
//! | replace content or value, block a result, attach context | `tools/post-execute` ([`Scope::on_post_execute`]) |
//! | observe the immutable final result | `tools/result` ([`Scope::on_result`]) |
//! | filter the tools an agent sees | [`Scope::restrict`] |
//!
//! Every hook is contained: a panicking hook fails the call closed (`DENIED`; the body does not
//! run when the failure is before dispatch) and never takes the registry down. A panicking
//! observer is logged and ignored.
//!
//! [`Scope::on_pre_execute`]: crate::Scope::on_pre_execute
//! [`Scope::guard`]: crate::Scope::guard
//! [`Scope::wrap_execute`]: crate::Scope::wrap_execute
//! [`Scope::on_post_execute`]: crate::Scope::on_post_execute
//! [`Scope::on_result`]: crate::Scope::on_result
//! [`Scope::restrict`]: crate::Scope::restrict

use crate::agent::{AgentRef, InjectedContext};
use crate::call::{ToolExecution, ToolResult};
use crate::content::ContentBlock;
use crate::error::{FailureCode, panic_message};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// A pre-execute listener's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreDecision {
    /// Proceed (to the next listener's verdict, or to the guards).
    Allow,
    /// Refuse with a reason the model reads as `Error: <reason>`.
    Deny {
        /// Why.
        reason: String,
    },
    /// Ask the approval service; only an explicit grant proceeds.
    Ask {
        /// What the approver is shown.
        reason: Option<String>,
    },
}

impl PreDecision {
    /// A denial.
    pub fn deny(reason: impl Into<String>) -> PreDecision {
        PreDecision::Deny {
            reason: reason.into(),
        }
    }

    /// A request for approval.
    pub fn ask(reason: impl Into<String>) -> PreDecision {
        PreDecision::Ask {
            reason: Some(reason.into()),
        }
    }
}

pub(crate) type PreExecuteFn =
    Arc<dyn Fn(Arc<ToolExecution>, PreNext) -> BoxFuture<'static, PreDecision> + Send + Sync>;
pub(crate) type GuardFn = Arc<dyn Fn(&ToolExecution) -> Option<String> + Send + Sync>;
pub(crate) type ExecuteWrapperFn =
    Arc<dyn Fn(ExecuteStage, ExecuteNext) -> BoxFuture<'static, ToolResult> + Send + Sync>;
pub(crate) type PostExecuteFn =
    Arc<dyn Fn(Arc<ToolExecution>, ToolResult) -> BoxFuture<'static, PostDecision> + Send + Sync>;
pub(crate) type ResultObserverFn = Arc<dyn Fn(&ToolExecution, &ToolResult) + Send + Sync>;

/// The rest of the pre-execute waterfall. Calling [`PreNext::run`] returns the verdict of the
/// listeners after this one (`Allow` when there are none).
pub struct PreNext {
    pub(crate) chain: Arc<[PreExecuteFn]>,
    pub(crate) index: usize,
    pub(crate) execution: Arc<ToolExecution>,
    /// Set when any listener panicked: the call then fails closed whatever others return.
    pub(crate) failure: Arc<Mutex<Option<String>>>,
}

impl fmt::Debug for PreNext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreNext")
            .field("remaining", &(self.chain.len().saturating_sub(self.index)))
            .finish()
    }
}

impl PreNext {
    /// Runs the remaining listeners and returns their verdict.
    pub fn run(self) -> BoxFuture<'static, PreDecision> {
        Box::pin(async move {
            let Some(listener) = self.chain.get(self.index).cloned() else {
                return PreDecision::Allow;
            };
            let next = PreNext {
                chain: Arc::clone(&self.chain),
                index: self.index + 1,
                execution: Arc::clone(&self.execution),
                failure: Arc::clone(&self.failure),
            };
            let execution = Arc::clone(&self.execution);
            let outcome = AssertUnwindSafe(async move { listener(execution, next).await })
                .catch_unwind()
                .await;
            match outcome {
                Ok(decision) => decision,
                Err(payload) => {
                    let message = format!(
                        "a pre-execute policy listener failed ({}); the call is denied",
                        panic_message(payload.as_ref())
                    );
                    tracing::warn!(tool = %self.execution.name, "{message}");
                    if let Ok(mut failure) = self.failure.lock() {
                        failure.get_or_insert(message.clone());
                    }
                    PreDecision::Deny { reason: message }
                }
            }
        })
    }
}

/// The approval service's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approval {
    /// Proceed, this once.
    Grant,
    /// Refuse.
    Refuse {
        /// Why, when the approver says.
        reason: Option<String>,
    },
    /// The question was withdrawn (e.g. the user closed the prompt).
    Cancel,
}

/// What an approver is asked.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The call.
    pub execution: Arc<ToolExecution>,
    /// The agent it runs for.
    pub agent: AgentRef,
    /// The listener's reason for asking.
    pub reason: Option<String>,
    /// The caller's cancellation: an approver may stop waiting when it fires.
    pub signal: CancellationToken,
}

/// The approval service that answers `Ask` verdicts.
pub trait Approver: Send + Sync {
    /// Answers one request. Only [`Approval::Grant`] lets the call proceed.
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval>;
}

/// What an execute-stage wrapper sees: the execution and the signal in force at its depth.
#[derive(Clone, Debug)]
pub struct ExecuteStage {
    /// The call.
    pub execution: Arc<ToolExecution>,
    /// The signal in force (the caller's, or one an outer wrapper installed).
    pub signal: CancellationToken,
}

/// The inner part of the dispatch, from a wrapper's point of view. It may be run more than once
/// (a retry wrapper); each run dispatches the body anew.
#[derive(Clone)]
pub struct ExecuteNext {
    pub(crate) chain: Arc<[ExecuteWrapperFn]>,
    pub(crate) index: usize,
    pub(crate) execution: Arc<ToolExecution>,
    pub(crate) signal: CancellationToken,
    pub(crate) dispatch:
        Arc<dyn Fn(CancellationToken) -> BoxFuture<'static, ToolResult> + Send + Sync>,
}

impl fmt::Debug for ExecuteNext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecuteNext")
            .field("remaining", &(self.chain.len().saturating_sub(self.index)))
            .finish()
    }
}

impl ExecuteNext {
    /// Runs the inner wrappers and the body under the current signal.
    pub fn run(&self) -> BoxFuture<'static, ToolResult> {
        self.run_under(self.signal.clone())
    }

    /// Runs the inner wrappers and the body under a replacement signal. The caller's signal is
    /// always fused back in: cancelling the caller still cancels the body.
    pub fn run_with_signal(&self, signal: CancellationToken) -> BoxFuture<'static, ToolResult> {
        let fused = signal.child_token();
        let caller = self.execution.signal.clone();
        let inner = self.run_under(fused.clone());
        Box::pin(async move {
            let mut inner = inner;
            let mut caller_seen = caller.is_cancelled();
            if caller_seen {
                fused.cancel();
            }
            loop {
                tokio::select! {
                    result = &mut inner => return result,
                    () = caller.cancelled(), if !caller_seen => {
                        caller_seen = true;
                        fused.cancel();
                    }
                }
            }
        })
    }

    fn run_under(&self, signal: CancellationToken) -> BoxFuture<'static, ToolResult> {
        let Some(wrapper) = self.chain.get(self.index).cloned() else {
            return (self.dispatch)(signal);
        };
        let next = ExecuteNext {
            chain: Arc::clone(&self.chain),
            index: self.index + 1,
            execution: Arc::clone(&self.execution),
            signal: signal.clone(),
            dispatch: Arc::clone(&self.dispatch),
        };
        let stage = ExecuteStage {
            execution: Arc::clone(&self.execution),
            signal,
        };
        let name = self.execution.name.clone();
        Box::pin(async move {
            match AssertUnwindSafe(async move { wrapper(stage, next).await })
                .catch_unwind()
                .await
            {
                Ok(result) => result,
                Err(payload) => {
                    let message = format!(
                        "an execute-stage wrapper failed ({}); the call failed closed",
                        panic_message(payload.as_ref())
                    );
                    tracing::warn!(tool = %name, "{message}");
                    ToolResult::failure(FailureCode::Denied, message)
                }
            }
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PostAction {
    Keep,
    Content(Vec<ContentBlock>),
    Value(Value),
    Block(String),
}

/// A post-execute listener's verdict: accept (optionally replacing the content **or** the
/// value, never both) or block; either may attach contexts.
#[derive(Clone, Debug, PartialEq)]
pub struct PostDecision {
    pub(crate) action: PostAction,
    pub(crate) additional_contexts: Vec<InjectedContext>,
}

impl PostDecision {
    /// Accept the result as it is.
    pub fn accept() -> PostDecision {
        PostDecision {
            action: PostAction::Keep,
            additional_contexts: Vec::new(),
        }
    }

    /// Accept, replacing the model-visible content; the value is kept.
    pub fn replace_content(content: Vec<ContentBlock>) -> PostDecision {
        PostDecision {
            action: PostAction::Content(content),
            additional_contexts: Vec::new(),
        }
    }

    /// Accept, replacing the canonical value. The new value is validated against the output
    /// schema (`INVALID_TOOL_OUTPUT` when it breaks it) and rendered anew. Replacing the value
    /// of a failed result is refused (the failure stands).
    pub fn replace_value(value: Value) -> PostDecision {
        PostDecision {
            action: PostAction::Value(value),
            additional_contexts: Vec::new(),
        }
    }

    /// Turn the result into an error whose content is the feedback, without a value.
    pub fn block(feedback: impl Into<String>) -> PostDecision {
        PostDecision {
            action: PostAction::Block(feedback.into()),
            additional_contexts: Vec::new(),
        }
    }

    /// Attach a context to be appended after the result.
    pub fn with_context(mut self, context: InjectedContext) -> PostDecision {
        self.additional_contexts.push(context);
        self
    }
}

/// A restriction over the tools an agent scope inherits (a visibility mask, not a security
/// boundary: deny policy belongs in guards).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restriction {
    /// Inherited tools that stay visible; every other inherited tool, including ones registered
    /// later, is hidden.
    pub allow: Option<Vec<String>>,
    /// Inherited tools that are hidden; tools registered later stay visible.
    pub deny: Option<Vec<String>>,
}

impl Restriction {
    /// Keep only these inherited tools.
    pub fn allow(names: impl IntoIterator<Item = impl Into<String>>) -> Restriction {
        Restriction {
            allow: Some(names.into_iter().map(Into::into).collect()),
            deny: None,
        }
    }

    /// Hide these inherited tools.
    pub fn deny(names: impl IntoIterator<Item = impl Into<String>>) -> Restriction {
        Restriction {
            allow: None,
            deny: Some(names.into_iter().map(Into::into).collect()),
        }
    }

    pub(crate) fn admits(&self, name: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|list| list.iter().any(|n| n == name));
        let denied = self
            .deny
            .as_ref()
            .is_some_and(|list| list.iter().any(|n| n == name));
        allowed && !denied
    }
}

/// Asks `approver` about `execution`; `Some(reason)` denies. Also reached from a body through
/// [`ExecContext::request_approval`](crate::ExecContext::request_approval).
pub(crate) async fn ask(
    execution: &Arc<ToolExecution>,
    approver: Option<Arc<dyn Approver>>,
    reason: Option<String>,
) -> Option<String> {
    let why = reason
        .clone()
        .unwrap_or_else(|| String::from("approval required"));
    let Some(agent) = execution.agent.clone() else {
        return Some(format!("{why}; the call has no agent to ask for approval"));
    };
    let Some(approver) = approver else {
        return Some(format!("{why}; no approval service is available"));
    };
    let request = ApprovalRequest {
        execution: Arc::clone(execution),
        agent,
        reason,
        signal: execution.signal.clone(),
    };
    let answer = AssertUnwindSafe(async move { approver.approve(request).await }).catch_unwind();
    let answer = tokio::select! {
        answer = answer => answer,
        () = execution.signal.cancelled() => Ok(Approval::Cancel),
    };
    match answer {
        Ok(Approval::Grant) => None,
        Ok(Approval::Refuse { reason }) => Some(match reason {
            Some(reason) => format!("approval refused: {reason}"),
            None => String::from("approval refused"),
        }),
        Ok(Approval::Cancel) => Some(String::from("approval was cancelled")),
        Err(payload) => Some(format!(
            "the approval service failed ({}); the call is denied",
            panic_message(payload.as_ref())
        )),
    }
}
