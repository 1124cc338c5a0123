//! Running the built `dsh-agent` as a user would, for the integration tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The session store of the tests: under the target directory, never the user's home.
pub const SESSION_DIR: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/dsh-agent-sessions");

/// `dsh-agent <args>` with a clean environment for logging and colour (`NO_COLOR=1`, no
/// `RUST_LOG`, no `CLICOLOR*`, no `DSH_MODEL`), then `env` on top; stdin is `stdin` or empty.
pub fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-agent"));
    command
        .args(args)
        .env("NO_COLOR", "1")
        .env("DSH_SESSION_DIR", SESSION_DIR)
        .env_remove("DSH_SESSION_RETENTION")
        .env_remove("RUST_LOG")
        .env_remove("DSH_MODEL")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Runs `dsh-agent <args>` to the end with `env` set (see [`command`]).
pub fn run_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    command(args, env).output().unwrap()
}

/// Runs `dsh-agent <args>` to the end.
pub fn run(args: &[&str]) -> Output {
    run_with(args, &[])
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Writes a script of `steps` (a JSON array) to `dir/script.json`.
pub fn write_script(dir: &Path, steps: serde_json::Value) -> PathBuf {
    let path = dir.join("script.json");
    let script = serde_json::json!({ "steps": steps });
    std::fs::write(&path, script.to_string()).unwrap();
    path
}

/// One step that calls `bash` with `command`.
pub fn bash_step(id: &str, command: &str, description: &str) -> serde_json::Value {
    serde_json::json!({ "toolCalls": [ {
        "id": id,
        "name": "bash",
        "arguments": { "command": command, "description": description }
    } ] })
}

/// One step that answers with `text`.
pub fn text_step(text: &str) -> serde_json::Value {
    serde_json::json!({ "text": text })
}

/// The peak resident memory of a live process, in bytes (`VmHWM` of `/proc/<pid>/status`).
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"));
    kib * 1024
}

/// The JSON messages a JSON-RPC peer writes to `stdout`, one per line, read on a thread of
/// their own until the stream ends or the receiver is dropped.
pub fn json_lines(
    stdout: impl std::io::Read + Send + 'static,
) -> std::sync::mpsc::Receiver<serde_json::Value> {
    use std::io::BufRead;
    let (sender, messages) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let message: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if sender.send(message).is_err() {
                return;
            }
        }
    });
    messages
}
