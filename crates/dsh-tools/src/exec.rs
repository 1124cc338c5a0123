//! One call's identity, its runtime context, and its result.

use crate::agent::{AgentRef, InjectedContext};
use crate::content::{ContentBlock, ToolResultRecord};
use crate::error::{FailureCode, ToolFailure};
use crate::json::JsonValue;
use serde_json::Value;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;

/// An opaque identity the registry assigns to each execution. It permits correlation (a
/// sub-dispatch carries its parent's token) without exposing any mutable state.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExecToken(u64);

impl ExecToken {
    pub(crate) fn next() -> ExecToken {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ExecToken(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Debug for ExecToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExecToken(#{})", self.0)
    }
}

/// The arguments of a call as the caller has them.
#[derive(Clone, Debug, PartialEq)]
pub enum Arguments {
    /// The model's raw argument text; parsed once, losslessly, and kept.
    Text(String),
    /// Already-parsed JSON (in-process callers, Code Mode). It has only the precision a
    /// `serde_json::Value` keeps.
    Value(Value),
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Arguments {
        Arguments::Value(value)
    }
}

impl From<String> for Arguments {
    fn from(text: String) -> Arguments {
        Arguments::Text(text)
    }
}

impl From<&str> for Arguments {
    fn from(text: &str) -> Arguments {
        Arguments::Text(text.to_owned())
    }
}

/// A request to execute one tool call.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ToolCall {
    /// The model's call id.
    pub call_id: String,
    /// The root model-requested call of this execution tree (defaults to `call_id`).
    pub root_call_id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: Arguments,
    /// The agent the call runs for; decides visibility and scoped hooks.
    pub agent: Option<AgentRef>,
    /// The enclosing execution, for sub-dispatches (Code Mode). Sub-dispatches have no cards
    /// and skip `presentation_meta`.
    pub parent: Option<ExecToken>,
    /// The caller's cancellation.
    pub signal: CancellationToken,
}

impl ToolCall {
    /// A top-level call with no agent, cancelled by nobody: its signal is a fresh
    /// `CancellationToken`. Give it the caller's with [`with_signal`](Self::with_signal).
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> ToolCall {
        ToolCall {
            call_id: call_id.into(),
            root_call_id: None,
            name: name.into(),
            arguments: arguments.into(),
            agent: None,
            parent: None,
            signal: CancellationToken::new(),
        }
    }

    /// Cancels the call when `signal` fires (the user stops the turn, the agent is disposed).
    pub fn with_signal(mut self, signal: CancellationToken) -> ToolCall {
        self.signal = signal;
        self
    }

    /// Runs the call on behalf of an agent.
    pub fn with_agent(mut self, agent: AgentRef) -> ToolCall {
        self.agent = Some(agent);
        self
    }

    /// Marks the call as a sub-dispatch of `parent`.
    pub fn with_parent(mut self, parent: ExecToken, root_call_id: impl Into<String>) -> ToolCall {
        self.parent = Some(parent);
        self.root_call_id = Some(root_call_id.into());
        self
    }
}

/// A call's parsed arguments, frozen: the exact JSON (every digit, the model's key order), the
/// argument text it came from, and a `serde_json::Value` for convenience.
///
/// The `Value` is built from the exact JSON the first time something asks for it (a hook, a
/// renderer, a raw body), then kept: a typed tool reads its arguments from the text and most
/// failures never look at them, so building it eagerly cost every call a map it rarely used.
#[derive(Clone, Debug)]
pub struct ParsedArguments {
    text: Option<Box<str>>,
    exact: JsonValue,
    value: OnceLock<Arc<Value>>,
}

impl PartialEq for ParsedArguments {
    /// The `Value` is derived from the exact JSON, so the text and the exact JSON decide.
    fn eq(&self, other: &ParsedArguments) -> bool {
        self.text == other.text && self.exact == other.exact
    }
}

impl ParsedArguments {
    /// Parses argument text, keeping it.
    pub fn parse(text: &str) -> Result<ParsedArguments, serde_json::Error> {
        ParsedArguments::from_text(text.to_owned()).map_err(|(_, error)| error)
    }

    /// Parses argument text, keeping it without a copy; on failure the text comes back.
    pub(crate) fn from_text(text: String) -> Result<ParsedArguments, (String, serde_json::Error)> {
        match JsonValue::parse(&text) {
            Ok(exact) => Ok(ParsedArguments {
                text: Some(text.into_boxed_str()),
                exact,
                value: OnceLock::new(),
            }),
            Err(error) => Err((text, error)),
        }
    }

    /// Wraps a value an in-process caller built.
    pub fn from_value(value: Value) -> ParsedArguments {
        ParsedArguments {
            exact: JsonValue::from(&value),
            text: None,
            value: OnceLock::from(Arc::new(value)),
        }
    }

    /// The arguments of a call whose text could not be read: `null`.
    pub(crate) const fn null() -> ParsedArguments {
        ParsedArguments {
            text: None,
            exact: JsonValue::Null,
            value: OnceLock::new(),
        }
    }

    /// The argument text, when the call came as text (`None` for [`Arguments::Value`]).
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// The exact arguments: numbers as sent, keys in the order sent.
    pub fn exact(&self) -> &JsonValue {
        &self.exact
    }

    /// The arguments as a `serde_json::Value`: sorted keys, numbers as `u64`/`i64`/`f64` (see
    /// [`JsonValue::to_value`]). Built on the first call, then shared.
    pub fn value(&self) -> &Arc<Value> {
        self.value.get_or_init(|| Arc::new(self.exact.to_value()))
    }

    /// Whether the `Value` has been built yet.
    #[cfg(test)]
    pub(crate) fn value_built(&self) -> bool {
        self.value.get().is_some()
    }
}

/// The materialised arguments of an execution.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CallArguments {
    /// Detached, frozen JSON, held exactly.
    Json(Arc<ParsedArguments>),
    /// The argument text was not JSON (the call fails with `INVALID_ARGS`).
    Unparsable {
        /// The text as received.
        text: Arc<str>,
        /// The parser's complaint.
        error: String,
    },
    /// The argument text was longer than the registry's limit; it was dropped unread (the call
    /// fails with `INVALID_ARGS`).
    Oversized {
        /// The text's length in bytes.
        bytes: usize,
        /// The registry's limit in bytes ([`RegistryConfig::max_argument_bytes`](crate::RegistryConfig)).
        limit: usize,
    },
}

/// One pending call inside the pipeline: identity, frozen arguments and the caller's signal.
/// Hooks, guards, observers and `finalize_content` receive it read-only.
#[derive(Debug)]
pub struct ToolExecution {
    pub(crate) call_id: String,
    /// `None` for a top-level call, whose root is itself.
    pub(crate) root_call_id: Option<String>,
    pub(crate) name: String,
    pub(crate) arguments: CallArguments,
    pub(crate) token: ExecToken,
    pub(crate) parent: Option<ExecToken>,
    pub(crate) agent: Option<AgentRef>,
    pub(crate) signal: CancellationToken,
    /// What the body leaves besides its value; part of the execution, so a call allocates no
    /// separate home for it.
    pub(crate) sink: CallSink,
}

impl ToolExecution {
    /// The call id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The root model-requested call of this execution tree.
    pub fn root_call_id(&self) -> &str {
        self.root_call_id.as_deref().unwrap_or(&self.call_id)
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parsed arguments as a `serde_json::Value`, or `None` when the text was not JSON or
    /// was too long to read. [`ToolExecution::exact_args`] has every digit and the key order.
    pub fn args(&self) -> Option<&Arc<Value>> {
        self.parsed().map(|parsed| parsed.value())
    }

    /// The parsed arguments exactly as sent (numbers digit for digit, keys in order).
    pub fn exact_args(&self) -> Option<&JsonValue> {
        self.parsed().map(|parsed| parsed.exact())
    }

    /// The parsed arguments in all their forms.
    pub fn parsed(&self) -> Option<&Arc<ParsedArguments>> {
        match &self.arguments {
            CallArguments::Json(parsed) => Some(parsed),
            CallArguments::Unparsable { .. } | CallArguments::Oversized { .. } => None,
        }
    }

    /// The materialised arguments.
    pub fn arguments(&self) -> &CallArguments {
        &self.arguments
    }

    /// The registry-assigned token.
    pub fn token(&self) -> ExecToken {
        self.token
    }

    /// The enclosing execution's token, for sub-dispatches.
    pub fn parent(&self) -> Option<ExecToken> {
        self.parent
    }

    /// The agent the call runs for.
    pub fn agent(&self) -> Option<&AgentRef> {
        self.agent.as_ref()
    }

    /// The caller's cancellation.
    pub fn signal(&self) -> &CancellationToken {
        &self.signal
    }

    /// The agent's session id, when there is an agent.
    pub fn session_id(&self) -> Option<&str> {
        self.agent.as_ref().map(|a| a.session_id())
    }
}

/// Shared services a body can reach (`exec.service::<T>()`), such as the jobs runtime.
#[derive(Clone, Default)]
pub struct Services {
    map: Arc<Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.map.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("Services").field("count", &count).finish()
    }
}

impl Services {
    pub(crate) fn insert<T: Any + Send + Sync>(&self, service: Arc<T>) {
        if let Ok(mut map) = self.map.lock() {
            map.insert(TypeId::of::<T>(), service);
        }
    }

    pub(crate) fn remove<T: Any + Send + Sync>(&self, service: &Arc<T>) {
        if let Ok(mut map) = self.map.lock() {
            let same = map
                .get(&TypeId::of::<T>())
                .and_then(|s| Arc::clone(s).downcast::<T>().ok())
                .is_some_and(|s| Arc::ptr_eq(&s, service));
            if same {
                map.remove(&TypeId::of::<T>());
            }
        }
    }

    /// The service of type `T`, when one is provided.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let map = self.map.lock().ok()?;
        map.get(&TypeId::of::<T>())
            .and_then(|s| Arc::clone(s).downcast::<T>().ok())
    }
}

/// What a body leaves on its own result besides the value.
#[derive(Debug, Default)]
pub(crate) struct CallSink {
    pub(crate) deferred: Mutex<Vec<InjectedContext>>,
    pub(crate) concludes_turn: AtomicBool,
    /// Counter for Code Mode sub-call ids (`<parent>:code:<n>`).
    pub(crate) sub_calls: AtomicU64,
}

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
pub(crate) struct ApproverSlot(pub(crate) Option<Arc<dyn crate::hooks::Approver>>);

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
        match crate::pipeline::ask(
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

/// The outcome of one execution.
///
/// Only `content`, `error` and `meta` are durable ([`ToolResult::record`]); `value` is
/// execution-local (Code Mode programs receive it).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolResult {
    /// Whether the call failed.
    pub is_error: bool,
    /// The model-visible content.
    pub content: Vec<ContentBlock>,
    /// The canonical value (successes only), frozen.
    pub value: Option<Arc<Value>>,
    /// The failure (errors only).
    pub error: Option<ToolFailure>,
    /// Replayable presentation facts (top-level successes only).
    pub meta: Option<Value>,
    /// Contexts to append after this result, in order.
    pub additional_contexts: Vec<InjectedContext>,
    /// Whether this (successful) result ends the agent's turn.
    pub concludes_turn: bool,
}

impl ToolResult {
    /// A failed result; its content is `Error: <message>`.
    pub fn failure(code: FailureCode, message: impl Into<String>) -> ToolResult {
        let message = message.into();
        ToolResult {
            is_error: true,
            content: vec![ContentBlock::text(format!("Error: {message}"))],
            value: None,
            error: Some(ToolFailure { message, code }),
            meta: None,
            additional_contexts: Vec::new(),
            concludes_turn: false,
        }
    }

    pub(crate) fn success(value: Arc<Value>, content: Vec<ContentBlock>) -> ToolResult {
        ToolResult {
            is_error: false,
            content,
            value: Some(value),
            error: None,
            meta: None,
            additional_contexts: Vec::new(),
            concludes_turn: false,
        }
    }

    /// The failure code, for failed results.
    pub fn code(&self) -> Option<FailureCode> {
        self.error.as_ref().map(|e| e.code)
    }

    /// The durable projection (what a session log keeps).
    pub fn record(&self) -> ToolResultRecord {
        ToolResultRecord {
            content: self.content.clone(),
            is_error: self.is_error,
            error: self.error.clone(),
            meta: self.meta.clone(),
        }
    }
}
