//! Architecture invariant: `presenters` is pure. Its normal dependencies are the card
//! vocabulary, serde and pure helpers, and its source names no file system, environment,
//! process, clock or randomness API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every normal (non-dev) dependency `presenters` may have. A new one must be pure: no I/O,
/// no async runtime, no clock or randomness.
const ALLOWED_DEPENDENCIES: &[&str] = &["dsh-tools", "serde", "serde_json", "similar"];

/// Paths and names the library source must not mention.
const FORBIDDEN_PATHS: &[&str] = &[
    "std::fs",
    "std::env",
    "std::process",
    "std::time::SystemTime",
    "std::net",
    "tokio",
];
const FORBIDDEN_IDENTIFIERS: &[&str] = &["rand", "Instant", "SystemTime", "env", "option_env"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn normal_dependencies_are_pure() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace_root = crate_dir().join("../..");
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&workspace_root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let package = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "presenters")
        .expect("the presenters package is a workspace member");
    let normal: BTreeSet<&str> = package["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].as_str() != Some("dev"))
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let outside: Vec<&str> = normal
        .iter()
        .copied()
        .filter(|name| !ALLOWED_DEPENDENCIES.contains(name))
        .collect();
    assert_eq!(
        outside,
        Vec::<&str>::new(),
        "dependencies outside the allow-list"
    );
    assert!(normal.contains("dsh-tools"), "{normal:?}");
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The forbidden paths and identifiers `source` mentions (comments included: a doc that
/// names such an API is as suspicious as code that calls it).
fn impurities(source: &str) -> Vec<String> {
    let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found: Vec<String> = FORBIDDEN_PATHS
        .iter()
        .filter(|path| compact.contains(*path))
        .map(|path| (*path).to_owned())
        .collect();
    let identifiers: BTreeSet<&str> = source
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    found.extend(
        FORBIDDEN_IDENTIFIERS
            .iter()
            .filter(|name| identifiers.contains(*name))
            .map(|name| (*name).to_owned()),
    );
    found
}

#[test]
fn the_scan_catches_what_it_looks_for() {
    let check = |source: &str, expected: &[&str]| {
        assert_eq!(impurities(source), expected, "{source}");
    };
    check("use std::fs::read;", &["std::fs"]);
    check("std :: process :: Command::new(\"ls\")", &["std::process"]);
    check("let t = Instant::now();", &["Instant"]);
    check("let x = rand::random::<u8>();", &["rand"]);
    check("let v = std::env::var(\"HOME\");", &["std::env", "env"]);
    check("let v = env!(\"X\");", &["env"]);
    // Words that merely contain a forbidden name are fine.
    check("let operand = brand; // random environment", &[]);
}

#[test]
fn library_source_has_no_io_clock_env_or_randomness() {
    let mut files = Vec::new();
    rust_files(&crate_dir().join("src"), &mut files);
    assert!(!files.is_empty());
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            impurities(&source),
            Vec::<String>::new(),
            "{}",
            file.display()
        );
    }
}
