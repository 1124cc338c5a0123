//! The third-party OpenAI-compatible test server `@dwmkerr/mock-llm`, installed from npm into
//! `target/mock-llm` on first use and reused afterwards by `npm.rs` (in
//! crates/dsh-tools/tests/support; the including crate declares `mod npm`), as the TypeScript
//! compiler is.
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
    crate::npm::install(
        PACKAGE,
        "mock-llm",
        "node_modules/@dwmkerr/mock-llm/dist/main.js",
    )
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
