//! Session events: every observable step of a session, as broadcast to subscribers and as
//! written to the JSONL session log.

use crate::model::AssistantToolCall;
use dsh_tools::jobs::JobStatus;
use dsh_tools::{ContentBlock, ContextSource, InjectedContext, ToolFailure};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::SystemTime;

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnEndReason {
    /// The model answered without tool calls.
    Completed,
    /// A tool result concluded the turn.
    Concluded,
    /// The step limit was reached.
    MaxSteps,
    /// The turn was cancelled.
    Cancelled,
    /// The model adapter failed.
    Error,
}

impl TurnEndReason {
    /// The wire spelling (the serde name; a test checks the two agree for every variant).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Concluded => "concluded",
            TurnEndReason::MaxSteps => "max_steps",
            TurnEndReason::Cancelled => "cancelled",
            TurnEndReason::Error => "error",
        }
    }
}

/// Why a session ended (`session/end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionEndReason {
    /// The host finished it normally.
    Completed,
    /// A signal (SIGINT, SIGTERM) stopped it.
    Interrupted,
    /// The host stopped it after a failure.
    Failed,
}

impl SessionEndReason {
    /// The wire spelling (the serde name; a test checks the two agree for every variant).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEndReason::Completed => "completed",
            SessionEndReason::Interrupted => "interrupted",
            SessionEndReason::Failed => "failed",
        }
    }
}

/// One observable step of a session. The wire form is tagged by `type`, fields in camelCase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum SessionEvent {
    /// The session began.
    #[serde(rename = "session/start")]
    SessionStart {
        /// The session id.
        session_id: String,
        /// The working directory.
        cwd: String,
        /// The names of the tools visible to the agent.
        tools: Vec<String>,
        /// How the shell's commands are confined, as the host reports it (for `dsh-agent`, a
        /// `tool_bash::sandbox::SandboxReport`: mode, backend, network, what is not enforced).
        /// Absent when the host said nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Value>,
    },
    /// Real user input.
    #[serde(rename = "user/message")]
    UserMessage {
        /// The text.
        content: String,
    },
    /// A request to the model.
    #[serde(rename = "model/request")]
    ModelRequest {
        /// The step of the turn (1-based).
        step: u32,
        /// The names of the tools sent.
        tools: Vec<String>,
        /// The contexts drained into this request.
        injected: Vec<InjectedContext>,
    },
    /// The model's answer.
    #[serde(rename = "assistant/message")]
    AssistantMessage {
        /// The visible text.
        text: String,
        /// The reasoning text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// The tool calls, arguments as raw text.
        tool_calls: Vec<AssistantToolCall>,
    },
    /// A tool call about to run.
    #[serde(rename = "tool/call")]
    ToolCall {
        /// The call id.
        call_id: String,
        /// The tool name.
        name: String,
        /// The parsed arguments, or the raw string when they were not JSON.
        arguments: Value,
    },
    /// A tool call's durable result.
    #[serde(rename = "tool/result")]
    ToolResult {
        /// The call id.
        call_id: String,
        /// The tool name.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// The model-visible content.
        content: Vec<ContentBlock>,
        /// The failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ToolFailure>,
        /// Replayable presentation facts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    },
    /// Context entered the agent's inbox (it rides the next model request).
    #[serde(rename = "context/inject")]
    ContextInject {
        /// Who injected it.
        source: ContextSource,
        /// The text.
        content: String,
    },
    /// Contexts still waiting in the inbox when the agent was disposed: no model request took
    /// them (a job notice that found the wake-up budget spent, for instance).
    #[serde(rename = "context/undelivered")]
    ContextUndelivered {
        /// The contexts, in the order they arrived.
        contexts: Vec<InjectedContext>,
    },
    /// A job owned by the agent started. Resuming compares these with `job/end`: a job that
    /// started but never ended was lost with the process that ran it.
    #[serde(rename = "job/start")]
    JobStart {
        /// The job.
        job_id: String,
        /// Its kind (`bash`).
        kind: String,
        /// Its label.
        label: String,
    },
    /// A job owned by the agent settled.
    #[serde(rename = "job/end")]
    JobEnd {
        /// The job.
        job_id: String,
        /// Its terminal status.
        status: JobStatus,
        /// Its detail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A turn ended.
    #[serde(rename = "turn/end")]
    TurnEnd {
        /// Why.
        reason: TurnEndReason,
        /// How many model requests it made.
        steps: u32,
    },
    /// The host ended the session ([`Agent::end_session`](crate::Agent::end_session)). A
    /// resumed session may carry on after it; a log whose last event is not this one ended
    /// in a crash (or is still being written).
    #[serde(rename = "session/end")]
    SessionEnd {
        /// Why.
        reason: SessionEndReason,
    },
    /// Something failed outside a tool call (the model adapter, the loop).
    #[serde(rename = "error")]
    Error {
        /// What went wrong.
        message: String,
        /// A machine-readable code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

impl SessionEvent {
    /// The wire `type` (the serde tag; a test checks the two agree for every variant).
    pub fn kind(&self) -> &'static str {
        match self {
            SessionEvent::SessionStart { .. } => "session/start",
            SessionEvent::UserMessage { .. } => "user/message",
            SessionEvent::ModelRequest { .. } => "model/request",
            SessionEvent::AssistantMessage { .. } => "assistant/message",
            SessionEvent::ToolCall { .. } => "tool/call",
            SessionEvent::ToolResult { .. } => "tool/result",
            SessionEvent::ContextInject { .. } => "context/inject",
            SessionEvent::ContextUndelivered { .. } => "context/undelivered",
            SessionEvent::JobStart { .. } => "job/start",
            SessionEvent::JobEnd { .. } => "job/end",
            SessionEvent::TurnEnd { .. } => "turn/end",
            SessionEvent::SessionEnd { .. } => "session/end",
            SessionEvent::Error { .. } => "error",
        }
    }
}

/// One line of the session log: `{"seq": n, "ts": "<RFC 3339>", "type": …, …fields}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventRecord {
    /// Position in the session, from 1.
    pub seq: u64,
    /// When it happened (RFC 3339, UTC, milliseconds).
    pub ts: String,
    /// The event.
    #[serde(flatten)]
    pub event: SessionEvent,
}

impl EventRecord {
    pub(crate) fn now(seq: u64, event: SessionEvent) -> EventRecord {
        EventRecord {
            seq,
            ts: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            event,
        }
    }

    /// The JSON line (without the newline).
    pub fn to_json_line(&self) -> String {
        // Serialising plain data with string keys cannot fail; an empty object keeps the log
        // line-shaped even if it somehow did.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Parses one log line (tolerant of number spellings; see `dsh_tools::json`).
    pub fn from_json_line(line: &str) -> Result<EventRecord, serde_json::Error> {
        dsh_tools::json::from_str(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The position of a variant in declaration order. The match has no wildcard arm, so a
    /// new variant does not compile until it is listed here, and then `samples` must cover it.
    fn variant(event: &SessionEvent) -> usize {
        match event {
            SessionEvent::SessionStart { .. } => 0,
            SessionEvent::UserMessage { .. } => 1,
            SessionEvent::ModelRequest { .. } => 2,
            SessionEvent::AssistantMessage { .. } => 3,
            SessionEvent::ToolCall { .. } => 4,
            SessionEvent::ToolResult { .. } => 5,
            SessionEvent::ContextInject { .. } => 6,
            SessionEvent::ContextUndelivered { .. } => 7,
            SessionEvent::JobStart { .. } => 8,
            SessionEvent::JobEnd { .. } => 9,
            SessionEvent::TurnEnd { .. } => 10,
            SessionEvent::SessionEnd { .. } => 11,
            SessionEvent::Error { .. } => 12,
        }
    }

    fn samples() -> Vec<SessionEvent> {
        vec![
            SessionEvent::SessionStart {
                session_id: "s1".into(),
                cwd: "/work".into(),
                tools: vec!["echo".into()],
                sandbox: None,
            },
            SessionEvent::UserMessage {
                content: "hi".into(),
            },
            SessionEvent::ModelRequest {
                step: 1,
                tools: vec![],
                injected: vec![InjectedContext::from_plugin("bash", "done")],
            },
            SessionEvent::AssistantMessage {
                text: "ok".into(),
                reasoning: Some("because".into()),
                tool_calls: vec![AssistantToolCall {
                    call_id: "c1".into(),
                    name: "echo".into(),
                    arguments: "{}".into(),
                }],
            },
            SessionEvent::ToolCall {
                call_id: "c1".into(),
                name: "echo".into(),
                arguments: Value::Null,
            },
            SessionEvent::ToolResult {
                call_id: "c1".into(),
                name: "echo".into(),
                is_error: false,
                content: vec![ContentBlock::text("hi")],
                error: None,
                meta: None,
            },
            SessionEvent::ContextInject {
                source: ContextSource::plugin("bash"),
                content: "done".into(),
            },
            SessionEvent::ContextUndelivered {
                contexts: vec![InjectedContext::from_plugin("bash", "late")],
            },
            SessionEvent::JobStart {
                job_id: "bash-1".into(),
                kind: "bash".into(),
                label: "sleep 1".into(),
            },
            SessionEvent::JobEnd {
                job_id: "bash-1".into(),
                status: JobStatus::Completed,
                detail: None,
            },
            SessionEvent::TurnEnd {
                reason: TurnEndReason::Completed,
                steps: 1,
            },
            SessionEvent::SessionEnd {
                reason: SessionEndReason::Interrupted,
            },
            SessionEvent::Error {
                message: "boom".into(),
                code: None,
            },
        ]
    }

    #[test]
    fn every_event_kind_is_its_serde_tag() {
        let samples = samples();
        let covered: Vec<usize> = samples.iter().map(variant).collect();
        assert_eq!(
            covered,
            (0..13).collect::<Vec<_>>(),
            "one sample per variant, in order"
        );
        for event in &samples {
            let wire = serde_json::to_value(event).unwrap();
            assert_eq!(wire["type"], event.kind(), "{event:?}");
        }
    }

    #[test]
    fn every_session_end_reason_spells_as_serde_does() {
        // No wildcard arm: a new reason does not compile until it is listed here.
        let position = |reason: SessionEndReason| match reason {
            SessionEndReason::Completed => 0,
            SessionEndReason::Interrupted => 1,
            SessionEndReason::Failed => 2,
        };
        let all = [
            SessionEndReason::Completed,
            SessionEndReason::Interrupted,
            SessionEndReason::Failed,
        ];
        assert_eq!(
            all.map(position),
            [0, 1, 2],
            "one sample per reason, in order"
        );
        for reason in all {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }

    #[test]
    fn every_turn_end_reason_spells_as_serde_does() {
        // No wildcard arm: a new reason does not compile until it is listed here.
        let position = |reason: TurnEndReason| match reason {
            TurnEndReason::Completed => 0,
            TurnEndReason::Concluded => 1,
            TurnEndReason::MaxSteps => 2,
            TurnEndReason::Cancelled => 3,
            TurnEndReason::Error => 4,
        };
        let all = [
            TurnEndReason::Completed,
            TurnEndReason::Concluded,
            TurnEndReason::MaxSteps,
            TurnEndReason::Cancelled,
            TurnEndReason::Error,
        ];
        assert_eq!(
            all.map(position),
            [0, 1, 2, 3, 4],
            "one sample per reason, in order"
        );
        for reason in all {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }
}
