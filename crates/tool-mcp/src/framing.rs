//! The byte-stream transport: one JSON-RPC message a line, bounded in size and depth.
//!
//! rmcp's own stdio transport drops a line over its size limit, and `serde_json` cannot read a
//! message that nests deeper than 128 levels, which rmcp drops too: either way the call it
//! answers would wait for its timeout. This transport reads the lines itself, measures each
//! one before it is parsed, and turns a message past a limit into an answer: the call whose
//! id a bounded scan finds fails at once, a tool list loses only its tools that are too deep,
//! and a message with no id closes the connection (every call fails at once). The scan also
//! counts the message's JSON values, so a message of millions of small values is refused
//! before a parse would build a tree of them. The scan keeps a few bytes per level it follows
//! and a record only of the listed tools that nest too deep, at most [`MAX_REFUSED_TOOLS`].

use rmcp::RoleClient;
use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::connect::{ByteReader, ByteWriter};

/// The longest message a server may send over a byte stream, in bytes, without its newline:
/// 16 MiB, rmcp's own bound. A longer answer fails its call at once with
/// `MCP_MALFORMED_RESULT`.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How deeply arrays and objects may nest in one message from a server, counted from the
/// JSON-RPC message itself (a call's `structuredContent` starts at level 3, a listed tool's
/// `inputSchema` at level 5). A deeper answer fails its call at once with
/// `MCP_MALFORMED_RESULT`; a deeper tool in a tool list is refused alone. It stays below
/// `serde_json`'s limit of 128, past which a message cannot be read at all.
pub const MAX_MESSAGE_DEPTH: usize = 100;

/// How many JSON values one message from a server may hold (every array, object, string,
/// number, `true`, `false` and `null`, at any depth, keys not counted): 1 000 000. A message
/// is counted before it is parsed, and a parse builds a tree of its values, so this bounds
/// what one message costs in memory. A message with more fails its call at once with
/// `MCP_MALFORMED_RESULT`.
pub const MAX_MESSAGE_VALUES: usize = 1_000_000;

/// The longest id a scan reads; a longer one is no id of ours.
const MAX_ID_BYTES: usize = 256;

/// The most tools of one list that are refused alone for nesting too deep; a list with more
/// fails as a whole. A refused tool takes at least [`MAX_MESSAGE_DEPTH`] bytes, so fewer
/// than this fit in a message anyway unless they are short, and this bounds the scan's records.
const MAX_REFUSED_TOOLS: usize = 10_000;

/// The longest tool name a scan reads to name a refused tool.
const MAX_NAME_BYTES: usize = 1024;

/// The JSON-RPC code of the answer that stands in for one past a limit.
const INTERNAL_ERROR: i64 = -32603;

/// Which limit a message passed.
#[derive(Clone, Copy, Debug)]
enum Breach {
    Size,
    Values,
    Depth,
}

impl Breach {
    fn describe(self) -> String {
        match self {
            Breach::Size => format!(
                "a message over the {MAX_MESSAGE_BYTES}-byte ({} MiB) limit of one message",
                MAX_MESSAGE_BYTES >> 20
            ),
            Breach::Values => format!(
                "a message of more than the {MAX_MESSAGE_VALUES} JSON values one message may hold"
            ),
            Breach::Depth => format!(
                "a message that nests deeper than the {MAX_MESSAGE_DEPTH} levels one message \
                 may nest"
            ),
        }
    }
}

/// What the transport of one connection refused, read by the calls and the tool listing.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    /// The requests sent and not yet answered or ended: whether each lists tools.
    pending: Mutex<HashMap<RequestId, bool>>,
    /// Answers that stood in for a message past a limit, by request id: why.
    calls: Mutex<HashMap<RequestId, String>>,
    /// Why the connection was closed, when a message past a limit had no id of ours.
    connection: Mutex<Option<String>>,
    /// Tools left out of tool lists: their names and why.
    tools: Mutex<Vec<(String, String)>>,
}

impl Refusals {
    /// Why the answer to `id` was refused, once.
    pub(crate) fn call(&self, id: &RequestId) -> Option<String> {
        lock(&self.calls).remove(id)
    }

    /// Forgets the request `id`, whose call has ended (answered, timed out, cancelled): a
    /// late answer to it is no answer of a pending request, and nothing about it is kept.
    pub(crate) fn end(&self, id: &RequestId) {
        lock(&self.pending).remove(id);
        lock(&self.calls).remove(id);
    }

    /// How many requests and refusals are kept, for the tests of [`Refusals::end`].
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        (lock(&self.pending).len(), lock(&self.calls).len())
    }

    /// Why the connection was closed by the transport, if it was.
    pub(crate) fn connection(&self) -> Option<String> {
        lock(&self.connection).clone()
    }

    /// The tools left out of the tool lists read since the last call.
    pub(crate) fn take_tools(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *lock(&self.tools))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The client's transport over a byte stream: rmcp's writer, and a reader of bounded lines.
pub(crate) struct BoundedTransport {
    server: String,
    writer: AsyncRwTransport<RoleClient, tokio::io::Empty, ByteWriter>,
    reader: BufReader<ByteReader>,
    /// The line being read; kept across cancelled reads (`receive` is polled in a `select!`).
    line: Vec<u8>,
    /// Set once a line over the limit has been answered, until its newline is read.
    discarding: bool,
    refusals: Arc<Refusals>,
}

impl BoundedTransport {
    pub(crate) fn new(
        server: &str,
        reader: ByteReader,
        writer: ByteWriter,
        refusals: Arc<Refusals>,
    ) -> BoundedTransport {
        BoundedTransport {
            server: server.to_owned(),
            writer: AsyncRwTransport::new(tokio::io::empty(), writer),
            reader: BufReader::new(reader),
            line: Vec::new(),
            discarding: false,
            refusals,
        }
    }

    /// Reads one line into `self.line`, never past [`MAX_MESSAGE_BYTES`]; `Ok(false)` at the
    /// end of the stream. A line over the limit keeps its first bytes there (for its id) and
    /// returns `Err(())`; the rest of it is skipped by the next reads. Cancellation-safe: what
    /// is read is consumed in the same step as it is kept.
    async fn read_line(&mut self) -> Result<bool, ()> {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    tracing::warn!(server = %self.server, "MCP server stream: {error}");
                    return Ok(false);
                }
            };
            if available.is_empty() {
                return Ok(false);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if self.discarding {
                self.discarding = newline.is_none();
                self.reader.consume(take);
                continue;
            }
            let content = newline.unwrap_or(take);
            if self.line.len() + content > MAX_MESSAGE_BYTES {
                let room = MAX_MESSAGE_BYTES - self.line.len();
                self.line.extend_from_slice(&available[..room]);
                self.discarding = newline.is_none();
                self.reader.consume(take);
                return Err(());
            }
            self.line.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            if newline.is_some() {
                return Ok(true);
            }
        }
    }

    /// The message that stands in for `line`, or `None` for nothing to deliver; `Err` closes
    /// the connection.
    fn message(
        &mut self,
        line: &[u8],
        oversized: bool,
    ) -> Result<Option<RxJsonRpcMessage<RoleClient>>, ()> {
        let shape = Shape::of(line);
        let id = shape
            .id
            .as_ref()
            .and_then(|range| parse_id(&line[range.clone()]));
        let lists_tools = id
            .as_ref()
            .and_then(|id| lock(&self.refusals.pending).get(id).copied());
        let breach = if oversized {
            Some(Breach::Size)
        } else if shape.values > MAX_MESSAGE_VALUES {
            Some(Breach::Values)
        } else if shape.depth > MAX_MESSAGE_DEPTH {
            Some(Breach::Depth)
        } else {
            None
        };
        let Some(breach) = breach else {
            return Ok(self.parse(line, id.as_ref()));
        };
        if let (Some(id), None) = (&id, lists_tools) {
            // An answer to a call that has ended (timed out, cancelled), or to none: rmcp
            // would drop it too.
            tracing::debug!(server = %self.server, ?id, "dropped {}, which answers no pending request", breach.describe());
            return Ok(None);
        }
        let Some(id) = id else {
            let why = format!(
                "the MCP server `{}` sent {}, and no id says which call it answers; the \
                 connection is closed and the server restarted",
                self.server,
                breach.describe()
            );
            tracing::warn!(server = %self.server, "{why}");
            *lock(&self.refusals.connection) = Some(why);
            return Err(());
        };
        if let (Breach::Depth, Some(true)) = (breach, lists_tools)
            && let Some(listed) = self.without_deep_tools(line, &shape)
        {
            return Ok(self.parse(&listed, Some(&id)));
        }
        let why = format!(
            "the MCP server `{}` answered with {}",
            self.server,
            breach.describe()
        );
        tracing::warn!(server = %self.server, "{why}");
        lock(&self.refusals.pending).remove(&id);
        if lists_tools != Some(true) {
            lock(&self.refusals.calls).insert(id.clone(), why.clone());
        }
        Ok(stand_in(&id, &why))
    }

    /// A tool list with the tools that nest too deep left out (and recorded as refused), when
    /// that brings it within the limit. The tools kept are the text between the refused ones.
    fn without_deep_tools(&self, line: &[u8], shape: &Shape) -> Option<Vec<u8>> {
        let list = shape.tools.as_ref().filter(|list| !list.overflowed)?;
        let refused = &list.refused;
        let mut listed = line[..list.open + 1].to_vec();
        let mut from = list.open + 1;
        let mut any = false;
        let ends = refused
            .iter()
            .map(|tool| tool.range.clone())
            .chain(std::iter::once(list.close..list.close));
        for cut in ends {
            let between = trim_separators(&line[from..cut.start]);
            if !between.is_empty() {
                if any {
                    listed.push(b',');
                }
                listed.extend_from_slice(between);
                any = true;
            }
            from = cut.end;
        }
        listed.extend_from_slice(&line[list.close..]);
        if Shape::of(&listed).depth > MAX_MESSAGE_DEPTH {
            return None;
        }
        let why = format!(
            "its definition nests deeper than the {MAX_MESSAGE_DEPTH} levels one MCP message \
             may nest"
        );
        let mut tools = lock(&self.refusals.tools);
        for tool in refused {
            let name = tool
                .name
                .as_ref()
                .filter(|range| range.len() <= MAX_NAME_BYTES)
                .and_then(|range| serde_json::from_slice::<String>(&line[range.clone()]).ok())
                .unwrap_or_else(|| {
                    format!("(an unnamed tool, number {} of the list)", tool.number + 1)
                });
            tools.push((name, why.clone()));
        }
        Some(listed)
    }

    /// A message within the limits, parsed as rmcp does: a line that is not a message of the
    /// protocol is skipped, unless it carries the id of a request it then fails.
    fn parse(
        &mut self,
        line: &[u8],
        id: Option<&RequestId>,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
            Ok(message) => {
                if let JsonRpcMessage::Response(response) = &message {
                    lock(&self.refusals.pending).remove(&response.id);
                } else if let JsonRpcMessage::Error(error) = &message
                    && let Some(id) = &error.id
                {
                    lock(&self.refusals.pending).remove(id);
                }
                Some(message)
            }
            Err(error) => {
                let id = id
                    .filter(|id| lock(&self.refusals.pending).contains_key(*id))?
                    .clone();
                let why = format!(
                    "the MCP server `{}` answered with a message that is not JSON-RPC: {error}",
                    self.server
                );
                lock(&self.refusals.pending).remove(&id);
                lock(&self.refusals.calls).insert(id.clone(), why.clone());
                stand_in(&id, &why)
            }
        }
    }
}

/// The error answer to `id` that stands in for a message that was refused.
fn stand_in(id: &RequestId, why: &str) -> Option<RxJsonRpcMessage<RoleClient>> {
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": INTERNAL_ERROR, "message": why}
    });
    serde_json::from_value(answer).ok()
}

fn parse_id(raw: &[u8]) -> Option<RequestId> {
    if raw.len() > MAX_ID_BYTES {
        return None;
    }
    serde_json::from_slice(raw).ok()
}

impl Transport<RoleClient> for BoundedTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item {
            let lists_tools = matches!(request.request, ClientRequest::ListToolsRequest(_));
            lock(&self.refusals.pending).insert(request.id.clone(), lists_tools);
        }
        self.writer.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let read = self.read_line().await;
            let line = std::mem::take(&mut self.line);
            let oversized = match read {
                Ok(true) => false,
                Ok(false) => return None,
                Err(()) => true,
            };
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                continue;
            }
            match self.message(text, oversized) {
                Ok(Some(message)) => return Some(message),
                Ok(None) => {}
                Err(()) => return None,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.close().await
    }
}

/// What a scan of a message's bytes finds, without parsing it: how deep it nests, how many
/// JSON values it holds, where its id is, and the tools of a tool list that nest too deep.
#[derive(Debug, Default)]
struct Shape {
    depth: usize,
    /// Its values (keys not counted), read as JSON; a line that is not JSON counts roughly.
    values: usize,
    /// The bytes of the top-level `id` value.
    id: Option<Range<usize>>,
    /// The `result.tools` array.
    tools: Option<ToolList>,
}

#[derive(Debug)]
struct ToolList {
    /// Where its `[` and its `]` are.
    open: usize,
    close: usize,
    /// Its elements that nest deeper than [`MAX_MESSAGE_DEPTH`], at most
    /// [`MAX_REFUSED_TOOLS`]; the others are not recorded.
    refused: Vec<Member>,
    /// Whether more elements than that nest too deep.
    overflowed: bool,
    /// How many elements it has.
    members: usize,
}

/// One element of the tool list.
#[derive(Debug)]
struct Member {
    range: Range<usize>,
    /// Its position in the list, from 0.
    number: usize,
    /// The bytes of its `name` string.
    name: Option<Range<usize>>,
}

/// The keys the scan follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Id,
    Result,
    Tools,
    Name,
    Other,
}

/// An array or object the scan is inside, at the levels it follows.
#[derive(Debug)]
struct Frame {
    object: bool,
    /// The key of the current member (objects).
    key: Key,
    /// Whether the next string is a key (objects).
    awaiting_key: bool,
    /// Where the current member's value started.
    start: Option<usize>,
    /// The deepest level inside the current member.
    deepest: usize,
}

/// The levels whose keys the scan follows: the message, `result`, `tools`, one tool.
const FOLLOWED: usize = 4;

impl Shape {
    /// Scans `line` once, in linear time and without recursion; frames are kept for the
    /// [`FOLLOWED`] outer levels only, so a deep line costs no memory.
    fn of(line: &[u8]) -> Shape {
        let mut shape = Shape::default();
        let mut frames: Vec<Frame> = Vec::with_capacity(FOLLOWED);
        let mut depth = 0usize;
        let mut tool_name: Option<Range<usize>> = None;
        // Values are counted as the strings, scalars and containers, less one key for each
        // `:` (in JSON every key and only a key is followed by one).
        let (mut tokens, mut colons, mut in_scalar) = (0usize, 0usize, false);
        let mut at = 0;
        while at < line.len() {
            let byte = line[at];
            let scalar = !matches!(
                byte,
                b'"' | b'{' | b'[' | b'}' | b']' | b',' | b':' | b' ' | b'\t' | b'\r' | b'\n'
            );
            if !scalar {
                in_scalar = false;
            }
            match byte {
                b'"' => {
                    tokens += 1;
                    let end = string_end(line, at + 1);
                    if let Some(frame) = followed(&mut frames, depth) {
                        if frame.object && frame.awaiting_key {
                            frame.key = key(&line[at..end]);
                            frame.awaiting_key = false;
                        } else if frame.start.is_none() {
                            frame.start = Some(at);
                            frame.deepest = depth;
                        }
                    }
                    at = end;
                    continue;
                }
                b'{' | b'[' => {
                    tokens += 1;
                    let in_tools = in_tool_list(&frames);
                    if let Some(frame) = followed(&mut frames, depth)
                        && frame.start.is_none()
                    {
                        frame.start = Some(at);
                        frame.deepest = depth;
                        if depth == 3 && in_tools {
                            tool_name = None;
                        }
                    }
                    depth += 1;
                    shape.depth = shape.depth.max(depth);
                    for frame in &mut frames {
                        frame.deepest = frame.deepest.max(depth);
                    }
                    if depth <= FOLLOWED {
                        let object = byte == b'{';
                        frames.push(Frame {
                            object,
                            key: Key::Other,
                            awaiting_key: object,
                            start: None,
                            deepest: depth,
                        });
                        if depth == 3 && !object && is_tools_array(&frames) {
                            shape.tools = Some(ToolList {
                                open: at,
                                close: line.len(),
                                refused: Vec::new(),
                                overflowed: false,
                                members: 0,
                            });
                        }
                    }
                }
                b'}' | b']' | b',' => {
                    if (1..=FOLLOWED).contains(&depth) {
                        finish(&mut shape, &mut frames, depth, at, line, &mut tool_name);
                    }
                    if byte == b',' {
                        if let Some(frame) = followed(&mut frames, depth)
                            && frame.object
                        {
                            frame.awaiting_key = true;
                        }
                    } else {
                        // The frame is popped first; the tool list's end is its first close.
                        if depth <= FOLLOWED
                            && frames.pop().is_some()
                            && depth == 3
                            && let Some(tools) = shape.tools.as_mut()
                            && tools.close == line.len()
                        {
                            tools.close = at;
                        }
                        depth = depth.saturating_sub(1);
                    }
                }
                b':' => colons += 1,
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => {
                    if !in_scalar {
                        tokens += 1;
                        in_scalar = true;
                    }
                    if let Some(frame) = followed(&mut frames, depth)
                        && !frame.awaiting_key
                        && frame.start.is_none()
                    {
                        frame.start = Some(at);
                        frame.deepest = depth;
                    }
                }
            }
            at += 1;
        }
        shape.values = tokens.saturating_sub(colons);
        shape
    }
}

/// The frame of level `depth` when the scan follows it.
fn followed(frames: &mut [Frame], depth: usize) -> Option<&mut Frame> {
    if depth == 0 || depth > FOLLOWED {
        return None;
    }
    frames.get_mut(depth - 1)
}

/// Whether the first three frames are the message, its `result` and that result's `tools`.
fn is_tools_array(frames: &[Frame]) -> bool {
    matches!(
        frames,
        [message, result, tools, ..]
            if message.object && message.key == Key::Result
                && result.object && result.key == Key::Tools
                && !tools.object
    )
}

fn in_tool_list(frames: &[Frame]) -> bool {
    frames.len() >= 3 && is_tools_array(frames)
}

/// Ends the current member of level `depth` at `at` (a `,` or the container's end).
fn finish(
    shape: &mut Shape,
    frames: &mut [Frame],
    depth: usize,
    at: usize,
    line: &[u8],
    tool_name: &mut Option<Range<usize>>,
) {
    let in_tools = in_tool_list(frames);
    let Some(frame) = frames.get_mut(depth - 1) else {
        return;
    };
    let Some(start) = frame.start.take() else {
        return;
    };
    let mut end = at;
    while end > start && line[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    let range = start..end;
    match depth {
        1 if frame.key == Key::Id => shape.id = Some(range),
        3 if in_tools => {
            let name = tool_name.take();
            if let Some(tools) = shape.tools.as_mut() {
                let number = tools.members;
                tools.members += 1;
                let deep = frame.deepest > MAX_MESSAGE_DEPTH;
                if deep && tools.refused.len() < MAX_REFUSED_TOOLS {
                    tools.refused.push(Member {
                        range,
                        number,
                        name,
                    });
                } else if deep {
                    tools.overflowed = true;
                }
            }
        }
        4 if in_tools && frame.object && frame.key == Key::Name => *tool_name = Some(range),
        _ => {}
    }
}

/// `bytes` without the whitespace and commas at either end: the elements of a list between
/// two that were cut out (an element never starts or ends with either).
fn trim_separators(bytes: &[u8]) -> &[u8] {
    let separator = |b: &u8| b.is_ascii_whitespace() || *b == b',';
    let start = bytes
        .iter()
        .position(|b| !separator(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !separator(b))
        .map_or(start, |at| at + 1);
    &bytes[start..end]
}

/// Where the string that starts after its quote at `from` ends (after its closing quote).
fn string_end(line: &[u8], from: usize) -> usize {
    let mut at = from;
    while at < line.len() {
        match line[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    line.len()
}

/// Which followed key a quoted string is.
fn key(quoted: &[u8]) -> Key {
    let decoded;
    let text: &[u8] = if quoted.contains(&b'\\') && quoted.len() <= 64 {
        match serde_json::from_slice::<String>(quoted) {
            Ok(text) => {
                decoded = text;
                decoded.as_bytes()
            }
            Err(_) => return Key::Other,
        }
    } else {
        quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or(b"")
    };
    match text {
        b"id" => Key::Id,
        b"result" => Key::Result,
        b"tools" => Key::Tools,
        b"name" => Key::Name,
        _ => Key::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn the_scan_finds_the_depth_the_id_and_the_tools() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","result":{{"tools":[{{"name":"a","x":{}}} , {{"name":"b\"]"}}]}},"id" : 7 }}"#,
            nested(5)
        );
        let shape = Shape::of(line.as_bytes());
        assert_eq!(shape.depth, 9);
        // The message, "2.0", the result, the list, the id, and the two tools (1 + 1 + 6,
        // 1 + 1).
        assert_eq!(shape.values, 15);
        assert_eq!(&line[shape.id.unwrap()], "7");
        let tools = shape.tools.unwrap();
        assert_eq!((tools.members, tools.refused.len()), (2, 0));
        assert_eq!(&line[tools.open..tools.open + 2], "[{");
        assert_eq!(&line[tools.close..tools.close + 2], "]}");
    }

    #[test]
    fn the_scan_records_only_the_tools_that_nest_too_deep() {
        let deep = nested(MAX_MESSAGE_DEPTH);
        let line = format!(
            r#"{{"id":1,"result":{{"tools":[{{"name":"a","x":{deep}}}, {{"name":"b"}} ,{{"x":{deep},"name":"c"}},{{"x":{deep}}}]}}}}"#
        );
        let shape = Shape::of(line.as_bytes());
        let tools = shape.tools.as_ref().unwrap();
        let found: Vec<(&str, usize, Option<&str>)> = tools
            .refused
            .iter()
            .map(|m| {
                (
                    &line[m.range.start..m.range.start + 11],
                    m.number,
                    m.name.clone().map(|name| &line[name]),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (r#"{"name":"a""#, 0, Some(r#""a""#)),
                (r#"{"x":[[[[[["#, 2, Some(r#""c""#)),
                (r#"{"x":[[[[[["#, 3, None),
            ]
        );
        assert_eq!(tools.members, 4);
        assert_eq!(trim_separators(b" , {\"b\"} , "), br#"{"b"}"#.as_slice());
    }

    #[test]
    fn the_scan_counts_values_not_keys() {
        for (line, values) in [
            ("1", 1),
            (r#"{"a":[1,true,null,"x",{}],"b":-1.5e3}"#, 8),
            (r#"[ "a\"b" , [] ,false]"#, 4),
            (&format!("[{}0]", "0,".repeat(999)), 1001),
        ] {
            assert_eq!(Shape::of(line.as_bytes()).values, values, "{line}");
        }
    }

    #[test]
    fn an_ended_call_leaves_nothing_behind() {
        let refusals = Refusals::default();
        let id = RequestId::Number(7);
        lock(&refusals.pending).insert(id.clone(), false);
        lock(&refusals.calls).insert(id.clone(), String::from("why"));
        lock(&refusals.pending).insert(RequestId::Number(8), false);
        refusals.end(&id);
        assert_eq!(refusals.kept(), (1, 0));
    }

    #[test]
    fn ids_and_tools_elsewhere_are_not_followed() {
        let line =
            r#"{"result":{"content":[{"id":1,"tools":[1]}],"tools":{"id":2}},"params":{"id":3}}"#;
        let shape = Shape::of(line.as_bytes());
        assert_eq!(
            (shape.depth, shape.id, shape.tools.is_none()),
            (5, None, true)
        );
    }
}
