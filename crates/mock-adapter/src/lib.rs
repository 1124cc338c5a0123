//! A scripted model adapter for testing dsh-rs agents (and for the CLI's embedded demo).
//!
//! [`MockAdapter`] answers each model request with the next step of a script: text, reasoning,
//! tool calls (JSON arguments or raw argument text), a scripted error, or a hang until
//! cancelled. Responses are streamed as deltas in configurable chunk sizes, with parallel tool
//! calls' argument fragments interleaved, so the loop's assembly is exercised. Every request is
//! captured for assertions, unless [`MockAdapter::capture_requests`] turns that off. The script
//! is strict: a request after it ran out fails loudly with the request number, and
//! [`MockAdapter::assert_exhausted`] checks nothing was left unused.
//! A function mode answers requests from a closure instead.
//!
//! Scripts load from JSON in the format of the `dsh-agent run --script` flag:
//!
//! ```
//! use mock_adapter::MockAdapter;
//!
//! let mock = MockAdapter::from_json(r#"{ "steps": [
//!   { "toolCalls": [ { "id": "c1", "name": "bash",
//!                      "arguments": { "command": "echo hi", "description": "Print a greeting" } } ] },
//!   { "toolCalls": [ { "id": "c2", "name": "bash", "argumentsRaw": "{not json" } ] },
//!   { "text": "Done.", "reasoning": "optional" }
//! ] }"#)?;
//! assert_eq!(mock.remaining(), 3);
//! # Ok::<(), mock_adapter::ScriptError>(())
//! ```
//!
//! A step's `delayMs` is a whole number of milliseconds up to [`MAX_DELAY_MS`]; any other value
//! is refused naming the field as a JSON pointer (`/steps/1/delayMs`).
//!
//! A captured request keeps its history alive, and the agent copies a history it still shares
//! before appending to it (see [`agent_loop::History`]), so with capture on every step copies
//! the history once: harmless in a test, quadratic over a session of thousands of steps. The
//! `long_session` benchmark turns capture off.
//!
//! It deliberately does not simulate a provider's HTTP behaviour; it drives the `ModelAdapter`
//! seam directly.
//!
//! Unsafe budget: 0 — none.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use agent_loop::{FinishReason, ModelAdapter, ModelError, ModelEvent, ModelRequest, ModelStream};
use dsh_tools::json::{JsonNumber, JsonValue};
use serde::Deserialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The arguments of a scripted tool call.
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptedArguments {
    /// JSON, serialised to text when streamed.
    Json(Value),
    /// Raw argument text, streamed as is (e.g. malformed JSON).
    Raw(String),
}

impl ScriptedArguments {
    fn text(&self) -> String {
        match self {
            ScriptedArguments::Json(value) => value.to_string(),
            ScriptedArguments::Raw(raw) => raw.clone(),
        }
    }
}

/// A scripted tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptedCall {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments.
    pub arguments: ScriptedArguments,
}

impl ScriptedCall {
    /// A call with JSON arguments.
    pub fn json(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> ScriptedCall {
        ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: ScriptedArguments::Json(arguments),
        }
    }

    /// A call with raw argument text.
    pub fn raw(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ScriptedCall {
        ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: ScriptedArguments::Raw(arguments.into()),
        }
    }
}

/// One scripted response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Response {
    /// Visible text.
    pub text: String,
    /// Reasoning text.
    pub reasoning: Option<String>,
    /// Tool calls, streamed in parallel (indices 0, 1, …).
    pub tool_calls: Vec<ScriptedCall>,
    /// A delay before the response starts streaming.
    pub delay: Option<Duration>,
}

impl Response {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Response {
        Response {
            text: text.into(),
            ..Response::default()
        }
    }

    /// A response with tool calls.
    pub fn calls(calls: impl IntoIterator<Item = ScriptedCall>) -> Response {
        Response {
            tool_calls: calls.into_iter().collect(),
            ..Response::default()
        }
    }

    /// Adds reasoning text.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Response {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Adds visible text.
    pub fn with_text(mut self, text: impl Into<String>) -> Response {
        self.text = text.into();
        self
    }

    /// Delays the response.
    pub fn with_delay(mut self, delay: Duration) -> Response {
        self.delay = Some(delay);
        self
    }
}

/// One step of a script: the answer to one model request.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// Stream this response.
    Respond(Response),
    /// Fail the request with this message.
    Error(String),
    /// Stream nothing and wait until the request is cancelled.
    Hang,
}

impl From<Response> for Step {
    fn from(response: Response) -> Step {
        Step::Respond(response)
    }
}

/// The longest delay a script step may ask for, in milliseconds (ten minutes): longer than any
/// test or demo needs, short enough that a typo cannot park a run for days.
pub const MAX_DELAY_MS: u64 = 600_000;

/// Why a JSON script was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The text is not a script.
    #[error("invalid script: {0}")]
    Invalid(#[from] serde_json::Error),
    /// A step is not usable.
    #[error("invalid script: step {step}: {message}")]
    Step {
        /// The 1-based step.
        step: usize,
        /// What is wrong.
        message: String,
    },
    /// A field's value is out of range or of the wrong type.
    #[error("invalid script: {pointer}: {message}")]
    Field {
        /// The field, as a JSON pointer into the script (`/steps/0/delayMs`).
        pointer: String,
        /// What is wrong.
        message: String,
    },
}

/// A mismatch found by [`MockAdapter::check_exhausted`].
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the script has {remaining} unused step(s) after {requests} request(s)")]
pub struct NotExhausted {
    /// Steps left.
    pub remaining: usize,
    /// Requests received.
    pub requests: usize,
}

type Responder = Arc<dyn Fn(&ModelRequest) -> Step + Send + Sync>;

struct MockState {
    steps: VecDeque<Step>,
    /// The captured requests (none when capture is off).
    requests: Vec<ModelRequest>,
    /// Every request received, captured or not.
    received: usize,
    responder: Option<Responder>,
}

/// The scripted model adapter (cheap to clone; clones share the script and the captures).
#[derive(Clone)]
pub struct MockAdapter {
    state: Arc<Mutex<MockState>>,
    chunk_bytes: usize,
    capture: bool,
}

impl fmt::Debug for MockAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("MockAdapter")
            .field("remaining", &state.steps.len())
            .field("requests", &state.received)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("capture", &self.capture)
            .finish()
    }
}

/// The script file format (`--script`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    steps: Vec<ScriptStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScriptStep {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptToolCall>,
    #[serde(default)]
    error: Option<String>,
    /// Read as any JSON, exactly, so that a negative, fractional or huge value is reported as
    /// written with its field's pointer, like one over [`MAX_DELAY_MS`].
    #[serde(default)]
    delay_ms: Option<JsonValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScriptToolCall {
    id: String,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    arguments_raw: Option<String>,
}

impl MockAdapter {
    /// A mock that answers requests with `steps`, in order.
    pub fn new(steps: impl IntoIterator<Item = impl Into<Step>>) -> MockAdapter {
        MockAdapter {
            state: Arc::new(Mutex::new(MockState {
                steps: steps.into_iter().map(Into::into).collect(),
                requests: Vec::new(),
                received: 0,
                responder: None,
            })),
            chunk_bytes: 4,
            capture: true,
        }
    }

    /// Function mode: every request is answered by `respond` (the script is not used).
    pub fn with_function(
        respond: impl Fn(&ModelRequest) -> Step + Send + Sync + 'static,
    ) -> MockAdapter {
        let mock = MockAdapter::new(Vec::<Step>::new());
        mock.lock().responder = Some(Arc::new(respond));
        mock
    }

    /// Loads a JSON script (the `dsh-agent run --script` format). A step is `{ "error": … }`
    /// alone, or a response with `text` and/or `toolCalls`, optional `reasoning` and an
    /// optional `delayMs` (an integer from 0 to [`MAX_DELAY_MS`]; any other value is refused,
    /// naming the field as a JSON pointer).
    pub fn from_json(text: &str) -> Result<MockAdapter, ScriptError> {
        let file: ScriptFile = dsh_tools::json::from_str(text)?;
        let mut steps = Vec::with_capacity(file.steps.len());
        for (i, step) in file.steps.into_iter().enumerate() {
            let n = i + 1;
            if let Some(message) = step.error {
                // An error step fails the request at once: anything else on it would be
                // silently ignored, so it is refused instead.
                if step.text.is_some()
                    || step.reasoning.is_some()
                    || !step.tool_calls.is_empty()
                    || step.delay_ms.is_some()
                {
                    return Err(ScriptError::Step {
                        step: n,
                        message: String::from(
                            "an `error` step cannot also have text, reasoning, tool calls or a delay",
                        ),
                    });
                }
                steps.push(Step::Error(message));
                continue;
            }
            let mut calls = Vec::new();
            for call in step.tool_calls {
                let arguments = match (call.arguments, call.arguments_raw) {
                    (Some(json), None) => ScriptedArguments::Json(json),
                    (None, Some(raw)) => ScriptedArguments::Raw(raw),
                    (None, None) => ScriptedArguments::Json(Value::Object(Default::default())),
                    (Some(_), Some(_)) => {
                        return Err(ScriptError::Step {
                            step: n,
                            message: format!(
                                "tool call `{}` has both `arguments` and `argumentsRaw`",
                                call.id
                            ),
                        });
                    }
                };
                calls.push(ScriptedCall {
                    id: call.id,
                    name: call.name,
                    arguments,
                });
            }
            if step.text.is_none() && calls.is_empty() {
                return Err(ScriptError::Step {
                    step: n,
                    message: String::from("a step needs `text`, `toolCalls` or `error`"),
                });
            }
            steps.push(Step::Respond(Response {
                text: step.text.unwrap_or_default(),
                reasoning: step.reasoning,
                tool_calls: calls,
                delay: match &step.delay_ms {
                    Some(value) => Some(delay(i, value)?),
                    None => None,
                },
            }));
        }
        Ok(MockAdapter::new(steps))
    }

    /// Streams text and arguments in chunks of at most `bytes` bytes (at least 1; default 4),
    /// cut on character boundaries.
    pub fn chunk_bytes(mut self, bytes: usize) -> MockAdapter {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// Whether this adapter keeps every request for [`MockAdapter::requests`] (default: yes).
    /// Without capture a request is dropped once its step is chosen, so the agent's history
    /// is never shared when it appends to it and no step copies it: what a long session
    /// needs, since a captured request makes the agent's next append copy the whole history.
    pub fn capture_requests(mut self, capture: bool) -> MockAdapter {
        self.capture = capture;
        self
    }

    fn lock(&self) -> MutexGuard<'_, MockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends steps to the script.
    pub fn push(&self, step: impl Into<Step>) {
        self.lock().steps.push_back(step.into());
    }

    /// Every request received so far (cheap: the requests share their histories and schemas
    /// with the agent). Empty when capture is off.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// The number of unused steps.
    pub fn remaining(&self) -> usize {
        self.lock().steps.len()
    }

    /// Checks that every step was used.
    pub fn check_exhausted(&self) -> Result<(), NotExhausted> {
        let state = self.lock();
        if state.steps.is_empty() {
            Ok(())
        } else {
            Err(NotExhausted {
                remaining: state.steps.len(),
                requests: state.received,
            })
        }
    }

    /// Panics if steps remain unused (for tests).
    #[track_caller]
    pub fn assert_exhausted(&self) {
        if let Err(error) = self.check_exhausted() {
            panic!("{error}");
        }
    }

    fn next_step(&self, request: &ModelRequest) -> Result<Step, ModelError> {
        let mut state = self.lock();
        if self.capture {
            state.requests.push(request.clone());
        }
        state.received += 1;
        let number = state.received;
        if let Some(respond) = state.responder.clone() {
            drop(state);
            return Ok(respond(request));
        }
        state
            .steps
            .pop_front()
            .ok_or_else(|| ModelError::new(format!("script exhausted at request {number}")))
    }
}

/// The delay of step `index` (0-based), checked against [`MAX_DELAY_MS`].
fn delay(index: usize, value: &JsonValue) -> Result<Duration, ScriptError> {
    match value.as_number().and_then(JsonNumber::as_u64) {
        Some(ms) if ms <= MAX_DELAY_MS => Ok(Duration::from_millis(ms)),
        _ => Err(ScriptError::Field {
            pointer: format!("/steps/{index}/delayMs"),
            message: format!(
                "must be a whole number of milliseconds from 0 to {MAX_DELAY_MS}, not {value}"
            ),
        }),
    }
}

/// Splits text into chunks of at most `size` bytes on character boundaries.
fn chunks(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

fn events(response: &Response, chunk: usize) -> Vec<Result<ModelEvent, ModelError>> {
    let mut out = Vec::new();
    if let Some(reasoning) = &response.reasoning {
        out.extend(
            chunks(reasoning, chunk)
                .into_iter()
                .map(|c| Ok(ModelEvent::ReasoningDelta(c))),
        );
    }
    out.extend(
        chunks(&response.text, chunk)
            .into_iter()
            .map(|c| Ok(ModelEvent::TextDelta(c))),
    );
    for (index, call) in response.tool_calls.iter().enumerate() {
        out.push(Ok(ModelEvent::ToolCallStart {
            index,
            id: call.id.clone(),
            name: call.name.clone(),
        }));
    }
    // Interleave the calls' fragments round-robin, as parallel calls stream in practice.
    let mut fragments: Vec<VecDeque<String>> = response
        .tool_calls
        .iter()
        .map(|c| chunks(&c.arguments.text(), chunk).into())
        .collect();
    loop {
        let mut any = false;
        for (index, queue) in fragments.iter_mut().enumerate() {
            if let Some(fragment) = queue.pop_front() {
                any = true;
                out.push(Ok(ModelEvent::ToolCallArguments { index, fragment }));
            }
        }
        if !any {
            break;
        }
    }
    out.push(Ok(ModelEvent::Finish {
        reason: if response.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
        usage: None,
    }));
    out
}

impl ModelAdapter for MockAdapter {
    fn stream(&self, request: ModelRequest, signal: CancellationToken) -> ModelStream {
        let step = self.next_step(&request);
        let chunk = self.chunk_bytes;
        Box::pin(async_stream(step, chunk, signal))
    }
}

fn async_stream(
    step: Result<Step, ModelError>,
    chunk: usize,
    signal: CancellationToken,
) -> impl futures::Stream<Item = Result<ModelEvent, ModelError>> + Send {
    use futures::StreamExt;
    let prelude = async move {
        match step {
            Err(error) => vec![Err(error)],
            Ok(Step::Error(message)) => vec![Err(ModelError::new(message))],
            Ok(Step::Hang) => {
                signal.cancelled().await;
                vec![Err(ModelError::new("cancelled"))]
            }
            Ok(Step::Respond(response)) => {
                if let Some(delay) = response.delay {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = signal.cancelled() => return vec![Err(ModelError::new("cancelled"))],
                    }
                }
                events(&response, chunk)
            }
        }
    };
    futures::stream::once(prelude).flat_map(futures::stream::iter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_character_boundaries() {
        assert_eq!(chunks("héllo", 1), vec!["h", "é", "l", "l", "o"]);
        assert_eq!(chunks("abcdef", 4), vec!["abcd", "ef"]);
        assert!(chunks("", 3).is_empty());
    }

    #[test]
    fn parallel_fragments_interleave() {
        let response = Response::calls([
            ScriptedCall::raw("a", "t", "xyz"),
            ScriptedCall::raw("b", "t", "12"),
        ]);
        let fragments: Vec<(usize, String)> = events(&response, 1)
            .into_iter()
            .filter_map(|e| match e {
                Ok(ModelEvent::ToolCallArguments { index, fragment }) => Some((index, fragment)),
                _ => None,
            })
            .collect();
        assert_eq!(
            fragments,
            vec![
                (0, "x".into()),
                (1, "1".into()),
                (0, "y".into()),
                (1, "2".into()),
                (0, "z".into())
            ]
        );
    }

    #[test]
    fn scripts_name_their_problems() {
        let err = MockAdapter::from_json("{\"steps\": [{}]}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid script: step 1: a step needs `text`, `toolCalls` or `error`"
        );
        let err = MockAdapter::from_json("{\"steps\": [").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid script: EOF while parsing"),
            "{err}"
        );
        let err = MockAdapter::from_json("{\"stepz\": []}").unwrap_err();
        assert!(err.to_string().contains("unknown field `stepz`"), "{err}");
    }

    #[test]
    fn delays_are_bounded_and_a_bad_one_names_its_field() {
        let script = |delay: &str| {
            format!(
                r#"{{ "steps": [ {{ "text": "a" }}, {{ "text": "b", "delayMs": {delay} }} ] }}"#
            )
        };
        for delay in ["600001", "18446744073709551616", "-1", "1.5", "\"10\""] {
            let err = MockAdapter::from_json(&script(delay)).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "invalid script: /steps/1/delayMs: must be a whole number of milliseconds from 0 to 600000, not {delay}"
                ),
                "{delay}"
            );
        }
        for (delay, expected) in [("0", 0), ("600000", MAX_DELAY_MS)] {
            let mock = MockAdapter::from_json(&script(delay)).unwrap();
            let Step::Respond(response) = &mock.lock().steps[1] else {
                panic!("{delay}");
            };
            assert_eq!(response.delay, Some(Duration::from_millis(expected)));
        }
    }

    #[test]
    fn an_error_step_carries_nothing_else() {
        let refused = "invalid script: step 2: an `error` step cannot also have text, reasoning, tool calls or a delay";
        for extra in [
            r#""text": "hi""#,
            r#""reasoning": "hmm""#,
            r#""toolCalls": [ { "id": "c1", "name": "t" } ]"#,
            r#""delayMs": 10"#,
        ] {
            let script =
                format!(r#"{{ "steps": [ {{ "text": "ok" }}, {{ "error": "boom", {extra} }} ] }}"#);
            let err = MockAdapter::from_json(&script).unwrap_err();
            assert_eq!(err.to_string(), refused, "{extra}");
        }
        let mock = MockAdapter::from_json(r#"{ "steps": [ { "error": "boom" } ] }"#).unwrap();
        assert_eq!(mock.lock().steps, [Step::Error("boom".into())]);
    }

    #[tokio::test]
    async fn without_capture_requests_are_counted_but_not_kept() {
        use futures::StreamExt;
        let request = ModelRequest::new("", vec![agent_loop::Message::user("hi")], vec![]);
        let kept = MockAdapter::new([Response::text("a"), Response::text("b")]);
        let dropped = kept.clone().capture_requests(false);
        drop(kept.stream(request.clone(), CancellationToken::new()));
        drop(dropped.stream(request.clone(), CancellationToken::new()));
        // The clones share the script and the captures; only the capturing one kept its
        // request, and that shares the history it was sent.
        let captured = kept.requests();
        assert_eq!(captured, vec![request.clone()]);
        assert!(captured[0].messages.shares_storage(&request.messages));
        // The uncaptured request still counts.
        let events: Vec<_> = dropped
            .stream(request, CancellationToken::new())
            .collect()
            .await;
        assert_eq!(
            events,
            vec![Err(ModelError::new("script exhausted at request 3"))]
        );
        assert_eq!(kept.requests().len(), 1);
    }
}
