//! Finding the processes a test started, by a mark in their environment: a server spawned with
//! `DSH_MCP_TEST_MARK=<mark>` passes it on to everything it starts. Linux only (`/proc`).
//! Included with `#[path]` by every test crate that checks no process is left behind.

#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, Instant};

/// The variable that carries the mark.
pub const MARK_VAR: &str = "DSH_MCP_TEST_MARK";

/// The live (not zombie) processes whose environment holds `DSH_MCP_TEST_MARK=<mark>`.
pub fn marked_processes(mark: &str) -> Vec<u32> {
    let needle = format!("{MARK_VAR}={mark}");
    let mut found = Vec::new();
    // Without `/proc` every check of this file would pass without looking: fail instead.
    let entries = std::fs::read_dir("/proc").unwrap_or_else(|e| panic!("cannot read /proc: {e}"));
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|stat| stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')))
            .unwrap_or(false);
        if !zombie
            && environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Waits (up to 10 s) until no process carries `mark`; panics naming those left.
pub fn wait_gone(mark: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = marked_processes(mark);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes left running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
