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

/// A spawned server, stopped when its connection ends: one the connector spawned itself (its
/// process group is killed when this is dropped), or one a spawning [`ServerLauncher`] started
/// (its [`ServerHandle`] stops it).
#[derive(Debug)]
pub(crate) enum ServerProcess {
    Child {
        child: tokio::process::Child,
        /// The server's process group, until it is killed. It is kept apart from the child
        /// because `Child::id` is gone once the server is reaped, and the processes the server
        /// started may outlive it.
        group: Option<i32>,
    },
    Launched(Option<Box<dyn ServerHandle>>),
}

impl ServerProcess {
    fn new(child: tokio::process::Child) -> ServerProcess {
        // The group was made at spawn (`process_group(0)`), so its id is the server's pid.
        let group = child.id().and_then(|pid| i32::try_from(pid).ok());
        ServerProcess::Child { child, group }
    }

    /// Gives the server `grace` to exit on its own (its stdin is closed by then), then kills
    /// the server and what it started (its process group, or all of it through a launcher's
    /// handle) and reaps the server.
    pub(crate) async fn stop(mut self, grace: std::time::Duration) {
        match &mut self {
            ServerProcess::Child { child, group } => {
                let _ = tokio::time::timeout(grace, child.wait()).await;
                kill_group(child, group);
                let _ = child.wait().await;
            }
            ServerProcess::Launched(handle) => {
                if let Some(handle) = handle.take() {
                    handle.stop(grace).await;
                }
            }
        }
    }
}

/// Kills the group once: a second kill could reach a new group that reuses the id.
fn kill_group(child: &mut tokio::process::Child, group: &mut Option<i32>) {
    let group = group.take();
    #[cfg(unix)]
    if let Some(group) = group {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    #[cfg(not(unix))]
    let _ = group;
    let _ = child.start_kill();
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // `kill_on_drop` kills the server only; its children die with the group. A launcher's
        // handle kills its server when it is dropped.
        if let ServerProcess::Child { child, group } = self {
            kill_group(child, group);
        }
    }
}

/// How a server a spawning [`ServerLauncher`] started is stopped.
///
/// Dropping the handle without [`ServerHandle::stop`] (a host dropping its connection, a
/// runtime shutting down) must kill the server and everything it started too, without waiting.
pub trait ServerHandle: Send + Sync + fmt::Debug + 'static {
    /// Stops the server once its stdin has been closed: gives it `grace` to exit on its own,
    /// then kills it and everything it started, and reaps it. Resolves once that is done.
    fn stop(self: Box<Self>, grace: std::time::Duration) -> BoxFuture<'static, ()>;
}

/// A server a spawning [`ServerLauncher`] started: its standard streams and how it is stopped.
#[non_exhaustive]
pub struct LaunchedServer {
    /// The server's stdin: the protocol's requests.
    pub stdin: ByteWriter,
    /// The server's stdout: the protocol's answers.
    pub stdout: ByteReader,
    /// The server's stderr, copied to the host's; `None`: the launcher took care of it.
    pub stderr: Option<ByteReader>,
    /// How the server is stopped.
    pub handle: Box<dyn ServerHandle>,
}

impl LaunchedServer {
    /// A launched server with these streams, stopped through `handle`.
    pub fn new(
        stdin: impl AsyncWrite + Send + Sync + 'static,
        stdout: impl AsyncRead + Send + Sync + 'static,
        stderr: Option<ByteReader>,
        handle: Box<dyn ServerHandle>,
    ) -> LaunchedServer {
        LaunchedServer {
            stdin: Box::pin(stdin),
            stdout: Box::pin(stdout),
            stderr,
            handle,
        }
    }
}

impl fmt::Debug for LaunchedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchedServer")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
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

/// How a host starts its stdio servers: by building the command that starts each one (to
/// confine it in a sandbox, say; [`ServerLauncher::new`]), or by starting it itself and handing
/// back its streams and a stop handle ([`ServerLauncher::spawning`]), which is how a host runs
/// its servers under a supervisor that kills everything they start.
///
/// A command's server gets its stdin and stdout piped, its stderr copied to the host's, and its
/// own process group, killed on dispose: what the server starts outside that group (`setsid`,
/// a double fork, a group of its own) outlives it. A host that must contain its servers
/// launches them itself (`dsh-agent` does, with `tool-bash`'s supervisor). An error of either
/// form fails that start like a program that cannot be spawned.
#[derive(Clone)]
pub struct ServerLauncher(LaunchForm);

#[derive(Clone)]
enum LaunchForm {
    Command(Arc<LaunchFn>),
    Spawn(Arc<SpawnFn>),
}

/// What a command-building [`ServerLauncher`] calls.
type LaunchFn = dyn Fn(&ServerLaunch) -> io::Result<std::process::Command> + Send + Sync;
/// What a spawning [`ServerLauncher`] calls.
type SpawnFn =
    dyn Fn(&ServerLaunch) -> BoxFuture<'static, io::Result<LaunchedServer>> + Send + Sync;

impl ServerLauncher {
    /// A launcher that builds each server's command with `launch`; the connector spawns it in
    /// a process group of its own.
    pub fn new(
        launch: impl Fn(&ServerLaunch) -> io::Result<std::process::Command> + Send + Sync + 'static,
    ) -> ServerLauncher {
        ServerLauncher(LaunchForm::Command(Arc::new(launch)))
    }

    /// A launcher that starts each server itself with `spawn`, which resolves to the server's
    /// streams and the handle that stops it.
    pub fn spawning(
        spawn: impl Fn(&ServerLaunch) -> BoxFuture<'static, io::Result<LaunchedServer>>
        + Send
        + Sync
        + 'static,
    ) -> ServerLauncher {
        ServerLauncher(LaunchForm::Spawn(Arc::new(spawn)))
    }
}

impl fmt::Debug for ServerLauncher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            LaunchForm::Command(_) => "ServerLauncher::Command(..)",
            LaunchForm::Spawn(_) => "ServerLauncher::Spawn(..)",
        })
    }
}

/// Two launchers are equal when they are the same one (clones of it).
impl PartialEq for ServerLauncher {
    fn eq(&self, other: &ServerLauncher) -> bool {
        match (&self.0, &other.0) {
            (LaunchForm::Command(a), LaunchForm::Command(b)) => Arc::ptr_eq(a, b),
            (LaunchForm::Spawn(a), LaunchForm::Spawn(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for ServerLauncher {}

/// Spawns a stdio server with the shell executor's hygiene: its own process group, an
/// environment of [`INHERITED_VARS`] plus its configured `env`, killed with its group on
/// dispose; through a [`ServerLauncher`] when one is given (a spawning one starts and stops the
/// server itself).
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

    /// Starts the server through `launcher`.
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

    fn command(
        &self,
        launch: &ServerLaunch,
        build: Option<&LaunchFn>,
    ) -> io::Result<tokio::process::Command> {
        let command = match build {
            Some(build) => build(launch)?,
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
async fn forward_stderr(mut stderr: impl AsyncRead + Unpin) {
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
        let launch = self.launch();
        let program = self.server.command.clone();
        let cannot_start =
            move |e: io::Error| io::Error::new(e.kind(), format!("cannot start `{program}`: {e}"));
        if let Some(ServerLauncher(LaunchForm::Spawn(spawn))) = &self.launcher {
            let started = spawn(&launch);
            return Box::pin(async move {
                let server = started.await.map_err(cannot_start)?;
                if let Some(stderr) = server.stderr {
                    tokio::spawn(forward_stderr(stderr));
                }
                Ok(StreamConnection {
                    reader: server.stdout,
                    writer: server.stdin,
                    process: Some(ServerProcess::Launched(Some(server.handle))),
                })
            });
        }
        let build = match &self.launcher {
            Some(ServerLauncher(LaunchForm::Command(build))) => Some(build.as_ref()),
            _ => None,
        };
        let command = self.command(&launch, build);
        Box::pin(async move {
            let mut child = command
                .and_then(|mut command| command.spawn())
                .map_err(cannot_start)?;
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

    /// What a recording [`ServerHandle`] saw: the grace of each stop, and whether it was
    /// dropped.
    #[derive(Debug, Default)]
    struct Seen {
        stops: Vec<std::time::Duration>,
        dropped: usize,
    }

    #[derive(Debug)]
    struct Recording(Arc<std::sync::Mutex<Seen>>);

    impl ServerHandle for Recording {
        fn stop(self: Box<Self>, grace: std::time::Duration) -> BoxFuture<'static, ()> {
            self.0.lock().unwrap().stops.push(grace);
            Box::pin(async {})
        }
    }

    impl Drop for Recording {
        fn drop(&mut self) {
            self.0.lock().unwrap().dropped += 1;
        }
    }

    #[tokio::test]
    async fn a_spawning_launcher_starts_the_server_and_its_handle_stops_it() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
        let programs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (recorded, handles) = (Arc::clone(&programs), Arc::clone(&seen));
        let launcher = ServerLauncher::spawning(move |launch: &ServerLaunch| {
            recorded.lock().unwrap().push(launch.program.clone());
            let handle = Box::new(Recording(Arc::clone(&handles)));
            Box::pin(async move {
                let (stdout, mut server_out) = tokio::io::duplex(64);
                server_out.write_all(b"spawned").await?;
                drop(server_out);
                Ok(LaunchedServer::new(tokio::io::sink(), stdout, None, handle))
            })
        });
        assert_eq!(launcher.clone(), launcher);
        assert_ne!(launcher, ServerLauncher::new(|launch| Ok(launch.command())));
        let connector =
            StdioConnector::new(StdioServer::new("server", ["a"]), None).with_launcher(launcher);

        // Stopped: the handle's stop, with the grace.
        let mut connection = connector.connect().await.unwrap();
        let mut out = String::new();
        connection.reader.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "spawned");
        let grace = std::time::Duration::from_millis(1234);
        connection.process.take().unwrap().stop(grace).await;
        // Dropped without a stop (the host dropped the connection): the handle is dropped.
        drop(connector.connect().await.unwrap());
        let (stops, dropped) = {
            let seen = seen.lock().unwrap();
            (seen.stops.clone(), seen.dropped)
        };
        assert_eq!((stops, dropped), (vec![grace], 2));
        assert_eq!(
            *programs.lock().unwrap(),
            vec![OsString::from("server"), OsString::from("server")]
        );

        let refusing = StdioConnector::new(StdioServer::new("server", ["a"]), None).with_launcher(
            ServerLauncher::spawning(|_: &ServerLaunch| {
                Box::pin(async { Err(io::Error::other("no supervisor today")) })
            }),
        );
        let error = refusing.connect().await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot start `server`: no supervisor today"
        );
    }
}
