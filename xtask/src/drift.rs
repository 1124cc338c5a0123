//! `cargo xtask drift-check`: the documented contract is the code's contract.
//!
//! 1. Every `<!-- BEGIN GENERATED name -->` region equals what its generator renders from the
//!    code, byte for byte (`--bless` rewrites them).
//! 2. Every `X.md` with an `X.zh.md` sibling has the same heading structure, byte-identical code
//!    blocks and identical generated regions.
//! 3. Every cookbook page is included by the `cookbook` crate, so `cargo test` compiles its code.

use crate::generate::GENERATORS;
use anyhow::{Result, bail};
use std::fmt;
use std::path::{Path, PathBuf};

/// What to do with a stale region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Report it.
    Check,
    /// Rewrite it.
    Bless,
}

/// Regions every checkout must carry: (file relative to the root, region name).
pub(crate) const REQUIRED: &[(&str, &str)] = &[
    ("docs/subsystems/tools.md", "failure-codes"),
    ("docs/subsystems/tools.md", "code-mode-sdk"),
    ("docs/subsystems/shell.md", "tool-catalog"),
    ("docs/subsystems/presenters.md", "card-vocabulary"),
    ("docs/subsystems/agent-loop.md", "session-events"),
];

/// The crate that compiles the cookbook pages, relative to the root.
pub(crate) const COOKBOOK_CRATE: &str = "xtask/cookbook/src/lib.rs";

/// The fix to name for stale regions.
const BLESS: &str = "cargo xtask drift-check --bless";

/// The outcome of a run.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) problems: Vec<String>,
    pub(crate) rewritten: Vec<String>,
    pub(crate) checked: usize,
    pub(crate) pairs: usize,
}

impl Report {
    pub(crate) fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rewritten in &self.rewritten {
            writeln!(f, "blessed {rewritten}")?;
        }
        if self.problems.is_empty() {
            return writeln!(
                f,
                "drift-check: {} generated regions are fresh; {} bilingual pairs agree",
                self.checked, self.pairs
            );
        }
        for problem in &self.problems {
            writeln!(f, "{problem}")?;
        }
        writeln!(f, "drift-check: {} problem(s)", self.problems.len())
    }
}

/// One generated region found in a file.
#[derive(Debug)]
struct Region {
    name: String,
    /// Byte range of the content between the markers.
    content: std::ops::Range<usize>,
}

pub(crate) fn begin_marker(name: &str) -> String {
    format!("<!-- BEGIN GENERATED {name} -->")
}

pub(crate) fn end_marker(name: &str) -> String {
    format!("<!-- END GENERATED {name} -->")
}

/// Finds the generated regions of a document.
fn regions(text: &str, file: &str) -> Result<Vec<Region>> {
    const OPEN: &str = "<!-- BEGIN GENERATED ";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find(OPEN).map(|i| i + from) {
        let name_start = start + OPEN.len();
        let Some(name_len) = text[name_start..].find(" -->") else {
            bail!("{file}: unterminated BEGIN GENERATED marker");
        };
        let name = text[name_start..name_start + name_len].to_owned();
        let content_start = name_start + name_len + " -->".len();
        let content_start = content_start + usize::from(text[content_start..].starts_with('\n'));
        let end = end_marker(&name);
        let Some(end_at) = text[content_start..].find(&end).map(|i| i + content_start) else {
            bail!("{file}: region `{name}` has no `{end}` marker");
        };
        out.push(Region {
            name,
            content: content_start..end_at,
        });
        from = end_at + end.len();
    }
    Ok(out)
}

/// The markdown files checked: README and everything under docs/.
pub(crate) fn documents(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.retain(|p| p.exists());
    out.sort();
    Ok(out)
}

pub(crate) fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Checks (or blesses) everything under `root`.
pub(crate) fn run(root: &Path, mode: Mode) -> Result<Report> {
    let mut report = Report::default();
    let mut found: Vec<(String, String)> = Vec::new();
    for path in documents(root)? {
        let file = relative(root, &path);
        let text = crate::read(&path)?;
        let mut rewritten = text.clone();
        // Replace back to front so earlier byte ranges stay valid.
        for region in regions(&text, &file)?.into_iter().rev() {
            found.push((file.clone(), region.name.clone()));
            let Some(generator) = crate::generate::generator(&region.name) else {
                report.problems.push(format!(
                    "{file}: unknown generated region `{}` (known: {})",
                    region.name,
                    GENERATORS
                        .iter()
                        .map(|g| g.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            };
            report.checked += 1;
            let expected = (generator.render)();
            let actual = &text[region.content.clone()];
            if actual == expected {
                continue;
            }
            match mode {
                Mode::Bless => rewritten.replace_range(region.content.clone(), &expected),
                Mode::Check => report.problems.push(format!(
                    "{file}: generated region `{}` is stale (edited by hand, or the code changed):\n{}  fix: run `{BLESS}` and commit the docs",
                    region.name,
                    diff(actual, &expected)
                )),
            }
        }
        if mode == Mode::Bless && rewritten != text {
            std::fs::write(&path, &rewritten)?;
            report.rewritten.push(file);
        }
    }
    for (file, name) in REQUIRED {
        if !found.iter().any(|(f, n)| f == file && n == name) {
            report.problems.push(format!(
                "{file}: the generated region `{name}` is missing; add\n{}\n{}\nand run `{BLESS}`",
                begin_marker(name),
                end_marker(name)
            ));
        }
    }
    parity(root, &mut report)?;
    cookbook_wiring(root, &mut report)?;
    Ok(report)
}

/// The structure of a document that must agree across languages.
#[derive(Debug, Default, PartialEq)]
struct Shape {
    /// Heading levels in order (the texts are translated).
    headings: Vec<(usize, usize)>,
    /// Fenced code blocks in order: (line, info string + body).
    code: Vec<(usize, String)>,
    /// Generated regions in order: (name, content).
    regions: Vec<(String, String)>,
}

fn shape(text: &str, file: &str) -> Result<Shape> {
    let mut shape = Shape::default();
    let mut fence: Option<(usize, String, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if let Some((start, marker, body)) = &mut fence {
            if line.trim_start().starts_with(marker.as_str()) && line.trim() == marker.as_str() {
                shape.code.push((*start, std::mem::take(body)));
                fence = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let marker: String = trimmed
                .chars()
                .take_while(|c| *c == '`' || *c == '~')
                .collect();
            let info = trimmed[marker.len()..].trim().to_owned();
            fence = Some((number, marker, format!("{info}\n")));
            continue;
        }
        if line.starts_with('#') {
            let level = line.chars().take_while(|c| *c == '#').count();
            if line[level..].starts_with(' ') {
                shape.headings.push((level, number));
            }
        }
    }
    for region in regions(text, file)? {
        shape
            .regions
            .push((region.name, text[region.content].to_owned()));
    }
    Ok(shape)
}

/// Compares every `X.md` with its `X.zh.md`.
fn parity(root: &Path, report: &mut Report) -> Result<()> {
    for path in documents(root)? {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".zh.md") {
            continue;
        }
        let sibling = path.with_file_name(name.replace(".md", ".zh.md"));
        if !sibling.exists() {
            continue;
        }
        report.pairs += 1;
        let (en, zh) = (relative(root, &path), relative(root, &sibling));
        let left = shape(&crate::read(&path)?, &en)?;
        let right = shape(&crate::read(&sibling)?, &zh)?;
        let levels = |s: &Shape| s.headings.iter().map(|(l, _)| *l).collect::<Vec<_>>();
        if levels(&left) != levels(&right) {
            let at = levels(&left)
                .iter()
                .zip(levels(&right))
                .position(|(a, b)| *a != b)
                .unwrap_or(left.headings.len().min(right.headings.len()));
            let line = |s: &Shape| {
                s.headings
                    .get(at)
                    .map_or_else(|| String::from("end"), |(_, n)| format!("line {n}"))
            };
            report.problems.push(format!(
                "{en} and {zh}: the heading structure differs ({} headings vs {}); first difference at heading {} ({en} {}, {zh} {}). fix: keep the same headings at the same levels in both languages",
                left.headings.len(),
                right.headings.len(),
                at + 1,
                line(&left),
                line(&right)
            ));
        }
        let bodies = |s: &Shape| s.code.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>();
        if bodies(&left) != bodies(&right) {
            let at = bodies(&left)
                .iter()
                .zip(bodies(&right))
                .position(|(a, b)| *a != b)
                .unwrap_or(left.code.len().min(right.code.len()));
            let line = |s: &Shape| {
                s.code
                    .get(at)
                    .map_or_else(|| String::from("missing"), |(n, _)| format!("line {n}"))
            };
            report.problems.push(format!(
                "{en} and {zh}: code block {} differs ({en} {}, {zh} {}); code blocks must be byte-identical in both languages. fix: copy the block from one file to the other",
                at + 1,
                line(&left),
                line(&right)
            ));
        }
        if left.regions != right.regions {
            report.problems.push(format!(
                "{en} and {zh}: the generated regions differ; both files must carry the same regions. fix: add the markers to both and run `{BLESS}`"
            ));
        }
    }
    Ok(())
}

/// Every cookbook page must be included by the cookbook crate (so its code is compiled).
fn cookbook_wiring(root: &Path, report: &mut Report) -> Result<()> {
    let dir = root.join("docs/cookbook");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let crate_source = std::fs::read_to_string(root.join(COOKBOOK_CRATE)).unwrap_or_default();
    let mut pages: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    pages.sort();
    for page in pages {
        let included = format!("\"/{page}\"))]");
        if !crate_source.contains(&included) {
            report.problems.push(format!(
                "docs/cookbook/{page} is not compiled: {COOKBOOK_CRATE} does not include it. fix: add\n#[doc = include_str!(concat!(env!(\"DSH_COOKBOOK_DIR\"), \"/{page}\"))]\npub mod <name> {{}}"
            ));
        }
    }
    Ok(())
}

/// A small line diff: lines only in the document (`-`) and only in the generated text (`+`).
fn diff(actual: &str, expected: &str) -> String {
    let old: Vec<&str> = actual.lines().collect();
    let new: Vec<&str> = expected.lines().collect();
    // Longest common subsequence table; regions are small.
    let mut lcs = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("    - {}\n", old[i]));
            i += 1;
        } else {
            out.push_str(&format!("    + {}\n", new[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The `cargo test` twin of `cargo xtask drift-check`.
    #[test]
    fn the_docs_agree_with_the_code() {
        let report = run(&crate::workspace_root(), Mode::Check).unwrap();
        assert!(report.is_clean(), "{report}");
    }

    /// A scratch copy of everything the drift check reads.
    pub(crate) fn copy_of_docs() -> tempfile::TempDir {
        let root = crate::workspace_root();
        let dir = tempfile::tempdir().unwrap();
        let mut files = documents(&root).unwrap();
        files.push(root.join(COOKBOOK_CRATE));
        for file in files {
            let target = dir.path().join(relative(&root, &file));
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(&file, target).unwrap();
        }
        dir
    }

    fn edit(dir: &Path, file: &str, change: impl FnOnce(String) -> String) {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let changed = change(text.clone());
        assert_ne!(changed, text, "the mutation of {file} changed nothing");
        std::fs::write(path, changed).unwrap();
    }

    fn problems(dir: &Path) -> String {
        let report = run(dir, Mode::Check).unwrap();
        assert!(!report.is_clean(), "the mutation went unnoticed");
        report.to_string()
    }

    #[test]
    fn an_untouched_copy_is_clean() {
        let dir = copy_of_docs();
        let report = run(dir.path(), Mode::Check).unwrap();
        assert!(report.is_clean(), "{report}");
    }

    #[test]
    fn a_hand_edited_region_fails_naming_the_file_and_the_fix() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/tools.md", |t| {
            t.replacen("| `INVALID_ARGS` |", "| `INVALID_ARGUMENTS` |", 1)
        });
        let text = problems(dir.path());
        assert!(
            text.contains("docs/subsystems/tools.md: generated region `failure-codes` is stale"),
            "{text}"
        );
        assert!(text.contains("    - | `INVALID_ARGUMENTS`"), "{text}");
        assert!(text.contains("    + | `INVALID_ARGS`"), "{text}");
        assert!(text.contains(BLESS), "{text}");
        let blessed = run(dir.path(), Mode::Bless).unwrap();
        assert_eq!(blessed.rewritten, vec!["docs/subsystems/tools.md"]);
        assert!(run(dir.path(), Mode::Check).unwrap().is_clean());
    }

    #[test]
    fn a_parameter_added_without_blessing_fails() {
        // The copy documents an older `bash` without `workdir`; the code has it. This is the
        // state after adding a parameter to a built-in tool and forgetting to bless.
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/shell.md", |t| {
            let start = t.find("\"workdir\": {").unwrap();
            let end = start + t[start..].find("},").unwrap() + 2;
            let line_start = t[..start].rfind('\n').unwrap() + 1;
            let line_end = end + t[end..].find('\n').unwrap() + 1;
            format!("{}{}", &t[..line_start], &t[line_end..])
        });
        let text = problems(dir.path());
        assert!(
            text.contains("docs/subsystems/shell.md: generated region `tool-catalog` is stale"),
            "{text}"
        );
        assert!(text.contains("+         \"workdir\": {"), "{text}");
        assert!(text.contains(BLESS), "{text}");
    }

    #[test]
    fn a_code_block_changed_on_one_side_fails() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/cookbook/adding-a-tool.md", |t| {
            let at = t.find("```rust\n").unwrap() + "```rust\n".len();
            format!("{}// changed in English only\n{}", &t[..at], &t[at..])
        });
        let text = problems(dir.path());
        assert!(text.contains("docs/cookbook/adding-a-tool.md and docs/cookbook/adding-a-tool.zh.md: code block 1 differs"), "{text}");
        assert!(text.contains("fix: copy the block"), "{text}");
    }

    #[test]
    fn a_heading_removed_from_one_side_fails() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/jobs.zh.md", |t| {
            let at = t.find("\n## ").unwrap() + 1;
            let end = at + t[at..].find('\n').unwrap() + 1;
            format!("{}{}", &t[..at], &t[end..])
        });
        let text = problems(dir.path());
        assert!(text.contains("docs/subsystems/jobs.md and docs/subsystems/jobs.zh.md: the heading structure differs"), "{text}");
    }

    #[test]
    fn a_cookbook_page_that_is_not_compiled_fails() {
        let dir = copy_of_docs();
        std::fs::write(dir.path().join("docs/cookbook/new-page.md"), "# New\n").unwrap();
        let text = problems(dir.path());
        assert!(
            text.contains("docs/cookbook/new-page.md is not compiled"),
            "{text}"
        );
    }

    #[test]
    fn a_cookbook_block_that_no_longer_compiles_fails_cargo_test() {
        // Compile a copy of the pages with one block broken, through the real cookbook crate
        // (its build script reads DSH_COOKBOOK_DIR), and expect the doctests to fail.
        let root = crate::workspace_root();
        let dir = tempfile::tempdir().unwrap();
        for page in ["adding-a-tool.md", "adding-a-tool.zh.md"] {
            std::fs::copy(root.join("docs/cookbook").join(page), dir.path().join(page)).unwrap();
        }
        edit(dir.path(), "adding-a-tool.md", |t| {
            let at = t.find("```rust\n").unwrap() + "```rust\n".len();
            format!(
                "{}let broken: u32 = \"not a number\";\n{}",
                &t[..at],
                &t[at..]
            )
        });
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| String::from("cargo"));
        let output = std::process::Command::new(cargo)
            .args(["test", "--quiet", "-p", "cookbook", "--doc"])
            .env("DSH_COOKBOOK_DIR", dir.path())
            // Its own target directory: rebuilding the cookbook crate with another page
            // directory must not disturb the outer test run's artifacts.
            .env("CARGO_TARGET_DIR", root.join("target/cookbook-mutation"))
            .current_dir(&root)
            .output()
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !output.status.success(),
            "the broken block compiled:\n{log}"
        );
        assert!(log.contains("mismatched types"), "{log}");
        assert!(log.contains("adding-a-tool.md"), "{log}");
    }

    #[test]
    fn missing_and_unknown_regions_are_reported() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/agent-loop.md", |t| {
            t.replace(&begin_marker("session-events"), &begin_marker("mystery"))
                .replace(&end_marker("session-events"), &end_marker("mystery"))
        });
        let text = problems(dir.path());
        assert!(
            text.contains("docs/subsystems/agent-loop.md: unknown generated region `mystery`"),
            "{text}"
        );
        assert!(
            text.contains(
                "docs/subsystems/agent-loop.md: the generated region `session-events` is missing"
            ),
            "{text}"
        );
    }

    #[test]
    fn diff_marks_removed_and_added_lines() {
        assert_eq!(diff("a\nb\nc\n", "a\nx\nc\n"), "    - b\n    + x\n");
    }
}
