//! The contract the code and the docs cite lives in this repository: no Rust comment and no
//! doc (outside code blocks) cites a document that is not here. What gives such a citation
//! away: the section sign, a numbered spec (`spec` and a number), the word `spec` after a
//! definite article as the name of a document (a `ShellSpec` is called by its type's name
//! instead), or a path into the directory beside the checkout that held the originals.
//! A citation points at a `docs/` page instead (the `links` rule checks that it exists).

use super::{Tree, prose_lines};

/// The fix named with every finding.
const FIX: &str = "bring the part it relies on into docs/ (design notes go under docs/design/) and cite that page by its path and anchor";

pub(super) fn check(tree: &Tree) -> Vec<String> {
    let mut findings = Vec::new();
    for (doc, text) in tree.markdown() {
        for (line_number, line) in prose_lines(text) {
            if let Some(what) = external_citation(line) {
                findings.push(format!("{doc}:{line_number}: cites {what}; fix: {FIX}"));
            }
        }
    }
    for (file, text) in tree.rust() {
        for (index, line) in text.lines().enumerate() {
            let Some(comment) = line.trim_start().strip_prefix("//") else {
                continue;
            };
            if let Some(what) = external_citation(comment) {
                findings.push(format!("{file}:{}: cites {what}; fix: {FIX}", index + 1));
            }
        }
    }
    findings
}

/// What in `text` cites a document outside the repository, if anything does.
fn external_citation(text: &str) -> Option<&'static str> {
    if text.contains('\u{a7}') {
        return Some("a section of a document by the section sign");
    }
    if text.contains(concat!("..", "/shared")) {
        return Some("a file outside the repository");
    }
    let lower = text.to_lowercase();
    for (at, _) in lower.match_indices("spec") {
        let before = lower[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let after = &lower[at + 4..];
        if after.starts_with(' ') && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
            return Some("a numbered spec");
        }
        let names_a_document =
            after.is_empty() || after.starts_with(|c: char| !c.is_alphanumeric() && c != '_');
        if names_a_document && lower[..at].ends_with("the ") {
            return Some("\"the spec\"");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn citations_of_documents_outside_the_repository_are_reported() {
        let section = '\u{a7}';
        let rust = [
            format!("//! The pipeline (spec 01 {section}1.4)."),
            "// The bound the spec sets.".to_owned(),
            "// See the spec's table.".to_owned(),
            "let spec = ShellSpec::new(); // the spec here is a ShellSpec; code lines are not read"
                .to_owned(),
            "// The specs of each run, the specified limit, the spec_ field.".to_owned(),
        ]
        .join("\n");
        let doc = format!(
            "Read {}/UPSTREAM.md.\n```text\nspec 07 {section}7.1\n```\nSee docs/performance.md.\n",
            concat!("..", "/shared")
        );
        let tree = Tree::of(&[("crates/a/src/lib.rs", &rust), ("docs/page.md", &doc)]);
        let fix = "fix: bring the part it relies on into docs/ (design notes go under docs/design/) and cite that page by its path and anchor";
        assert_eq!(
            check(&tree),
            vec![
                format!("docs/page.md:1: cites a file outside the repository; {fix}"),
                format!(
                    "crates/a/src/lib.rs:1: cites a section of a document by the section sign; {fix}"
                ),
                format!("crates/a/src/lib.rs:2: cites \"the spec\"; {fix}"),
                format!("crates/a/src/lib.rs:3: cites \"the spec\"; {fix}"),
            ]
        );
    }
}
