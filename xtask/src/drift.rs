//! `cargo xtask drift-check`: the documented contract is the code's contract.
//!
//! 1. Every `<!-- BEGIN GENERATED name -->` region equals what its generator renders from the
//!    code, byte for byte (`--bless` rewrites them), and every generator's region is in the
//!    document the generator names as its home.
//! 2. Every `X.md` with an `X.zh.md` sibling has the same heading structure, byte-identical code
//!    blocks and identical generated regions.
//! 3. Every English cookbook page is included by the `cookbook` crate, so `cargo test -p
//!    cookbook` compiles and runs its code, and none of its blocks is marked so that rustdoc
//!    would skip it. A translation `X.zh.md` is accepted without an include of its own when
//!    `X.md` exists: 2. makes its code blocks byte-identical to those of `X.md`, so compiling
//!    them again would add nothing.
//!
//! A run reads and parses every document once and renders every generator at most once.

use crate::generate::{GENERATORS, Generator};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What to do with a stale region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Report it.
    Check,
    /// Rewrite it.
    Bless,
}

/// The crate that compiles the cookbook pages, relative to the root.
const COOKBOOK_CRATE: &str = "xtask/cookbook/src/lib.rs";

/// The directory of the cookbook pages, relative to the root.
const COOKBOOK_DIR: &str = "docs/cookbook/";

/// The fix to name for stale regions.
const BLESS: &str = "cargo xtask drift-check --bless";

/// The outcome of a run.
#[derive(Debug, Default)]
pub(crate) struct Report {
    problems: Vec<String>,
    rewritten: Vec<String>,
    checked: usize,
    pairs: usize,
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

/// A markdown document, read and parsed once per run.
#[derive(Debug)]
struct Document {
    path: PathBuf,
    /// The path relative to the root, as messages name it.
    file: String,
    text: String,
    /// Heading levels in order: (line, level). The texts are translated, so only the levels
    /// must agree across languages.
    headings: Vec<(usize, usize)>,
    /// Fenced code blocks in order: (line of the opening fence, block).
    code: Vec<(usize, Block)>,
    /// Generated regions in order.
    regions: Vec<Region>,
}

/// A fenced code block.
#[derive(Debug, PartialEq)]
struct Block {
    /// The info string after the opening fence (`rust`, `json`, `text`, …).
    info: String,
    body: String,
}

/// One generated region of a document.
#[derive(Debug)]
struct Region {
    name: String,
    /// Byte range of the content between the markers.
    content: Range<usize>,
}

fn begin_marker(name: &str) -> String {
    format!("<!-- BEGIN GENERATED {name} -->")
}

fn end_marker(name: &str) -> String {
    format!("<!-- END GENERATED {name} -->")
}

impl Document {
    fn parse(path: PathBuf, file: String, text: String) -> Result<Document> {
        let mut headings = Vec::new();
        let mut code = Vec::new();
        // The open fence: (its line, its marker, the block so far).
        let mut fence: Option<(usize, String, Block)> = None;
        for (i, line) in text.lines().enumerate() {
            let number = i + 1;
            if let Some((start, marker, mut block)) = fence.take() {
                if line.trim() == marker {
                    code.push((start, block));
                } else {
                    block.body.push_str(line);
                    block.body.push('\n');
                    fence = Some((start, marker, block));
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
                let block = Block {
                    info,
                    body: String::new(),
                };
                fence = Some((number, marker, block));
                continue;
            }
            if line.starts_with('#') {
                let level = line.chars().take_while(|c| *c == '#').count();
                if line[level..].starts_with(' ') {
                    headings.push((number, level));
                }
            }
        }
        let regions = regions(&text, &file)?;
        Ok(Document {
            path,
            file,
            text,
            headings,
            code,
            regions,
        })
    }

    /// The content of a region.
    fn content(&self, region: &Region) -> &str {
        &self.text[region.content.clone()]
    }

    /// The generated regions in order: (name, content).
    fn generated(&self) -> Vec<(&str, &str)> {
        self.regions
            .iter()
            .map(|r| (r.name.as_str(), self.content(r)))
            .collect()
    }
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

/// The markdown files checked: the README, its translation and everything under docs/.
pub(crate) fn documents(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![root.join("README.md"), root.join("README.zh.md")];
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

/// Each generator's output, rendered at most once per run (a region appears in a document and
/// in its translation).
#[derive(Default)]
struct Renders(BTreeMap<&'static str, String>);

impl Renders {
    fn get(&mut self, generator: &'static Generator) -> &str {
        self.0
            .entry(generator.name)
            .or_insert_with(generator.render)
    }
}

/// Checks (or blesses) everything under `root`.
pub(crate) fn run(root: &Path, mode: Mode) -> Result<Report> {
    let mut documents = documents(root)?
        .into_iter()
        .map(|path| {
            let file = relative(root, &path);
            let text = crate::read(&path)?;
            Document::parse(path, file, text)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut report = Report::default();
    let mut renders = Renders::default();
    for document in &mut documents {
        freshness(document, mode, &mut renders, &mut report)?;
    }
    homes(&documents, &mut report);
    parity(&documents, &mut report);
    cookbook(root, &documents, &mut report)?;
    Ok(report)
}

/// Compares each generated region of `document` with its generator's output; in bless mode
/// rewrites the stale ones and re-parses the document, so the checks after this one see what
/// is now on disk.
fn freshness(
    document: &mut Document,
    mode: Mode,
    renders: &mut Renders,
    report: &mut Report,
) -> Result<()> {
    let mut blessed: Option<String> = None;
    // Back to front, so the byte ranges of the earlier regions stay valid while blessing.
    for region in document.regions.iter().rev() {
        let Some(generator) = GENERATORS.iter().find(|g| g.name == region.name) else {
            report.problems.push(format!(
                "{}: unknown generated region `{}` (known: {})",
                document.file,
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
        let expected = renders.get(generator);
        let actual = document.content(region);
        if actual == expected {
            continue;
        }
        match mode {
            Mode::Bless => blessed
                .get_or_insert_with(|| document.text.clone())
                .replace_range(region.content.clone(), expected),
            Mode::Check => report.problems.push(format!(
                "{}: generated region `{}` is stale (edited by hand, or the code changed):\n{}fix: run `{BLESS}` and commit the docs",
                document.file,
                region.name,
                diff(&document.file, actual, expected)
            )),
        }
    }
    if let Some(text) = blessed {
        std::fs::write(&document.path, &text)?;
        report.rewritten.push(document.file.clone());
        *document = Document::parse(document.path.clone(), document.file.clone(), text)?;
    }
    Ok(())
}

/// Every generator's region must be in its home document.
fn homes(documents: &[Document], report: &mut Report) {
    for generator in GENERATORS {
        let present = documents.iter().any(|d| {
            d.file == generator.home && d.regions.iter().any(|r| r.name == generator.name)
        });
        if !present {
            report.problems.push(format!(
                "{}: the generated region `{}` is missing; add\n{}\n{}\nand run `{BLESS}`",
                generator.home,
                generator.name,
                begin_marker(generator.name),
                end_marker(generator.name)
            ));
        }
    }
}

/// The `X.zh.md` translation of an `X.md` document, if there is one.
fn translation<'a>(documents: &'a [Document], document: &Document) -> Option<&'a Document> {
    let stem = document.file.strip_suffix(".md")?;
    if stem.ends_with(".zh") {
        return None;
    }
    let twin = format!("{stem}.zh.md");
    documents.iter().find(|d| d.file == twin)
}

/// The first difference of two sequences of `(line, item)`: its index, and the line on each
/// side there (`None` past that side's end).
type Difference = (usize, Option<usize>, Option<usize>);

/// Where two sequences of `(line, item)` first differ in their items, if they do; the lines
/// themselves are not compared (translations differ in length).
fn first_difference<T: PartialEq>(left: &[(usize, T)], right: &[(usize, T)]) -> Option<Difference> {
    let at = left
        .iter()
        .zip(right)
        .position(|((_, a), (_, b))| a != b)
        .or_else(|| (left.len() != right.len()).then(|| left.len().min(right.len())))?;
    let line = |items: &[(usize, T)]| items.get(at).map(|(line, _)| *line);
    Some((at, line(left), line(right)))
}

/// The problem of a pair whose `item`s (headings, code blocks) differ.
fn mismatch(
    en: &Document,
    zh: &Document,
    item: &str,
    (at, left, right): Difference,
    rule: &str,
    fix: &str,
) -> String {
    let line =
        |n: Option<usize>| n.map_or_else(|| String::from("missing"), |n| format!("line {n}"));
    format!(
        "{} and {}: {item} {} differs ({} {}, {} {}); {rule}. fix: {fix}",
        en.file,
        zh.file,
        at + 1,
        en.file,
        line(left),
        zh.file,
        line(right)
    )
}

/// Compares every `X.md` with its `X.zh.md`.
fn parity(documents: &[Document], report: &mut Report) {
    for en in documents {
        let Some(zh) = translation(documents, en) else {
            continue;
        };
        report.pairs += 1;
        if let Some(difference) = first_difference(&en.headings, &zh.headings) {
            let rule = format!(
                "the heading structure must be the same in both languages ({} headings vs {})",
                en.headings.len(),
                zh.headings.len()
            );
            let fix = "keep the same headings at the same levels in both languages";
            report
                .problems
                .push(mismatch(en, zh, "heading", difference, &rule, fix));
        }
        if let Some(difference) = first_difference(&en.code, &zh.code) {
            let rule = "code blocks must be byte-identical in both languages";
            let fix = "copy the block from one file to the other";
            report
                .problems
                .push(mismatch(en, zh, "code block", difference, rule, fix));
        }
        if en.generated() != zh.generated() {
            report.problems.push(format!(
                "{} and {}: the generated regions differ; both files must carry the same regions. fix: add the markers to both and run `{BLESS}`",
                en.file, zh.file
            ));
        }
    }
}

/// Whether a block's marking lets it escape `cargo test -p cookbook`: `ignore` in any form, or
/// a spelling of Rust that rustdoc does not test (`rs`, `Rust`). A block that names no
/// language is refused too: rustdoc compiles it as Rust while the page shows plain text, so
/// either way its language must be named.
fn escapes_compilation(info: &str) -> bool {
    let tokens: Vec<&str> = info
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    let Some(language) = tokens.first() else {
        return true;
    };
    let misspelt_rust =
        *language != "rust" && matches!(language.to_lowercase().as_str(), "rust" | "rs");
    misspelt_rust || tokens.iter().any(|t| t.starts_with("ignore"))
}

/// Every English cookbook page must be included by the cookbook crate (so its code is
/// compiled and run) with no block that rustdoc would skip; a translation is compiled through
/// its English page.
fn cookbook(root: &Path, documents: &[Document], report: &mut Report) -> Result<()> {
    let pages: Vec<(&str, &Document)> = documents
        .iter()
        .filter_map(|d| Some((d.file.strip_prefix(COOKBOOK_DIR)?, d)))
        .filter(|(page, _)| !page.contains('/'))
        .collect();
    if pages.is_empty() {
        return Ok(());
    }
    let crate_source = crate::read(&root.join(COOKBOOK_CRATE))?;
    let included = |page: &str| crate_source.contains(&format!("\"/{page}\"))]"));
    let english = |stem: &str| pages.iter().any(|(p, _)| *p == format!("{stem}.md"));
    for (page, document) in &pages {
        let translation_of = page.strip_suffix(".zh.md");
        if !included(page) && !translation_of.is_some_and(english) {
            report.problems.push(format!(
                "{COOKBOOK_DIR}{page} is not compiled: {COOKBOOK_CRATE} does not include it. fix: add\n#[doc = include_str!(concat!(env!(\"DSH_COOKBOOK_DIR\"), \"/{page}\"))]\npub mod <name> {{}}"
            ));
        }
        if translation_of.is_some() {
            continue;
        }
        for (line, block) in &document.code {
            if escapes_compilation(&block.info) {
                report.problems.push(format!(
                    "{COOKBOOK_DIR}{page} line {line}: the code block is marked `{}`, so `cargo test -p cookbook` would not compile it as Rust. fix: mark a Rust block `rust` (and make it pass), or name the block's language (`text`, `json`, `toml`, …)",
                    block.info
                ));
            }
        }
    }
    Ok(())
}

/// A unified diff of a stale region: `-` lines are in the document, `+` lines are generated.
fn diff(file: &str, actual: &str, expected: &str) -> String {
    similar::TextDiff::from_lines(actual, expected)
        .unified_diff()
        .context_radius(1)
        .header(file, "generated from the code")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The `cargo test` twin of `cargo xtask drift-check`.
    #[test]
    fn the_docs_agree_with_the_code() {
        let report = run(&crate::workspace_root(), Mode::Check).unwrap();
        assert!(report.is_clean(), "{report}");
    }

    /// A scratch copy of everything the drift check reads, blessed and clean: each test
    /// below then sees its own mutation only, even while the checkout's docs are stale (which
    /// `the_docs_agree_with_the_code` reports).
    fn copy_of_docs() -> tempfile::TempDir {
        let root = crate::workspace_root();
        let dir = tempfile::tempdir().unwrap();
        let mut files = documents(&root).unwrap();
        files.push(root.join(COOKBOOK_CRATE));
        for file in files {
            let target = dir.path().join(relative(&root, &file));
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(&file, target).unwrap();
        }
        let blessed = run(dir.path(), Mode::Bless).unwrap();
        assert!(blessed.is_clean(), "{blessed}");
        dir
    }

    fn edit(dir: &Path, file: &str, change: impl FnOnce(String) -> String) {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let changed = change(text.clone());
        assert_ne!(changed, text, "the mutation of {file} changed nothing");
        std::fs::write(path, changed).unwrap();
    }

    /// The problems the check reports for the tree at `dir`.
    fn problems(dir: &Path) -> Vec<String> {
        run(dir, Mode::Check).unwrap().problems
    }

    /// The one problem the check reports for the tree at `dir`.
    fn the_problem(dir: &Path) -> String {
        let mut problems = problems(dir);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        problems.remove(0)
    }

    #[test]
    fn a_hand_edited_region_fails_naming_the_file_and_the_fix() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/tools.md", |t| {
            t.replacen("| `INVALID_ARGS` |", "| `INVALID_ARGUMENTS` |", 1)
        });
        let problems = problems(dir.path());
        // The English page is stale, and the Chinese one no longer carries the same region.
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert_eq!(
            problems[1],
            format!(
                "docs/subsystems/tools.md and docs/subsystems/tools.zh.md: the generated regions differ; both files must carry the same regions. fix: add the markers to both and run `{BLESS}`"
            )
        );
        let text = &problems[0];
        assert!(
            text.starts_with("docs/subsystems/tools.md: generated region `failure-codes` is stale"),
            "{text}"
        );
        assert!(text.contains("\n--- docs/subsystems/tools.md\n"), "{text}");
        assert!(text.contains("\n-| `INVALID_ARGUMENTS` |"), "{text}");
        assert!(text.contains("\n+| `INVALID_ARGS` |"), "{text}");
        assert!(
            text.ends_with(&format!("fix: run `{BLESS}` and commit the docs")),
            "{text}"
        );
        let blessed = run(dir.path(), Mode::Bless).unwrap();
        assert_eq!(blessed.rewritten, vec!["docs/subsystems/tools.md"]);
        assert!(blessed.is_clean(), "{blessed}");
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
        let problems = problems(dir.path());
        // The English page is stale, and no longer agrees with the Chinese one on the region
        // and on the code block in it.
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0]
                .starts_with("docs/subsystems/shell.md: generated region `tool-catalog` is stale"),
            "{}",
            problems[0]
        );
        assert!(
            problems[0].contains("\n+        \"workdir\": {\n"),
            "{}",
            problems[0]
        );
        assert!(problems[0].contains(BLESS), "{}", problems[0]);
    }

    #[test]
    fn a_code_block_changed_on_one_side_fails() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/cookbook/adding-a-tool.md", |t| {
            let at = t.find("```rust\n").unwrap() + "```rust\n".len();
            format!("{}// changed in English only\n{}", &t[..at], &t[at..])
        });
        assert_eq!(
            problems(dir.path()),
            [
                "docs/cookbook/adding-a-tool.md and docs/cookbook/adding-a-tool.zh.md: code block 1 differs (docs/cookbook/adding-a-tool.md line 13, docs/cookbook/adding-a-tool.zh.md line 13); code blocks must be byte-identical in both languages. fix: copy the block from one file to the other"
            ]
        );
    }

    /// The root README and its translation are a pair like those under docs/.
    #[test]
    fn the_root_readme_translation_is_compared() {
        let dir = copy_of_docs();
        edit(dir.path(), "README.zh.md", |t| {
            t.replacen(
                "cargo test --workspace",
                "cargo test --workspace --quiet",
                1,
            )
        });
        assert_eq!(
            problems(dir.path()),
            [
                "README.md and README.zh.md: code block 1 differs (README.md line 7, README.zh.md line 7); code blocks must be byte-identical in both languages. fix: copy the block from one file to the other"
            ]
        );
    }

    #[test]
    fn a_heading_removed_from_one_side_fails() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/jobs.zh.md", |t| {
            let at = t.find("\n## ").unwrap() + 1;
            let end = at + t[at..].find('\n').unwrap() + 1;
            format!("{}{}", &t[..at], &t[end..])
        });
        let text = the_problem(dir.path());
        assert!(
            text.starts_with("docs/subsystems/jobs.md and docs/subsystems/jobs.zh.md: heading "),
            "{text}"
        );
        assert!(
            text.contains("docs/subsystems/jobs.zh.md missing); the heading structure must be the same in both languages"),
            "{text}"
        );
        assert!(
            text.ends_with("fix: keep the same headings at the same levels in both languages"),
            "{text}"
        );
    }

    #[test]
    fn regions_missing_from_a_translation_fail() {
        let dir = copy_of_docs();
        edit(dir.path(), "docs/subsystems/shell.zh.md", |t| {
            t.replace(&format!("{}\n", begin_marker("tool-catalog")), "")
                .replace(&format!("{}\n", end_marker("tool-catalog")), "")
        });
        assert_eq!(
            problems(dir.path()),
            [format!(
                "docs/subsystems/shell.md and docs/subsystems/shell.zh.md: the generated regions differ; both files must carry the same regions. fix: add the markers to both and run `{BLESS}`"
            )]
        );
    }

    #[test]
    fn a_cookbook_page_that_is_not_compiled_fails() {
        let dir = copy_of_docs();
        let not_compiled = |page: &str| {
            format!(
                "docs/cookbook/{page} is not compiled: {COOKBOOK_CRATE} does not include it. fix: add\n#[doc = include_str!(concat!(env!(\"DSH_COOKBOOK_DIR\"), \"/{page}\"))]\npub mod <name> {{}}"
            )
        };
        // A translation alone has no English page to be compiled through.
        std::fs::write(dir.path().join("docs/cookbook/new-page.zh.md"), "# 新\n").unwrap();
        assert_eq!(problems(dir.path()), [not_compiled("new-page.zh.md")]);
        // With its English page, only the English page needs the include.
        std::fs::write(dir.path().join("docs/cookbook/new-page.md"), "# New\n").unwrap();
        assert_eq!(problems(dir.path()), [not_compiled("new-page.md")]);
    }

    #[test]
    fn a_cookbook_block_rustdoc_would_skip_fails() {
        let dir = copy_of_docs();
        for page in ["adding-a-tool.md", "adding-a-tool.zh.md"] {
            edit(dir.path(), &format!("docs/cookbook/{page}"), |t| {
                t.replacen("```rust\n", "```rust,ignore\n", 1)
            });
        }
        assert_eq!(
            problems(dir.path()),
            [
                "docs/cookbook/adding-a-tool.md line 13: the code block is marked `rust,ignore`, so `cargo test -p cookbook` would not compile it as Rust. fix: mark a Rust block `rust` (and make it pass), or name the block's language (`text`, `json`, `toml`, …)"
            ]
        );
    }

    #[test]
    fn fences_that_escape_compilation_are_recognised() {
        for (info, escapes) in [
            ("rust", false),
            ("rust,no_run", false),
            ("text", false),
            ("json", false),
            ("", true),
            ("ignore", true),
            ("rust,ignore", true),
            ("rust ignore-x86_64", true),
            ("rs", true),
            ("Rust", true),
        ] {
            assert_eq!(escapes_compilation(info), escapes, "`{info}`");
        }
    }

    #[test]
    fn a_cookbook_block_that_no_longer_compiles_fails_cargo_test() {
        // Compile a page with one block broken, through the real cookbook crate (its build
        // script reads DSH_COOKBOOK_DIR), and expect the doctests to fail. The page is the
        // English one cut after that block: the blocks after it compile as they do in the
        // main run and would only make this test slower.
        let root = crate::workspace_root();
        let dir = tempfile::tempdir().unwrap();
        let page = std::fs::read_to_string(root.join("docs/cookbook/adding-a-tool.md")).unwrap();
        let start = page.find("```rust\n").unwrap() + "```rust\n".len();
        let end = start + page[start..].find("\n```\n").unwrap() + "\n```\n".len();
        let broken = format!(
            "{}let broken: u32 = \"not a number\";\n{}",
            &page[..start],
            &page[start..end]
        );
        std::fs::write(dir.path().join("adding-a-tool.md"), broken).unwrap();
        // In the outer run's target directory (unlocked while tests run), so only the cookbook
        // is rebuilt (a directory of its own took four minutes); the outer run's doctests keep
        // the page directory its build script gave them. The xtask package's variables are
        // dropped: build scripts watching them (ring's) would rebuild their crates twice.
        let mut cargo = crate::cargo();
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            let package = [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_BIN_EXE_",
                "CARGO_CRATE_",
            ];
            if package.iter().any(|prefix| name.starts_with(prefix))
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR"].contains(&name.as_ref())
            {
                cargo.env_remove(name.as_ref());
            }
        }
        let output = cargo
            .args(["test", "--quiet", "--workspace", "--doc"])
            .env("DSH_COOKBOOK_DIR", dir.path())
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
        for page in ["agent-loop.md", "agent-loop.zh.md"] {
            edit(dir.path(), &format!("docs/subsystems/{page}"), |t| {
                t.replace(&begin_marker("session-events"), &begin_marker("mystery"))
                    .replace(&end_marker("session-events"), &end_marker("mystery"))
            });
        }
        let unknown = |file: &str| {
            format!(
                "{file}: unknown generated region `mystery` (known: failure-codes, code-mode-sdk, tool-catalog, card-vocabulary, session-events, env-policy-defaults)"
            )
        };
        assert_eq!(
            problems(dir.path()),
            [
                unknown("docs/subsystems/agent-loop.md"),
                unknown("docs/subsystems/agent-loop.zh.md"),
                format!(
                    "docs/subsystems/agent-loop.md: the generated region `session-events` is missing; add\n{}\n{}\nand run `{BLESS}`",
                    begin_marker("session-events"),
                    end_marker("session-events")
                ),
            ]
        );
    }
}
