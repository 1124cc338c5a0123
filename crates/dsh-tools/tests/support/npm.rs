//! npm packages for tests (the TypeScript compiler, the third-party mock model server),
//! installed into `target/<dir>` from the npm registry on first use and reused afterwards, so a
//! plain `cargo test --workspace` works on a fresh machine that has node and npm. Included with
//! `#[path]` by every test crate that provisions a package.
//!
//! There is no lock to wait on: a process that finds no install makes one in a staging
//! directory of its own and renames it into place. The rename is atomic, so `target/<dir>` is
//! either absent or a complete install, and an install that was killed leaves only its
//! `<dir>.staging.<pid>` directory behind, which nothing waits for (and `cargo clean` removes).
//! Two first runs at once both install; the first rename wins. Within one process, callers
//! provision once (a `OnceLock`): the staging directory is per process, so two threads must not
//! install into it at once.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Installs `package` (an npm spec such as `typescript@5`) into `target/<dir>` unless it is
/// there, and returns the path of `entry` (relative to the install prefix) inside the install.
pub fn install(package: &str, dir: &str, entry: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let entry_in = |prefix: &Path| prefix.join(entry);
    let prefix = target.join(dir);
    if entry_in(&prefix).exists() {
        return entry_in(&prefix);
    }
    let staging = target.join(format!("{dir}.staging.{}", std::process::id()));
    // A staging directory of this process id can only be left over from a dead process.
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).unwrap_or_else(|e| {
        panic!(
            "cannot create the staging directory {}: {e}",
            staging.display()
        )
    });
    let status = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&staging)
        .arg(package)
        .status()
        .unwrap_or_else(|e| panic!("this test needs node and npm to install {package}: {e}"));
    assert!(
        status.success() && entry_in(&staging).exists(),
        "npm install {package} into {} failed: {status}",
        staging.display()
    );
    if let Err(error) = std::fs::rename(&staging, &prefix) {
        // Another process renamed its complete install into place first: use that one.
        let _ = std::fs::remove_dir_all(&staging);
        assert!(
            entry_in(&prefix).exists(),
            "cannot move the {package} install from {} to {}: {error}",
            staging.display(),
            prefix.display()
        );
    }
    entry_in(&prefix)
}
