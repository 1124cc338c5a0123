//! Every cited doc section exists.
//!
//! Read in the docs (outside code blocks): every markdown link `[text](target)` whose target
//! is neither a URL nor a rustdoc path (`crate::Tool`), and every reference to a markdown
//! file by a path with a `/` or an anchor after a `#`. Read in Rust comments: every such
//! reference. A link resolves against its document's directory; a reference against the
//! directory of the file that makes it or any directory above it, up to the root. The target
//! must exist, and an anchor must be the GitHub slug of one of the target's headings (or an
//! HTML `id`/`name`).

use super::{Tree, join, parent, prose_lines};
use std::collections::BTreeSet;

pub(super) fn check(tree: &Tree) -> Vec<String> {
    let mut findings = Vec::new();
    for (doc, text) in tree.markdown() {
        for (line_number, line) in prose_lines(text) {
            for target in link_targets(line) {
                if let Some(problem) = resolve(tree, doc, target, false) {
                    findings.push(format!("{doc}:{line_number}: link `{target}`: {problem}"));
                }
            }
            for target in references(line) {
                if let Some(problem) = resolve(tree, doc, target, true) {
                    findings.push(format!("{doc}:{line_number}: `{target}`: {problem}"));
                }
            }
        }
    }
    for (file, text) in tree.rust() {
        for (index, line) in text.lines().enumerate() {
            let Some(comment) = line.trim_start().strip_prefix("//") else {
                continue;
            };
            for target in references(comment) {
                if let Some(problem) = resolve(tree, file, target, true) {
                    findings.push(format!("{file}:{}: `{target}`: {problem}", index + 1));
                }
            }
        }
    }
    findings
}

/// Why `target`, cited in `from`, points at nothing, or `None` when it resolves. A link
/// resolves against `from`'s directory only; a reference (`climb`) also against each
/// directory above it.
fn resolve(tree: &Tree, from: &str, target: &str, climb: bool) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let mut base = parent(from);
    let resolved = loop {
        let candidate = if path.is_empty() {
            Some(from.to_owned())
        } else {
            join(base, path)
        };
        if let Some(candidate) = candidate.filter(|c| tree.exists(c)) {
            break candidate;
        }
        if !climb || base.is_empty() {
            return Some(format!(
                "no such file or directory; fix: point it at an existing file (relative to {})",
                if climb {
                    "this file or a directory above it"
                } else {
                    "this document"
                }
            ));
        }
        base = parent(base);
    };
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if !resolved.ends_with(".md") {
        return None;
    }
    let text = tree.texts.get(&resolved)?;
    if anchors(text).contains(anchor) {
        return None;
    }
    Some(format!(
        "`{resolved}` has no heading with the anchor `#{anchor}`; fix: cite one of its headings (GitHub slugs: lowercase, punctuation dropped, spaces as `-`)"
    ))
}

/// The targets of the markdown links of a line that are not URLs.
fn link_targets(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    for (at, _) in line.match_indices("](") {
        let rest = &line[at + 2..];
        let Some(end) = rest.find(')') else {
            continue;
        };
        let target = rest[..end]
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_start_matches('<')
            .trim_end_matches('>');
        if target.is_empty()
            || target.contains("://")
            || target.contains("::")
            || target.starts_with("mailto:")
        {
            continue;
        }
        targets.push(target);
    }
    targets
}

/// The references to markdown files in a text that have a `/` or an anchor, links and URLs
/// excluded.
fn references(text: &str) -> Vec<&str> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut found = Vec::new();
    for (at, _) in text.match_indices(".md") {
        let start = text[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !is_path(*c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        // A link's target is read as a link, with the link's resolution.
        if text[..start].ends_with("](") || text[..start].ends_with("](<") {
            continue;
        }
        let mut end = at + 3;
        let after = &text[end..];
        if after.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            continue;
        }
        if let Some(anchor) = after.strip_prefix('#') {
            let length = anchor
                .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(anchor.len());
            end += 1 + length;
        }
        let reference = &text[start..end];
        // A URL's path starts right after the colon of its scheme.
        if text[..start].ends_with(':') {
            continue;
        }
        if reference[..at - start].contains('/') || reference.contains('#') {
            found.push(reference);
        }
    }
    found
}

/// The anchors of a markdown document: the GitHub slug of every heading (a repeated slug
/// gets `-1`, `-2`, …) and every HTML `id="…"` or `name="…"`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(&line[hashes..]);
            let mut anchor = base.clone();
            let mut repeat = 0;
            while found.contains(&anchor) {
                repeat += 1;
                anchor = format!("{base}-{repeat}");
            }
            found.insert(anchor);
        }
        for attribute in ["id=\"", "name=\""] {
            for (at, _) in line.match_indices(attribute) {
                let rest = &line[at + attribute.len()..];
                if let Some(end) = rest.find('"') {
                    found.insert(rest[..end].to_owned());
                }
            }
        }
    }
    found
}

/// GitHub's anchor for a heading's text: link targets dropped, lowercase, letters, digits,
/// `-` and `_` kept, spaces turned into `-`, everything else dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading.trim();
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = rest[at..].find(')').map_or("", |end| &rest[at + end + 1..]);
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const TOOLS: &str =
        "# Tools\n\n## The pipeline: `execute`\n\n## Hooks\n\n## Hooks\n\n<a id=\"custom\"></a>\n";

    fn findings(files: &[(&str, &str)]) -> Vec<String> {
        let mut all = vec![("docs/subsystems/tools.md", TOOLS)];
        all.extend_from_slice(files);
        check(&Tree::of(&all))
    }

    #[test]
    fn links_and_references_that_resolve_are_accepted() {
        let doc = "See [the pipeline](subsystems/tools.md#the-pipeline-execute), \
                   [hooks](subsystems/tools.md#hooks-1), [x](subsystems/tools.md#custom), \
                   [the crate](../crates/a/), [web](https://example.com/x.md#nothing), \
                   [top](#architecture), [`Tool`](crate::Tool), `docs/subsystems/tools.md#hooks` and \
                   https://example.com/docs/x.md#y.\n\
                   ```text\n[not a link](nowhere.md)\n```\n# Architecture\n";
        let rust = "//! The stages of docs/subsystems/tools.md#the-pipeline-execute.\n\
                    let url = \"docs/nowhere.md\";\n";
        assert_eq!(
            findings(&[("docs/architecture.md", doc), ("crates/a/src/lib.rs", rust),]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_missing_file_or_heading_is_reported() {
        let doc = "See [gone](subsystems/spill.md), [renamed](subsystems/tools.md#the-stages) \
                   and `docs/design/missing.md`.\n";
        let rust = "    // As docs/subsystems/tools.md#guards says.\n";
        assert_eq!(
            findings(&[("docs/architecture.md", doc), ("crates/a/src/lib.rs", rust),]),
            vec![
                "docs/architecture.md:1: link `subsystems/spill.md`: no such file or directory; fix: point it at an existing file (relative to this document)",
                "docs/architecture.md:1: link `subsystems/tools.md#the-stages`: `docs/subsystems/tools.md` has no heading with the anchor `#the-stages`; fix: cite one of its headings (GitHub slugs: lowercase, punctuation dropped, spaces as `-`)",
                "docs/architecture.md:1: `docs/design/missing.md`: no such file or directory; fix: point it at an existing file (relative to this file or a directory above it)",
                "crates/a/src/lib.rs:1: `docs/subsystems/tools.md#guards`: `docs/subsystems/tools.md` has no heading with the anchor `#guards`; fix: cite one of its headings (GitHub slugs: lowercase, punctuation dropped, spaces as `-`)",
            ]
        );
    }

    #[test]
    fn slugs_follow_github() {
        assert_eq!(slug(" The pipeline: `execute`"), "the-pipeline-execute");
        assert_eq!(slug(" [Adding](x.md) a tool (v2)"), "adding-a-tool-v2");
        assert_eq!(
            slug(" 每次测试运行中的检查（快）"),
            "每次测试运行中的检查快"
        );
        assert_eq!(
            slug(" `mcp_call`: the MCP bridge"),
            "mcp_call-the-mcp-bridge"
        );
    }
}
