//! Architecture invariant: `presenters` is pure. Its source names no file system, environment,
//! process, clock or randomness API. (Its normal dependencies are an allow-list checked with
//! the other dependency rules, by `presenters_normal_dependencies_are_pure` in
//! `xtask/src/architecture.rs`.)

use pretty_assertions::assert_eq;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

/// `source` without whitespace and with every group of paths spelt out, so a forbidden path
/// is found as a substring whatever the layout: `use std::{fs, io::{Read, Write}};` becomes
/// `usestd::fs;usestd::io::Read;usestd::io::Write;;`.
fn flattened(source: &str) -> String {
    let mut text: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    let mut from = 0;
    while let Some(open) = text[from..].find("::{").map(|i| i + from) {
        let prefix_start = text[..open]
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_' || *c == ':'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let group_start = open + "::{".len();
        let mut depth = 1;
        let mut items = vec![group_start];
        let mut close = None;
        for (i, c) in text[group_start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 1 => items.push(group_start + i + 1),
                _ => {}
            }
            if depth == 0 {
                close = Some(group_start + i);
                break;
            }
        }
        let Some(close) = close else {
            // Not a group of paths (an unbalanced brace in a string): look further on.
            from = group_start;
            continue;
        };
        items.push(close + 1);
        let prefix = &text[prefix_start..open];
        let spelt: String = items
            .windows(2)
            .map(|w| &text[w[0]..w[1] - 1])
            .filter(|item| !item.is_empty())
            .map(|item| format!("{prefix}::{item};"))
            .collect();
        text.replace_range(prefix_start..=close, &spelt);
        // Nested groups are now at or after `prefix_start`.
        from = prefix_start;
    }
    text
}

/// The forbidden paths and identifiers `source` mentions (comments included: a doc that
/// names such an API is as suspicious as code that calls it).
fn impurities(source: &str) -> Vec<String> {
    let flat = flattened(source);
    let mut found: Vec<String> = FORBIDDEN_PATHS
        .iter()
        .filter(|path| flat.contains(*path))
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
    // Paths in groups, however nested and laid out.
    check("use std::{fs, io};", &["std::fs"]);
    check(
        "use std::{\n    io,\n    net::TcpStream,\n};",
        &["std::net"],
    );
    check(
        "use std::{io::{self, Read}, time::{Duration, SystemTime}};",
        &["std::time::SystemTime", "SystemTime"],
    );
    // Words that merely contain a forbidden name are fine, and so are harmless groups.
    check("let operand = brand; // random environment", &[]);
    check("use std::{fmt, sync::Arc};", &[]);
    check("format!(\"{a}::{b}\")", &[]);
}

#[test]
fn library_source_has_no_io_clock_env_or_randomness() {
    let mut files = Vec::new();
    rust_files(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
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
