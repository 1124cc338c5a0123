//! How a server is reached: a byte stream (a spawned program's stdio, or an in-memory pipe for
//! tests and benchmarks), or streamable HTTP.

use crate::config::{HttpServer, StdioServer};
use futures::future::BoxFuture;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use tokio::io::{AsyncRead, AsyncWrite};

/// The variables a spawned server inherits from the host (patterns ending in `*` match a
/// prefix): what a program needs to find programs, its home and its temporary directory, and
/// to read and write text in the user's language. Nothing else of the host's environment
/// reaches it, so credentials in the host's environment stay there; a server that needs one
/// names it in its `env`.
pub const INHERITED_VARS: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TMPDIR", "TZ",
];

/// The reading half of a byte-stream connection.
pub type ByteReader = Pin<Box<dyn AsyncRead + Send + Sync>>;
/// The writing half of a byte-stream connection.
pub type ByteWriter = Pin<Box<dyn AsyncWrite + Send + Sync>>;

/// One live byte-stream connection to a server: the server's output, its input, and what to
/// stop when the connection is disposed.
pub struct StreamConnection {
    pub(crate) reader: ByteReader,
    pub(crate) writer: ByteWriter,
    pub(crate) process: Option<ServerProcess>,
}

impl fmt::Debug for StreamConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamConnection")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl StreamConnection {
    /// A connection over any pair of streams (an in-memory pipe to an in-process server).
    pub fn new(
        reader: impl AsyncRead + Send + Sync + 'static,
        writer: impl AsyncWrite + Send + Sync + 'static,
    ) -> StreamConnection {
        StreamConnection {
            reader: Box::pin(reader),
            writer: Box::pin(writer),
            process: None,
        }
    }
}

/// Opens byte-stream connections to one server, once per (re)start.
pub trait Connector: Send + Sync + 'static {
    /// Opens a new connection.
    fn connect(&self) -> BoxFuture<'static, io::Result<StreamConnection>>;

    /// What the server is, for messages (`npx -y server`).
    fn describe(&self) -> String;
}

/// How a server is reached.
#[derive(Clone)]
pub(crate) enum Endpoint {
    Stream(std::sync::Arc<dyn Connector>),
    Http(HttpServer),
}

/// A spawned server: its process group is killed when this is dropped.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: tokio::process::Child,
    /// The server's process group, until it is killed. It is kept apart from the child
    /// because `Child::id` is gone once the server is reaped, and the processes the server
    /// started may outlive it.
    group: Option<i32>,
}

impl ServerProcess {
    fn new(child: tokio::process::Child) -> ServerProcess {
        // The group was made at spawn (`process_group(0)`), so its id is the server's pid.
        let group = child.id().and_then(|pid| i32::try_from(pid).ok());
        ServerProcess { child, group }
    }

    /// Gives the server `grace` to exit on its own (its stdin is closed by then), then kills
    /// the whole process group (the server and anything it started) and reaps the server.
    pub(crate) async fn stop(mut self, grace: std::time::Duration) {
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        self.kill_group();
        let _ = self.child.wait().await;
    }

    /// Kills the group once: a second kill could reach a new group that reuses the id.
    fn kill_group(&mut self) {
        let group = self.group.take();
        #[cfg(unix)]
        if let Some(group) = group {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        #[cfg(not(unix))]
        let _ = group;
        let _ = self.child.start_kill();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // `kill_on_drop` kills the server only; its children die with the group.
        self.kill_group();
    }
}

/// Spawns a stdio server with the shell executor's hygiene: its own process group, an
/// environment of [`INHERITED_VARS`] plus its configured `env`, killed with its group on
/// dispose.
#[derive(Clone, Debug)]
pub struct StdioConnector {
    server: StdioServer,
    base_dir: Option<PathBuf>,
}

impl StdioConnector {
    /// A connector for `server`; a relative `cwd` is resolved against `base_dir`.
    pub fn new(server: StdioServer, base_dir: Option<PathBuf>) -> StdioConnector {
        StdioConnector { server, base_dir }
    }

    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.server.command);
        command
            .args(&self.server.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // The server's diagnostics go where the host's go; the protocol is on stdout.
            .stderr(Stdio::inherit())
            .env_clear()
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        for (name, value) in std::env::vars_os() {
            if let Some(name_text) = name.to_str()
                && inherited(name_text)
            {
                command.env(&name, value);
            }
        }
        command.envs(&self.server.env);
        let cwd = match (&self.server.cwd, &self.base_dir) {
            (Some(cwd), Some(base)) => Some(base.join(cwd)),
            (Some(cwd), None) => Some(cwd.clone()),
            (None, base) => base.clone(),
        };
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        command
    }
}

fn inherited(name: &str) -> bool {
    INHERITED_VARS
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *pattern,
        })
}

impl Connector for StdioConnector {
    fn connect(&self) -> BoxFuture<'static, io::Result<StreamConnection>> {
        let mut command = self.command();
        let program = self.server.command.clone();
        Box::pin(async move {
            let mut child = command
                .spawn()
                .map_err(|e| io::Error::new(e.kind(), format!("cannot start `{program}`: {e}")))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(io::Error::other("the server's stdio was not piped"));
            };
            Ok(StreamConnection {
                reader: Box::pin(stdout),
                writer: Box::pin(stdin),
                process: Some(ServerProcess::new(child)),
            })
        })
    }

    fn describe(&self) -> String {
        std::iter::once(self.server.command.as_str())
            .chain(self.server.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allowlist_is_inherited() {
        for (name, expected) in [
            ("PATH", true),
            ("LC_ALL", true),
            ("HOME", true),
            ("GITHUB_TOKEN", false),
            ("AWS_SECRET_ACCESS_KEY", false),
            ("PATHS", false),
        ] {
            assert_eq!(inherited(name), expected, "{name}");
        }
    }
}
