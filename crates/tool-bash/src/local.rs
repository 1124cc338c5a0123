//! The local executor: `bash -c` in its own process group, stdin on `/dev/null`, a scrubbed
//! non-interactive environment, tree-scoped termination, bounded draining and byte-exact spill.
//!
//! Termination is always of the whole group: SIGTERM, a grace period (default 2 s), then
//! SIGKILL; "killed" is reported only after the group is gone. After the shell itself exits, its
//! pipes are drained for at most the grace period, so a grandchild that keeps stdout open
//! (`sleep 100 &`) cannot hold the result hostage; whatever is left of the group is then killed,
//! so no process outlives its call. A crashed harness leaves nothing running either: an orphan
//! guard process kills every group still registered when the harness's pipe to it closes.
//!
//! Spill files live in one private directory per executor (`0700`, files `0600`, unguessable
//! names) under the system temporary directory (or [`LocalConfig::spill_root`]). They are kept
//! while the executor or any process it started is alive, and the directory is removed when the
//! last of them is dropped, that is when the session's service tears down.

use crate::env::child_env;
use crate::output::{SpillSink, StreamCollector};
use crate::shell::{
    Collected, DEFAULT_SPILL_CAP_BYTES, DEFAULT_TIMEOUT, DEFAULT_VISIBLE_BYTES, MAX_TIMEOUT,
    ProcessStatus, ShellError, ShellExecutor, ShellLimits, ShellProcess, ShellRequest,
    ShellRunResult, ShellSpec, Stream, StreamRead,
};
use futures::future::BoxFuture;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Configuration of the local executor.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LocalConfig {
    /// The foreground timeout when a request gives none (120 s).
    pub default_timeout: Duration,
    /// The largest foreground timeout (600 s).
    pub max_timeout: Duration,
    /// The bytes of output a foreground result shows in total (30 000).
    pub visible_bytes: usize,
    /// The in-memory window per stream of a background process (64 KiB).
    pub background_window_bytes: usize,
    /// The most bytes of one stream kept in its spill file (1 GiB).
    pub spill_cap_bytes: u64,
    /// Between SIGTERM and SIGKILL, and the longest pipe drain after the shell exits (2 s).
    pub grace: Duration,
    /// Where the private spill directory is created (default: the system temp directory).
    pub spill_root: Option<PathBuf>,
    /// The shell binary (`bash`, found on `PATH`).
    pub bash: PathBuf,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            visible_bytes: DEFAULT_VISIBLE_BYTES,
            background_window_bytes: 64 * 1024,
            spill_cap_bytes: DEFAULT_SPILL_CAP_BYTES,
            grace: Duration::from_secs(2),
            spill_root: None,
            bash: PathBuf::from("bash"),
        }
    }
}

/// The private spill directory, created on first use. A failed creation is not remembered:
/// the next spill tries again, so one transient error does not turn spilling off for good.
#[derive(Debug)]
struct SpillDir {
    root: Option<PathBuf>,
    dir: OnceLock<tempfile::TempDir>,
}

impl SpillDir {
    fn path(&self) -> std::io::Result<&Path> {
        if let Some(dir) = self.dir.get() {
            return Ok(dir.path());
        }
        let root = self.root.clone().unwrap_or_else(std::env::temp_dir);
        // A random name, and mode 0700 set at creation (not after: no window).
        let created = tempfile::Builder::new()
            .prefix("dsh-spill-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&root)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a spill directory in {}: {e}", root.display()),
                )
            })?;
        // Two first spills may race; the loser's empty directory is removed when it drops.
        Ok(self.dir.get_or_init(|| created).path())
    }
}

impl SpillSink for SpillDir {
    fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)> {
        let dir = self.path()?;
        // A random name, and mode 0600 set at creation.
        let file = tempfile::Builder::new()
            .prefix(&format!("{label}-"))
            .suffix(".out")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)?;
        file.keep().map_err(|e| e.error)
    }
}

/// The local executor (see the module docs).
#[derive(Debug, Clone)]
pub struct LocalExecutor {
    config: Arc<LocalConfig>,
    /// `config.bash`, resolved on `PATH` once.
    bash: Arc<PathBuf>,
    spill: Arc<SpillDir>,
    guard: Arc<OrphanGuard>,
}

impl Default for LocalExecutor {
    fn default() -> Self {
        LocalExecutor::new(LocalConfig::default())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl LocalExecutor {
    /// An executor with the given configuration.
    pub fn new(config: LocalConfig) -> LocalExecutor {
        LocalExecutor {
            spill: Arc::new(SpillDir {
                root: config.spill_root.clone(),
                dir: OnceLock::new(),
            }),
            bash: Arc::new(resolve_program(&config.bash)),
            guard: Arc::new(OrphanGuard::default()),
            config: Arc::new(config),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// The private spill directory, once something spilled.
    pub fn spill_dir(&self) -> Option<PathBuf> {
        self.spill.dir.get().map(|d| d.path().to_path_buf())
    }

    fn sink(&self) -> Arc<dyn SpillSink> {
        self.spill.clone()
    }

    fn command(&self, spec: &ShellSpec) -> Command {
        let mut command = Command::new(self.bash.as_path());
        command
            .arg("-c")
            .arg(&spec.command)
            .current_dir(&spec.workdir)
            .env_clear()
            .envs(child_env(std::env::vars_os(), &spec.env, &spec.managed))
            .stdin(if spec.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        command
    }

    fn spawn(&self, spec: &mut ShellSpec) -> Result<Child, ShellError> {
        let mut child = self.command(spec).spawn().map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                ShellError::BashMissing(format!("{}: {error}", self.bash.display()))
            } else {
                ShellError::Spawn(error.to_string())
            }
        })?;
        if let Some(pgid) = child.id() {
            self.guard.register(&self.bash, pgid as i32);
        }
        if let (Some(bytes), Some(mut stdin)) = (spec.stdin.take(), child.stdin.take()) {
            tokio::spawn(async move {
                // A command that does not read its stdin closes the pipe; that is not an error.
                let _ = stdin.write_all(&bytes).await;
            });
        }
        Ok(child)
    }
}

/// The orphan guard: one small `bash` process per executor that knows every live process
/// group the executor started. It reads `add <pgid>` / `del <pgid>` lines on a pipe from the
/// harness; when the pipe closes (the harness exited or crashed, however it died), it kills
/// every group still registered. This keeps a crashed harness from leaving commands (and their
/// grandchildren) running, without a `pre_exec` hook, so spawning stays on `posix_spawn`.
const GUARD_SCRIPT: &str = r#"declare -A live
while read -r op id; do
  case "$op" in
    add) live[$id]=1 ;;
    del) unset "live[$id]" ;;
  esac
done
for id in "${!live[@]}"; do kill -KILL -- "-$id" 2>/dev/null; done
"#;

#[derive(Debug, Default)]
struct OrphanGuard {
    state: Mutex<GuardState>,
}

#[derive(Debug, Default)]
struct GuardState {
    /// The guard process and the write end of its pipe, while it runs.
    process: Option<(std::process::Child, std::process::ChildStdin)>,
    /// Every group registered and not yet unregistered: what a new guard is told first.
    live: std::collections::BTreeSet<i32>,
}

impl OrphanGuard {
    fn register(&self, bash: &Path, pgid: i32) {
        let mut state = lock(&self.state);
        state.live.insert(pgid);
        state.send(bash, &format!("add {pgid}\n"));
    }

    fn unregister(&self, bash: &Path, pgid: i32) {
        let mut state = lock(&self.state);
        if state.live.remove(&pgid) {
            state.send(bash, &format!("del {pgid}\n"));
        }
    }
}

impl GuardState {
    /// Sends one line. A guard found gone (killed by someone) is replaced, and the new one is
    /// told every live group before the line, so no group goes unguarded.
    fn send(&mut self, bash: &Path, line: &str) {
        use std::io::Write;
        for _ in 0..2 {
            if self.process.is_none() {
                self.process = GuardState::start(bash, &self.live);
            }
            let Some((_, stdin)) = self.process.as_mut() else {
                return;
            };
            if stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush())
                .is_ok()
            {
                return;
            }
            tracing::warn!("the orphan guard exited; starting a new one");
            if let Some((mut child, _)) = self.process.take() {
                let _ = child.wait();
            }
        }
    }

    fn start(
        bash: &Path,
        live: &std::collections::BTreeSet<i32>,
    ) -> Option<(std::process::Child, std::process::ChildStdin)> {
        use std::io::Write;
        use std::os::unix::process::CommandExt as _;
        let spawned = std::process::Command::new(bash)
            .arg("-c")
            .arg(GUARD_SCRIPT)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: killing a command's group never reaches the guard.
            .process_group(0)
            .spawn();
        let (child, mut stdin) = match spawned {
            Ok(mut child) => {
                let stdin = child.stdin.take()?;
                (child, stdin)
            }
            Err(error) => {
                tracing::warn!(
                    "cannot start the orphan guard: {error}; a crashed harness may leave commands running"
                );
                return None;
            }
        };
        let known: String = live.iter().map(|pgid| format!("add {pgid}\n")).collect();
        if let Err(error) = stdin.write_all(known.as_bytes()) {
            tracing::warn!("cannot brief the new orphan guard: {error}");
        }
        Some((child, stdin))
    }
}

impl Drop for OrphanGuard {
    fn drop(&mut self) {
        // Closing the pipe makes the guard kill whatever is still registered (nothing, after an
        // orderly shutdown) and exit; reap it so no zombie is left.
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some((mut child, stdin)) = state.process.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// Finds `bash` on `PATH` once. Spawning by absolute path keeps the standard library on
/// `posix_spawn`: with a cleared environment and a bare name it would fall back to `fork`.
fn resolve_program(program: &Path) -> PathBuf {
    if program.components().count() > 1 || program.is_absolute() {
        return program.to_path_buf();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| program.to_path_buf())
}

/// Sends `signal` to a process group; `false` when the group no longer exists.
fn signal_group(pgid: i32, signal: Signal) -> bool {
    killpg(Pid::from_raw(pgid), signal).is_ok()
}

/// Whether any process of the group is still alive (zombies waiting for their reaper count as
/// gone: they run nothing and hold no pipe).
fn group_alive(pgid: i32) -> bool {
    if killpg(Pid::from_raw(pgid), None).is_err() {
        return false;
    }
    // `kill(2)` also succeeds for zombies; on Linux look closer.
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        for entry in entries.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Fields after the command name (which may contain spaces) start after ") ".
            let Some(rest) = stat.rfind(") ").map(|i| &stat[i + 2..]) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // fields[0] = state, fields[2] = pgrp
            if fields.get(2).and_then(|p| p.parse::<i32>().ok()) == Some(pgid)
                && fields.first() != Some(&"Z")
            {
                return true;
            }
        }
        false
    }
    #[cfg(not(target_os = "linux"))]
    true
}

/// Waits (bounded) until no live process is left in the group.
async fn await_group_gone(pgid: i32, bound: Duration) {
    let deadline = Instant::now() + bound;
    while group_alive(pgid) {
        if Instant::now() >= deadline {
            tracing::warn!(pgid, "a process of the group is still alive after SIGKILL");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// TERM the group, give it `grace`, then KILL it; returns the shell's status.
async fn terminate(child: &mut Child, pgid: i32, grace: Duration) -> std::io::Result<ExitStatus> {
    signal_group(pgid, Signal::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            child.wait().await
        }
    }
}

fn pump<R: AsyncRead + Unpin + Send + 'static>(
    mut reader: R,
    sink: Arc<Mutex<StreamCollector>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => lock(&sink).push(&buffer[..n]),
            }
        }
    })
}

fn signal_name(status: &ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    status
        .signal()
        .map(|number| match Signal::try_from(number) {
            Ok(signal) => signal.as_str().to_owned(),
            Err(_) => format!("signal {number}"),
        })
}

/// Splits the visible budget between the streams, given the bytes of text each decodes to
/// ([`StreamCollector::text_len`]): budgets count text, so a short stream of invalid bytes,
/// three bytes of text each, gets room for all of its text. Stdout never shows more than
/// `stdout_max`. When both streams fit in `visible.max(stdout_max)` nothing else is cut;
/// otherwise stderr keeps at least a third of `visible` (all of itself when shorter) plus
/// whatever stdout leaves of `visible`, and stdout gets the rest within `stdout_max`.
fn budgets(stdout: u64, stderr: u64, visible: usize, stdout_max: usize) -> (usize, usize) {
    let stdout_max = stdout_max.max(1);
    let total = visible.max(stdout_max);
    if stdout.saturating_add(stderr) <= total as u64 {
        return (stdout_max, total);
    }
    let stderr = usize::try_from(stderr).unwrap_or(usize::MAX);
    let left_by_stdout = visible.saturating_sub(usize::try_from(stdout).unwrap_or(usize::MAX));
    let err = stderr.min((visible / 3).max(left_by_stdout));
    let out = stdout_max.min(total.saturating_sub(err));
    (out.max(1), err.max(1))
}

impl ShellExecutor for LocalExecutor {
    fn resolve(
        &self,
        mut request: ShellRequest,
        session_cwd: Option<&Path>,
    ) -> Result<ShellSpec, ShellError> {
        let base = session_cwd
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let workdir = match request.workdir.take() {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => base.join(dir),
            None => base,
        };
        match std::fs::metadata(&workdir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(ShellError::WorkdirNotDirectory(workdir)),
            Err(_) => return Err(ShellError::WorkdirMissing(workdir)),
        }
        let limits = ShellLimits {
            default_timeout: self.config.default_timeout,
            max_timeout: self.config.max_timeout,
            visible_bytes: self.config.visible_bytes,
        };
        Ok(ShellSpec::from_request(request, workdir, &limits))
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'static, Result<ShellRunResult, ShellError>> {
        let executor = self.clone();
        Box::pin(async move { executor.run_foreground(spec).await })
    }

    fn start(&self, spec: ShellSpec) -> Arc<dyn ShellProcess> {
        self.start_background(spec)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    Exited,
    TimedOut,
    Aborted,
}

impl LocalExecutor {
    async fn run_foreground(&self, mut spec: ShellSpec) -> Result<ShellRunResult, ShellError> {
        let started = Instant::now();
        let config = Arc::clone(&self.config);
        let stdout_window = spec.stdout_max_bytes.max(config.visible_bytes);
        let stdout = Arc::new(Mutex::new(StreamCollector::new(
            "stdout",
            stdout_window,
            config.spill_cap_bytes,
            Some(self.sink()),
        )));
        let stderr = Arc::new(Mutex::new(StreamCollector::new(
            "stderr",
            config.visible_bytes,
            config.spill_cap_bytes,
            Some(self.sink()),
        )));
        let mut child = self.spawn(&mut spec)?;
        let pgid = child.id().map(|id| id as i32);
        let reaper = Reaper {
            executor: self,
            pgid,
        };
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(pump(out, Arc::clone(&stdout)));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(pump(err, Arc::clone(&stderr)));
        }
        let (cause, status) = tokio::select! {
            status = child.wait() => (Cause::Exited, status),
            () = tokio::time::sleep(spec.timeout) => (Cause::TimedOut, Ok(ExitStatus::default())),
            () = spec.signal.cancelled() => (Cause::Aborted, Ok(ExitStatus::default())),
        };
        let status = match (cause, pgid) {
            (Cause::Exited, _) => status,
            (_, Some(pgid)) => terminate(&mut child, pgid, config.grace).await,
            (_, None) => child.wait().await,
        };
        let status = status
            .map_err(|e| ShellError::Spawn(format!("waiting for the command failed: {e}")))?;
        if let Some(pgid) = pgid {
            drain_and_reap(pgid, readers, config.grace).await;
        }
        reaper.done();
        let (out_text, err_text) = (lock(&stdout).text_len(), lock(&stderr).text_len());
        let (out_budget, err_budget) = budgets(
            out_text,
            err_text,
            config.visible_bytes,
            spec.stdout_max_bytes,
        );
        let stdout: Collected = lock(&stdout).finish(out_budget);
        let stderr: Collected = lock(&stderr).finish(err_budget);
        Ok(ShellRunResult {
            exit_code: status.code(),
            signal: signal_name(&status),
            timed_out: cause == Cause::TimedOut,
            aborted: cause == Cause::Aborted,
            timeout: spec.timeout,
            stdout,
            stderr,
            duration: started.elapsed(),
        })
    }

    fn start_background(&self, mut spec: ShellSpec) -> Arc<dyn ShellProcess> {
        let config = Arc::clone(&self.config);
        let window = config.background_window_bytes;
        let process = Arc::new(LocalProcess {
            state: Mutex::new(ProcessState {
                status: ProcessStatus::Running,
                exit_code: None,
                signal: None,
            }),
            stdout: Arc::new(Mutex::new(StreamCollector::new(
                "job-stdout",
                window,
                config.spill_cap_bytes,
                Some(self.sink()),
            ))),
            stderr: Arc::new(Mutex::new(StreamCollector::new(
                "job-stderr",
                window,
                config.spill_cap_bytes,
                Some(self.sink()),
            ))),
            kill: CancellationToken::new(),
            done: watch::channel(false).0,
            _spill: Arc::clone(&self.spill),
        });
        let mut child = match self.spawn(&mut spec) {
            Ok(child) => child,
            Err(error) => {
                lock(&process.stderr).push(format!("{error}\n").as_bytes());
                process.settle(ProcessStatus::Killed, None, None);
                return process;
            }
        };
        let pgid = child.id().map(|id| id as i32);
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(pump(out, Arc::clone(&process.stdout)));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(pump(err, Arc::clone(&process.stderr)));
        }
        let supervised = Arc::clone(&process);
        let guard = Arc::clone(&self.guard);
        let bash = Arc::clone(&self.bash);
        tokio::spawn(async move {
            let (killed, status) = tokio::select! {
                status = child.wait() => (false, status),
                () = supervised.kill.cancelled() => {
                    let status = match pgid {
                        Some(pgid) => terminate(&mut child, pgid, config.grace).await,
                        None => child.wait().await,
                    };
                    (true, status)
                }
            };
            if let Some(pgid) = pgid {
                drain_and_reap(pgid, readers, config.grace).await;
                guard.unregister(&bash, pgid);
            }
            match status {
                Ok(status) => {
                    let state = if killed || status.code().is_none() {
                        ProcessStatus::Killed
                    } else {
                        ProcessStatus::Exited
                    };
                    supervised.settle(state, status.code(), signal_name(&status));
                }
                Err(error) => {
                    lock(&supervised.stderr)
                        .push(format!("waiting for the command failed: {error}\n").as_bytes());
                    supervised.settle(ProcessStatus::Killed, None, None);
                }
            }
        });
        process
    }
}

/// Owns a foreground command's process group until it was reaped: if the `run` future is
/// dropped first (a caller's timeout, an aborted task), the group is killed right away rather
/// than left running until the executor goes.
struct Reaper<'a> {
    executor: &'a LocalExecutor,
    pgid: Option<i32>,
}

impl Reaper<'_> {
    /// The group was reaped: stop guarding it.
    fn done(mut self) {
        if let Some(pgid) = self.pgid.take() {
            self.executor.guard.unregister(&self.executor.bash, pgid);
        }
    }
}

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            tracing::debug!(pgid, "a foreground run was dropped; killing its group");
            signal_group(pgid, Signal::SIGKILL);
            self.executor.guard.unregister(&self.executor.bash, pgid);
        }
    }
}

/// How long the readers may take the bytes left in the pipes after the group was killed.
const READ_REMAINDER: Duration = Duration::from_millis(200);

/// After the shell exited: drain its pipes for at most `grace`, then kill whatever is left of
/// its group and wait (bounded) until it is gone.
async fn drain_and_reap(pgid: i32, readers: Vec<tokio::task::JoinHandle<()>>, grace: Duration) {
    let aborts: Vec<_> = readers
        .iter()
        .map(tokio::task::JoinHandle::abort_handle)
        .collect();
    let mut readers = futures::future::join_all(readers);
    if tokio::time::timeout(grace, &mut readers).await.is_err() {
        tracing::debug!(
            pgid,
            "output pipes still open after the shell exited; killing the rest of its group"
        );
        signal_group(pgid, Signal::SIGKILL);
        // With the group killed the pipes close: take what was still in them. A reader that is
        // still blocked after that (a pipe passed to a process outside the group) is stopped.
        if tokio::time::timeout(READ_REMAINDER, readers).await.is_err() {
            for abort in aborts {
                abort.abort();
            }
        }
    } else {
        signal_group(pgid, Signal::SIGKILL);
    }
    await_group_gone(pgid, grace).await;
}

struct ProcessState {
    status: ProcessStatus,
    exit_code: Option<i32>,
    signal: Option<String>,
}

/// A background process of the local executor.
struct LocalProcess {
    state: Mutex<ProcessState>,
    stdout: Arc<Mutex<StreamCollector>>,
    stderr: Arc<Mutex<StreamCollector>>,
    kill: CancellationToken,
    done: watch::Sender<bool>,
    /// Keeps the spill directory alive while this process's files may be read.
    _spill: Arc<SpillDir>,
}

impl std::fmt::Debug for LocalProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProcess")
            .field("status", &lock(&self.state).status)
            .finish_non_exhaustive()
    }
}

impl LocalProcess {
    fn settle(&self, status: ProcessStatus, exit_code: Option<i32>, signal: Option<String>) {
        {
            let mut state = lock(&self.state);
            state.status = status;
            state.exit_code = exit_code;
            state.signal = signal;
        }
        self.done.send_replace(true);
    }
}

impl ShellProcess for LocalProcess {
    fn status(&self) -> ProcessStatus {
        lock(&self.state).status
    }

    fn exit_code(&self) -> Option<i32> {
        lock(&self.state).exit_code
    }

    fn signal(&self) -> Option<String> {
        lock(&self.state).signal.clone()
    }

    fn done(&self) -> BoxFuture<'static, ()> {
        let mut done = self.done.subscribe();
        Box::pin(async move {
            let _ = done.wait_for(|d| *d).await;
        })
    }

    fn read_from(&self, stream: Stream, offset: u64, max_bytes: usize) -> StreamRead {
        let settled = *self.done.borrow();
        let collector = match stream {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
        };
        lock(collector).read_from(offset, max_bytes, settled)
    }

    fn kill(&self) -> bool {
        if *self.done.borrow() {
            return false;
        }
        self.kill.cancel();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_hold_stdout_to_its_own_limit_and_keep_a_third_for_stderr() {
        // (stdout text, stderr text, visible, stdout_max) -> (stdout budget, stderr budget)
        let cases = [
            // Both fit: nothing is cut but stdout's own limit.
            ((5_000, 0, 30_000, 100), (100, 30_000)),
            ((5_000, 5_000, 30_000, 30_000), (30_000, 30_000)),
            // Too much of both: stderr keeps a third, stdout the rest.
            ((20_000, 20_000, 30_000, 30_000), (20_000, 10_000)),
            ((90_000, 90_000, 30_000, 30_000), (20_000, 10_000)),
            // Short stdout leaves its room to stderr.
            ((1_000, 50_000, 30_000, 30_000), (1_000, 29_000)),
            // Short stderr is shown whole.
            ((50_000, 10, 30_000, 30_000), (29_990, 10)),
            // Three invalid bytes of stderr are nine bytes of text, all of them shown.
            ((100_000, 9, 30_000, 30_000), (29_991, 9)),
            // A caller's larger stdout budget widens the total.
            ((90_000, 20_000, 30_000, 100_000), (90_000, 10_000)),
        ];
        for ((stdout, stderr, visible, stdout_max), expected) in cases {
            assert_eq!(
                budgets(stdout, stderr, visible, stdout_max),
                expected,
                "stdout {stdout}, stderr {stderr}, visible {visible}, stdout_max {stdout_max}"
            );
        }
    }

    #[test]
    fn a_replaced_guard_still_kills_the_groups_registered_before_it() {
        use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
        let bash = resolve_program(Path::new("bash"));
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("100")
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let guard = OrphanGuard::default();
        let mut first = spawn();
        guard.register(&bash, first.id() as i32);
        {
            // Someone kills the guard.
            let mut state = lock(&guard.state);
            let (child, _) = state.process.as_mut().unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
        }
        let mut second = spawn();
        guard.register(&bash, second.id() as i32);
        // The harness goes away: the pipe closes, and the new guard kills what it knows.
        drop(guard);
        let deadline = Instant::now() + Duration::from_secs(10);
        for child in [&mut first, &mut second] {
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("a registered group outlived the guard");
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));
        }
    }
}
