//! What the local executor asks its supervisor for, and what it hears back: the one vocabulary
//! of the Linux supervisor and the portable one.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;

/// What to start: `program` with `args` (after `argv[0]`) and exactly `env`, in `workdir`.
#[derive(Debug)]
pub(crate) struct Launch {
    /// The shell binary (an absolute path: it is executed without a `PATH` search).
    pub(crate) program: PathBuf,
    /// The arguments after `argv[0]`.
    pub(crate) args: Vec<OsString>,
    /// The complete environment.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// The working directory.
    pub(crate) workdir: PathBuf,
    /// Whether stdin is a pipe (for trusted `stdin` bytes) rather than `/dev/null`.
    pub(crate) stdin_piped: bool,
    /// A Landlock ruleset the shell-to-be enforces on itself, after `no_new_privs`, just before
    /// its `execve` (the sandboxed executor's; see `crate::sandbox`). It is built beforehand,
    /// in the harness: the shell-to-be may not allocate. Only the Linux supervisor applies it;
    /// the portable one refuses a launch that carries one.
    pub(crate) landlock: Option<Arc<OwnedFd>>,
}

/// How a wait for the shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShellEnd {
    /// The shell exited or was killed, with this status.
    Status(ExitStatus),
    /// The supervisor vanished before it reported (something killed it).
    SupervisorLost,
    /// The shell never ran: setting it up or its `execve` failed with this errno. Only the
    /// subreaper supervisor reports it late; the portable one fails `spawn` instead.
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )]
    StartFailed(i32),
}
