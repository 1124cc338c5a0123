//! The five tools' cards: plain data in the card vocabulary of `dsh-tools`, read softly (any
//! argument or record they cannot read gives `None`, the generic card).
//!
//! - `read`: a generic `read` card with the location (path, first line); its result is a read
//!   card whose lines are taken from the model text and whose path and offset come from the
//!   presentation meta.
//! - `write`: a generic `edit` card with the file's location; `edit`: a diff card of
//!   `old_string` → `new_string`. Their results are diff cards built from the presentation
//!   meta alone (the applied change, `oldText: null` for a new file), so a replayed session
//!   shows the same diff without reading the disk.
//! - `glob` and `grep`: search cards (paths or matches, truncated, total) from the meta.

use dsh_tools::card::{
    DiffCallView, DiffResultView, FileDiff, GenericCallView, Location, NumberedLine,
    ReadResultView, SearchFile, SearchMatch, SearchMatches, SearchPaths, SearchResultView,
    ToolKind,
};
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView, content_text};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::value::{GlobValue, GrepValue, ReadValue};

/// A string argument, when present and not blank.
fn arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// The presentation meta of a read: what the card needs beyond the model text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadMeta {
    pub(crate) path: String,
    pub(crate) offset: u64,
    pub(crate) total_lines: u64,
}

impl ReadMeta {
    pub(crate) fn of(value: &ReadValue) -> ReadMeta {
        ReadMeta {
            path: value.path.clone(),
            offset: value.offset,
            total_lines: value.total_lines,
        }
    }
}

/// The pending card of a `read`.
pub fn present_read_call(args: &Value) -> Option<ToolCallView> {
    let path = arg(args, "file_path")?;
    let line = args.get("offset").and_then(Value::as_u64);
    Some(ToolCallView::Generic(GenericCallView {
        title: format!("Read {path}"),
        kind: Some(ToolKind::Read),
        raw_input: Some(args.clone()),
        content: None,
        locations: Some(vec![Location {
            path: path.to_owned(),
            line,
        }]),
    }))
}

/// The completed card of a `read`.
pub fn present_read_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    arg(args, "file_path")?;
    if record.is_error {
        return Some(ToolResultView::fallback(record));
    }
    let meta: ReadMeta = serde_json::from_value(record.meta.clone()?).ok()?;
    let text = content_text(&record.content);
    let lines = text
        .lines()
        .filter_map(|line| {
            let (number, text) = line.split_once('\t')?;
            let number = number.trim().parse().ok()?;
            Some(NumberedLine {
                number,
                text: text.to_owned(),
            })
        })
        .collect();
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    Some(ToolResultView::Read(ReadResultView {
        title: Some(format!("Read {}", meta.path)),
        path: meta.path,
        offset: meta.offset.saturating_sub(1),
        lines,
        total_lines: meta.total_lines,
        lang: lang_of(arg(args, "file_path")?),
        content: (!notes.is_empty()).then(|| notes.join("\n")),
    }))
}

/// A highlighting hint from the file's extension.
fn lang_of(path: &str) -> Option<String> {
    let ext = std::path::Path::new(path).extension()?.to_str()?;
    let lang = match ext {
        "rs" => "rust",
        "ts" | "tsx" => "typescript",
        "js" | "jsx" | "mjs" => "javascript",
        "py" => "python",
        "md" => "markdown",
        "toml" => "toml",
        "json" => "json",
        "sh" | "bash" => "bash",
        "go" => "go",
        "c" | "h" => "c",
        "cpp" | "cc" | "hpp" => "cpp",
        "yaml" | "yml" => "yaml",
        _ => return None,
    };
    Some(lang.to_owned())
}

/// The pending card of a `write`.
pub fn present_write_call(args: &Value) -> Option<ToolCallView> {
    let path = arg(args, "file_path")?;
    args.get("content")?.as_str()?;
    Some(ToolCallView::Generic(GenericCallView {
        title: format!("Write {path}"),
        kind: Some(ToolKind::Edit),
        raw_input: None,
        content: None,
        locations: Some(vec![Location {
            path: path.to_owned(),
            line: None,
        }]),
    }))
}

/// The pending card of an `edit`: the fragment it replaces.
pub fn present_edit_call(args: &Value) -> Option<ToolCallView> {
    let path = arg(args, "file_path")?;
    let old = args.get("old_string")?.as_str()?;
    let new = args.get("new_string")?.as_str()?;
    Some(ToolCallView::Diff(DiffCallView {
        title: format!("Edit {path}"),
        diffs: vec![FileDiff {
            path: path.to_owned(),
            old_text: Some(old.to_owned()),
            new_text: new.to_owned(),
        }],
        locations: None,
    }))
}

/// The completed card of a `write` or `edit`: the applied change, from the meta alone.
pub fn present_change_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    arg(args, "file_path")?;
    if record.is_error {
        return Some(ToolResultView::fallback(record));
    }
    let diff: FileDiff = serde_json::from_value(record.meta.clone()?).ok()?;
    Some(ToolResultView::Diff(DiffResultView {
        title: Some(content_text(&record.content)),
        diffs: vec![diff],
    }))
}

/// The pending card of a `glob` or `grep`.
pub fn present_search_call(args: &Value) -> Option<ToolCallView> {
    let pattern = arg(args, "pattern")?;
    let path = arg(args, "path");
    Some(ToolCallView::Generic(GenericCallView {
        title: match path {
            Some(path) => format!("Search `{pattern}` in {path}"),
            None => format!("Search `{pattern}`"),
        },
        kind: Some(ToolKind::Search),
        raw_input: Some(args.clone()),
        content: None,
        locations: path.map(|p| {
            vec![Location {
                path: p.to_owned(),
                line: None,
            }]
        }),
    }))
}

/// The completed card of a `glob` or `grep`: the search card the meta holds.
pub fn present_search_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    arg(args, "pattern")?;
    if record.is_error {
        return Some(ToolResultView::fallback(record));
    }
    let view: SearchResultView = dsh_tools::json::from_value(record.meta.as_ref()?).ok()?;
    Some(ToolResultView::Search(view))
}

/// The search card of a glob value.
pub(crate) fn glob_card(value: &GlobValue, pattern: &str) -> SearchResultView {
    SearchResultView::Paths(SearchPaths {
        paths: value.paths.clone(),
        truncated: value.truncated,
        total: value.total,
        title: Some(format!("Glob `{pattern}` in {}", value.path)),
    })
}

/// The search card of a grep value.
pub(crate) fn grep_card(value: &GrepValue, pattern: &str) -> SearchResultView {
    SearchResultView::Matches(SearchMatches {
        files: value
            .files
            .iter()
            .map(|f| SearchFile {
                path: f.path.clone(),
                matches: f
                    .matches
                    .iter()
                    .map(|m| SearchMatch {
                        line_number: m.line_number,
                        line: m.line.clone(),
                    })
                    .collect(),
            })
            .collect(),
        truncated: value.truncated,
        total: value.total,
        title: Some(format!("Grep `{pattern}` in {}", value.path)),
    })
}
