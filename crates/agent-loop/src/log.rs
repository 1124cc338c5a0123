//! The JSONL session log: an append-only writer, a tolerant reader, and history restoration
//! for resuming a session.

use crate::event::{EventRecord, SessionEvent};
use crate::model::Message;
use dsh_tools::{FailureCode, InjectedContext, ToolResult};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Appends one JSON object per line, flushed per event.
#[derive(Debug)]
pub struct SessionLogWriter {
    file: File,
}

impl SessionLogWriter {
    /// Opens (creating, or appending to) a log file.
    pub fn open(path: impl AsRef<Path>) -> io::Result<SessionLogWriter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(SessionLogWriter { file })
    }

    /// Appends one record as a line. One write per line, so a crash leaves at most a truncated
    /// last line, which the reader skips.
    pub fn append(&mut self, record: &EventRecord) -> io::Result<()> {
        let mut line = record.to_json_line();
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.flush()
    }
}

/// A line the reader could not use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedLine {
    /// The 1-based line number.
    pub line: usize,
    /// Why it was skipped.
    pub error: String,
}

/// A log as read back: the events that parsed, and the lines that did not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionLog {
    /// The events, in file order.
    pub events: Vec<EventRecord>,
    /// The malformed lines (garbage, a truncated last line), counted and skipped.
    pub skipped: Vec<SkippedLine>,
}

impl SessionLog {
    /// Parses log text. Never fails: a malformed line is skipped and counted; blank lines are
    /// ignored.
    pub fn parse(text: &str) -> SessionLog {
        let mut log = SessionLog::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match EventRecord::from_json_line(line) {
                Ok(record) => log.events.push(record),
                Err(error) => log.skipped.push(SkippedLine {
                    line: i + 1,
                    error: error.to_string(),
                }),
            }
        }
        log
    }

    /// Reads and parses a log file. Invalid UTF-8 is replaced, so only its lines are skipped.
    pub fn read(path: impl AsRef<Path>) -> io::Result<SessionLog> {
        let bytes = std::fs::read(path)?;
        Ok(SessionLog::parse(&String::from_utf8_lossy(&bytes)))
    }
}

/// What a log says about a session, rebuilt for resuming it.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    pub(crate) session_id: Option<String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) history: Vec<Message>,
    pub(crate) inbox: Vec<InjectedContext>,
    pub(crate) last_seq: u64,
}

/// The result given to a call the log shows made but never answered (the session stopped
/// between `assistant/message` and the call's `tool/result`).
const UNANSWERED_CALL: &str = "the session ended before this call returned";

impl Restored {
    /// Replays the events that shape the history: user input, contexts drained into requests
    /// (inbox order), assistant messages and tool results. Contexts injected after the last
    /// request stay pending in the inbox.
    ///
    /// The rebuilt history keeps the pairing invariant whatever the log lost: a call left
    /// without a result (the session stopped mid-turn) gets the error result `Error: the
    /// session ended before this call returned` right after the results it did get, before
    /// the next message; a result that answers no open call (a log cut at the front) is
    /// dropped.
    pub(crate) fn from_log(log: &SessionLog) -> Restored {
        let mut restored = Restored::default();
        // The calls of the last assistant message still waiting for their result.
        let mut open: Vec<String> = Vec::new();
        for record in &log.events {
            restored.last_seq = restored.last_seq.max(record.seq);
            match &record.event {
                SessionEvent::SessionStart {
                    session_id, cwd, ..
                } => {
                    restored
                        .session_id
                        .get_or_insert_with(|| session_id.clone());
                    restored.cwd.get_or_insert_with(|| PathBuf::from(cwd));
                }
                SessionEvent::UserMessage { content } => {
                    restored.answer_unanswered(&mut open);
                    restored.history.push(Message::user(content.clone()));
                }
                SessionEvent::ContextInject { source, content } => {
                    restored.inbox.push(InjectedContext {
                        source: source.clone(),
                        content: content.clone(),
                    });
                }
                SessionEvent::ModelRequest { injected, .. } => {
                    restored.answer_unanswered(&mut open);
                    // A request drains the whole inbox.
                    restored.inbox.clear();
                    restored.history.extend(injected.iter().map(Message::from));
                }
                SessionEvent::AssistantMessage {
                    text,
                    reasoning,
                    tool_calls,
                } => {
                    restored.answer_unanswered(&mut open);
                    open = tool_calls.iter().map(|c| c.call_id.clone()).collect();
                    restored.history.push(Message::Assistant {
                        text: text.clone(),
                        reasoning: reasoning.clone(),
                        tool_calls: tool_calls.clone(),
                    });
                }
                SessionEvent::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    let Some(position) = open.iter().position(|id| id == call_id) else {
                        continue;
                    };
                    open.remove(position);
                    restored.history.push(Message::Tool {
                        call_id: call_id.clone(),
                        content: content.clone(),
                        is_error: *is_error,
                    });
                }
                _ => {}
            }
        }
        restored.answer_unanswered(&mut open);
        restored
    }

    /// Gives every still-open call its synthesized error result, in call order.
    fn answer_unanswered(&mut self, open: &mut Vec<String>) {
        for call_id in open.drain(..) {
            // Shaped as the registry shapes any failure, so the model reads it like the others.
            let result = ToolResult::failure(FailureCode::Aborted, UNANSWERED_CALL);
            self.history.push(Message::Tool {
                call_id,
                content: result.content,
                is_error: true,
            });
        }
    }
}
