//! JSON-RPC 2.0 as ACP frames it: one message per line on stdin and stdout, no batches.
//!
//! Incoming lines become [`Incoming`] values or a protocol error to send back; outgoing
//! messages go through one `Outbox`, whose writer task keeps them whole and in order, so a
//! prompt's updates always precede its response. The framing half (the bounded line reader,
//! [`parse`] and the error replies) is public, so another JSON-RPC server on stdio (`dsh-agent
//! mcp`) answers the same bad input the same way.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, oneshot};

/// The most messages queued for stdout and not yet written before the reader stops reading
/// stdin (`Outbox::room`): a client that does not read its stdout stops being read, instead
/// of having its every line's answer kept for it.
pub const MAX_UNWRITTEN: usize = 64;

/// JSON-RPC's error code for a message that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's error code for a message that is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's error code for a method this server does not have.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's error code for params that do not read as the method's.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's error code for a failure of the server's own.
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP's error code for a resource (here: a session) that does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// The longest message a client may send, newline included: a line that never ends must not
/// grow without bound, and a longer one is read through and discarded, never kept. Prompts
/// carry text and resource links, far below this; 16 MiB is also rmcp's own line limit.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The most JSON values (every scalar, array and object, nested ones included) a message may
/// hold. Parsing expands each value: a 16 MiB line of `[0,0,…]` is eight million values, which
/// cost hundreds of MiB as `serde_json::Value`s and over a GiB as rmcp's typed messages. A
/// prompt or a tool call holds a few dozen; [`too_many_values`] counts them before any parse.
pub const MAX_MESSAGE_VALUES: usize = 100_000;

/// The refusal of a message of more than [`MAX_MESSAGE_VALUES`] values, with its id when it
/// can be read, found by a scan that allocates nothing per value; `None` for one within it.
pub fn too_many_values(text: &str) -> Option<(Value, RpcError)> {
    if count_values(text.as_bytes(), MAX_MESSAGE_VALUES) <= MAX_MESSAGE_VALUES {
        return None;
    }
    let error = RpcError::invalid_request(format!(
        "too many values: a message holds at most {MAX_MESSAGE_VALUES} JSON values"
    ));
    Some((request_id(text), error))
}

/// The number of JSON values in `text`, counted up to just past `cap`: one per element and
/// member value, and the message itself. Strings are skipped whole, so their text does not
/// count; malformed input is counted as far as it goes (the parser then names its fault).
fn count_values(text: &[u8], cap: usize) -> usize {
    let mut values = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            // A comma starts the next element or member; a bracket the first one (an empty
            // container counts one too many, which is harmless).
            b',' | b'[' | b'{' => {
                values += 1;
                if values > cap {
                    return values;
                }
            }
            _ => {}
        }
    }
    values
}

/// A message's `id` when it is a string or a number, read without building its other values
/// (they are skipped); `null` otherwise.
fn request_id(text: &str) -> Value {
    // The top level's members, each kept as its raw text: nothing under them is built.
    let members: HashMap<&str, &serde_json::value::RawValue> = match serde_json::from_str(text) {
        Ok(members) => members,
        Err(_) => return Value::Null,
    };
    members
        .get("id")
        .map(|raw| raw.get())
        .filter(|raw| raw.starts_with(|c: char| c == '"' || c == '-' || c.is_ascii_digit()))
        .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
        .unwrap_or(Value::Null)
}

/// What [`read_message`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A message is in the buffer (its last line may lack the newline).
    Message,
    /// A line longer than the limit was read and thrown away, up to its newline.
    TooLong,
    /// The input is over.
    End,
}

/// Reads the next line into `line`, keeping at most `limit` bytes: a longer one is consumed to
/// its end and reported as [`Frame::TooLong`], with nothing kept.
pub async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Frame> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Frame::TooLong,
                (false, true) => Frame::End,
                (false, false) => Frame::Message,
            });
        }
        let (used, ends) = match available.iter().position(|byte| *byte == b'\n') {
            Some(newline) => (newline + 1, true),
            None => (available.len(), false),
        };
        if !too_long {
            if line.len() + used > limit {
                too_long = true;
                *line = Vec::new();
            } else {
                line.extend_from_slice(&available[..used]);
            }
        }
        reader.consume(used);
        if ends {
            return Ok(if too_long {
                Frame::TooLong
            } else {
                Frame::Message
            });
        }
    }
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// The error code ([`INVALID_PARAMS`] and the others).
    pub code: i64,
    /// The short description of the code.
    pub message: String,
    /// What went wrong in particular, when said.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message`, and no data.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data`.
    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    /// Params that do not read as the method's: the reader's complaint is the data.
    pub fn invalid_params(why: impl std::fmt::Display) -> RpcError {
        RpcError::new(INVALID_PARAMS, "Invalid params").with_data(json!(why.to_string()))
    }

    /// A failure of the server's own: `why` is the data.
    pub fn internal(why: impl std::fmt::Display) -> RpcError {
        RpcError::new(INTERNAL_ERROR, "Internal error").with_data(json!(why.to_string()))
    }

    /// A message that is not a valid request (or notification, or response): `why` says how.
    pub fn invalid_request(why: impl std::fmt::Display) -> RpcError {
        RpcError::new(INVALID_REQUEST, "Invalid Request").with_data(json!(why.to_string()))
    }

    /// The answer to a line over [`MAX_MESSAGE_BYTES`], which was discarded unread: its id is
    /// unknown, so it goes out with a `null` one.
    pub fn too_long() -> RpcError {
        RpcError::invalid_request(format!(
            "a message longer than {MAX_MESSAGE_BYTES} bytes ({} MiB) was discarded",
            MAX_MESSAGE_BYTES / (1024 * 1024)
        ))
    }

    /// The answer to a line that is not UTF-8, which JSON always is: its id is unknown.
    pub fn not_utf8() -> RpcError {
        RpcError::new(PARSE_ERROR, "Parse error").with_data(json!("a message is UTF-8 text"))
    }

    /// The error response to a request `id` (`null` when it could not be read), as a line.
    pub fn response(&self, id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_json()})
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// One message read from the client.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A call that wants an answer.
    Request {
        /// The request's id, a string or a number.
        id: Value,
        /// The method called.
        method: String,
        /// Its params (`null` when there are none).
        params: Value,
    },
    /// A call that wants none.
    Notification {
        /// The method called.
        method: String,
        /// Its params (`null` when there are none).
        params: Value,
    },
    /// The client's answer to a request of ours.
    Response {
        /// The id of our request.
        id: Value,
        /// Its result, or its error.
        outcome: Result<Value, RpcError>,
    },
}

/// Reads one line. `Err` carries the error response to send (with the request's id when it
/// could be read, else `null`); `Ok(None)` is a blank line, which is skipped.
pub fn parse(line: &str) -> Result<Option<Incoming>, (Value, RpcError)> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    if let Some(refused) = too_many_values(line) {
        return Err(refused);
    }
    let value: Value = serde_json::from_str(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(PARSE_ERROR, "Parse error").with_data(json!(e.to_string())),
        )
    })?;
    let invalid = |id: Value, why: &str| Err((id, RpcError::invalid_request(why)));
    let Value::Object(mut object) = value else {
        return invalid(
            Value::Null,
            "a message is a JSON object (batches are not supported)",
        );
    };
    let id = object.remove("id");
    // An id is a string or a number; a null id is only an error response's.
    if let Some(id) = &id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return invalid(Value::Null, "`id` must be a string or a number");
    }
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid(id.unwrap_or(Value::Null), "`jsonrpc` must be \"2.0\"");
    }
    if let Some(method) = object.remove("method") {
        let Value::String(method) = method else {
            return invalid(id.unwrap_or(Value::Null), "`method` must be a string");
        };
        let params = object.remove("params").unwrap_or(Value::Null);
        if !(params.is_object() || params.is_array() || params.is_null()) {
            return invalid(
                id.unwrap_or(Value::Null),
                "`params` must be an object or an array",
            );
        }
        return Ok(Some(match id {
            Some(id) if !id.is_null() => Incoming::Request { id, method, params },
            Some(_) => return invalid(Value::Null, "a request's `id` must not be null"),
            None => Incoming::Notification { method, params },
        }));
    }
    let Some(id) = id else {
        return invalid(
            Value::Null,
            "a message without `method` is a response, which has an `id`",
        );
    };
    let outcome = match (object.remove("result"), object.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(RpcError {
            code: error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
            message: error["message"].as_str().unwrap_or_default().to_owned(),
            data: error.get("data").cloned(),
        }),
        _ => return invalid(id, "a response has exactly one of `result` and `error`"),
    };
    Ok(Some(Incoming::Response { id, outcome }))
}

/// The requests of ours waiting for the client's answer, by id.
type Waiting = HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>;

/// The one way out to the client, shared by every task: requests of ours wait for their
/// answers here too.
#[derive(Clone, Debug)]
pub(crate) struct Outbox {
    /// Messages for the writer; `None` tells it to stop once what came before is written
    /// (the approvers hold outboxes in registries that may outlive the connection, so the
    /// writer cannot wait for every sender to go).
    sender: mpsc::UnboundedSender<Option<Value>>,
    pending: Arc<Mutex<Waiting>>,
    next_id: Arc<AtomicU64>,
    backlog: Arc<Backlog>,
}

/// How many messages are queued and not yet written, and the writer's word when it writes one.
#[derive(Debug, Default)]
struct Backlog {
    unwritten: AtomicUsize,
    written: Notify,
    /// The writer stopped (stdout failed): nothing will be written any more.
    gone: AtomicBool,
}

impl Backlog {
    fn written(&self) {
        self.unwritten.fetch_sub(1, Ordering::SeqCst);
        self.written.notify_waiters();
    }

    fn gone(&self) {
        self.gone.store(true, Ordering::SeqCst);
        self.written.notify_waiters();
    }
}

impl Outbox {
    /// An outbox and the writer task that drains it to `stdout` (the client's input), which
    /// ends at [`Outbox::close`] or when writing fails.
    pub(crate) fn writer<W>(mut stdout: W) -> (Outbox, tokio::task::JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, mut receiver) = mpsc::unbounded_channel::<Option<Value>>();
        let outbox = Outbox::over(sender);
        let backlog = Arc::clone(&outbox.backlog);
        let writer = tokio::spawn(async move {
            while let Some(Some(message)) = receiver.recv().await {
                let mut line = message.to_string();
                line.push('\n');
                if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err()
                {
                    tracing::warn!("the ACP client stopped reading stdout");
                    backlog.gone();
                    return;
                }
                backlog.written();
            }
        });
        (outbox, writer)
    }

    /// An outbox that hands each message to `sender` (tests read them from its receiver).
    pub(crate) fn over(sender: mpsc::UnboundedSender<Option<Value>>) -> Outbox {
        Outbox {
            sender,
            pending: Arc::default(),
            next_id: Arc::new(AtomicU64::new(0)),
            backlog: Arc::default(),
        }
    }

    fn send(&self, message: Value) {
        self.backlog.unwritten.fetch_add(1, Ordering::SeqCst);
        // The writer is gone only once stdout failed; nobody is left to tell.
        let _ = self.sender.send(Some(message));
    }

    /// Waits until fewer than [`MAX_UNWRITTEN`] messages wait for stdout (or stdout failed,
    /// when waiting would be for ever): the reader's backpressure.
    pub(crate) async fn room(&self) {
        loop {
            let written = self.backlog.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if self.backlog.gone.load(Ordering::SeqCst)
                || self.backlog.unwritten.load(Ordering::SeqCst) < MAX_UNWRITTEN
            {
                return;
            }
            written.await;
        }
    }

    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub(crate) fn respond(&self, id: Value, outcome: Result<Value, RpcError>) {
        match outcome {
            Ok(result) => self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(error) => self.send(error.response(id)),
        }
    }

    /// Sends a request to the client and waits for its answer; an error when the connection
    /// closed first.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, answer);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        answered
            .await
            .unwrap_or_else(|_| Err(RpcError::internal("the connection closed")))
    }

    /// Hands the client's answer to the request waiting for it; an answer to nothing we
    /// asked is logged and dropped.
    pub(crate) fn answer(&self, id: &Value, outcome: Result<Value, RpcError>) {
        let waiting = id.as_u64().and_then(|id| {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id)
        });
        match waiting {
            Some(waiting) => {
                let _ = waiting.send(outcome);
            }
            None => tracing::warn!(%id, "an ACP response to no request of ours"),
        }
    }

    /// Fails every request still waiting, and stops the writer once what was sent before is
    /// written: the connection has closed.
    pub(crate) fn close(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let _ = self.sender.send(None);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn error(line: &str) -> (Value, i64) {
        let (id, error) = parse(line).unwrap_err();
        (id, error.code)
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert_eq!(
            parse(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#
            ),
            Ok(Some(Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({"protocolVersion": 1}),
            }))
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Ok(Some(Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({"sessionId": "s"}),
            }))
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}"#),
            Ok(Some(Incoming::Response {
                id: json!(0),
                outcome: Ok(json!({"outcome": {"outcome": "cancelled"}})),
            }))
        );
        assert_eq!(parse("  "), Ok(None));
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_skipped_whole_and_the_next_one_read() {
        let mut input: &[u8] = b"{\"a\":1}\nxxxxxxxxxxxxxxxxxxxx\n{\"b\":2}\nyyyyyyyyyyyyyyyyyyyy";
        let mut line = Vec::new();
        let mut frames = Vec::new();
        loop {
            let frame = read_message(&mut input, &mut line, 10).await.unwrap();
            if frame == Frame::End {
                break;
            }
            frames.push((frame, String::from_utf8(line.clone()).unwrap()));
        }
        assert_eq!(
            frames,
            vec![
                (Frame::Message, "{\"a\":1}\n".to_owned()),
                (Frame::TooLong, String::new()),
                (Frame::Message, "{\"b\":2}\n".to_owned()),
                (Frame::TooLong, String::new()),
            ]
        );
        // Exactly the limit, newline included, still fits.
        let mut input: &[u8] = b"123456789\nabc";
        assert_eq!(
            read_message(&mut input, &mut line, 10).await.unwrap(),
            Frame::Message
        );
        assert_eq!(line, b"123456789\n");
        assert_eq!(
            read_message(&mut input, &mut line, 10).await.unwrap(),
            Frame::Message
        );
        assert_eq!(line, b"abc");
    }

    #[test]
    fn malformed_messages_get_the_json_rpc_error_that_names_them() {
        assert_eq!(error("{not json"), (Value::Null, PARSE_ERROR));
        assert_eq!(error("[1, 2]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            error(r#"{"id":3,"method":"x"}"#),
            (json!(3), INVALID_REQUEST)
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":4,"method":7}"#),
            (json!(4), INVALID_REQUEST)
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":5,"method":"x","params":"text"}"#),
            (json!(5), INVALID_REQUEST)
        );
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","result":{}}"#),
            (Value::Null, INVALID_REQUEST)
        );
    }

    #[test]
    fn values_are_counted_outside_strings_and_a_message_past_the_cap_refused_with_its_id() {
        for (text, values) in [
            ("{}", 2),
            ("[1,2,3]", 4),
            (r#"{"a":[1,{"b":2}],"c":"x,[{"}"#, 6),
            (r#"{"a":"quote \" , [ escaped","b":1}"#, 3),
        ] {
            assert_eq!(count_values(text.as_bytes(), usize::MAX), values, "{text}");
        }
        let many = format!(
            r#"{{"jsonrpc":"2.0","id":"big","method":"m","params":[{}0]}}"#,
            "0,".repeat(MAX_MESSAGE_VALUES)
        );
        let (id, error) = too_many_values(&many).unwrap();
        assert_eq!((id, error.code), (json!("big"), INVALID_REQUEST));
        // Within the cap, and an id that is no string or number: not refused, or no id.
        assert_eq!(too_many_values(r#"{"id":1,"params":[0,0]}"#), None);
        assert_eq!(request_id(r#"{"id":[1],"params":0}"#), Value::Null);
        assert_eq!(request_id("{not json"), Value::Null);
    }

    #[tokio::test]
    async fn a_request_of_ours_gets_the_answer_with_its_id() {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let outbox = Outbox::over(sender);
        let asking = {
            let outbox = outbox.clone();
            tokio::spawn(async move {
                outbox
                    .request("session/request_permission", json!({}))
                    .await
            })
        };
        let sent = receiver.recv().await.unwrap().unwrap();
        assert_eq!(sent["method"], json!("session/request_permission"));
        outbox.answer(
            &sent["id"],
            Ok(json!({"outcome": {"outcome": "cancelled"}})),
        );
        assert_eq!(
            asking.await.unwrap(),
            Ok(json!({"outcome": {"outcome": "cancelled"}}))
        );
    }
}
