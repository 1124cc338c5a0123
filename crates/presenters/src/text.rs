//! Plain-text rendering of cards for terminals.
//!
//! The text carries no colour codes or other terminal escapes: a CLI adds styling on top. Every
//! card renders: a terminal result becomes a console block (`$ command`, the output, the status
//! marker), a diff becomes a unified diff, and capped listings say how much was left out.
//!
//! Tool output and arguments are untrusted, and a terminal obeys the control characters it is
//! sent: an OSC 52 sequence writes the clipboard, another retitles the window, a CSI clears the
//! screen, a bidi override reorders what the reader sees. So every public renderer here passes
//! its text through [`escape_controls`], which shows such characters as visible escapes
//! (`\x1b`, `\u{202e}`) and keeps only newlines and tabs. The ACP projection and the model's
//! text are built from the raw card fields and are unchanged.

use crate::markers::{ExitOutcome, status_marker};
use dsh_tools::card::{
    DiffCallView, FileDiff, GenericCallView, GenericResultView, ReadResultView, SearchMatches,
    SearchPaths, SearchResultView, TerminalCallView, TerminalResultView, WebFetch, WebResultView,
    WebSearch,
};
use dsh_tools::{ToolCallView, ToolResultView};
use similar::TextDiff;
use std::borrow::Cow;
use std::fmt::Write as _;

/// Either kind of card, for [`render_text`].
#[derive(Clone, Copy, Debug)]
pub enum Card<'a> {
    /// A pending card.
    Call(&'a ToolCallView),
    /// A completed card.
    Result(&'a ToolResultView),
}

impl<'a> From<&'a ToolCallView> for Card<'a> {
    fn from(view: &'a ToolCallView) -> Card<'a> {
        Card::Call(view)
    }
}

impl<'a> From<&'a ToolResultView> for Card<'a> {
    fn from(view: &'a ToolResultView) -> Card<'a> {
        Card::Result(view)
    }
}

/// Renders any card as plain text (see [`render_call_text`] and [`render_result_text`]).
pub fn render_text<'a>(card: impl Into<Card<'a>>) -> String {
    match card.into() {
        Card::Call(view) => render_call_text(view),
        Card::Result(view) => render_result_text(view),
    }
}

/// Renders a pending card as plain text, with control characters escaped.
pub fn render_call_text(view: &ToolCallView) -> String {
    escape_controls(&call_text(view)).into_owned()
}

/// Renders a completed card as plain text, with control characters escaped.
pub fn render_result_text(view: &ToolResultView) -> String {
    escape_controls(&result_text(view)).into_owned()
}

/// A terminal result as a console block: `$ <command>`, the output, then the status marker
/// (nothing for exit code 0), each part only when present; control characters escaped.
pub fn console_block(card: &TerminalResultView) -> String {
    escape_controls(&raw_console_block(card)).into_owned()
}

/// One file change as a unified diff with three lines of context; a created file is diffed
/// against `/dev/null`, and a change that changes nothing says so. Control characters are
/// escaped.
pub fn render_file_diff(diff: &FileDiff) -> String {
    escape_controls(&file_diff(diff)).into_owned()
}

/// Shows the characters a terminal would act on as visible escapes, so untrusted text prints as
/// what it is.
///
/// Escaped: every C0 control but newline and tab (ESC as `\x1b`, BEL `\x07`, CR `\x0d`), DEL
/// (`\x7f`), the C1 controls U+0080–U+009F (`\u{9b}`) and the bidi embeddings, overrides and
/// isolates U+202A–U+202E and U+2066–U+2069 (`\u{202e}`). Everything else, backslashes
/// included, is kept, so the escaping is for reading, not a reversible encoding. Text with
/// nothing to escape is returned borrowed.
///
/// ```
/// use presenters::text::escape_controls;
///
/// assert_eq!(escape_controls("\x1b]52;c;aGk=\x07ok\n"), "\\x1b]52;c;aGk=\\x07ok\n");
/// assert_eq!(escape_controls("abc\u{202e}fed"), "abc\\u{202e}fed");
/// assert_eq!(escape_controls("tab\tkept"), "tab\tkept");
/// ```
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_terminal_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_terminal_control(c) {
            out.push(c);
        } else if c.is_ascii() {
            // Writing to a `String` cannot fail.
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal could act on `c` rather than print it (see [`escape_controls`]).
fn is_terminal_control(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        // C0, DEL and C1: the Unicode `Cc` category.
        c => c.is_control(),
    }
}

fn call_text(view: &ToolCallView) -> String {
    match view {
        ToolCallView::Generic(card) => generic_call(card),
        ToolCallView::Terminal(card) => terminal_call(card),
        ToolCallView::Diff(card) => diff_call(card),
        other => unknown_card(other),
    }
}

/// A completed card as raw text: the form the ACP projection embeds.
pub(crate) fn result_text(view: &ToolResultView) -> String {
    match view {
        ToolResultView::Generic(card) => generic_result(card),
        ToolResultView::Terminal(card) => raw_console_block(card),
        ToolResultView::Diff(card) => {
            let mut out = Lines::default();
            out.push_opt(card.title.as_deref());
            for diff in &card.diffs {
                out.push(&file_diff(diff));
            }
            out.finish()
        }
        ToolResultView::Search(SearchResultView::Matches(card)) => search_matches(card),
        ToolResultView::Search(SearchResultView::Paths(card)) => search_paths(card),
        ToolResultView::Read(card) => read(card),
        ToolResultView::Web(WebResultView::Search(card)) => web_search(card),
        ToolResultView::Web(WebResultView::Fetch(card)) => web_fetch(card),
        other => unknown_card(other),
    }
}

/// The console block of [`console_block`] as raw text: the form the ACP projection fences.
pub(crate) fn raw_console_block(card: &TerminalResultView) -> String {
    let mut out = Lines::default();
    if let Some(title) = &card.title {
        out.push(&format!("$ {title}"));
    }
    out.push_opt(card.output.as_deref());
    let outcome = ExitOutcome {
        exit_code: card.exit_code,
        signal: card.signal.clone(),
    };
    out.push_opt(status_marker(&outcome).as_deref());
    out.finish()
}

fn file_diff(diff: &FileDiff) -> String {
    let old = diff.old_text.as_deref().unwrap_or_default();
    let old_name = match diff.old_text {
        Some(_) => format!("a/{}", diff.path),
        None => "/dev/null".to_owned(),
    };
    let new_name = format!("b/{}", diff.path);
    let text_diff = TextDiff::from_lines(old, diff.new_text.as_str());
    let rendered = text_diff
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &new_name)
        .to_string();
    if rendered.is_empty() {
        return format!("{}: no changes", diff.path);
    }
    rendered.strip_suffix('\n').unwrap_or(&rendered).to_owned()
}

fn generic_call(card: &GenericCallView) -> String {
    let mut out = Lines::default();
    match card.kind {
        Some(kind) => out.push(&format!("{} ({})", card.title, kind.as_str())),
        None => out.push(&card.title),
    }
    match (&card.content, &card.raw_input) {
        (Some(content), _) => out.push_indented(content),
        // Without content the raw input is the only detail the card has.
        (None, Some(input)) => out.push_indented(&format!("input: {input}")),
        (None, None) => {}
    }
    for location in card.locations.iter().flatten() {
        match location.line {
            Some(line) => out.push_indented(&format!("at {}:{line}", location.path)),
            None => out.push_indented(&format!("at {}", location.path)),
        }
    }
    out.finish()
}

fn terminal_call(card: &TerminalCallView) -> String {
    let mut out = Lines::default();
    out.push(&format!("$ {}", card.title));
    if let Some(description) = &card.description {
        out.push_indented(description);
    }
    if let Some(cwd) = &card.cwd {
        out.push_indented(&format!("cwd: {cwd}"));
    }
    out.finish()
}

fn diff_call(card: &DiffCallView) -> String {
    let mut out = Lines::default();
    out.push(&card.title);
    for diff in &card.diffs {
        out.push(&file_diff(diff));
    }
    out.finish()
}

fn generic_result(card: &GenericResultView) -> String {
    let mut out = Lines::default();
    out.push_opt(card.title.as_deref());
    out.push_opt(card.content.as_deref());
    out.finish()
}

fn search_matches(card: &SearchMatches) -> String {
    let shown: u64 = card.files.iter().map(|f| f.matches.len() as u64).sum();
    let mut out = Lines::default();
    // The total counts every match, including files not listed, so no file count is shown.
    out.push(&format!(
        "{}: {}",
        card.title.as_deref().unwrap_or("Search"),
        count(card.total, "match", "matches"),
    ));
    for file in &card.files {
        out.push(&file.path);
        let width = number_width(file.matches.iter().map(|m| m.line_number));
        for hit in &file.matches {
            out.push_indented(&format!("{:>width$}: {}", hit.line_number, hit.line));
        }
    }
    out.push_opt(omitted(card.total, shown, card.truncated, "match", "matches").as_deref());
    out.finish()
}

fn search_paths(card: &SearchPaths) -> String {
    let mut out = Lines::default();
    out.push(&format!(
        "{}: {}",
        card.title.as_deref().unwrap_or("Search"),
        count(card.total, "path", "paths"),
    ));
    for path in &card.paths {
        out.push_indented(path);
    }
    let shown = card.paths.len() as u64;
    out.push_opt(omitted(card.total, shown, card.truncated, "path", "paths").as_deref());
    out.finish()
}

fn read(card: &ReadResultView) -> String {
    let mut out = Lines::default();
    match &card.title {
        Some(title) => out.push(&format!("{title}: {}", card.path)),
        None => out.push(&card.path),
    }
    let width = number_width(card.lines.iter().map(|l| l.number));
    for line in &card.lines {
        out.push(&format!("{:>width$}  {}", line.number, line.text));
    }
    match (card.lines.first(), card.lines.last()) {
        (Some(first), Some(last)) if (card.lines.len() as u64) < card.total_lines => {
            out.push(&format!(
                "… lines {}-{} of {}",
                first.number, last.number, card.total_lines
            ))
        }
        (None, _) if card.total_lines > 0 => {
            out.push(&format!("… no lines shown of {}", card.total_lines));
        }
        _ => {}
    }
    out.push_opt(card.content.as_deref());
    out.finish()
}

fn web_search(card: &WebSearch) -> String {
    let mut out = Lines::default();
    out.push(&format!(
        "Web search: {}",
        count(card.sources.len() as u64, "source", "sources")
    ));
    out.push_opt(card.answer.as_deref());
    for source in &card.sources {
        match &source.title {
            Some(title) => {
                out.push(&format!("- {title}"));
                out.push_indented(&source.url);
            }
            None => out.push(&format!("- {}", source.url)),
        }
        if let Some(published) = &source.published_at {
            out.push_indented(&format!("published {published}"));
        }
        if let Some(snippet) = &source.snippet {
            out.push_indented(snippet);
        }
    }
    if card.truncated {
        out.push("… more sources not shown (truncated)");
    }
    out.finish()
}

fn web_fetch(card: &WebFetch) -> String {
    let mut out = Lines::default();
    out.push(&format!("Fetched {} (HTTP {})", card.url, card.status_code));
    if card.truncated {
        out.push("… body truncated");
    }
    out.finish()
}

/// A card variant added to the vocabulary after this renderer: its JSON, so nothing is hidden.
fn unknown_card(card: &impl serde::Serialize) -> String {
    serde_json::to_string(card).unwrap_or_default()
}

/// The "… N more" line of a capped listing, when anything was left out.
fn omitted(total: u64, shown: u64, truncated: bool, one: &str, many: &str) -> Option<String> {
    let hidden = total.saturating_sub(shown);
    match (hidden, truncated) {
        (0, false) => None,
        (0, true) => Some("… more not shown (truncated)".to_owned()),
        (n, true) => Some(format!("… {} not shown (truncated)", more(n, one, many))),
        (n, false) => Some(format!("… {} not shown", more(n, one, many))),
    }
}

/// `N more matches`.
fn more(n: u64, one: &str, many: &str) -> String {
    format!("{n} more {}", if n == 1 { one } else { many })
}

/// The width of the widest number, for right-aligned columns.
fn number_width(numbers: impl Iterator<Item = u64>) -> usize {
    numbers.map(|n| n.to_string().len()).max().unwrap_or(1)
}

fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Collects output lines; each pushed block loses one trailing newline so blocks join cleanly.
#[derive(Debug, Default)]
struct Lines(Vec<String>);

impl Lines {
    fn push(&mut self, block: &str) {
        self.0
            .push(block.strip_suffix('\n').unwrap_or(block).to_owned());
    }

    fn push_opt(&mut self, block: Option<&str>) {
        if let Some(block) = block {
            self.push(block);
        }
    }

    /// Pushes a block with every line indented by two spaces.
    fn push_indented(&mut self, block: &str) {
        let block = block.strip_suffix('\n').unwrap_or(block);
        let indented: Vec<String> = block
            .split('\n')
            .map(|line| match line {
                "" => String::new(),
                line => format!("  {line}"),
            })
            .collect();
        self.0.push(indented.join("\n"));
    }

    fn finish(self) -> String {
        self.0.join("\n")
    }
}
