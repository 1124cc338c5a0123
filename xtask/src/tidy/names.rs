//! Every test a doc names is a `fn` of the workspace, in the file the doc names with it.
//!
//! A *test name* is a backticked snake_case identifier of four or more words
//! (`a_panicking_body_is_contained`), the shape of every test name the docs cite, unless the
//! Rust source uses it as a field, a binding, a path root or a whole string literal
//! (`max_concurrent_jobs_per_owner:`, `serde_path_to_error::`, a benchmark's figure in
//! quotes), which makes it another kind of identifier. A test name resolves when some Rust
//! file defines a `fn` of that name. Where the doc also says which file, that file must
//! define it: `` `name` in `path.rs` `` (also after a list of names joined by `,` and `and`),
//! or `` `path.rs`: `name`, `name` `` up to the next `;` or table cell (the colon and the
//! semicolon ASCII or full-width). A short path (`reliability.rs`, `jobs/settlement.rs`)
//! matches the end of a path.

use super::{Tree, code_spans, prose_lines};
use std::collections::{BTreeMap, BTreeSet};

/// The fix named with every finding.
const FIX: &str = "rename the citation to the test's current name and file, or restore the test";

pub(super) fn check(tree: &Tree) -> Vec<String> {
    let definitions = definitions(tree);
    let other_identifiers = other_identifiers(tree);
    let mut findings = Vec::new();
    for (doc, text) in tree.markdown() {
        for (line_number, line) in prose_lines(text) {
            for (name, file) in citations(line) {
                if other_identifiers.contains(name) && !definitions.contains_key(name) {
                    continue;
                }
                let files = definitions.get(name);
                let problem = match (files, file) {
                    (None, _) => format!("no `fn {name}` in the workspace"),
                    (Some(files), Some(file)) if !files.iter().any(|f| ends_with(f, file)) => {
                        format!("`fn {name}` is not in `{file}` (it is in {files:?})")
                    }
                    _ => continue,
                };
                findings.push(format!(
                    "{doc}:{line_number}: names a test: {problem}; fix: {FIX}"
                ));
            }
        }
    }
    findings
}

/// Whether `name` has the shape of a test name.
fn is_test_name(name: &str) -> bool {
    let words: Vec<&str> = name.split('_').collect();
    words.len() >= 4
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && words.iter().all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Whether `path` is `file` or ends with `/file`.
fn ends_with(path: &str, file: &str) -> bool {
    path == file || path.ends_with(&format!("/{file}"))
}

/// The test names of a line, each with the file the line cites it in, if it does.
fn citations(line: &str) -> Vec<(&str, Option<&str>)> {
    let spans = code_spans(line);
    let mut cited: Vec<(&str, Option<&str>)> = Vec::new();
    // The file a `path.rs`: introduces, until a `;` or a table cell ends the list.
    let mut introduced: Option<&str> = None;
    let mut end_of_previous = 0;
    for (index, &(at, span)) in spans.iter().enumerate() {
        let before = &line[end_of_previous..at];
        if before.contains([';', '；', '|']) {
            introduced = None;
        }
        end_of_previous = at + span.len() + 2;
        if span.ends_with(".rs") {
            if line[end_of_previous..].starts_with([':', '：']) {
                introduced = Some(span);
            }
            continue;
        }
        if !is_test_name(span) {
            continue;
        }
        cited.push((span, introduced.or_else(|| file_after(line, &spans, index))));
    }
    cited
}

/// The file of `` `name` in `path.rs` `` (or `` in [`path.rs`](…) ``) for the name at
/// `index`, also when it is one of a list (`` `a`, `b` and `c` in `path.rs` ``).
fn file_after<'a>(line: &'a str, spans: &[(usize, &'a str)], index: usize) -> Option<&'a str> {
    let mut index = index;
    loop {
        let (at, span) = spans[index];
        let (next_at, next) = *spans.get(index + 1)?;
        let between = &line[at + span.len() + 2..next_at];
        if next.ends_with(".rs") && matches!(between, " in " | " in [") {
            return Some(next);
        }
        if !is_test_name(next) || !matches!(between, ", " | " and " | ", and ") {
            return None;
        }
        index += 1;
    }
}

/// Each `fn` name of the workspace's Rust and the files that define it.
fn definitions(tree: &Tree) -> BTreeMap<&str, Vec<&str>> {
    let mut definitions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (file, text) in tree.rust() {
        for name in identifiers_after(text, "fn ") {
            definitions.entry(name).or_default().push(file);
        }
    }
    definitions
}

/// The snake_case identifiers the Rust source uses as fields, bindings, path roots or whole
/// string literals (a benchmark's figure, a JSON key).
fn other_identifiers(tree: &Tree) -> BTreeSet<&str> {
    let mut found = BTreeSet::new();
    for (_, text) in tree.rust() {
        found.extend(
            text.split('"')
                .skip(1)
                .step_by(2)
                .filter(|literal| is_test_name(literal)),
        );
        for (at, _) in text.match_indices(':') {
            let start = text[..at]
                .char_indices()
                .rev()
                .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let name = &text[start..at];
            if is_test_name(name) {
                found.insert(name);
            }
        }
    }
    found
}

/// The identifiers that follow `keyword` at a word boundary.
fn identifiers_after<'a>(text: &'a str, keyword: &str) -> Vec<&'a str> {
    text.match_indices(keyword)
        .filter(|(at, _)| {
            text[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
        .filter_map(|(at, _)| {
            let rest = &text[at + keyword.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (end > 0).then(|| &rest[..end])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const SOURCE: &str = "
#[test]
fn a_panicking_body_is_contained() {}
struct Limits { max_concurrent_jobs_per_owner: usize }
fn x() { serde_path_to_error::deserialize(); }
const FIGURE: &str = \"program_us_per_call\";
";

    fn findings(doc: &str) -> Vec<String> {
        let tree = Tree::of(&[
            ("crates/a/tests/pipeline.rs", SOURCE),
            (
                "crates/a/tests/jobs/settlement.rs",
                "fn a_kill_racing_an_exit() {}",
            ),
            ("docs/page.md", doc),
        ]);
        check(&tree)
    }

    #[test]
    fn a_renamed_test_is_reported_and_fields_and_crates_are_not_tests() {
        let doc = "Tested by `a_panicking_body_is_contained`.\n\
                   The `max_concurrent_jobs_per_owner` cap, `serde_path_to_error`, `two_words`, \
                   `program_us_per_call`.\n\
                   ```text\n`a_test_inside_a_code_block`\n```\n\
                   Tested by `a_panicking_body_is_still_contained`.\n";
        assert_eq!(
            findings(doc),
            vec![
                "docs/page.md:6: names a test: no `fn a_panicking_body_is_still_contained` in the workspace; fix: rename the citation to the test's current name and file, or restore the test"
            ]
        );
    }

    #[test]
    fn a_test_cited_in_the_wrong_file_is_reported() {
        let doc = "Tests: `a_panicking_body_is_contained` in `crates/a/tests/pipeline.rs`, \
                   `a_kill_racing_an_exit` and `a_panicking_body_is_contained` in [`pipeline.rs`](x).\n\
                   | row | `jobs/settlement.rs`: `a_kill_racing_an_exit`, `a_panicking_body_is_contained`; `a_kill_racing_an_exit` |\n\
                   | 行 | `pipeline.rs`：`a_kill_racing_an_exit` |\n";
        assert_eq!(
            findings(doc),
            vec![
                "docs/page.md:1: names a test: `fn a_kill_racing_an_exit` is not in `pipeline.rs` (it is in [\"crates/a/tests/jobs/settlement.rs\"]); fix: rename the citation to the test's current name and file, or restore the test",
                "docs/page.md:2: names a test: `fn a_panicking_body_is_contained` is not in `jobs/settlement.rs` (it is in [\"crates/a/tests/pipeline.rs\"]); fix: rename the citation to the test's current name and file, or restore the test",
                "docs/page.md:3: names a test: `fn a_kill_racing_an_exit` is not in `pipeline.rs` (it is in [\"crates/a/tests/jobs/settlement.rs\"]); fix: rename the citation to the test's current name and file, or restore the test",
            ]
        );
    }

    #[test]
    fn the_shape_of_a_test_name() {
        assert!(is_test_name("a_b_c_d"));
        assert!(is_test_name("teardown_stops_50_jobs"));
        assert!(!is_test_name("a_b_c"));
        assert!(!is_test_name("A_b_c_d"));
        assert!(!is_test_name("a__b_c_d"));
        assert!(!is_test_name("tool_bash::a_b_c"));
    }
}
