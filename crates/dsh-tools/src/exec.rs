//! The body's runtime context ([`ExecContext`]): the frozen execution, its arguments, the
//! signal, services, the context channel and the approval service a body may ask.

use crate::agent::{AgentRef, InjectedContext};
use crate::call::{ExecToken, ParsedArguments, Services, ToolExecution};
use crate::hooks::{Approver, ask};
use crate::json::JsonValue;
use serde_json::Value;
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

/// The body's runtime context: the frozen execution plus the (possibly replaced) signal, the
/// context channel, and services.
#[derive(Clone, Debug)]
pub struct ExecContext {
    pub(crate) execution: Arc<ToolExecution>,
    pub(crate) args: Arc<ParsedArguments>,
    /// A signal an execute-stage wrapper installed; `None` is the caller's, which the
    /// execution holds (cloning a token takes a lock, so the common case does not).
    pub(crate) signal: Option<CancellationToken>,
    pub(crate) services: Services,
    pub(crate) approver: ApproverSlot,
}

/// The approval service of a call's layer, as a body may ask it
/// ([`ExecContext::request_approval`]).
#[derive(Clone, Default)]
pub(crate) struct ApproverSlot(pub(crate) Option<Arc<dyn Approver>>);

impl fmt::Debug for ApproverSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(Approver)"
        } else {
            "None"
        })
    }
}

impl ExecContext {
    /// The frozen execution.
    pub fn execution(&self) -> &Arc<ToolExecution> {
        &self.execution
    }

    /// The call id.
    pub fn call_id(&self) -> &str {
        &self.execution.call_id
    }

    /// The root model-requested call of this execution tree.
    pub fn root_call_id(&self) -> &str {
        self.execution.root_call_id()
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.execution.name
    }

    /// The frozen arguments as a `serde_json::Value`: keys sorted, numbers as `u64`, `i64` or
    /// the nearest `f64` (see [`JsonValue::to_value`]). Use [`ExecContext::exact_args`] when
    /// every digit or the key order matters.
    pub fn args(&self) -> &Arc<Value> {
        self.args.value()
    }

    /// The frozen arguments exactly as sent: numbers digit for digit (`18446744073709551617`,
    /// `1e400`, `0.10`, `-0`) and keys in the model's order.
    pub fn exact_args(&self) -> &JsonValue {
        self.args.exact()
    }

    /// The argument text as the model sent it (`None` when an in-process caller passed a
    /// value).
    pub fn args_text(&self) -> Option<&str> {
        self.args.text()
    }

    /// Deserialises the arguments into `T`, from the text when there is one, so integer fields
    /// (`u64`, `i128`, `u128`) get the exact digits; a failure names the field
    /// ([`json::from_str_located`](crate::json::from_str_located)).
    pub fn typed_args<T: serde::de::DeserializeOwned>(&self) -> Result<T, crate::Violation> {
        match self.args.text() {
            Some(text) => crate::json::from_str_located(text),
            None => crate::json::from_value_located(self.args.value()),
        }
    }

    /// The registry-assigned token.
    pub fn token(&self) -> ExecToken {
        self.execution.token
    }

    /// The cancellation the body must honour. It fires when the caller cancels, and when an
    /// execute-stage wrapper (such as the definition's timeout) cancels.
    pub fn signal(&self) -> &CancellationToken {
        self.signal.as_ref().unwrap_or(&self.execution.signal)
    }

    /// A copy of this context whose signal is `signal`. A body that ends its own work early
    /// (Code Mode's time limit) hands nested calls a child of [`signal`](Self::signal) through
    /// it, so they are cancelled with the body's work whether the caller or the body ends it.
    pub fn with_signal(&self, signal: CancellationToken) -> ExecContext {
        let mut context = self.clone();
        context.signal = Some(signal);
        context
    }

    /// The agent the call runs for. Its `inject` can fail once the agent is gone.
    pub fn agent(&self) -> Option<&AgentRef> {
        self.execution.agent.as_ref()
    }

    /// Attaches context to this call's own result; the loop appends it after the `tool/result`.
    pub fn defer_context(&self, context: InjectedContext) {
        if let Ok(mut deferred) = self.execution.sink.deferred.lock() {
            deferred.push(context);
        }
    }

    /// Marks a successful result of this call as ending the agent's turn.
    pub fn conclude_turn(&self) {
        self.execution
            .sink
            .concludes_turn
            .store(true, Ordering::SeqCst);
    }

    /// A shared service, such as the jobs runtime.
    pub fn service<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.services.get::<T>()
    }

    /// Asks the call's approval service (the one that answers `Ask` verdicts of pre-execute
    /// listeners) to let this call do more than it would by default, such as leaving the
    /// shell's sandbox. `reason` is what the approver shows the user. `Ok` only for an explicit
    /// grant; otherwise the reason for the denial: a refusal, a cancellation, a failed approver,
    /// no approver or no agent to ask for.
    pub async fn request_approval(&self, reason: impl Into<String>) -> Result<(), String> {
        match ask(
            &self.execution,
            self.approver.0.clone(),
            Some(reason.into()),
        )
        .await
        {
            None => Ok(()),
            Some(denied) => Err(denied),
        }
    }
}
