//! The TypeScript compiler for tests that type-check generated declarations. It is installed
//! into `target/typescript` from the npm registry on first use and reused afterwards, so a plain
//! `cargo test --workspace` works on a fresh machine that has node and npm. Shared by the
//! dsh-tools and dsh-agent tests (included with `#[path]`).
//!
//! Installed by `npm.rs` (its including crate declares `mod npm`).

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
    crate::npm::install(
        "typescript@5",
        "typescript",
        "node_modules/typescript/bin/tsc",
    )
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
