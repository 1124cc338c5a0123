//! The neutral card vocabulary: plain data a tool's presenters return and a host renders.
//!
//! Wire form: tagged by `"card"`, fields in camelCase (`docs/subsystems/presenters.md`). It lives here so a tool
//! can declare `present_call`/`present_result` without importing any UI or transport crate;
//! rendering lives in the `presenters` crate.
//!
//! Parse cards from JSON text with [`crate::json::from_str`]: the cards are internally tagged,
//! and serde's buffering of tagged shapes needs the canonical number spellings it provides.

use crate::content::{ToolResultRecord, content_text};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The pending card of a call (what `present_call` returns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "card", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolCallView {
    /// The default card.
    Generic(GenericCallView),
    /// The call is a shell command.
    Terminal(TerminalCallView),
    /// The call creates or modifies files.
    Diff(DiffCallView),
}

/// The completed card of a call (what `present_result` returns); it replaces the pending one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "card", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolResultView {
    /// The default card.
    Generic(GenericResultView),
    /// Shell output with its exit status.
    Terminal(TerminalResultView),
    /// Applied file changes.
    Diff(DiffResultView),
    /// Search results, with their truncation stated.
    Search(SearchResultView),
    /// Lines read from a file.
    Read(ReadResultView),
    /// A web search or fetch.
    Web(WebResultView),
}

/// The kind of a generic call, which picks an icon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ToolKind {
    /// Reads data.
    Read,
    /// Edits data.
    Edit,
    /// Deletes data.
    Delete,
    /// Moves or renames.
    Move,
    /// Searches.
    Search,
    /// Runs something.
    Execute,
    /// Fetches from the network.
    Fetch,
    /// Anything else.
    Other,
}

impl ToolKind {
    /// The kind's wire spelling, as serde writes it and as ACP names it (`"execute"`): the one
    /// spelling every surface (terminal text, ACP) shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Fetch => "fetch",
            ToolKind::Other => "other",
        }
    }
}

/// A place in a file an editor can follow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// The file path.
    pub path: String,
    /// The 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// The generic pending card.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenericCallView {
    /// The card's title.
    pub title: String,
    /// The kind, which picks an icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// The raw arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// Extra text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Places an editor can follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
}

/// A pending shell command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalCallView {
    /// The command.
    pub title: String,
    /// What the command is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// One file change: `old_text` is `None` for a new file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    /// The file path.
    pub path: String,
    /// The text before (`null` when the file is created).
    #[serde(default)]
    pub old_text: Option<String>,
    /// The text after.
    pub new_text: String,
}

/// A pending file change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffCallView {
    /// The card's title.
    pub title: String,
    /// The changes.
    pub diffs: Vec<FileDiff>,
    /// Places an editor can follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
}

/// The generic completed card.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenericResultView {
    /// The title (the pending card's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The result text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// Completed shell output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalResultView {
    /// The title (the pending card's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The output, without the exit-status markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The exit code, when the process exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The terminating signal, when killed (`SIGKILL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

/// Applied file changes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffResultView {
    /// The title (the pending card's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The changes.
    pub diffs: Vec<FileDiff>,
}

/// Search results: matches within files, or matching paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "shape", rename_all = "camelCase")]
#[non_exhaustive]
pub enum SearchResultView {
    /// Matching lines grouped by file.
    Matches(SearchMatches),
    /// Matching paths.
    Paths(SearchPaths),
}

/// Matching lines grouped by file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatches {
    /// The files with matches.
    pub files: Vec<SearchFile>,
    /// Whether the list was capped.
    pub truncated: bool,
    /// The total number of matches, including any not listed.
    pub total: u64,
    /// The title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// One file's matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchFile {
    /// The file path.
    pub path: String,
    /// The matching lines.
    pub matches: Vec<SearchMatch>,
}

/// One matching line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatch {
    /// The 1-based line number.
    pub line_number: u64,
    /// The line's text.
    pub line: String,
}

/// Matching paths.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchPaths {
    /// The paths.
    pub paths: Vec<String>,
    /// Whether the list was capped.
    pub truncated: bool,
    /// The total number of paths, including any not listed.
    pub total: u64,
    /// The title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Lines read from a file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadResultView {
    /// The title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The file path.
    pub path: String,
    /// The 0-based line offset of the first line shown.
    pub offset: u64,
    /// The lines shown.
    pub lines: Vec<NumberedLine>,
    /// The file's total line count.
    pub total_lines: u64,
    /// A language hint for highlighting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    /// Extra text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// One numbered line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumberedLine {
    /// The 1-based line number.
    pub number: u64,
    /// The line's text.
    pub text: String,
}

/// A web search or fetch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum WebResultView {
    /// A web search.
    Search(WebSearch),
    /// A page fetch.
    Fetch(WebFetch),
}

/// A web search.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebSearch {
    /// The sources found.
    pub sources: Vec<WebSource>,
    /// A synthesised answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Whether the list was capped.
    pub truncated: bool,
}

/// One web source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebSource {
    /// The address.
    pub url: String,
    /// The page title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A snippet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// When it was published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
}

/// A page fetch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebFetch {
    /// The address.
    pub url: String,
    /// The HTTP status.
    pub status_code: u16,
    /// Whether the body was cut.
    pub truncated: bool,
}

impl ToolCallView {
    /// The generic fallback for a call: title = tool name, raw input = the arguments.
    pub fn fallback(tool_name: &str, arguments: &Value) -> ToolCallView {
        ToolCallView::Generic(GenericCallView {
            title: tool_name.to_owned(),
            raw_input: Some(arguments.clone()),
            ..GenericCallView::default()
        })
    }
}

impl ToolResultView {
    /// The generic fallback for a result: the pending card's title is kept, and the content is
    /// the result's text.
    pub fn fallback(record: &ToolResultRecord) -> ToolResultView {
        let text = content_text(&record.content);
        ToolResultView::Generic(GenericResultView {
            title: None,
            content: (!text.is_empty()).then_some(text),
        })
    }
}
