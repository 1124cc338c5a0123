//! Vendored docs for downstream agents: `cargo xtask vendor-docs DEST` writes the docs with a
//! `VERSION` stamp and content hashes; `cargo xtask drift-check --vendor DIR` tells a downstream
//! project, file by file, where its copy no longer matches the `dsh-tools` version its
//! `Cargo.lock` resolves.

use crate::drift::{documents, relative};
use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The stamp file: the `dsh-tools` version the docs were vendored from.
pub(crate) const VERSION_FILE: &str = "VERSION";
/// The hash file: `<sha256>  <path>` per vendored file, as `sha256sum` writes it.
pub(crate) const HASHES_FILE: &str = "HASHES";

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The docs set of this checkout: relative path → contents.
fn docs_set(root: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for path in documents(root)? {
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        out.insert(relative(root, &path), bytes);
    }
    Ok(out)
}

/// Writes the docs set into `dest` with the version stamp and the hashes.
pub(crate) fn vendor_docs(root: &Path, dest: &Path) -> Result<usize> {
    let docs = docs_set(root)?;
    let mut hashes = String::new();
    for (path, bytes) in &docs {
        let target = dest.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes)
            .with_context(|| format!("cannot write {}", target.display()))?;
        hashes.push_str(&format!("{}  {path}\n", sha256(bytes)));
    }
    std::fs::write(dest.join(VERSION_FILE), format!("{}\n", dsh_tools::VERSION))?;
    std::fs::write(dest.join(HASHES_FILE), hashes)?;
    Ok(docs.len())
}

/// The `Cargo.lock` that governs `dir`: the nearest one in `dir` or an ancestor.
fn find_lock(dir: &Path) -> Option<PathBuf> {
    let start = dir.canonicalize().ok()?;
    start
        .ancestors()
        .map(|d| d.join("Cargo.lock"))
        .find(|p| p.exists())
}

/// The version of `package` a lock file resolves (the first one, if several).
fn locked_version(lock: &str, package: &str) -> Option<String> {
    let mut in_package = false;
    let mut name_matches = false;
    for line in lock.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            in_package = true;
            name_matches = false;
            continue;
        }
        if !in_package {
            continue;
        }
        if let Some(name) = line.strip_prefix("name = ") {
            name_matches = name.trim_matches('"') == package;
        } else if let Some(version) = line.strip_prefix("version = ")
            && name_matches
        {
            return Some(version.trim_matches('"').to_owned());
        }
    }
    None
}

/// Checks a vendored copy at `dir` against this checkout. Returns the problems, one per line.
pub(crate) fn check_vendored(root: &Path, dir: &Path) -> Result<Vec<String>> {
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let mut problems = Vec::new();
    let stamp = std::fs::read_to_string(dir.join(VERSION_FILE))
        .map(|s| s.trim().to_owned())
        .with_context(|| {
            format!(
                "{} has no {VERSION_FILE} stamp: vendor it with `cargo xtask vendor-docs`",
                dir.display()
            )
        })?;
    let Some(lock) = find_lock(dir) else {
        bail!("no Cargo.lock in {} or above it", dir.display());
    };
    let lock_text = crate::read(&lock)?;
    let Some(locked) = locked_version(&lock_text, "dsh-tools") else {
        bail!("{} does not resolve dsh-tools", lock.display());
    };
    if stamp != locked {
        problems.push(format!(
            "{}: the vendored docs are stamped dsh-tools {stamp}, but {} resolves {locked}. fix: re-vendor with `cargo xtask vendor-docs` from dsh-rs {locked}",
            dir.join(VERSION_FILE).display(),
            lock.display()
        ));
    }
    if locked != dsh_tools::VERSION {
        problems.push(format!(
            "{} resolves dsh-tools {locked}, but this dsh-rs checkout is {}: run the check from a checkout of {locked}",
            lock.display(),
            dsh_tools::VERSION
        ));
    }
    let hashes_path = dir.join(HASHES_FILE);
    let hashes = match std::fs::read_to_string(&hashes_path) {
        Ok(hashes) => hashes,
        // Without the hashes every file that differs looks like an upstream change, so the
        // copy is still compared, but the missing file is a problem of its own.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            problems.push(format!(
                "{}: missing, so local edits cannot be told from upstream changes. fix: re-vendor with `cargo xtask vendor-docs`",
                hashes_path.display()
            ));
            String::new()
        }
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", hashes_path.display()));
        }
    };
    let recorded: BTreeMap<String, String> = hashes
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(hash, path)| (path.to_owned(), hash.to_owned()))
        .collect();
    let upstream = docs_set(root)?;
    for (path, bytes) in &upstream {
        let vendored = dir.join(path);
        let Ok(copy) = std::fs::read(&vendored) else {
            problems.push(format!("{path}: missing from the vendored copy"));
            continue;
        };
        let copy_hash = sha256(&copy);
        if recorded.get(path).is_some_and(|h| *h != copy_hash) {
            problems.push(format!("{path}: edited since it was vendored"));
        } else if copy_hash != sha256(bytes) {
            problems.push(format!(
                "{path}: differs from dsh-rs {}",
                dsh_tools::VERSION
            ));
        }
    }
    for path in recorded.keys() {
        if !upstream.contains_key(path) {
            problems.push(format!(
                "{path}: no longer part of the dsh-rs {} docs",
                dsh_tools::VERSION
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// A downstream project whose Cargo.lock resolves dsh-tools `version`, with the docs
    /// vendored under `docs/dsh`.
    fn downstream(version: &str) -> (tempfile::TempDir, PathBuf) {
        let project = tempfile::tempdir().unwrap();
        std::fs::write(
            project.path().join("Cargo.lock"),
            format!("version = 4\n\n[[package]]\nname = \"agent\"\nversion = \"1.0.0\"\n\n[[package]]\nname = \"dsh-tools\"\nversion = \"{version}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"),
        )
        .unwrap();
        let vendored = project.path().join("docs/dsh");
        vendor_docs(&crate::workspace_root(), &vendored).unwrap();
        (project, vendored)
    }

    #[test]
    fn a_matching_vendored_copy_passes() {
        let (_project, vendored) = downstream(dsh_tools::VERSION);
        assert_eq!(
            check_vendored(&crate::workspace_root(), &vendored).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_different_stamp_fails() {
        let (project, vendored) = downstream(dsh_tools::VERSION);
        std::fs::write(vendored.join(VERSION_FILE), "0.0.1\n").unwrap();
        let lock = project.path().canonicalize().unwrap().join("Cargo.lock");
        assert_eq!(
            check_vendored(&crate::workspace_root(), &vendored).unwrap(),
            vec![format!(
                "{}: the vendored docs are stamped dsh-tools 0.0.1, but {} resolves {v}. fix: re-vendor with `cargo xtask vendor-docs` from dsh-rs {v}",
                vendored.join(VERSION_FILE).display(),
                lock.display(),
                v = dsh_tools::VERSION
            )]
        );
    }

    #[test]
    fn a_lock_on_another_version_fails() {
        let (project, vendored) = downstream("9.9.9");
        let lock = project.path().canonicalize().unwrap().join("Cargo.lock");
        assert_eq!(
            check_vendored(&crate::workspace_root(), &vendored).unwrap(),
            vec![
                format!(
                    "{}: the vendored docs are stamped dsh-tools {v}, but {} resolves 9.9.9. fix: re-vendor with `cargo xtask vendor-docs` from dsh-rs 9.9.9",
                    vendored.join(VERSION_FILE).display(),
                    lock.display(),
                    v = dsh_tools::VERSION
                ),
                format!(
                    "{} resolves dsh-tools 9.9.9, but this dsh-rs checkout is {}: run the check from a checkout of 9.9.9",
                    lock.display(),
                    dsh_tools::VERSION
                ),
            ]
        );
    }

    #[test]
    fn a_missing_hash_file_is_reported() {
        let (_project, vendored) = downstream(dsh_tools::VERSION);
        std::fs::remove_file(vendored.join(HASHES_FILE)).unwrap();
        assert_eq!(
            check_vendored(&crate::workspace_root(), &vendored).unwrap(),
            vec![format!(
                "{}: missing, so local edits cannot be told from upstream changes. fix: re-vendor with `cargo xtask vendor-docs`",
                vendored.join(HASHES_FILE).display()
            )]
        );
    }

    #[test]
    fn drifted_files_are_listed_one_by_one() {
        let (_project, vendored) = downstream(dsh_tools::VERSION);
        let tools = vendored.join("docs/subsystems/tools.md");
        let mut text = std::fs::read_to_string(&tools).unwrap();
        text.push_str("\nA local note.\n");
        std::fs::write(&tools, text).unwrap();
        std::fs::remove_file(vendored.join("docs/subsystems/jobs.md")).unwrap();
        // A copy vendored from an older release: the hash on record is of different text.
        let hashes = std::fs::read_to_string(vendored.join(HASHES_FILE)).unwrap();
        let readme_hash = sha256(b"an older README\n");
        let hashes: String = hashes
            .lines()
            .map(|l| {
                if l.ends_with("  README.md") {
                    format!("{readme_hash}  README.md\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        // A file an older release had and this one dropped.
        let removed = format!("{}  docs/removed.md\n", sha256(b"gone\n"));
        std::fs::write(vendored.join(HASHES_FILE), hashes + &removed).unwrap();
        std::fs::write(vendored.join("README.md"), "an older README\n").unwrap();
        let problems = check_vendored(&crate::workspace_root(), &vendored).unwrap();
        assert_eq!(
            problems,
            vec![
                "README.md: differs from dsh-rs ".to_owned() + dsh_tools::VERSION,
                "docs/subsystems/jobs.md: missing from the vendored copy".to_owned(),
                "docs/subsystems/tools.md: edited since it was vendored".to_owned(),
                "docs/removed.md: no longer part of the dsh-rs ".to_owned()
                    + dsh_tools::VERSION
                    + " docs",
            ]
        );
    }

    #[test]
    fn lock_versions_are_read_per_package() {
        let lock = "[[package]]\nname = \"dsh-tools-extra\"\nversion = \"2.0.0\"\n\n[[package]]\nname = \"dsh-tools\"\nversion = \"0.3.1\"\n";
        assert_eq!(locked_version(lock, "dsh-tools").as_deref(), Some("0.3.1"));
        assert_eq!(locked_version(lock, "missing"), None);
    }
}
