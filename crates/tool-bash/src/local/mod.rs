//! The local executor: `bash -c` in its own process group under a per-command supervisor, stdin
//! on `/dev/null`, a non-interactive environment decided by an
//! [`EnvPolicy`], tree-scoped termination, bounded
//! draining and byte-exact spill.
//!
//! Termination starts with the shell's group: SIGTERM, a grace period (default 2 s), then
//! SIGKILL. After the shell itself exits, its pipes are drained for at most the grace period, so
//! a grandchild that keeps stdout open (`sleep 100 &`) cannot hold the result hostage. Then every
//! process left is killed, and not only the group's: on Linux each command runs under a
//! supervisor that is a child subreaper (see `supervisor.rs`), so a process that left the group
//! (`set -m`, `setsid`, a double fork) is still below it and is swept with the rest. "Killed" is
//! reported only after the sweep. A crashed harness leaves nothing running either: each
//! supervisor sweeps when its control pipe from the harness closes, and an orphan guard process
//! kills every group still registered when its own pipe closes; a killed guard is replaced at
//! once.
//!
//! Spill files live in one private directory per executor (`0700`, files `0600`, unguessable
//! names) under the system temporary directory (or [`LocalConfig::spill_root`]). They are kept
//! while the executor or any process it started is alive, and the directory is removed when the
//! last of them is dropped, that is when the session's service tears down. A host that keeps
//! sessions sets [`LocalConfig::spill_dir`] instead: that directory is used as it is and never
//! removed, so the paths outlive the process (and a crash) until the host's retention goes. Together they hold
//! at most [`LocalConfig::spill_budget_bytes`] (4 GiB): past it a stream's file stops (or is
//! not created) and its result says so, while its in-memory window works as before.
//!
//! At most [`LocalConfig::max_concurrent_commands`] commands run in the foreground or start in
//! the background at once (default: 4 per CPU the process may use). One executor is usually
//! shared by every agent of a process, so this bounds the processes a thousand agents fork at
//! once; a call beyond it waits for a slot, in the order the calls came.
//!
//! Programs that are not shell commands (a stdio MCP server) run under the same supervisor:
//! [`LocalExecutor::spawn_program`] starts one with piped stdin, stdout and stderr and gives a
//! [`SupervisedProgram`], whose [`stop`](SupervisedProgram::stop) (or drop) kills the program
//! and everything it started, however it regrouped.
//!
//! The module's parts: this file holds the configuration and the executor (run, start, drain);
//! `spill` the spill directory and budget, `guard` the orphan guard, `group` the process-group
//! operations (signals, termination, exit status), `process` the background process handle and
//! `program` the supervised programs.

use crate::env::{EnvPolicy, child_env};
use crate::launch::{Launch, Restrictions, ShellEnd};
use crate::output::{SpillSink, StreamCollector};
use crate::shell::{
    Collected, DEFAULT_SPILL_BUDGET_BYTES, DEFAULT_SPILL_CAP_BYTES, DEFAULT_TIMEOUT,
    DEFAULT_VISIBLE_BYTES, MAX_TIMEOUT, ProcessStatus, ShellError, ShellExecutor, ShellLimits,
    ShellProcess, ShellRequest, ShellRunResult, ShellSpec,
};
use crate::supervisor::Supervised;
use futures::future::BoxFuture;
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

mod group;
mod guard;
mod process;
mod program;
mod spill;

use group::{
    await_group_gone, resolve_program, shell_status, signal_group, signal_name, terminate,
};
use guard::OrphanGuard;
use process::{LocalProcess, ProcessState, lock};
use spill::SpillDir;
#[cfg(all(
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
use spill::SpillPlace;

#[cfg(all(
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) use group::find_on_path;
pub use program::{ConfinedProgram, ProgramError, ProgramOutput, ProgramStdin, SupervisedProgram};

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
    /// The most bytes all spill files of this executor hold together (4 GiB). The executor
    /// serves one session, so this is the session's disk budget for output.
    pub spill_budget_bytes: u64,
    /// Between SIGTERM and SIGKILL, and the longest pipe drain after the shell exits (2 s).
    pub grace: Duration,
    /// Where the private spill directory is created (default: the system temp directory).
    pub spill_root: Option<PathBuf>,
    /// A spill directory to use as it is and keep: a session store's, so the `full output`
    /// paths given to the model stay valid after the process exits. It is created (`0700`)
    /// on first use if missing and never deleted by the executor; files already in it count
    /// against [`LocalConfig::spill_budget_bytes`]. When set, [`LocalConfig::spill_root`] is
    /// not used.
    pub spill_dir: Option<PathBuf>,
    /// The shell binary (`bash`, found on `PATH`).
    pub bash: PathBuf,
    /// Which of the harness's variables commands see (default: all but credentials and shell
    /// start-up variables; see [`EnvPolicy`]).
    pub env_policy: EnvPolicy,
    /// The most commands that run in the foreground, or start in the background, at once
    /// (default: 4 × the CPUs the process may use, [`default_max_concurrent_commands`]; at
    /// least 1). A call beyond it waits for a slot, first come first served, and its
    /// cancellation signal ends the wait (the result says `aborted`, nothing ran); its timeout
    /// and `duration` start once it has a slot. A foreground command holds its slot until it
    /// has been reaped. A background command holds one only while it starts: how many run
    /// after that is the jobs runtime's business (its per-owner limits), and a long-lived
    /// server must not keep every later foreground call waiting.
    pub max_concurrent_commands: usize,
}

/// The default of [`LocalConfig::max_concurrent_commands`]: 4 × the CPUs this process may use
/// (`std::thread::available_parallelism`, 1 when unknown). Short commands mostly wait on
/// `fork`, `exec` and pipes rather than a CPU, so a few per CPU keep the CPUs busy, while a
/// burst of a thousand agents' calls does not fork a thousand processes at once.
pub fn default_max_concurrent_commands() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) * 4
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            visible_bytes: DEFAULT_VISIBLE_BYTES,
            background_window_bytes: 64 * 1024,
            spill_cap_bytes: DEFAULT_SPILL_CAP_BYTES,
            spill_budget_bytes: DEFAULT_SPILL_BUDGET_BYTES,
            grace: Duration::from_secs(2),
            spill_root: None,
            spill_dir: None,
            bash: PathBuf::from("bash"),
            env_policy: EnvPolicy::default(),
            max_concurrent_commands: default_max_concurrent_commands(),
        }
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
    /// How a sandboxed executor confines every command it starts (see `crate::sandbox`).
    confinement: Option<Arc<Confinement>>,
    /// One permit per command that may run (or start) at once.
    slots: Arc<Semaphore>,
}

/// How the commands of a sandboxed executor are confined: the restrictions the shell puts on
/// itself before its `execve` (a mount namespace, capabilities, seccomp, Landlock), or a
/// wrapper program (`bwrap`) that starts the shell, and variables set over the command's
/// environment (`TMPDIR`).
#[derive(Debug, Default)]
pub(crate) struct Confinement {
    pub(crate) restrictions: Option<Arc<Restrictions>>,
    pub(crate) wrapper: Option<Wrapper>,
    pub(crate) env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// The commands' private temporary directory (Landlock's `TMPDIR`), removed when the
    /// executor and every clone of it are gone.
    pub(crate) _temp_dir: Option<tempfile::TempDir>,
    /// The executor's own spill directory, made by the sandbox (see `crate::sandbox`) when the
    /// configuration names none; removed after the temporary directory inside it.
    pub(crate) _spill_dir: Option<tempfile::TempDir>,
}

/// A program that starts the shell inside its own confinement: `program HEAD… [--ro-bind P P]…
/// TAIL… --chdir W -- bash -c COMMAND`, where `W` is the command's working directory. `W` and
/// the spill directory are bound read-only first when `hidden` says the wrapper would otherwise
/// hide them. Only the sandboxed executor makes one.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) struct Wrapper {
    pub(crate) program: PathBuf,
    pub(crate) head: Vec<std::ffi::OsString>,
    pub(crate) tail: Vec<std::ffi::OsString>,
    pub(crate) hidden: Box<dyn Fn(&Path) -> bool + Send + Sync>,
    /// The seccomp filter's bytes, handed to the wrapper on a pipe at each start; empty:
    /// none.
    pub(crate) seccomp: Vec<u8>,
}

impl std::fmt::Debug for Wrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrapper")
            .field("program", &self.program)
            .field("head", &self.head)
            .field("tail", &self.tail)
            .finish_non_exhaustive()
    }
}

#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
impl Wrapper {
    /// A pipe holding the seccomp filter for one start of the wrapper, which reads it to its
    /// end: its read end, close-on-exec (the launch passes it on).
    pub(crate) fn seccomp_pipe(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::io::Write;
        let (reader, mut writer) = std::io::pipe()?;
        // A few hundred bytes: far below a pipe's capacity, so the write cannot block.
        writer.write_all(&self.seccomp)?;
        drop(writer);
        Ok(reader.into())
    }
}

/// A command's wait for a slot ended by its cancellation, before it started.
struct CancelledWhileQueued;

impl Default for LocalExecutor {
    fn default() -> Self {
        LocalExecutor::new(LocalConfig::default())
    }
}

impl LocalExecutor {
    /// An executor with the given configuration.
    pub fn new(config: LocalConfig) -> LocalExecutor {
        LocalExecutor {
            spill: Arc::new(SpillDir {
                root: config.spill_root.clone(),
                kept: config.spill_dir.clone(),
                dir: OnceLock::new(),
                budget: config.spill_budget_bytes,
                claimed: AtomicU64::new(0),
            }),
            bash: Arc::new(resolve_program(&config.bash)),
            guard: OrphanGuard::new(),
            slots: Arc::new(Semaphore::new(
                config
                    .max_concurrent_commands
                    .clamp(1, Semaphore::MAX_PERMITS),
            )),
            config: Arc::new(config),
            confinement: None,
        }
    }

    /// An executor whose every command is confined by `confinement`.
    #[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
    pub(crate) fn confined(config: LocalConfig, confinement: Confinement) -> LocalExecutor {
        LocalExecutor {
            confinement: Some(Arc::new(confinement)),
            ..LocalExecutor::new(config)
        }
    }

    /// How this executor confines its commands, if it does.
    #[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
    pub(crate) fn confinement(&self) -> Option<&Confinement> {
        self.confinement.as_deref()
    }

    /// This executor without its confinement, for a call approved to leave the sandbox. It
    /// shares the slots, the spill directory and its budget, and the orphan guard: a command
    /// that left the sandbox still counts against the one limit of commands at once.
    #[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
    pub(crate) fn unconfined(&self) -> LocalExecutor {
        LocalExecutor {
            confinement: None,
            ..self.clone()
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

    /// Waits for a slot among [`LocalConfig::max_concurrent_commands`], unless `cancelled`
    /// fires first. Permits are handed out in the order they were asked for.
    async fn slot(
        &self,
        cancelled: &CancellationToken,
    ) -> Result<Option<OwnedSemaphorePermit>, CancelledWhileQueued> {
        let slots = Arc::clone(&self.slots);
        tokio::select! {
            biased;
            // The semaphore is never closed; were it, commands would run without a limit.
            permit = slots.acquire_owned() => Ok(permit.ok()),
            () = cancelled.cancelled() => Err(CancelledWhileQueued),
        }
    }

    fn sink(&self) -> Arc<dyn SpillSink> {
        self.spill.clone()
    }

    fn launch(&self, spec: &ShellSpec) -> std::io::Result<Launch> {
        let mut launch = Launch {
            program: self.bash.as_path().to_path_buf(),
            args: vec!["-c".into(), spec.command.clone().into()],
            env: child_env(&self.config.env_policy, &spec.env, &spec.managed),
            workdir: spec.workdir.clone(),
            // Under a wrapper, a command without stdin bytes reads an empty pipe, not the
            // host's `/dev/null`, whose descriptor would let a root command change the host's
            // device (`chmod /dev/stdin`); the shell-to-be of the Landlock backend reopens
            // `/dev/null` inside its own mount namespace instead.
            stdin_piped: spec.stdin.is_some()
                || self
                    .confinement
                    .as_ref()
                    .is_some_and(|confinement| confinement.wrapper.is_some()),
            confinement: None,
            inherit: Vec::new(),
        };
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        if spec.command.len() > crate::supervisor::ARGUMENT_SCRIPT_MAX {
            let (script, argument) = crate::supervisor::script_on_descriptor(&spec.command)?;
            launch.args = vec!["-c".into(), argument.into()];
            launch.inherit.push(script);
        }
        // A command's results name its spill files for the model to read.
        self.confine(&mut launch, true)?;
        Ok(launch)
    }

    /// Puts `launch` under this executor's confinement, the same way for its commands and its
    /// programs: the confinement's variables over the environment, and the restrictions the
    /// shell-to-be takes on itself before its `execve` or the wrapper it runs in (with the spill
    /// directory kept visible when `spill_visible`). Without a confinement, nothing.
    fn confine(&self, launch: &mut Launch, spill_visible: bool) -> std::io::Result<()> {
        let Some(confinement) = &self.confinement else {
            return Ok(());
        };
        for (name, value) in &confinement.env {
            launch.env.retain(|(existing, _)| existing != name);
            launch.env.push((name.clone(), value.clone()));
        }
        launch.confinement = confinement.restrictions.clone();
        // Only the sandboxed executor (Linux) makes a wrapper.
        #[cfg(all(
            feature = "sandbox",
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        if let Some(wrapper) = &confinement.wrapper {
            let spill = self
                .config
                .spill_dir
                .as_deref()
                .or_else(|| self.spill.dir.get().map(SpillPlace::path))
                .filter(|_| spill_visible);
            let seccomp = if wrapper.seccomp.is_empty() {
                None
            } else {
                let pipe = wrapper.seccomp_pipe()?;
                let fd = std::os::fd::AsRawFd::as_raw_fd(&pipe);
                launch.inherit.push(pipe);
                Some(fd)
            };
            let args = std::mem::take(&mut launch.args);
            (launch.program, launch.args) = wrapper.wrap(
                launch.program.as_os_str(),
                args,
                &launch.workdir,
                spill,
                seccomp,
            );
        }
        #[cfg(not(all(
            feature = "sandbox",
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )))]
        let _ = spill_visible;
        Ok(())
    }

    /// Starts the command under its supervisor and registers the shell's group with the orphan
    /// guard.
    async fn spawn(&self, spec: &mut ShellSpec) -> Result<Supervised, ShellError> {
        self.guard.ensure_running(&self.bash);
        let launch = self
            .launch(spec)
            .map_err(|error| self.start_error(&error))?;
        let mut supervised = Supervised::spawn(launch)
            .await
            .map_err(|error| self.start_error(&error))?;
        self.guard.register(&self.bash, supervised.shell());
        match (spec.stdin.take(), supervised.stdin()) {
            (Some(bytes), Some(mut stdin)) => {
                tokio::spawn(async move {
                    // A command that does not read its stdin closes the pipe; that is not an
                    // error.
                    let _ = stdin.write_all(&bytes).await;
                });
            }
            // An empty stdin (see `launch`): closed at once, so a read ends.
            (None, stdin) => drop(stdin),
            (Some(_), None) => {}
        }
        Ok(supervised)
    }

    /// The error of a command whose shell did not start.
    fn start_error(&self, error: &std::io::Error) -> ShellError {
        if error.kind() == std::io::ErrorKind::NotFound {
            ShellError::BashMissing(format!("{}: {error}", self.bash.display()))
        } else {
            ShellError::Spawn(error.to_string())
        }
    }
}

fn pump<R: AsyncRead + Unpin + Send + 'static>(
    mut reader: R,
    sink: Arc<Mutex<StreamCollector>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Read into spare capacity: nothing to zero first, which a short command would pay for
        // in full.
        let mut buffer = Vec::with_capacity(64 * 1024);
        loop {
            buffer.clear();
            match reader.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => lock(&sink).push(&buffer),
            }
        }
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
    fn required_drivers(&self) -> &[dsh_tools::runtime::RuntimeDriver] {
        // Processes, pipes and signals need IO; timeouts and grace periods need time.
        &dsh_tools::runtime::RuntimeDriver::ALL
    }

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
        Ok(ShellSpec::from_request(request, workdir, &self.limits()))
    }

    fn limits(&self) -> ShellLimits {
        ShellLimits {
            default_timeout: self.config.default_timeout,
            max_timeout: self.config.max_timeout,
            visible_bytes: self.config.visible_bytes,
        }
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
        let queued = self.slot(&spec.signal).await;
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
        let Ok(_slot) = queued else {
            // Cancelled while waiting for a slot: nothing ran.
            return Ok(ShellRunResult {
                exit_code: None,
                signal: None,
                timed_out: false,
                aborted: true,
                timeout: spec.timeout,
                stdout: lock(&stdout).finish(config.visible_bytes),
                stderr: lock(&stderr).finish(config.visible_bytes),
                duration: started.elapsed(),
                notes: Vec::new(),
            });
        };
        let mut supervised = self.spawn(&mut spec).await?;
        let pgid = supervised.shell();
        let reaper = Reaper {
            executor: self,
            pgid: Some(pgid),
        };
        let mut readers = Vec::new();
        if let Some(out) = supervised.stdout() {
            readers.push(pump(out, Arc::clone(&stdout)));
        }
        if let Some(err) = supervised.stderr() {
            readers.push(pump(err, Arc::clone(&stderr)));
        }
        let (cause, end) = tokio::select! {
            end = supervised.shell_end() => (Cause::Exited, Some(end)),
            () = tokio::time::sleep(spec.timeout) => (Cause::TimedOut, None),
            () = spec.signal.cancelled() => (Cause::Aborted, None),
        };
        if let Some(ShellEnd::StartFailed(errno)) = end {
            // The shell-to-be's `execve` failed after its pid was known: as a spawn error.
            drain_and_reap(&mut supervised, readers, config.grace).await;
            reaper.done();
            return Err(self.start_error(&std::io::Error::from_raw_os_error(errno)));
        }
        let end = match end {
            Some(end) => end,
            None => terminate(&mut supervised, config.grace).await,
        };
        let status = shell_status(end, pgid);
        drain_and_reap(&mut supervised, readers, config.grace).await;
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
            notes: Vec::new(),
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
        let executor = self.clone();
        let supervised = Arc::clone(&process);
        tokio::spawn(async move {
            let Ok(slot) = executor.slot(&supervised.kill).await else {
                // Killed while waiting for a slot: it never started.
                supervised.settle(ProcessStatus::Killed, None, None);
                return;
            };
            let started = executor.spawn(&mut spec).await;
            // A background command holds its slot only while it starts (see
            // `LocalConfig::max_concurrent_commands`).
            drop(slot);
            let mut child = match started {
                Ok(child) => child,
                Err(error) => {
                    lock(&supervised.stderr).push(format!("{error}\n").as_bytes());
                    supervised.settle(ProcessStatus::Killed, None, None);
                    return;
                }
            };
            let pgid = child.shell();
            let mut readers = Vec::new();
            if let Some(out) = child.stdout() {
                readers.push(pump(out, Arc::clone(&supervised.stdout)));
            }
            if let Some(err) = child.stderr() {
                readers.push(pump(err, Arc::clone(&supervised.stderr)));
            }
            let (killed, end) = tokio::select! {
                end = child.shell_end() => (false, end),
                () = supervised.kill.cancelled() => {
                    (true, terminate(&mut child, config.grace).await)
                }
            };
            if let ShellEnd::StartFailed(errno) = end {
                // As a spawn error: the error on stderr, the job killed.
                drain_and_reap(&mut child, readers, config.grace).await;
                executor.guard.unregister(&executor.bash, pgid);
                let error = executor.start_error(&std::io::Error::from_raw_os_error(errno));
                lock(&supervised.stderr).push(format!("{error}\n").as_bytes());
                supervised.settle(ProcessStatus::Killed, None, None);
                return;
            }
            let status = shell_status(end, pgid);
            drain_and_reap(&mut child, readers, config.grace).await;
            executor.guard.unregister(&executor.bash, pgid);
            let state = if killed || status.code().is_none() {
                ProcessStatus::Killed
            } else {
                ProcessStatus::Exited
            };
            supervised.settle(state, status.code(), signal_name(&status));
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
/// its group, sweep everything below its supervisor (processes that left the group included),
/// and wait (bounded) until the group is gone.
async fn drain_and_reap(
    supervised: &mut Supervised,
    readers: Vec<tokio::task::JoinHandle<()>>,
    grace: Duration,
) {
    let pgid = supervised.shell();
    let aborts: Vec<_> = readers
        .iter()
        .map(tokio::task::JoinHandle::abort_handle)
        .collect();
    let mut readers = futures::future::join_all(readers);
    let drained = tokio::time::timeout(grace, &mut readers).await.is_ok();
    if !drained {
        tracing::debug!(
            pgid,
            "output pipes still open after the shell exited; killing the rest of its processes"
        );
    }
    signal_group(pgid, Signal::SIGKILL);
    supervised.sweep(grace).await;
    if !drained {
        // With every process killed the pipes close: take what was still in them. A reader
        // still blocked after that (a pipe passed to a process out of reach) is stopped.
        if tokio::time::timeout(READ_REMAINDER, readers).await.is_err() {
            for abort in aborts {
                abort.abort();
            }
        }
    }
    await_group_gone(pgid, grace).await;
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
}
