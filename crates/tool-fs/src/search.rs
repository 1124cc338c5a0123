//! `glob` and `grep`: walks with ripgrep's `ignore` crate, patterns with `globset`, searches
//! with `grep-regex` and `grep-searcher`, in-process; a capped result saves its complete list
//! in the spill directory.

use crate::error::FsError;
use crate::value::{GlobValue, GrepFile, GrepMatch, GrepValue};
use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Version-control directories `glob` never descends into.
const VCS_DIRS: &[&str] = &[".git", ".hg", ".svn", ".jj", ".bzr", "_darcs", "CVS"];

/// A pattern or regex the tool cannot use: the model's mistake, reported as invalid arguments.
#[derive(Debug)]
pub(crate) struct BadPattern(pub(crate) String);

/// Why a search failed.
#[derive(Debug)]
pub(crate) enum SearchError {
    /// A bad pattern.
    Pattern(BadPattern),
    /// Anything else.
    Fs(FsError),
}

impl From<FsError> for SearchError {
    fn from(e: FsError) -> SearchError {
        SearchError::Fs(e)
    }
}

fn check_root(root: &Path) -> Result<(), FsError> {
    if !root.exists() {
        return Err(FsError::NotFound(crate::missing::not_found(root)));
    }
    Ok(())
}

/// The files under `root` matching `pattern`, newest first.
pub(crate) fn glob(
    root: &Path,
    pattern: &str,
    cap: usize,
    spill_dir: Option<&Path>,
) -> Result<GlobValue, SearchError> {
    check_root(root)?;
    if !root.is_dir() {
        return Err(SearchError::Pattern(BadPattern(format!(
            "/path: {} is a file, not a directory; give the directory to search",
            root.display()
        ))));
    }
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| SearchError::Pattern(BadPattern(format!("/pattern: {e}"))))?
        .compile_matcher();
    let basename = !pattern.contains('/');
    let mut found: Vec<(Option<SystemTime>, PathBuf)> = Vec::new();
    let walker = WalkBuilder::new(root)
        .hidden(false)
        .filter_entry(|entry| {
            !(entry.file_type().is_some_and(|t| t.is_dir())
                && VCS_DIRS.iter().any(|d| entry.file_name() == *d))
        })
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let matched = if basename {
            matcher.is_match(entry.file_name())
        } else {
            path.strip_prefix(root)
                .is_ok_and(|rel| matcher.is_match(rel))
        };
        if matched {
            let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
            found.push((modified, path.to_path_buf()));
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let all: Vec<String> = found
        .into_iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    let total = all.len() as u64;
    let truncated = all.len() > cap;
    let (spill_path, spill_error) = if truncated {
        spill(spill_dir, "glob", |out| {
            for path in &all {
                writeln!(out, "{path}")?;
            }
            Ok(())
        })
    } else {
        (None, None)
    };
    Ok(GlobValue {
        path: root.display().to_string(),
        paths: all.into_iter().take(cap).collect(),
        total,
        truncated,
        spill_path,
        spill_error,
    })
}

/// The lines under `root` (a directory or a file) matching the regex `pattern`, in files
/// matching `include`; honours ignore files as `rg` does.
pub(crate) fn grep(
    root: &Path,
    pattern: &str,
    include: Option<&str>,
    cap: usize,
    max_line_chars: usize,
    spill_dir: Option<&Path>,
) -> Result<GrepValue, SearchError> {
    check_root(root)?;
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| SearchError::Pattern(BadPattern(format!("/pattern: {e}"))))?;
    let mut builder = WalkBuilder::new(root);
    if let Some(include) = include {
        let base = if root.is_dir() {
            root
        } else {
            root.parent().unwrap_or(root)
        };
        let mut overrides = OverrideBuilder::new(base);
        overrides
            .add(include)
            .map_err(|e| SearchError::Pattern(BadPattern(format!("/include: {e}"))))?;
        let overrides = overrides
            .build()
            .map_err(|e| SearchError::Pattern(BadPattern(format!("/include: {e}"))))?;
        builder.overrides(overrides);
    }
    builder.sort_by_file_name(|a, b| a.cmp(b));
    let paths: Vec<PathBuf> = builder
        .build()
        .flatten()
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .collect();
    let mut files: Vec<GrepFile> = Vec::new();
    let mut total = 0u64;
    let mut shown = 0usize;
    // Every match once the cap is passed, written as it is found, so memory stays bounded.
    let mut overflow: Option<Overflow> = None;
    crate::pool::search_in_order(&paths, &matcher, |i, found| {
        let path = paths[i].display().to_string();
        let mut matches = Vec::new();
        for (number, line) in found.lines {
            total += 1;
            let line = cut(&line, max_line_chars);
            if shown < cap {
                shown += 1;
                matches.push(GrepMatch {
                    line_number: number,
                    line,
                });
            } else {
                let spill = overflow.get_or_insert_with(|| {
                    // Everything shown so far goes first, this file's shown lines too.
                    let mut spill = Overflow::start(spill_dir, &files);
                    for m in &matches {
                        spill.add(&path, m.line_number, &m.line);
                    }
                    spill
                });
                spill.add(&path, number, &line);
            }
        }
        if !matches.is_empty() {
            files.push(GrepFile { path, matches });
        }
    });
    let (spill_path, spill_error) = match overflow {
        Some(spill) => spill.finish(),
        None => (None, None),
    };
    Ok(GrepValue {
        path: root.display().to_string(),
        files,
        total,
        truncated: total > shown as u64,
        spill_path,
        spill_error,
    })
}

/// `line`'s first `max` characters, with a marker when cut.
pub(crate) fn cut(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((i, _)) => format!(
            "{}… [line cut at {max} of {} characters]",
            &line[..i],
            line.chars().count()
        ),
        None => line.to_owned(),
    }
}

/// The spill file of a capped `grep`: `path:line:text`, one match a line, in search order.
struct Overflow {
    out: Option<(std::io::BufWriter<std::fs::File>, PathBuf)>,
    error: Option<String>,
}

impl Overflow {
    fn start(spill_dir: Option<&Path>, shown: &[GrepFile]) -> Overflow {
        let Some(dir) = spill_dir else {
            return Overflow {
                out: None,
                error: Some(String::from("no spill directory is configured")),
            };
        };
        match create_spill(dir, "grep") {
            Ok((file, path)) => {
                let mut overflow = Overflow {
                    out: Some((std::io::BufWriter::new(file), path)),
                    error: None,
                };
                for file in shown {
                    for m in &file.matches {
                        overflow.add(&file.path, m.line_number, &m.line);
                    }
                }
                overflow
            }
            Err(e) => Overflow {
                out: None,
                error: Some(format!("the spill file could not be created: {e}")),
            },
        }
    }

    fn add(&mut self, path: &str, number: u64, line: &str) {
        if let Some((out, _)) = self.out.as_mut()
            && let Err(e) = writeln!(out, "{path}:{number}:{line}")
        {
            self.error = Some(format!("writing the spill file failed: {e}"));
            self.out = None;
        }
    }

    fn finish(self) -> (Option<String>, Option<String>) {
        match self.out {
            Some((mut out, path)) => match out.flush() {
                Ok(()) => (Some(path.display().to_string()), None),
                Err(e) => (None, Some(format!("writing the spill file failed: {e}"))),
            },
            None => (None, self.error),
        }
    }
}

/// A new private file (`0600`, unguessable name) in `dir`, created `0700` when missing.
fn create_spill(dir: &Path, label: &str) -> std::io::Result<(std::fs::File, PathBuf)> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    // tempfile creates its files 0600 where there are modes.
    let file = tempfile::Builder::new()
        .prefix(&format!("{label}-"))
        .suffix(".txt")
        .tempfile_in(dir)?;
    file.keep().map_err(|e| e.error)
}

/// Writes a complete list to a new spill file: its path, or why there is none.
fn spill(
    dir: Option<&Path>,
    label: &str,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> (Option<String>, Option<String>) {
    let Some(dir) = dir else {
        return (None, Some(String::from("no spill directory is configured")));
    };
    let written = create_spill(dir, label).and_then(|(file, path)| {
        let mut out = std::io::BufWriter::new(file);
        write(&mut out)?;
        out.flush()?;
        Ok(path)
    });
    match written {
        Ok(path) => (Some(path.display().to_string()), None),
        Err(e) => (
            None,
            Some(format!("the spill file could not be written: {e}")),
        ),
    }
}
