//! `cargo xtask tidy`: the rules that keep the tree navigable, each a pure function of the
//! files it reads, so each has a unit test on a made-up tree that breaks it.
//!
//! - `names`: every test a doc names is a `fn` of the workspace, in the file the doc names
//!   with it.
//! - `links`: every cited doc section exists: markdown links, and references to markdown
//!   files with an anchor in the docs and in Rust comments, resolve to a file and, with an
//!   anchor, to a heading.
//! - `external`: no Rust comment and no doc cites a document outside the repository.
//! - `size`: no Rust file is over [`size::BUDGET`] lines unless its first lines give the
//!   reason on a `Size:` comment line.
//! - `imports`: no file of a crate imports a file that imports it back, however long the
//!   circle (a module directory's `mod.rs` and its children are one unit).
//! - `unsafe_budget`: every crate under `crates/` states its `unsafe` budget on a
//!   `//! Unsafe budget: N — reason` line of its crate docs, and holds exactly N.

mod external;
mod imports;
mod links;
mod names;
mod size;
mod unsafe_budget;

use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Directories never read: build output, installed tools, version control.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", ".git"];

/// The part of the checkout the rules read: every path (files and directories, relative to
/// the root, `/`-separated) and the text of every Rust and markdown file.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    paths: BTreeSet<String>,
    texts: BTreeMap<String, String>,
}

impl Tree {
    /// Reads the checkout at `root`.
    pub(crate) fn read(root: &Path) -> Result<Tree> {
        let mut tree = Tree::default();
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(root.join(&dir))
                .with_context(|| format!("cannot list {}", root.join(&dir).display()))?;
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    if !SKIPPED_DIRS.contains(&name.as_str()) {
                        tree.paths.insert(path.clone());
                        stack.push(path);
                    }
                } else {
                    if path.ends_with(".rs") || path.ends_with(".md") {
                        tree.texts
                            .insert(path.clone(), crate::read(&root.join(&path))?);
                    }
                    tree.paths.insert(path);
                }
            }
        }
        Ok(tree)
    }

    /// A tree of the given files, for the rules' tests.
    #[cfg(test)]
    pub(crate) fn of(files: &[(&str, &str)]) -> Tree {
        let mut tree = Tree::default();
        for (path, text) in files {
            let mut parent = Path::new(path).parent();
            while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
                tree.paths.insert(dir.to_string_lossy().into_owned());
                parent = dir.parent();
            }
            tree.paths.insert((*path).to_owned());
            tree.texts.insert((*path).to_owned(), (*text).to_owned());
        }
        tree
    }

    /// Whether `path` (relative to the root) is a file or a directory of the tree.
    fn exists(&self, path: &str) -> bool {
        path.is_empty() || self.paths.contains(path)
    }

    /// The Rust files and their text.
    fn rust(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files_ending(".rs")
    }

    /// The markdown files and their text.
    fn markdown(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files_ending(".md")
    }

    fn files_ending(&self, extension: &str) -> impl Iterator<Item = (&str, &str)> {
        self.texts
            .iter()
            .filter(move |(path, _)| path.ends_with(extension))
            .map(|(path, text)| (path.as_str(), text.as_str()))
    }
}

/// Every finding of every rule, each one line naming the file, the line where there is one,
/// the rule and the fix.
pub(crate) fn check(tree: &Tree) -> Vec<String> {
    let mut findings = names::check(tree);
    findings.extend(links::check(tree));
    findings.extend(external::check(tree));
    findings.extend(size::check(tree));
    findings.extend(imports::check(tree));
    findings.extend(unsafe_budget::check(tree));
    findings
}

/// The lines of a markdown text outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fence: Option<&str> = None;
    text.lines().enumerate().filter_map(move |(index, line)| {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(marker)) => {
                fence = Some(marker);
                None
            }
            (Some(open), Some(marker)) if open == marker => {
                fence = None;
                None
            }
            (Some(_), _) => None,
            (None, None) => Some((index + 1, line)),
        }
    })
}

/// The inline code spans of a line (the text between single backticks), with the byte offset
/// of each span's opening backtick.
fn code_spans(line: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut rest = 0;
    while let Some(open) = line[rest..].find('`').map(|i| rest + i) {
        let Some(close) = line[open + 1..].find('`').map(|i| open + 1 + i) else {
            break;
        };
        spans.push((open, &line[open + 1..close]));
        rest = close + 1;
    }
    spans
}

/// The directory part of a `/`-separated relative path (`""` at the root).
fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// `base/relative`, with `.` and `..` resolved; `None` when `..` climbs above the root.
fn join(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The `cargo test` twin of `cargo xtask tidy`.
    #[test]
    fn the_tree_is_tidy() {
        let tree = Tree::read(&crate::workspace_root()).unwrap();
        assert_eq!(check(&tree), Vec::<String>::new());
    }

    #[test]
    fn code_blocks_are_not_prose() {
        let text = "a\n```rust\nb\n```\nc\n~~~\n```\nd\n~~~\ne";
        let lines: Vec<(usize, &str)> = prose_lines(text).collect();
        assert_eq!(lines, vec![(1, "a"), (5, "c"), (10, "e")]);
    }

    #[test]
    fn paths_join_and_refuse_to_climb_above_the_root() {
        assert_eq!(join("docs/subsystems", "../x.md"), Some("docs/x.md".into()));
        assert_eq!(join("", "./docs/a.md"), Some("docs/a.md".into()));
        assert_eq!(join("docs", "../../x.md"), None);
        assert_eq!(code_spans("a `b` c `d e` `f"), vec![(2, "b"), (8, "d e")]);
    }
}
