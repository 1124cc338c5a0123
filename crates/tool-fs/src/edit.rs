//! `edit`'s replacement: literal, exactly once unless `replace_all`, in the file's own line
//! endings; and the errors that say where a missed `old_string` differs from the file.

use crate::visible::{describe, make_visible};

/// A successful replacement.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Edited {
    pub(crate) text: String,
    /// The 1-based lines (in the new text) where the replacements start.
    pub(crate) lines: Vec<u64>,
    pub(crate) crlf_adapted: bool,
}

/// Replaces `old` by `new` in `content`; the error is the model's text.
pub(crate) fn apply(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Edited, String> {
    let attempt = |old: &str, new: &str, crlf_adapted: bool| {
        // Replacing every occurrence takes them left to right; a single replacement must be
        // unambiguous, so occurrences that overlap (`  ` in `   `) count as several.
        let starts: Vec<usize> = if replace_all {
            content.match_indices(old).map(|(i, _)| i).collect()
        } else {
            overlapping_starts(content, old)
        };
        if starts.is_empty() {
            return None;
        }
        Some(replace(
            content,
            old,
            new,
            &starts,
            replace_all,
            crlf_adapted,
        ))
    };
    if let Some(result) = attempt(old, new, false) {
        return result;
    }
    // A file with CRLF endings, and strings typed with LF: match and write in CRLF.
    if content.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
        let old_crlf = old.replace('\n', "\r\n");
        let new_crlf = new.replace("\r\n", "\n").replace('\n', "\r\n");
        if let Some(result) = attempt(&old_crlf, &new_crlf, true) {
            return result;
        }
    }
    Err(not_found(content, old))
}

/// Where `old` starts in `content`, overlapping occurrences included.
fn overlapping_starts(content: &str, old: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(found) = content[from..].find(old) {
        let at = from + found;
        starts.push(at);
        from = at + content[at..].chars().next().map_or(1, char::len_utf8);
    }
    starts
}

fn replace(
    content: &str,
    old: &str,
    new: &str,
    starts: &[usize],
    replace_all: bool,
    crlf_adapted: bool,
) -> Result<Edited, String> {
    if starts.len() > 1 && !replace_all {
        let lines: Vec<String> = lines_at(content, starts)
            .iter()
            .map(u64::to_string)
            .collect();
        return Err(format!(
            "old_string occurs {} times (at lines {}); include more of the surrounding lines to make it unique, or set `replace_all: true` to replace every occurrence",
            starts.len(),
            lines.join(", ")
        ));
    }
    let mut text = String::with_capacity(content.len() + starts.len() * new.len());
    let mut lines = Vec::with_capacity(starts.len());
    let mut last = 0;
    // Lines are counted as the text grows, so many replacements stay linear.
    let mut line = 1u64;
    let new_lines = new.matches('\n').count() as u64;
    for &start in starts {
        let before = &content[last..start];
        text.push_str(before);
        line += before.matches('\n').count() as u64;
        lines.push(line);
        text.push_str(new);
        line += new_lines;
        last = start + old.len();
    }
    text.push_str(&content[last..]);
    Ok(Edited {
        text,
        lines,
        crlf_adapted,
    })
}

/// The 1-based lines holding the ascending byte offsets `starts`, in one pass.
fn lines_at(content: &str, starts: &[usize]) -> Vec<u64> {
    let mut line = 1u64;
    let mut last = 0;
    starts
        .iter()
        .map(|&at| {
            line += content[last..at].matches('\n').count() as u64;
            last = at;
            line
        })
        .collect()
}

/// The 1-based line holding byte `at`.
fn line_of(content: &str, at: usize) -> u64 {
    content[..at].matches('\n').count() as u64 + 1
}

/// Whether `c` is blank for the fuzzy comparison: spaces, tabs, no-break spaces, CRs,
/// zero-width characters.
fn blank(c: char) -> bool {
    c == ' '
        || c == '\t'
        || c == '\r'
        || matches!(
            c,
            '\u{a0}'
                | '\u{202f}'
                | '\u{2007}'
                | '\u{200b}'
                | '\u{200c}'
                | '\u{200d}'
                | '\u{2060}'
                | '\u{feff}'
        )
}

/// `text` with every run of blanks as one space, and the byte each kept character came from.
fn normalised(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut from = Vec::with_capacity(text.len());
    let mut in_blank = false;
    for (i, c) in text.char_indices() {
        if blank(c) {
            if !in_blank {
                out.push(' ');
                from.push(i);
            }
            in_blank = true;
        } else {
            in_blank = false;
            out.push(c);
            from.extend(std::iter::repeat_n(i, c.len_utf8()));
        }
    }
    (out, from)
}

/// The error of an `old_string` not in `content`: the closest region, and its first character
/// that differs.
fn not_found(content: &str, old: &str) -> String {
    let head = "old_string was not found in the file";
    // First: the same text but for blanks (tabs against spaces, no-break spaces, CRLF).
    let (norm_content, from) = normalised(content);
    let (norm_old, _) = normalised(old);
    let trimmed = norm_old.trim();
    let start = (!trimmed.is_empty())
        .then(|| norm_content.find(trimmed))
        .flatten()
        .and_then(|i| from.get(i).copied());
    let start = match start {
        Some(i) => align_blank_run(content, i, old),
        None => return longest_prefix(content, old, head),
    };
    let (at, file_char, old_char) = first_difference(&content[start..], old);
    report(content, start + at, file_char, old_char, head)
}

/// Moves `start` back over blanks when `old` starts with blanks, to the run's start on its line.
fn align_blank_run(content: &str, start: usize, old: &str) -> usize {
    if !old.starts_with(blank) {
        return start;
    }
    let line_start = content[..start].rfind('\n').map_or(0, |n| n + 1);
    let before = &content[line_start..start];
    line_start + before.trim_end_matches(blank).len()
}

/// Where `file` (from the region's start) and `old` first differ, and the two characters.
fn first_difference(file: &str, old: &str) -> (usize, Option<char>, Option<char>) {
    let mut f = file.char_indices();
    let mut o = old.chars();
    loop {
        match (f.next(), o.next()) {
            (Some((_, a)), Some(b)) if a == b => continue,
            (Some((i, a)), b) => return (i, Some(a), b),
            (None, b) => return (file.len(), None, b),
        }
    }
}

/// The fallback: the longest prefix of `old` that occurs in `content`.
fn longest_prefix(content: &str, old: &str, head: &str) -> String {
    let bounds: Vec<usize> = old
        .char_indices()
        .map(|(i, _)| i)
        .skip(1)
        .chain([old.len()])
        .collect();
    // Occurrence of a prefix is monotone in its length: binary search the longest.
    let (mut lo, mut hi) = (0usize, bounds.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if content.contains(&old[..bounds[mid - 1]]) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == 0 {
        return format!(
            "{head}, and no part of it occurs there; read the file again with `read` and copy the text exactly"
        );
    }
    let prefix = &old[..bounds[lo - 1]];
    let Some(start) = content.find(prefix) else {
        return format!("{head}; read the file again with `read` and copy the text exactly");
    };
    let at = start + prefix.len();
    let file_char = content[at..].chars().next();
    let old_char = old[prefix.len()..].chars().next();
    report(content, at, file_char, old_char, head)
}

/// The error text: where the first difference is, what differs, and the region quoted.
fn report(
    content: &str,
    at: usize,
    file_char: Option<char>,
    old_char: Option<char>,
    head: &str,
) -> String {
    let line = line_of(content, at);
    let line_start = content[..at].rfind('\n').map_or(0, |n| n + 1);
    let column = content[line_start..at].chars().count() + 1;
    let mut text = format!(
        "{head}. The closest match differs first at line {line}, column {column}: the file has {} where old_string has {}.",
        describe(file_char),
        describe(old_char)
    );
    if file_char == Some('\r') || old_char == Some('\r') {
        text.push_str(" The file and old_string use different line endings.");
    }
    text.push_str(" The file there (look-alike characters shown as tokens; type the real ones):\n");
    let first = line.saturating_sub(2).max(1);
    for (n, l) in content
        .lines()
        .enumerate()
        .skip((first - 1) as usize)
        .take(5)
    {
        text.push_str(&format!("{:>6}\t{}\n", n + 1, make_visible(l)));
    }
    text.trim_end().to_owned()
}
