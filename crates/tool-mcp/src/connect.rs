//! How a server is reached: a byte stream (a spawned program's stdio, or an in-memory pipe for
//! tests and benchmarks), or streamable HTTP.

use crate::config::{HttpServer, StdioServer};
use futures::future::BoxFuture;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
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

/// What a stdio server is started as: the program, its arguments, its working directory and
/// its whole environment ([`INHERITED_VARS`] of the host's plus its configured `env`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerLaunch {
    /// The program (`command`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its working directory; `None`: the host's.
    pub cwd: Option<PathBuf>,
    /// Its whole environment: nothing else of the host's is inherited.
    pub env: Vec<(OsString, OsString)>,
}

impl ServerLaunch {
    /// The plain command: the program with its arguments, environment and working directory.
    pub fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(name, value)| (name, value)));
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        command
    }
}

/// Turns a [`ServerLaunch`] into the command that starts the server: how a host confines its
/// stdio servers (in a sandbox, say) or runs them some other way. The connector then pipes the
/// command's stdin and stdout, copies its stderr to the host's, and gives it its own
/// process group, killed on dispose. An error fails that start like a program that cannot be
/// spawned.
#[derive(Clone)]
pub struct ServerLauncher(Arc<LaunchFn>);

/// What a [`ServerLauncher`] calls.
type LaunchFn = dyn Fn(&ServerLaunch) -> io::Result<std::process::Command> + Send + Sync;

impl ServerLauncher {
    /// A launcher that builds each server's command with `launch`.
    pub fn new(
        launch: impl Fn(&ServerLaunch) -> io::Result<std::process::Command> + Send + Sync + 'static,
    ) -> ServerLauncher {
        ServerLauncher(Arc::new(launch))
    }
}

impl fmt::Debug for ServerLauncher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerLauncher(..)")
    }
}

/// Two launchers are equal when they are the same one (clones of it).
impl PartialEq for ServerLauncher {
    fn eq(&self, other: &ServerLauncher) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ServerLauncher {}

/// Spawns a stdio server with the shell executor's hygiene: its own process group, an
/// environment of [`INHERITED_VARS`] plus its configured `env`, killed with its group on
/// dispose; through a [`ServerLauncher`] when one is given.
#[derive(Clone, Debug)]
pub struct StdioConnector {
    server: StdioServer,
    base_dir: Option<PathBuf>,
    launcher: Option<ServerLauncher>,
}

impl StdioConnector {
    /// A connector for `server`; a relative `cwd` is resolved against `base_dir`.
    pub fn new(server: StdioServer, base_dir: Option<PathBuf>) -> StdioConnector {
        StdioConnector {
            server,
            base_dir,
            launcher: None,
        }
    }

    /// Starts the server with the command `launcher` builds.
    pub fn with_launcher(mut self, launcher: ServerLauncher) -> StdioConnector {
        self.launcher = Some(launcher);
        self
    }

    /// What the server is started as.
    pub fn launch(&self) -> ServerLaunch {
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(name, _)| name.to_str().is_some_and(inherited))
            .filter(|(name, _)| {
                !self
                    .server
                    .env
                    .keys()
                    .any(|configured| OsStr::new(configured) == name)
            })
            .collect();
        env.extend(
            self.server
                .env
                .iter()
                .map(|(name, value)| (name.into(), value.into())),
        );
        let cwd = match (&self.server.cwd, &self.base_dir) {
            (Some(cwd), Some(base)) => Some(base.join(cwd)),
            (Some(cwd), None) => Some(cwd.clone()),
            (None, base) => base.clone(),
        };
        ServerLaunch {
            program: self.server.command.clone().into(),
            args: self.server.args.iter().map(OsString::from).collect(),
            cwd,
            env,
        }
    }

    fn command(&self) -> io::Result<tokio::process::Command> {
        let launch = self.launch();
        let command = match &self.launcher {
            Some(launcher) => (launcher.0)(&launch)?,
            None => launch.command(),
        };
        let mut command = tokio::process::Command::from(command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // The server's diagnostics go where the host's go, copied from a pipe: the server
            // never holds the host's stderr, which may be the user's terminal (a confined
            // server could otherwise change its mode or settings). The protocol is on stdout.
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        Ok(command)
    }
}

/// Copies a server's stderr to the host's until the server closes it.
async fn forward_stderr(mut stderr: tokio::process::ChildStderr) {
    use std::io::Write;
    use tokio::io::AsyncReadExt;
    let mut buffer = vec![0u8; 8192];
    loop {
        match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                // A host whose stderr is gone loses the server's diagnostics, nothing else.
                let _ = std::io::stderr().write_all(&buffer[..read]);
            }
        }
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
        let command = self.command();
        let program = self.server.command.clone();
        Box::pin(async move {
            let mut child = command
                .and_then(|mut command| command.spawn())
                .map_err(|e| io::Error::new(e.kind(), format!("cannot start `{program}`: {e}")))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(io::Error::other("the server's stdio was not piped"));
            };
            if let Some(stderr) = child.stderr.take() {
                tokio::spawn(forward_stderr(stderr));
            }
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

    #[test]
    fn the_launch_is_the_allowlist_under_the_configured_env_in_the_resolved_cwd() {
        let mut server = StdioServer::new("server", ["--flag"]);
        server.env.insert("PATH".into(), "/configured".into());
        server.env.insert("TOKEN".into(), "given".into());
        server.cwd = Some(PathBuf::from("sub"));
        let launch = StdioConnector::new(server, Some(PathBuf::from("/base"))).launch();
        assert_eq!(launch.program, OsString::from("server"));
        assert_eq!(launch.args, vec![OsString::from("--flag")]);
        assert_eq!(launch.cwd, Some(PathBuf::from("/base/sub")));
        let path: Vec<_> = launch
            .env
            .iter()
            .filter(|(name, _)| name == "PATH")
            .collect();
        assert_eq!(path, vec![&("PATH".into(), "/configured".into())]);
        assert!(launch.env.contains(&("TOKEN".into(), "given".into())));
        assert!(
            launch
                .env
                .iter()
                .all(|(name, _)| name == "TOKEN" || inherited(name.to_str().unwrap())),
            "{:?}",
            launch.env
        );
    }

    #[tokio::test]
    async fn the_launcher_builds_the_command_and_its_error_fails_the_start() {
        use tokio::io::AsyncReadExt;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let launcher = ServerLauncher::new(move |launch: &ServerLaunch| {
            recorded.lock().unwrap().push(launch.program.clone());
            let mut command = std::process::Command::new("sh");
            command.args(["-c", "printf launched"]);
            Ok(command)
        });
        let connector = StdioConnector::new(StdioServer::new("server", ["a"]), None)
            .with_launcher(launcher.clone());
        let mut connection = connector.connect().await.unwrap();
        let mut out = String::new();
        connection.reader.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "launched");
        assert_eq!(*seen.lock().unwrap(), vec![OsString::from("server")]);
        assert_eq!(launcher.clone(), launcher);

        let refusing = StdioConnector::new(StdioServer::new("server", ["a"]), None).with_launcher(
            ServerLauncher::new(|_: &ServerLaunch| Err(io::Error::other("no sandbox today"))),
        );
        let error = refusing.connect().await.unwrap_err();
        assert_eq!(error.to_string(), "cannot start `server`: no sandbox today");
    }
}
