//! The TypeScript compiler for tests that type-check generated declarations. It is installed
//! into `target/ts` from the npm registry on first use and reused afterwards, so a plain
//! `cargo test --workspace` works on a fresh machine that has node and npm. Shared by the
//! dsh-tools and dsh-agent tests (included with `#[path]`).

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Provisions the compiler and returns the path of its `tsc` script.
pub fn compiler() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let prefix = target.join("ts");
    let tsc = prefix.join("node_modules/typescript/bin/tsc");
    if tsc.exists() {
        return tsc;
    }
    std::fs::create_dir_all(&prefix).unwrap();
    // Two test processes may get here at once; one installs, the other waits for it.
    let lock = prefix.join(".installing");
    let owner = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .is_ok();
    if owner {
        let status = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&prefix)
            .arg("typescript@5")
            .status();
        let _ = std::fs::remove_file(&lock);
        let status = status.unwrap_or_else(|e| {
            panic!("this test needs node and npm to install the TypeScript compiler: {e}")
        });
        assert!(status.success(), "npm install typescript failed: {status}");
    } else {
        for _ in 0..900 {
            if tsc.exists() && !lock.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    assert!(
        tsc.exists(),
        "the TypeScript compiler is missing at {}",
        tsc.display()
    );
    tsc
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
