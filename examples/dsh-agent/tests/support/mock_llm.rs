//! The third-party OpenAI-compatible test server `@dwmkerr/mock-llm`, installed from npm into
//! `target/mock-llm` on first use and reused afterwards, the way the TypeScript compiler is
//! (crates/dsh-tools/tests/support/typescript.rs): a process that finds no install makes one in
//! a staging directory of its own and renames it into place, so `target/mock-llm` is either
//! absent or complete and a killed install leaves only its staging directory behind.
//!
//! A running server listens on 127.0.0.1 only and is killed when its [`MockLlm`] is dropped.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The pinned release: its streaming sends only text (tool calls need whole responses).
const PACKAGE: &str = "@dwmkerr/mock-llm@0.1.29";

/// Provisions the server and returns the path of its entry script.
pub fn server_script() -> PathBuf {
    static SCRIPT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SCRIPT.get_or_init(provision).clone()
}

fn provision() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let script_in = |prefix: &Path| prefix.join("node_modules/@dwmkerr/mock-llm/dist/main.js");
    let prefix = target.join("mock-llm");
    if script_in(&prefix).exists() {
        return script_in(&prefix);
    }
    let staging = target.join(format!("mock-llm.staging.{}", std::process::id()));
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
        .arg(PACKAGE)
        .status()
        .unwrap_or_else(|e| panic!("this test needs node and npm to install {PACKAGE}: {e}"));
    assert!(
        status.success() && script_in(&staging).exists(),
        "npm install {PACKAGE} into {} failed: {status}",
        staging.display()
    );
    if let Err(error) = std::fs::rename(&staging, &prefix) {
        // Another process renamed its complete install into place first: use that one.
        let _ = std::fs::remove_dir_all(&staging);
        assert!(
            script_in(&prefix).exists(),
            "cannot move the mock-llm install from {} to {}: {error}",
            staging.display(),
            prefix.display()
        );
    }
    script_in(&prefix)
}

/// A running mock-llm, killed on drop.
pub struct MockLlm {
    child: Child,
    pub port: u16,
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl MockLlm {
    /// Starts the server with the YAML configuration `config` (written to `dir`) and returns
    /// once it says it is listening.
    pub fn start(dir: &Path, config: &str) -> MockLlm {
        let script = server_script();
        let config_path = dir.join("mock-llm.yaml");
        std::fs::write(&config_path, config).unwrap();
        // A free port: the listener is gone before the server binds it, which is as close as
        // a port handed to another program can get.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("node")
            .arg(&script)
            .arg("--config")
            .arg(&config_path)
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("this test needs node to run mock-llm: {e}"));
        let stdout = child.stdout.take().unwrap();
        let mut server = MockLlm { child, port };
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = String::new();
        loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if line.contains(&format!("running on 127.0.0.1:{port}")) {
                        break;
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                _ => {
                    let status = server.child.wait();
                    panic!("mock-llm ended before listening ({status:?}):\n{seen}");
                }
            }
        }
        // Keep reading so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        server
    }

    /// The base URL of its OpenAI-compatible API.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}
