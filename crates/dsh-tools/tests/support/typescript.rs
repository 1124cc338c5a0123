//! The TypeScript compiler for tests that type-check generated declarations. It is installed
//! into `target/typescript` from the npm registry on first use and reused afterwards, so a plain
//! `cargo test --workspace` works on a fresh machine that has node and npm. Shared by the
//! dsh-tools and dsh-agent tests (included with `#[path]`).
//!
//! There is no lock to wait on: a process that finds no compiler installs one into a staging
//! directory of its own and renames it into place. The rename is atomic, so
//! `target/typescript` is either absent or a complete install, and an install that was killed
//! leaves only its `typescript.staging.<pid>` directory behind, which nothing waits for (and
//! `cargo clean` removes). Two first runs at once both install; the first rename wins.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Provisions the compiler and returns the path of its `tsc` script. Within one process the
/// tests share one provisioning: the staging directory is per process, so two threads must not
/// install into it at once.
pub fn compiler() -> PathBuf {
    static COMPILER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COMPILER.get_or_init(provision).clone()
}

fn provision() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let tsc_in = |prefix: &Path| prefix.join("node_modules/typescript/bin/tsc");
    let prefix = target.join("typescript");
    if tsc_in(&prefix).exists() {
        return tsc_in(&prefix);
    }
    let staging = target.join(format!("typescript.staging.{}", std::process::id()));
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
        .arg("typescript@5")
        .status()
        .unwrap_or_else(|e| {
            panic!("this test needs node and npm to install the TypeScript compiler: {e}")
        });
    assert!(
        status.success() && tsc_in(&staging).exists(),
        "npm install typescript@5 into {} failed: {status}",
        staging.display()
    );
    if let Err(error) = std::fs::rename(&staging, &prefix) {
        // Another process renamed its complete install into place first: use that one.
        let _ = std::fs::remove_dir_all(&staging);
        assert!(
            tsc_in(&prefix).exists(),
            "cannot move the TypeScript install from {} to {}: {error}",
            staging.display(),
            prefix.display()
        );
    }
    tsc_in(&prefix)
}

/// Type-checks `files` in strict mode; returns whether they passed and the compiler's output.
pub fn check(files: &[&Path]) -> (bool, String) {
    let output = Command::new("node")
        .arg(compiler())
        .args([
            "--strict", "--noEmit", "--target", "es2020", "--lib", "es2020",
        ])
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("this test needs node to run the TypeScript compiler: {e}"));
    let log = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), log)
}
