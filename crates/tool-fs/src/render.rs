//! The model's text of each value: numbered lines, what was cut and how to continue, and the
//! search listings with their totals.

use crate::value::{EditValue, GlobValue, GrepValue, ReadValue, WriteValue};
use crate::visible::make_visible;

/// A read: `{number:>6}\t{line}` per line (look-alikes as tokens), then bracketed notes.
pub fn render_read(value: &ReadValue) -> String {
    let mut text = String::new();
    if value.total_lines == 0 {
        return format!("[{} is empty]", value.path);
    }
    for line in &value.lines {
        text.push_str(&format!("{:>6}\t{}", line.number, make_visible(&line.text)));
        if let Some(chars) = line.cut_from_chars {
            text.push_str(&format!(
                "… [line cut at {} of {chars} characters]",
                line.text.chars().count()
            ));
        }
        text.push('\n');
    }
    let mut notes = Vec::new();
    if let (Some(next), Some(first), Some(last)) =
        (value.next_offset, value.lines.first(), value.lines.last())
    {
        let why = if value.byte_cap_reached {
            " (the page reached its size cap)"
        } else {
            ""
        };
        notes.push(format!(
            "[showing lines {}-{} of {}{why}; continue with `offset`: {next}]",
            first.number, last.number, value.total_lines
        ));
    }
    let i = value.invisible;
    if !i.is_empty() {
        let mut kinds = Vec::new();
        if i.no_break_spaces > 0 {
            kinds.push(format!("{} no-break space(s)", i.no_break_spaces));
        }
        if i.zero_width > 0 {
            kinds.push(format!("{} zero-width character(s)", i.zero_width));
        }
        if i.lone_carriage_returns > 0 {
            kinds.push(format!(
                "{} lone carriage return(s) (⟨CR⟩)",
                i.lone_carriage_returns
            ));
        }
        notes.push(format!(
            "[these lines hold {}, shown as ⟨U+XXXX⟩ tokens; an edit's old_string must contain the real characters]",
            kinds.join(", ")
        ));
    }
    if value.crlf_lines > 0 {
        notes.push(format!(
            "[{} of these lines end in CRLF; edit keeps the file's line endings]",
            value.crlf_lines
        ));
    }
    text.push_str(&notes.join("\n"));
    text.trim_end().to_owned()
}

/// A write: what was written where.
pub fn render_write(value: &WriteValue) -> String {
    let verb = if value.created { "Created" } else { "Wrote" };
    format!(
        "{verb} {} ({} lines, {} bytes)",
        value.path, value.lines, value.bytes
    )
}

/// An edit: how many replacements, at which lines.
pub fn render_edit(value: &EditValue) -> String {
    let lines: Vec<String> = value.lines.iter().map(u64::to_string).collect();
    let what = if value.replacements == 1 {
        String::from("1 occurrence")
    } else {
        format!("{} occurrences", value.replacements)
    };
    let mut text = format!(
        "Edited {}: replaced {what} (at line{} {})",
        value.path,
        if lines.len() == 1 { "" } else { "s" },
        lines.join(", ")
    );
    if value.crlf_adapted {
        text.push_str("; matched and written with the file's CRLF line endings");
    }
    text
}

/// Where the complete list is, or why it is not saved.
fn spill_note(path: Option<&str>, error: Option<&str>) -> String {
    match (path, error) {
        (Some(path), _) => format!("the complete list is in {path}"),
        (None, Some(why)) => format!("the complete list was not saved: {why}"),
        (None, None) => String::from("the complete list was not saved"),
    }
}

/// A glob: the paths, newest first, and the total when capped.
pub fn render_glob(value: &GlobValue) -> String {
    if value.total == 0 {
        return format!("[no files match in {}]", value.path);
    }
    let mut text = value.paths.join("\n");
    if value.truncated {
        text.push_str(&format!(
            "\n[showing {} of {} files, newest first; {}. Narrow the pattern or the path]",
            value.paths.len(),
            value.total,
            spill_note(value.spill_path.as_deref(), value.spill_error.as_deref())
        ));
    }
    text
}

/// A grep: each file's path, then its matching lines as `  number: line`.
pub fn render_grep(value: &GrepValue) -> String {
    if value.total == 0 {
        return format!("[no matches in {}]", value.path);
    }
    let mut text = String::new();
    for file in &value.files {
        text.push_str(&file.path);
        text.push('\n');
        for m in &file.matches {
            text.push_str(&format!("  {}: {}\n", m.line_number, make_visible(&m.line)));
        }
    }
    let shown: usize = value.files.iter().map(|f| f.matches.len()).sum();
    if value.truncated {
        text.push_str(&format!(
            "[showing {shown} of {} matches; {}. Narrow the pattern, the path or `include`]",
            value.total,
            spill_note(value.spill_path.as_deref(), value.spill_error.as_deref())
        ));
    }
    text.trim_end().to_owned()
}
