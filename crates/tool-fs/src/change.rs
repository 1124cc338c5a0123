//! The change a `write` or `edit` made, as the diff card shows it: the whole old and new text
//! for a small file, or the changed lines with three lines of context for a large one.

use crate::value::FileChange;

/// Lines of context around the changed lines of a large file.
const CONTEXT: usize = 3;

/// The change from `old` (`None`: a new file) to `new` of `path`.
pub(crate) fn file_change(
    path: &str,
    old: Option<&str>,
    new: &str,
    whole_max: usize,
) -> FileChange {
    let old_len = old.map_or(0, str::len);
    if old_len.max(new.len()) <= whole_max {
        return FileChange {
            path: path.to_owned(),
            old_text: old.map(str::to_owned),
            new_text: new.to_owned(),
            first_line: 1,
            whole: true,
        };
    }
    let old_text = old.unwrap_or_default();
    let prefix = common_prefix(old_text, new);
    let suffix = common_suffix(&old_text[prefix..], &new[prefix..]);
    // Widen to whole lines, then to the context lines around them.
    let start = line_start_before(old_text, prefix, CONTEXT);
    let old_end = line_end_after(old_text, old_text.len() - suffix, CONTEXT);
    let new_end = line_end_after(new, new.len() - suffix, CONTEXT);
    let first_line = old_text[..start].matches('\n').count() as u64 + 1;
    FileChange {
        path: path.to_owned(),
        old_text: old.map(|_| old_text[start..old_end].to_owned()),
        new_text: new[start..new_end].to_owned(),
        first_line,
        whole: false,
    }
}

fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

fn common_suffix(a: &str, b: &str) -> usize {
    let mut n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    while !a.is_char_boundary(a.len() - n) || !b.is_char_boundary(b.len() - n) {
        n -= 1;
    }
    n
}

/// The start of the line `context` lines before the one holding byte `at`.
fn line_start_before(text: &str, at: usize, context: usize) -> usize {
    let mut start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    for _ in 0..context {
        if start == 0 {
            break;
        }
        start = text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
    }
    start
}

/// The end (after its newline) of the line `context` lines after the one holding byte `at`.
fn line_end_after(text: &str, at: usize, context: usize) -> usize {
    let mut end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
    for _ in 0..context {
        if end >= text.len() {
            break;
        }
        end = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    }
    end
}
