//! The spill directory: one private directory per executor (or the host's kept one), and
//! the session's spill budget across its files.

use crate::output::SpillSink;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The private spill directory, created on first use. A failed creation is not remembered:
/// the next spill tries again, so one transient error does not turn spilling off for good.
#[derive(Debug)]
pub(super) struct SpillDir {
    pub(super) root: Option<PathBuf>,
    /// A directory kept at exit ([`LocalConfig::spill_dir`]), instead of a temporary one.
    pub(super) kept: Option<PathBuf>,
    pub(super) dir: OnceLock<SpillPlace>,
    /// The most bytes the files may hold together, and the bytes claimed so far (files are
    /// kept until the directory goes, so claims are never given back).
    pub(super) budget: u64,
    pub(super) claimed: AtomicU64,
}

/// Where spill files go: a temporary directory removed with the executor, or a kept one.
#[derive(Debug)]
pub(super) enum SpillPlace {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl SpillPlace {
    pub(super) fn path(&self) -> &Path {
        match self {
            SpillPlace::Temporary(dir) => dir.path(),
            SpillPlace::Kept(dir) => dir,
        }
    }
}

/// Creates `dir` (and its parents) if missing, the last component `0700`, and returns the
/// bytes the files already in it hold.
pub(super) fn prepare_kept(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) => {
            return Err(std::io::Error::new(
                e.kind(),
                format!("cannot create the spill directory {}: {e}", dir.display()),
            ));
        }
    }
    let mut held = 0;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if let Ok(meta) = entry.metadata()
            && meta.is_file()
        {
            held += meta.len();
        }
    }
    Ok(held)
}

impl SpillDir {
    pub(super) fn path(&self) -> std::io::Result<&Path> {
        if let Some(dir) = self.dir.get() {
            return Ok(dir.path());
        }
        if let Some(kept) = &self.kept {
            let held = prepare_kept(kept)?;
            let mut first = false;
            let place = self.dir.get_or_init(|| {
                first = true;
                SpillPlace::Kept(kept.clone())
            });
            // Files a previous process left (a resumed session's) use the same budget; two
            // racing first spills count them once.
            if first {
                self.claimed.fetch_add(held, Ordering::SeqCst);
            }
            return Ok(place.path());
        }
        let root = self.root.clone().unwrap_or_else(std::env::temp_dir);
        // A random name, and mode 0700 set at creation (not after: no window).
        let created = tempfile::Builder::new()
            .prefix("dsh-spill-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&root)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a spill directory in {}: {e}", root.display()),
                )
            })?;
        // Two first spills may race; the loser's empty directory is removed when it drops.
        Ok(self
            .dir
            .get_or_init(|| SpillPlace::Temporary(created))
            .path())
    }
}

impl SpillSink for SpillDir {
    fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)> {
        let dir = self.path()?;
        // A random name, and mode 0600 set at creation.
        let file = tempfile::Builder::new()
            .prefix(&format!("{label}-"))
            .suffix(".out")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)?;
        file.keep().map_err(|e| e.error)
    }

    fn claim(&self, bytes: u64) -> u64 {
        let mut granted = 0;
        // Concurrent streams race for the last bytes; each claim is all-or-part, never more.
        let _ = self
            .claimed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |claimed| {
                granted = bytes.min(self.budget.saturating_sub(claimed));
                (granted > 0).then_some(claimed + granted)
            });
        granted
    }

    fn budget_bytes(&self) -> Option<u64> {
        Some(self.budget)
    }
}
