//! `cargo xtask drift-check`: every `<!-- BEGIN GENERATED name -->` region in the docs equals
//! what its generator renders from the code, byte for byte.

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
const REQUIRED: &[(&str, &str)] = &[
    ("docs/subsystems/tools.md", "failure-codes"),
    ("docs/subsystems/tools.md", "code-mode-sdk"),
];

/// The outcome of a run.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) problems: Vec<String>,
    pub(crate) rewritten: Vec<String>,
    pub(crate) checked: usize,
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
                "drift-check: {} generated regions are fresh",
                self.checked
            );
        }
        for problem in &self.problems {
            writeln!(f, "{problem}")?;
        }
        writeln!(
            f,
            "drift-check: {} problem(s). If the code change is intended, run `cargo xtask drift-check --bless` and commit the docs.",
            self.problems.len()
        )
    }
}

/// One generated region found in a file.
struct Region {
    name: String,
    /// Byte range of the content between the markers.
    content: std::ops::Range<usize>,
}

fn begin_marker(name: &str) -> String {
    format!("<!-- BEGIN GENERATED {name} -->")
}

fn end_marker(name: &str) -> String {
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
fn documents(root: &Path) -> Result<Vec<PathBuf>> {
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
    out.sort();
    Ok(out)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Checks (or blesses) every generated region under `root`.
pub(crate) fn run(root: &Path, mode: Mode) -> Result<Report> {
    let mut report = Report::default();
    let mut found: Vec<(String, String)> = Vec::new();
    for path in documents(root)? {
        if !path.exists() {
            continue;
        }
        let file = relative(root, &path);
        let text = crate::read(&path)?;
        let mut rewritten = text.clone();
        // Replace back to front so earlier byte ranges stay valid.
        for region in regions(&text, &file)?.into_iter().rev() {
            found.push((file.clone(), region.name.clone()));
            let Some(generator) = GENERATORS.iter().find(|g| g.name == region.name) else {
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
                    "{file}: generated region `{}` is stale (edited by hand, or the code changed):\n{}",
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
                "{file}: the generated region `{name}` is missing; add\n{}\n{}\nand run `cargo xtask drift-check --bless`",
                begin_marker(name),
                end_marker(name)
            ));
        }
    }
    Ok(report)
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
mod tests {
    use super::*;

    /// The `cargo test` twin of `cargo xtask drift-check`.
    #[test]
    fn generated_regions_are_fresh() {
        let report = run(&crate::workspace_root(), Mode::Check).unwrap();
        assert!(report.is_clean(), "{report}");
    }

    fn scratch(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn tools_page(failure_codes: &str) -> String {
        let sdk = (GENERATORS[1].render)();
        format!(
            "# Tools\n\n{}\n{failure_codes}{}\n\n{}\n{sdk}{}\n",
            begin_marker("failure-codes"),
            end_marker("failure-codes"),
            begin_marker("code-mode-sdk"),
            end_marker("code-mode-sdk"),
        )
    }

    #[test]
    fn a_hand_edited_region_fails_naming_the_file_and_the_fix() {
        let fresh = (GENERATORS[0].render)();
        let edited = fresh.replace("INVALID_ARGS", "INVALID_ARGUMENTS");
        let dir = scratch(&[("docs/subsystems/tools.md", &tools_page(&edited))]);
        let report = run(dir.path(), Mode::Check).unwrap();
        let text = report.to_string();
        assert!(!report.is_clean());
        assert!(
            text.contains("docs/subsystems/tools.md: generated region `failure-codes` is stale"),
            "{text}"
        );
        assert!(text.contains("    - | `INVALID_ARGUMENTS`"), "{text}");
        assert!(text.contains("    + | `INVALID_ARGS`"), "{text}");
        assert!(text.contains("cargo xtask drift-check --bless"), "{text}");

        let blessed = run(dir.path(), Mode::Bless).unwrap();
        assert_eq!(blessed.rewritten, vec!["docs/subsystems/tools.md"]);
        assert!(run(dir.path(), Mode::Check).unwrap().is_clean());
        let page = std::fs::read_to_string(dir.path().join("docs/subsystems/tools.md")).unwrap();
        assert_eq!(page, tools_page(&fresh));
    }

    #[test]
    fn missing_and_unknown_regions_are_reported() {
        let dir = scratch(&[(
            "docs/other.md",
            "<!-- BEGIN GENERATED mystery -->\nx\n<!-- END GENERATED mystery -->\n",
        )]);
        let text = run(dir.path(), Mode::Check).unwrap().to_string();
        assert!(
            text.contains("docs/other.md: unknown generated region `mystery`"),
            "{text}"
        );
        assert!(
            text.contains(
                "docs/subsystems/tools.md: the generated region `failure-codes` is missing"
            ),
            "{text}"
        );
    }

    #[test]
    fn diff_marks_removed_and_added_lines() {
        assert_eq!(diff("a\nb\nc\n", "a\nx\nc\n"), "    - b\n    + x\n");
    }
}
