//! `cargo xtask snapshots --references FILE`: every committed insta snapshot is referenced by a
//! test (the `--unreferenced=reject` check of `cargo insta test`, without needing cargo-insta).
//!
//! Run the tests with `INSTA_SNAPSHOT_REFERENCES_FILE=FILE` first; insta appends the path of
//! every snapshot an assertion used to that file.

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every `*.snap` file under `root` (outside `target/`).
fn snapshot_files(root: &Path) -> Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".snap") {
                out.insert(path.canonicalize()?);
            }
        }
    }
    Ok(out)
}

/// The snapshot files no test referenced.
pub(crate) fn unreferenced(root: &Path, references: &str) -> Result<Vec<PathBuf>> {
    let referenced: BTreeSet<PathBuf> = references
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| Path::new(l.trim()).canonicalize().ok())
        .collect();
    Ok(snapshot_files(root)?
        .into_iter()
        .filter(|snap| !referenced.contains(snap))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphans_are_found_and_referenced_snapshots_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let snaps = dir.path().join("crate/tests/snapshots");
        std::fs::create_dir_all(&snaps).unwrap();
        std::fs::create_dir_all(dir.path().join("target/x/snapshots")).unwrap();
        for name in ["used.snap", "orphan.snap"] {
            std::fs::write(snaps.join(name), "---\n").unwrap();
        }
        std::fs::write(dir.path().join("target/x/snapshots/ignored.snap"), "").unwrap();
        let references = format!("{}\n", snaps.join("used.snap").display());
        let orphans = unreferenced(dir.path(), &references).unwrap();
        assert_eq!(
            orphans,
            vec![snaps.join("orphan.snap").canonicalize().unwrap()]
        );
    }
}
