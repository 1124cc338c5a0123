//! The executor contract: what a caller asks for, what an executor runs, and what comes back.
//!
//! A [`ShellRequest`] is the caller's side (optional fields, trusted in-process extras);
//! [`ShellExecutor::resolve`] fills defaults and caps into a [`ShellSpec`]; [`ShellExecutor::run`]
//! and [`ShellExecutor::start`] act only on resolved specs. A downstream crate can implement
//! this trait (a sandboxed or remote executor) without the local executor, building its specs
//! with [`ShellSpec::from_request`].

use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The default foreground timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest foreground timeout a request may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The bytes of output a foreground result shows in total (head ≈ 1/3, tail ≈ 2/3).
pub const DEFAULT_VISIBLE_BYTES: usize = 30_000;
/// The most bytes of one stream kept in its spill file.
pub const DEFAULT_SPILL_CAP_BYTES: u64 = 1 << 30;

/// The most bytes all spill files of one executor (one session) hold together.
pub const DEFAULT_SPILL_BUDGET_BYTES: u64 = 4 << 30;

/// Harness-owned `DSH_*` facts for a command; they win over any inherited or caller entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedEnv {
    /// `DSH_SESSION_ID`.
    pub session_id: Option<String>,
    /// `DSH_CALL_ID`.
    pub call_id: Option<String>,
}

impl ManagedEnv {
    /// The variables, by name.
    pub fn vars(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        if let Some(session) = &self.session_id {
            out.push(("DSH_SESSION_ID", session.as_str()));
        }
        if let Some(call) = &self.call_id {
            out.push(("DSH_CALL_ID", call.as_str()));
        }
        out
    }
}

/// A caller's request. `stdin`, `env` and `stdout_max_bytes` are trusted in-process inputs; the
/// model never sets them (a model that needs stdin writes a heredoc or a pipe).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ShellRequest {
    /// The command, run as `bash -c <command>`.
    pub command: String,
    /// The working directory; relative paths resolve against the session's directory.
    pub workdir: Option<PathBuf>,
    /// The foreground timeout (default 120 s, capped at 600 s).
    pub timeout: Option<Duration>,
    /// The foreground stdout budget in bytes (default: the shared visible budget).
    pub stdout_max_bytes: Option<usize>,
    /// Bytes written to stdin, which is then closed. Absent: stdin is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Extra environment entries, applied after the executor's environment policy; shell
    /// start-up variables (`BASH_ENV`, …) and `DSH_*` names among them are dropped (see
    /// [`crate::env`]).
    pub env: BTreeMap<String, String>,
    /// Managed `DSH_*` facts.
    pub managed: ManagedEnv,
    /// Cancellation: the command's process group is terminated when it fires.
    pub signal: Option<CancellationToken>,
}

impl ShellRequest {
    /// A request for `command` with every other field defaulted.
    pub fn new(command: impl Into<String>) -> ShellRequest {
        ShellRequest {
            command: command.into(),
            ..ShellRequest::default()
        }
    }
}

/// A resolved request: every default and cap applied. Executors act only on these.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ShellSpec {
    /// The command.
    pub command: String,
    /// The absolute working directory (it existed when resolved).
    pub workdir: PathBuf,
    /// The effective foreground timeout (background processes have none).
    pub timeout: Duration,
    /// The foreground stdout budget.
    pub stdout_max_bytes: usize,
    /// Bytes for stdin.
    pub stdin: Option<Vec<u8>>,
    /// Extra environment entries.
    pub env: BTreeMap<String, String>,
    /// Managed `DSH_*` facts.
    pub managed: ManagedEnv,
    /// Cancellation (foreground only; a background process has its own `kill`).
    pub signal: CancellationToken,
}

/// The defaults and caps a request is resolved with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShellLimits {
    /// The foreground timeout when a request gives none ([`DEFAULT_TIMEOUT`]).
    pub default_timeout: Duration,
    /// The largest foreground timeout ([`MAX_TIMEOUT`]).
    pub max_timeout: Duration,
    /// The stdout budget when a request gives none ([`DEFAULT_VISIBLE_BYTES`]).
    pub visible_bytes: usize,
}

impl Default for ShellLimits {
    fn default() -> Self {
        ShellLimits {
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            visible_bytes: DEFAULT_VISIBLE_BYTES,
        }
    }
}

impl ShellSpec {
    /// A spec for `request` run in `workdir`, with `limits`' defaults filled in and its caps
    /// applied. Every executor builds its specs here; deciding the working directory (and
    /// whether it exists where the command will run) is the executor's part of
    /// [`ShellExecutor::resolve`].
    pub fn from_request(
        request: ShellRequest,
        workdir: PathBuf,
        limits: &ShellLimits,
    ) -> ShellSpec {
        ShellSpec {
            command: request.command,
            workdir,
            timeout: request
                .timeout
                .unwrap_or(limits.default_timeout)
                .min(limits.max_timeout),
            stdout_max_bytes: request.stdout_max_bytes.unwrap_or(limits.visible_bytes),
            stdin: request.stdin,
            env: request.env,
            managed: request.managed,
            signal: request.signal.unwrap_or_default(),
        }
    }
}

/// One stream's output as a result reports it: the visible text and how to get the rest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// The visible text (valid UTF-8): the whole stream, or its head and tail around a marker
    /// stating how many bytes were left out.
    pub text: String,
    /// Whether bytes were left out of `text`.
    pub truncated: bool,
    /// The stream's size in bytes.
    pub total_bytes: u64,
    /// The bytes of the stream `text` shows (excluding the elision marker).
    pub shown_bytes: u64,
    /// The file holding the stream byte for byte, when it outgrew its in-memory window.
    pub spill_path: Option<PathBuf>,
    /// When the spill file stopped at its cap: the bytes it holds.
    pub spill_limit_bytes: Option<u64>,
    /// Why there is no spill file although one was needed, or why it stops early (the
    /// session's spill budget was used up; `spill_limit_bytes` says where).
    pub spill_error: Option<String>,
}

/// The outcome of a foreground run. Non-zero exits, timeouts and cancellations are outcomes,
/// not errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellRunResult {
    /// The exit code, when the shell exited (`None` when a signal ended it).
    pub exit_code: Option<i32>,
    /// The terminating signal (`SIGKILL`), when a signal ended it.
    pub signal: Option<String>,
    /// The executor's timeout was the first cause to stop the command.
    pub timed_out: bool,
    /// The caller's cancellation was the first cause to stop the command.
    pub aborted: bool,
    /// The timeout that applied.
    pub timeout: Duration,
    /// Standard output.
    pub stdout: Collected,
    /// Standard error.
    pub stderr: Collected,
    /// Wall time from spawn to result.
    pub duration: Duration,
    /// Notes the executor adds for the model, shown after the output: a sandboxed executor
    /// names the policy that may have denied a write or a connection.
    pub notes: Vec<String>,
}

/// The lifecycle of a background process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessStatus {
    /// Still running.
    Running,
    /// Exited by itself (any exit code).
    Exited,
    /// Ended by `kill`, by a signal, or never started (spawn failure).
    Killed,
}

/// One offset-based read of one stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRead {
    /// The text from the requested offset (at most the requested bytes, keeping the newest).
    pub text: String,
    /// Where the next read should start.
    pub next_offset: u64,
    /// Bytes between the requested offset and `text` that were skipped.
    pub skipped_bytes: u64,
    /// The skipped bytes no spill file holds, as offsets into the stream (`start` included,
    /// `end` excluded; `end` is where `text` starts): past the file's cap or where its budget
    /// ran out, or all of them when there is no file. `None` when the file holds every
    /// skipped byte.
    pub lost: Option<Range<u64>>,
    /// The stream's spill file, when it spilled.
    pub spill_path: Option<PathBuf>,
    /// When the spill file stops short of the stream (its cap, or the budget): the bytes it
    /// holds, the stream's first ones, as in [`Collected::spill_limit_bytes`].
    pub spill_limit_bytes: Option<u64>,
    /// Why the spill file is missing or stops early although the stream needed one (so why
    /// skipped bytes may be lost), as in [`Collected::spill_error`].
    pub spill_error: Option<String>,
}

/// Which stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A background process started by [`ShellExecutor::start`]. It has no id or owner: the
/// `bash` tool adapts it into the jobs runtime, which owns those. No timeout applies.
pub trait ShellProcess: Send + Sync + fmt::Debug {
    /// The lifecycle state.
    fn status(&self) -> ProcessStatus;

    /// The exit code, once it exited.
    fn exit_code(&self) -> Option<i32>;

    /// The terminating signal, once a signal ended it.
    fn signal(&self) -> Option<String>;

    /// Resolves when the process (and its output pipes) closed and its group is gone. Never
    /// fails: a spawn failure settles as killed with the error on stderr.
    fn done(&self) -> BoxFuture<'static, ()>;

    /// Reads one stream from `offset`, at most `max_bytes` of text (keeping the newest bytes).
    /// Readers with their own offsets never steal each other's output.
    fn read_from(&self, stream: Stream, offset: u64, max_bytes: usize) -> StreamRead;

    /// Terminates the process group (TERM, grace, KILL). Idempotent; `false` when it had
    /// already finished.
    fn kill(&self) -> bool;
}

/// Why an executor could not run a command (an infrastructure failure, never a command's own
/// failure).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// The working directory does not exist.
    #[error("working directory `{}` does not exist", .0.display())]
    WorkdirMissing(PathBuf),
    /// The working directory is not a directory.
    #[error("working directory `{}` is not a directory", .0.display())]
    WorkdirNotDirectory(PathBuf),
    /// `bash` could not be found.
    #[error("bash is not installed or not on PATH ({0})")]
    BashMissing(String),
    /// The process could not be spawned.
    #[error("could not start the command: {0}")]
    Spawn(String),
}

/// An executor: resolves requests and runs them.
pub trait ShellExecutor: Send + Sync + fmt::Debug {
    /// Applies defaults and caps, and resolves the working directory (relative paths against
    /// `session_cwd`). A missing working directory is an error here, not a spawn crash.
    fn resolve(
        &self,
        request: ShellRequest,
        session_cwd: Option<&std::path::Path>,
    ) -> Result<ShellSpec, ShellError>;

    /// Runs a command in the foreground. Fails only for infrastructure failures.
    fn run(&self, spec: ShellSpec) -> BoxFuture<'static, Result<ShellRunResult, ShellError>>;

    /// Starts a command in the background.
    fn start(&self, spec: ShellSpec) -> std::sync::Arc<dyn ShellProcess>;

    /// The defaults and caps [`resolve`](ShellExecutor::resolve) applies; the `bash` tool
    /// states them in what the model reads. [`ShellLimits::default`] unless overridden, so an
    /// executor with other limits must say so here.
    fn limits(&self) -> ShellLimits {
        ShellLimits::default()
    }

    /// The Tokio runtime drivers `run` and `start` need. The `bash` tool checks them before
    /// it resolves a request, so a runtime built without them fails the call with an error
    /// that names them ([`dsh_tools::runtime::require`]) instead of a panic. None by default.
    fn required_drivers(&self) -> &[dsh_tools::runtime::RuntimeDriver] {
        &[]
    }

    /// How this executor confines commands, in one line for the model and the user; `None`
    /// (the default) when it does not.
    fn sandbox_policy(&self) -> Option<String> {
        None
    }

    /// The executor that runs one call outside this executor's sandbox, once the registry's
    /// approver granted it (the `bash` tool asks; see its `sandbox: "escalate"` argument).
    /// `None` (the default) when there is no sandbox to leave.
    fn escalated(&self) -> Option<std::sync::Arc<dyn ShellExecutor>> {
        None
    }
}
