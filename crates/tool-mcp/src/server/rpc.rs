//! JSON-RPC 2.0 as the server reads it: one message per line, no batches, each line bounded in
//! size ([`MAX_CLIENT_MESSAGE_BYTES`]) and in JSON values ([`MAX_CLIENT_MESSAGE_VALUES`])
//! before anything parses it, and the error answers JSON-RPC prescribes for what is not a
//! message. The transport (`lines`) hands rmcp what it can read and answers the rest with
//! these.

use serde_json::{Value, json};
use std::collections::HashMap;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// JSON-RPC's error codes for what a client sent.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// The longest message a client may send the server, newline included: 16 MiB, rmcp's own
/// line limit. A line that never ends must not grow without bound; a longer one is read
/// through a small buffer and discarded, never kept, and answered with `-32600` and a `null`
/// id (its id was not read).
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The most JSON values (every scalar, array and object, nested ones included) one message
/// from a client may hold: 100 000. Parsing expands each value: a 16 MiB line of `[0,0,…]` is
/// eight million values, which cost hundreds of MiB as `serde_json::Value`s and over a GiB as
/// rmcp's typed messages (about 200 bytes a value). A tool call holds a few dozen. The values
/// are counted by a scan of the bytes that skips strings, before any parse; a message with
/// more is answered with `-32600` and its id when one can be read.
pub const MAX_CLIENT_MESSAGE_VALUES: usize = 100_000;

/// The refusal of a message of more than [`MAX_CLIENT_MESSAGE_VALUES`] values, with its id
/// when it can be read, found by a scan that allocates nothing per value; `None` for one
/// within it.
pub(crate) fn too_many_values(text: &str) -> Option<(Value, RpcError)> {
    if count_values(text.as_bytes(), MAX_CLIENT_MESSAGE_VALUES) <= MAX_CLIENT_MESSAGE_VALUES {
        return None;
    }
    let error = RpcError::invalid_request(format!(
        "too many values: a message holds at most {MAX_CLIENT_MESSAGE_VALUES} JSON values"
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
pub(crate) enum Frame {
    /// A message is in the buffer (its last line may lack the newline).
    Message,
    /// A line longer than the limit was read and thrown away, up to its newline.
    TooLong,
    /// The input is over.
    End,
}

/// Reads the next line into `line`, keeping at most `limit` bytes: a longer one is consumed to
/// its end and reported as [`Frame::TooLong`], with nothing kept.
pub(crate) async fn read_message<R: AsyncBufRead + Unpin>(
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
pub(crate) struct RpcError {
    code: i64,
    message: &'static str,
    data: Value,
}

impl RpcError {
    /// Params that do not read as the method's: the reader's complaint is the data.
    pub(crate) fn invalid_params(why: impl std::fmt::Display) -> RpcError {
        RpcError::new(INVALID_PARAMS, "Invalid params", why)
    }

    /// A message that is not a valid request (or notification, or response): `why` says how.
    pub(crate) fn invalid_request(why: impl std::fmt::Display) -> RpcError {
        RpcError::new(INVALID_REQUEST, "Invalid Request", why)
    }

    /// The answer to a line over [`MAX_CLIENT_MESSAGE_BYTES`], which was discarded unread: its
    /// id is unknown, so it goes out with a `null` one.
    pub(crate) fn too_long() -> RpcError {
        RpcError::invalid_request(format!(
            "a message longer than {MAX_CLIENT_MESSAGE_BYTES} bytes ({} MiB) was discarded",
            MAX_CLIENT_MESSAGE_BYTES / (1024 * 1024)
        ))
    }

    /// The answer to a line that is not UTF-8, which JSON always is: its id is unknown.
    pub(crate) fn not_utf8() -> RpcError {
        RpcError::new(PARSE_ERROR, "Parse error", "a message is UTF-8 text")
    }

    fn new(code: i64, message: &'static str, why: impl std::fmt::Display) -> RpcError {
        RpcError {
            code,
            message,
            data: json!(why.to_string()),
        }
    }

    /// The error response to a request `id` (`null` when it could not be read), as a line.
    pub(crate) fn response(&self, id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id,
               "error": {"code": self.code, "message": self.message, "data": self.data}})
    }
}

/// What a line that is a JSON-RPC message is, as far as the server's answer to it goes.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// A call that wants an answer.
    Request { id: Value, method: String },
    /// A notification, or the client's answer to a request: neither is answered.
    Unanswered,
}

/// Reads one line as JSON-RPC 2.0. `Err` carries the error response to send (with the
/// request's id when it could be read, else `null`); `Ok(None)` is a blank line, which is
/// skipped.
pub(crate) fn parse(line: &str) -> Result<Option<Incoming>, (Value, RpcError)> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    if let Some(refused) = too_many_values(line) {
        return Err(refused);
    }
    let value: Value = serde_json::from_str(line)
        .map_err(|e| (Value::Null, RpcError::new(PARSE_ERROR, "Parse error", e)))?;
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
        return match id {
            Some(id) if !id.is_null() => Ok(Some(Incoming::Request { id, method })),
            Some(_) => invalid(Value::Null, "a request's `id` must not be null"),
            None => Ok(Some(Incoming::Unanswered)),
        };
    }
    let Some(id) = id else {
        return invalid(
            Value::Null,
            "a message without `method` is a response, which has an `id`",
        );
    };
    match (object.remove("result"), object.remove("error")) {
        (Some(_), None) | (None, Some(_)) => Ok(Some(Incoming::Unanswered)),
        _ => invalid(id, "a response has exactly one of `result` and `error`"),
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
    fn requests_are_told_from_messages_that_want_no_answer() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#),
            Ok(Some(Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
            }))
        );
        for unanswered in [
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","id":0,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":1,"message":"no"}}"#,
        ] {
            assert_eq!(
                parse(unanswered),
                Ok(Some(Incoming::Unanswered)),
                "{unanswered}"
            );
        }
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
            error(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
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
        assert_eq!(
            error(r#"{"jsonrpc":"2.0","id":6,"result":{},"error":{}}"#),
            (json!(6), INVALID_REQUEST)
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
            "0,".repeat(MAX_CLIENT_MESSAGE_VALUES)
        );
        let (id, error) = too_many_values(&many).unwrap();
        assert_eq!((id, error.code), (json!("big"), INVALID_REQUEST));
        // Within the cap, and an id that is no string or number: not refused, or no id.
        assert_eq!(too_many_values(r#"{"id":1,"params":[0,0]}"#), None);
        assert_eq!(request_id(r#"{"id":[1],"params":0}"#), Value::Null);
        assert_eq!(request_id("{not json"), Value::Null);
    }
}
