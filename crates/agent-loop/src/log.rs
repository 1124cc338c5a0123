//! The JSONL session log: an append-only writer whose lines never pass the reader's limit
//! (`log/bound`), a tolerant reader, and history restoration for resuming a session.

mod bound;

pub use bound::LOG_LINE_TOO_LONG;
pub(crate) use bound::log_line;

use crate::event::{EventRecord, SessionEvent};
use crate::model::Message;
use dsh_tools::json::JsonValue;
use dsh_tools::{ContentBlock, FailureCode, InjectedContext, ToolFailure, ToolResult};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// The longest log line the reader accepts, in bytes (32 MiB). The reader holds at most one
/// line in memory, so this bounds what reading a log costs however large (or endless, like
/// `/dev/zero`) the file is. A longer line is an error ([`LogReadError::LineTooLong`]), not a
/// line to skip: finding where it ends would mean reading it all. The writer never writes one:
/// an event too long for a line has its longest texts cut to fit, each ending in a note of how
/// many bytes went (`… [N bytes cut here: a session log line holds at most 33554432 bytes]`),
/// or, when texts are not its bulk, is written as an `error` event coded
/// [`LOG_LINE_TOO_LONG`].
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// Appends one JSON object per line, flushed per event.
#[derive(Debug)]
pub struct SessionLogWriter {
    file: File,
    path: PathBuf,
}

impl SessionLogWriter {
    /// Opens (creating, or appending to) a log file by its path, following symbolic links as
    /// any path does. A session of a store is written through
    /// [`SessionLogWriter::from_file`] with the file the store checked instead.
    pub fn open(path: impl AsRef<Path>) -> io::Result<SessionLogWriter> {
        let path = path.as_ref();
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(SessionLogWriter::from_file(file, path))
    }

    /// A writer appending to `file`, already open (for appending, or positioned at its end),
    /// whose path is `path` (for messages only: nothing is opened by it).
    pub fn from_file(file: File, path: impl Into<PathBuf>) -> SessionLogWriter {
        SessionLogWriter {
            file,
            path: path.into(),
        }
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as a line, bounded by [`MAX_LINE_BYTES`] (see there). One write per
    /// line, so a crash leaves at most a truncated last line, which the reader skips.
    pub fn append(&mut self, record: &EventRecord) -> io::Result<()> {
        let mut line = log_line(record);
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.flush()
    }
}

/// A write to the session log failed. The agent reports the first one (see
/// [`Agent::log_error`](crate::Agent::log_error)) and closes the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot write the session log {}: {message}", path.display())]
#[non_exhaustive]
pub struct LogWriteError {
    /// The log file.
    pub path: PathBuf,
    /// The kind of I/O error.
    pub kind: io::ErrorKind,
    /// The I/O error's message.
    pub message: String,
}

impl LogWriteError {
    pub(crate) fn new(path: &Path, error: &io::Error) -> LogWriteError {
        LogWriteError {
            path: path.to_owned(),
            kind: error.kind(),
            message: error.to_string(),
        }
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

/// A line kept although part of it was not understood: a `tool/result` whose `error` names a
/// failure code (or shape) this version does not know, or whose content holds a block of a
/// type it does not know, as a log written by a newer version may. The event is kept without
/// those fields; the rest of its content (the text the model read, which names the failure)
/// and the card stay.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairedLine {
    /// The 1-based line number.
    pub line: usize,
    /// The JSON pointer of the field that was set aside, e.g. `/error` or `/content/0`; when
    /// several were, their pointers (`/error` first), separated by `, `.
    pub pointer: String,
    /// That field's JSON text, kept as text (several: in the same order, separated by `, `).
    pub text: String,
}

/// Why a log could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogReadError {
    /// The file could not be opened or read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A line is longer than the limit ([`MAX_LINE_BYTES`] for [`SessionLog::read`]).
    #[error("line {line} is longer than {limit} bytes")]
    LineTooLong {
        /// The 1-based line number.
        line: usize,
        /// The limit in bytes.
        limit: usize,
    },
}

/// One line of a log, as the reader understood it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LogEntry {
    /// An event.
    Event(EventRecord),
    /// An event kept without a field this version does not understand.
    Repaired(EventRecord, RepairedLine),
    /// A line that is not an event (garbage, a truncated last line).
    Skipped(SkippedLine),
}

/// The lines of a log, read one at a time with at most one line in memory (see
/// [`SessionLog::lines`]). Blank lines are passed over; invalid UTF-8 is replaced, so only its
/// line is affected. After an error the iterator ends.
#[derive(Debug)]
pub struct LogLines<R> {
    reader: R,
    line: usize,
    limit: usize,
    buffer: Vec<u8>,
    finished: bool,
}

impl<R: BufRead> LogLines<R> {
    /// Reads log lines from `reader`, refusing lines longer than `limit` bytes.
    pub fn new(reader: R, limit: usize) -> LogLines<R> {
        LogLines {
            reader,
            line: 0,
            limit,
            buffer: Vec::new(),
            finished: false,
        }
    }

    fn next_line(&mut self) -> Result<Option<LogEntry>, LogReadError> {
        loop {
            self.buffer.clear();
            // One byte over the limit tells a line of exactly `limit` bytes without its newline
            // from a longer one, without reading the longer one further.
            let cap = u64::try_from(self.limit)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            let read = (&mut self.reader)
                .take(cap)
                .read_until(b'\n', &mut self.buffer)?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.buffer.last() == Some(&b'\n') {
                self.buffer.pop();
            }
            if self.buffer.len() > self.limit {
                return Err(LogReadError::LineTooLong {
                    line: self.line,
                    limit: self.limit,
                });
            }
            let text = String::from_utf8_lossy(&self.buffer);
            if text.trim().is_empty() {
                continue;
            }
            return Ok(Some(parse_line(self.line, &text)));
        }
    }
}

impl<R: BufRead> Iterator for LogLines<R> {
    type Item = Result<LogEntry, LogReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let next = self.next_line().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.finished = true;
        }
        next
    }
}

/// Parses one non-blank line.
fn parse_line(line: usize, text: &str) -> LogEntry {
    match EventRecord::from_json_line(text) {
        Ok(record) => LogEntry::Event(record),
        Err(error) => match repair(line, text) {
            Some((record, repaired)) => LogEntry::Repaired(record, repaired),
            None => LogEntry::Skipped(SkippedLine {
                line,
                error: error.to_string(),
            }),
        },
    }
}

/// Keeps a `tool/result` whose `error` or content blocks this version cannot read (a failure
/// code or a block type added later): the event without them, and each of them as text.
fn repair(line: usize, text: &str) -> Option<(EventRecord, RepairedLine)> {
    // Held exactly, so the fields' text keeps the writer's key order and numbers.
    let JsonValue::Object(mut object) = JsonValue::parse(text).ok()? else {
        return None;
    };
    if object.get("type").and_then(JsonValue::as_str) != Some("tool/result") {
        return None;
    }
    let mut set_aside: Vec<(String, String)> = Vec::new();
    if object
        .get("error")
        .is_some_and(|error| !understood::<ToolFailure>(error))
        && let Some(error) = object.remove("error")
    {
        set_aside.push((String::from("/error"), error.to_string()));
    }
    if let Some(JsonValue::Array(blocks)) = object.get_mut("content") {
        let mut index = 0;
        blocks.retain(|block| {
            let known = understood::<ContentBlock>(block);
            if !known {
                set_aside.push((format!("/content/{index}"), block.to_string()));
            }
            index += 1;
            known
        });
    }
    if set_aside.is_empty() {
        return None;
    }
    let record = EventRecord::from_json_line(&JsonValue::Object(object).to_string()).ok()?;
    let (pointers, texts): (Vec<String>, Vec<String>) = set_aside.into_iter().unzip();
    Some((
        record,
        RepairedLine {
            line,
            pointer: pointers.join(", "),
            text: texts.join(", "),
        },
    ))
}

/// Whether this version reads `value` as a `T`.
fn understood<T: serde::de::DeserializeOwned>(value: &JsonValue) -> bool {
    serde_json::from_str::<T>(&value.to_string()).is_ok()
}

/// A log as read back: the events that parsed, and the lines that did not.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct SessionLog {
    /// The events, in file order (repaired ones included).
    pub events: Vec<EventRecord>,
    /// The malformed lines (garbage, a truncated last line), counted and skipped.
    pub skipped: Vec<SkippedLine>,
    /// The lines kept without a field this version does not understand.
    pub repaired: Vec<RepairedLine>,
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
            log.push(parse_line(i + 1, line));
        }
        log
    }

    /// Reads and parses a log file, a line at a time. Invalid UTF-8 is replaced, so only its
    /// lines are skipped. Fails when the file cannot be read or a line is longer than
    /// [`MAX_LINE_BYTES`].
    pub fn read(path: impl AsRef<Path>) -> Result<SessionLog, LogReadError> {
        let mut log = SessionLog::default();
        for entry in SessionLog::lines(path)? {
            log.push(entry?);
        }
        Ok(log)
    }

    /// The lines of a log file, streamed (at most [`MAX_LINE_BYTES`] in memory at a time), for
    /// a reader that does not need the whole log at once.
    pub fn lines(path: impl AsRef<Path>) -> io::Result<LogLines<BufReader<File>>> {
        let file = File::open(path)?;
        Ok(LogLines::new(BufReader::new(file), MAX_LINE_BYTES))
    }

    pub(crate) fn push(&mut self, entry: LogEntry) {
        match entry {
            LogEntry::Event(record) => self.events.push(record),
            LogEntry::Repaired(record, repaired) => {
                self.events.push(record);
                self.repaired.push(repaired);
            }
            LogEntry::Skipped(skipped) => self.skipped.push(skipped),
        }
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
    /// Every job id the log names (`job/start`, `job/end`), so numbering continues past them.
    pub(crate) job_ids: Vec<String>,
    /// The jobs that started and never ended (the process running them died), in start order.
    pub(crate) lost_jobs: Vec<LostJob>,
}

/// A job a log shows started and never ended, as its `job/start` named it.
#[derive(Debug)]
pub(crate) struct LostJob {
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) label: String,
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
        // The lost jobs are found once the whole log is read, so the answer does not hang on
        // the order of a job's two events (the runtime tells a start before the job can end,
        // but logs written before it did may hold the end first).
        let mut started: Vec<LostJob> = Vec::new();
        let mut ended: std::collections::HashSet<String> = std::collections::HashSet::new();
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
                SessionEvent::JobStart {
                    job_id,
                    kind,
                    label,
                } => {
                    restored.job_ids.push(job_id.clone());
                    started.push(LostJob {
                        id: job_id.clone(),
                        kind: kind.clone(),
                        label: label.clone(),
                    });
                }
                SessionEvent::JobEnd { job_id, .. } => {
                    restored.job_ids.push(job_id.clone());
                    ended.insert(job_id.clone());
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
        restored.lost_jobs = started
            .into_iter()
            .filter(|job| !ended.contains(&job.id))
            .collect();
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
