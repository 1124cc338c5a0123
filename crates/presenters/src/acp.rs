//! The Agent Client Protocol projection: cards as ACP `ToolCall` and `ToolCallUpdate` JSON.
//!
//! A host sends [`tool_call`] when a call is announced (status `pending`) and
//! [`tool_call_update`] when it completes (status `completed` or `failed`). The output is plain
//! `serde_json` so this crate needs no ACP dependency; its shape is checked in tests against the
//! official schema crate.
//!
//! | card | `kind` | `content` | `locations` |
//! |---|---|---|---|
//! | generic call | the card's kind, `other` when absent | its text | its locations |
//! | terminal call | `execute` | the description | none |
//! | diff call | `edit` | one `diff` item per file | its locations, else one per file |
//! | generic result | unchanged | its text | unchanged |
//! | terminal result | unchanged | the console block, fenced | unchanged |
//! | diff result | unchanged | one `diff` item per file | unchanged |
//! | read result | unchanged | the lines, fenced with the language | the first line shown |
//! | search result | unchanged | the listing | one per match (matches shape) |
//! | web result | unchanged | the listing | unchanged |
//!
//! An update leaves out what the card does not know (a missing title keeps the pending one;
//! no content keeps the call's content). Line numbers beyond ACP's 32-bit range are dropped
//! rather than wrapped.

use crate::text::{raw_console_block, result_text};
use dsh_tools::card::{
    DiffCallView, FileDiff, GenericCallView, Location, ReadResultView, SearchResultView,
    TerminalCallView, ToolKind,
};
use dsh_tools::{ToolCallView, ToolResultView};
use serde_json::{Map, Value, json};

/// The ACP spelling of a tool kind ([`ToolKind::as_str`]).
pub fn tool_kind(kind: ToolKind) -> &'static str {
    kind.as_str()
}

/// The ACP `ToolCall` announcing a call, with status `pending`.
pub fn tool_call(call_id: &str, view: &ToolCallView) -> Value {
    let mut call = Map::new();
    call.insert("toolCallId".into(), json!(call_id));
    match view {
        ToolCallView::Generic(card) => generic_call(&mut call, card),
        ToolCallView::Terminal(card) => terminal_call(&mut call, card),
        ToolCallView::Diff(card) => diff_call(&mut call, card),
        other => {
            // A card kind newer than this projection: its title, if it has one, and no more.
            let title = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("title").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            call.insert("title".into(), json!(title));
            call.insert("kind".into(), json!(tool_kind(ToolKind::Other)));
        }
    }
    call.insert("status".into(), json!("pending"));
    Value::Object(call)
}

/// The ACP `ToolCallUpdate` completing a call: status `failed` when `failed`, else
/// `completed`.
pub fn tool_call_update(call_id: &str, view: &ToolResultView, failed: bool) -> Value {
    let mut update = Map::new();
    update.insert("toolCallId".into(), json!(call_id));
    update.insert(
        "status".into(),
        json!(if failed { "failed" } else { "completed" }),
    );
    if let Some(title) = result_title(view) {
        update.insert("title".into(), json!(title));
    }
    let content = match view {
        ToolResultView::Generic(card) => card.content.iter().map(|t| text_item(t)).collect(),
        ToolResultView::Terminal(card) => {
            let block = raw_console_block(card);
            if block.is_empty() {
                Vec::new()
            } else {
                vec![text_item(&fenced(&block, "console"))]
            }
        }
        ToolResultView::Diff(card) => card.diffs.iter().map(diff_item).collect(),
        ToolResultView::Read(card) => vec![text_item(&read_block(card))],
        other => vec![text_item(&result_text(other))],
    };
    if !content.is_empty() {
        update.insert("content".into(), Value::Array(content));
    }
    let locations = match view {
        ToolResultView::Read(card) => {
            let line = card.lines.first().map(|l| l.number);
            vec![location(&card.path, line)]
        }
        ToolResultView::Search(SearchResultView::Matches(card)) => card
            .files
            .iter()
            .flat_map(|f| {
                f.matches
                    .iter()
                    .map(|m| location(&f.path, Some(m.line_number)))
            })
            .collect(),
        _ => Vec::new(),
    };
    if !locations.is_empty() {
        update.insert("locations".into(), Value::Array(locations));
    }
    Value::Object(update)
}

fn generic_call(call: &mut Map<String, Value>, card: &GenericCallView) {
    call.insert("title".into(), json!(card.title));
    let kind = card.kind.unwrap_or(ToolKind::Other);
    call.insert("kind".into(), json!(tool_kind(kind)));
    if let Some(content) = &card.content {
        call.insert("content".into(), json!([text_item(content)]));
    }
    let locations: Vec<Value> = card.locations.iter().flatten().map(acp_location).collect();
    if !locations.is_empty() {
        call.insert("locations".into(), Value::Array(locations));
    }
    // ACP reads `"rawInput": null` as no input at all, so a null input is left out.
    if let Some(input) = card.raw_input.as_ref().filter(|input| !input.is_null()) {
        call.insert("rawInput".into(), input.clone());
    }
}

fn terminal_call(call: &mut Map<String, Value>, card: &TerminalCallView) {
    call.insert("title".into(), json!(card.title));
    call.insert("kind".into(), json!(tool_kind(ToolKind::Execute)));
    if let Some(description) = &card.description {
        call.insert("content".into(), json!([text_item(description)]));
    }
}

fn diff_call(call: &mut Map<String, Value>, card: &DiffCallView) {
    call.insert("title".into(), json!(card.title));
    call.insert("kind".into(), json!(tool_kind(ToolKind::Edit)));
    let content: Vec<Value> = card.diffs.iter().map(diff_item).collect();
    if !content.is_empty() {
        call.insert("content".into(), Value::Array(content));
    }
    // Without explicit locations, each changed file is one an editor can follow.
    let locations: Vec<Value> = match &card.locations {
        Some(locations) => locations.iter().map(acp_location).collect(),
        None => card.diffs.iter().map(|d| location(&d.path, None)).collect(),
    };
    if !locations.is_empty() {
        call.insert("locations".into(), Value::Array(locations));
    }
}

fn result_title(view: &ToolResultView) -> Option<&str> {
    match view {
        ToolResultView::Generic(card) => card.title.as_deref(),
        ToolResultView::Terminal(card) => card.title.as_deref(),
        ToolResultView::Diff(card) => card.title.as_deref(),
        ToolResultView::Search(SearchResultView::Matches(card)) => card.title.as_deref(),
        ToolResultView::Search(SearchResultView::Paths(card)) => card.title.as_deref(),
        ToolResultView::Read(card) => card.title.as_deref(),
        _ => None,
    }
}

/// `{"type": "content", "content": {"type": "text", "text": …}}`.
fn text_item(text: &str) -> Value {
    json!({ "type": "content", "content": { "type": "text", "text": text } })
}

/// `{"type": "diff", "path": …, "oldText": …|null, "newText": …}`.
fn diff_item(diff: &FileDiff) -> Value {
    json!({
        "type": "diff",
        "path": diff.path,
        "oldText": diff.old_text,
        "newText": diff.new_text,
    })
}

fn acp_location(location: &Location) -> Value {
    self::location(&location.path, location.line)
}

/// `{"path": …, "line": …}`; ACP lines are 32-bit, so a larger one is left out.
fn location(path: &str, line: Option<u64>) -> Value {
    let mut location = Map::new();
    location.insert("path".into(), json!(path));
    if let Some(line) = line.and_then(|l| u32::try_from(l).ok()) {
        location.insert("line".into(), json!(line));
    }
    Value::Object(location)
}

/// The lines of a read card as a fenced block in the card's language.
fn read_block(card: &ReadResultView) -> String {
    let body: Vec<&str> = card.lines.iter().map(|l| l.text.as_str()).collect();
    let mut text = fenced(&body.join("\n"), card.lang.as_deref().unwrap_or_default());
    if let Some(content) = &card.content {
        text.push('\n');
        text.push_str(content);
    }
    text
}

/// A Markdown code fence around `body`, longer than any backtick run inside it, so the body
/// cannot close the fence early.
fn fenced(body: &str, info: &str) -> String {
    let longest = body
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest.max(2) + 1);
    // An info string with spaces or backticks would change the fence's meaning; drop it.
    let info = if info.chars().any(|c| c.is_whitespace() || c == '`') {
        ""
    } else {
        info
    };
    format!("{fence}{info}\n{body}\n{fence}")
}
