//! Shared helpers for the agent-loop integration tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use agent_loop::{Agent, AgentBuilder, EventRecord, Message, SessionEvent};
use dsh_test_support::tool;
use dsh_tools::{ToolDefinition, ToolRegistry};
use mock_adapter::MockAdapter;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Collects every event an agent emits.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<EventRecord>>>);

impl Recorder {
    /// A subscriber that records into this recorder.
    pub fn sink(&self) -> impl Fn(&EventRecord) + Send + Sync + 'static {
        let sink = self.clone();
        move |record| sink.0.lock().unwrap().push(record.clone())
    }

    pub fn events(&self) -> Vec<EventRecord> {
        self.0.lock().unwrap().clone()
    }

    pub fn kinds(&self) -> Vec<&'static str> {
        self.events().iter().map(|r| r.event.kind()).collect()
    }

    /// The events of one wire `type`, in order.
    pub fn of_kind(&self, kind: &str) -> Vec<SessionEvent> {
        self.events()
            .into_iter()
            .filter(|r| r.event.kind() == kind)
            .map(|r| r.event)
            .collect()
    }

    pub fn turn_ends(&self) -> Vec<SessionEvent> {
        self.of_kind("turn/end")
    }
}

/// Builds the agent `builder` describes, recording its events.
pub fn recorded(builder: AgentBuilder) -> (Agent, Recorder) {
    let recorder = Recorder::default();
    let agent = builder.subscriber(recorder.sink()).build().unwrap();
    (agent, recorder)
}

/// The builder of the usual test agent: session `s1` in `/work`, with a system prompt.
pub fn builder(registry: &ToolRegistry, mock: &MockAdapter) -> AgentBuilder {
    Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .session_id("s1")
        .cwd("/work")
        .system_prompt(SYSTEM_PROMPT)
}

pub const SYSTEM_PROMPT: &str = "You are a test agent.";

/// The usual test agent over `registry` and `mock`, recording its events.
pub fn agent(registry: &ToolRegistry, mock: &MockAdapter) -> (Agent, Recorder) {
    recorded(builder(registry, mock))
}

/// A tool that appends `entry(args)` to `log` and returns `"done"`.
pub fn logging_tool(
    name: &str,
    safe: bool,
    log: &Arc<Mutex<Vec<String>>>,
    entry: impl Fn(&Value) -> String + Send + Sync + 'static,
) -> ToolDefinition {
    let log = Arc::clone(log);
    let entry = Arc::new(entry);
    tool(name, safe, move |args, _| {
        let (log, entry) = (Arc::clone(&log), Arc::clone(&entry));
        async move {
            log.lock().unwrap().push(entry(&args));
            Ok(json!("done"))
        }
    })
}

/// The tool messages of a history: call id, content text and whether it is an error.
pub fn tool_messages(messages: &[Message]) -> Vec<(String, String, bool)> {
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

/// Checks the pairing invariant on one request's messages: every assistant tool call is
/// answered by exactly one tool message before the next assistant message, and no tool
/// message answers an unknown call.
pub fn assert_paired(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                assert!(
                    open.is_empty(),
                    "unanswered calls {open:?} before the next assistant message"
                );
                open = tool_calls.iter().map(|c| c.call_id.clone()).collect();
            }
            Message::Tool { call_id, .. } => {
                let position = open.iter().position(|c| c == call_id);
                assert!(
                    position.is_some(),
                    "tool message for unknown or already answered call {call_id}"
                );
                open.remove(position.unwrap());
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "unanswered calls at the end: {open:?}");
}
