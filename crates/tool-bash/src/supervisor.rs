//! The command supervisor: containment of every process a command starts, however it regroups.
//!
//! Killing a command's process group misses whatever left the group: job control in the shell
//! (`set -m`), `setsid`, a program calling `setpgid`/`setsid`, a double fork into a new session.
//! On Linux each command therefore runs under a small supervisor process of its own:
//!
//! ```text
//! harness ── supervisor (child subreaper, its own session) ── bash -c COMMAND (its own group) ── …
//! ```
//!
//! The supervisor marks itself a *child subreaper* (`PR_SET_CHILD_SUBREAPER`), so every process
//! orphaned anywhere below it is re-parented to it instead of to `init`: whatever a command does
//! to its group or session, its processes stay the supervisor's descendants. It reports to the
//! harness on a pipe: the shell's pid, then the shell's wait status together with whether
//! anything was left below it. With nothing left it exits at once (nothing can be re-parented
//! to it any more). Otherwise it waits for one thing: its control pipe closing. Then it
//! *sweeps*: it kills its children, reaps them, kills the orphans that re-parent to it as their
//! parents die, and exits once it has no child left. The control pipe closes when the harness
//! asks (the call ended, the job was killed, the owner was disposed), when the harness drops
//! the command (teardown, a dropped future) and when the harness dies, however it dies: the
//! kernel closes the pipe of a killed process too.
//!
//! # How the supervisor is started: `fork`, then `fork` and `execve`
//!
//! The harness forks the supervisor, and the supervisor forks the shell-to-be, which executes
//! the shell. Both copies run only the code of [`after_fork`], whose rule (async-signal-safe
//! system calls on data prepared before the fork; no allocation, lock or panic) is written
//! once there; `docs/design/launcher.md` says why this design and what it costs (each `fork`
//! copies the harness's page tables). The launch (`argv`, `envp`, working directory,
//! descriptors, the sandbox's [`Restrictions`]) is prepared here, before the fork: the copies
//! only read their own copy of it.
//!
//! - The harness blocks every signal in its thread across the fork, so the supervisor starts
//!   with all of them blocked and no handler of the harness ever runs in it; it hears signals
//!   through a `signalfd`. Before it forks the shell-to-be it resets every handled signal to
//!   the default action, and `SIGPIPE` and `SIGCHLD` even if ignored, as `posix_spawn` does:
//!   the shell-to-be, which unblocks signals just before its `execve`, never runs a handler of
//!   the harness either.
//! - The supervisor writes the shell's pid to the harness before the shell-to-be may go on to
//!   its `execve` (it waits on a pipe for a byte): a command that kills its supervisor at once
//!   cannot keep the harness from knowing the group to kill. A shell-to-be whose `execve`
//!   fails reports its errno itself.
//! - The supervisor closes every descriptor of its copy of the harness's table but its control
//!   pipe, its report pipe and its signalfd, once the shell-to-be is forked.
//!
//! A sandboxed shell-to-be confines itself before its `execve` ([`after_fork::confine`]): a
//! mount namespace of its own, its directory, the capabilities dropped, `no_new_privs`, a
//! seccomp filter (`seccompiler::apply_filter`) and a Landlock ruleset (made in the harness;
//! the shell-to-be only restricts itself with it).
//!
//! A command cannot hang its call by stopping its supervisor (`kill -STOP $PPID`, which a
//! sandbox's signal scope forbids and an unconfined command may do): the harness kills a
//! supervisor whose sweep does not finish in time, and one that has not reported its shell's
//! end within [`REPORT_AFTER_EXIT`] of the shell's exit, which the harness sees on a pidfd of
//! the shell.
//!
//! What stays out of reach: an unconfined command that kills or stops its own supervisor before
//! it escapes its group. The harness notices, kills the shell's group and reports the command
//! as killed, but a process that had already left the group is then re-parented to `init` and
//! survives. The docs of the shell page say so.

pub(crate) mod after_fork;
mod first_report;
mod hooks;

#[cfg(feature = "sandbox")]
pub(crate) use hooks::{
    confine_at_exec, keep_at_exec, try_mount_namespace, try_restrictions, user_namespace,
};

use crate::launch::{Launch, ShellEnd};
use after_fork::{Plan, TREE_EMPTY};
use first_report::{FIRST_REPORT_LIMIT, first_word};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};
use std::ffi::{CString, c_char};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Mutex, MutexGuard, OnceLock};
use tokio::io::AsyncReadExt;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// The most descriptors a launch passes to the shell at their own numbers.
const INHERIT_MAX: usize = 2;

/// `__WALL` (see [`after_fork`]).
const WALL: u32 = 0x4000_0000;

pub(crate) fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the command or its environment contains a NUL byte",
        )
    })
}

/// The strings of a launch, checked for NUL bytes, and `execve`'s pointer arrays into them,
/// all made before the fork.
struct Strings {
    program: CString,
    workdir: CString,
    /// Held for the pointers below.
    _args: Vec<CString>,
    _env: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl Strings {
    fn new(launch: &Launch) -> io::Result<Strings> {
        let program = c_string(launch.program.as_os_str().as_bytes())?;
        let zeroth = launch.program.file_name().map_or_else(
            || program.clone(),
            |name| CString::new(name.as_bytes()).unwrap_or_default(),
        );
        let mut args = Vec::with_capacity(launch.args.len() + 1);
        args.push(zeroth);
        for arg in &launch.args {
            args.push(c_string(arg.as_bytes())?);
        }
        let mut env = Vec::with_capacity(launch.env.len());
        for (name, value) in &launch.env {
            let mut entry = Vec::with_capacity(name.len() + value.len() + 1);
            entry.extend_from_slice(name.as_bytes());
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            env.push(c_string(&entry)?);
        }
        // A `CString`'s bytes live on the heap, so the pointers stay valid as the vectors move.
        let pointers = |strings: &[CString]| {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Ok(Strings {
            argv: pointers(&args),
            envp: pointers(&env),
            program,
            workdir: c_string(launch.workdir.as_os_str().as_bytes())?,
            _args: args,
            _env: env,
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Supervisors that were exiting when their command was dropped: reaped at the next spawn.
static EXITING: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());

/// Reaps the supervisor of `pidfd` if it has exited. Returns whether it is gone.
fn try_reap(pidfd: &OwnedFd) -> bool {
    match rustix::process::waitid(
        WaitId::PidFd(pidfd.as_fd()),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::from_bits_retain(WALL),
    ) {
        Ok(status) => status.is_some(),
        // ECHILD: someone else's `waitpid(-1)` reaped it (or the kernel did, for a harness
        // that ignores SIGCHLD); it is gone either way.
        Err(Errno::CHILD) => true,
        Err(_) => false,
    }
}

/// Waits until the supervisor of `pidfd` has exited (its pidfd becomes readable), then reaps
/// it.
async fn reap(pidfd: &OwnedFd) {
    if try_reap(pidfd) {
        return;
    }
    if let Ok(exit) = readable(pidfd.as_fd()) {
        let _ = exit.readable().await;
    }
    if !try_reap(pidfd) {
        tracing::warn!("a command's supervisor could not be reaped");
    }
}

/// Reaps the supervisors that were exiting when their commands were dropped.
fn reap_exiting() {
    let mut exiting = lock(&EXITING);
    if !exiting.is_empty() {
        exiting.retain(|pidfd| !try_reap(pidfd));
    }
}

/// The supervisor process as the harness holds it.
#[derive(Debug)]
struct SupervisorProcess {
    /// Its pidfd, until it was reaped.
    pidfd: Option<OwnedFd>,
    /// The supervisor said it is exiting (nothing was left below it).
    exiting: bool,
    /// The shell's pid once reported, which is also its group: killed with the supervisor.
    shell: Option<Pid>,
}

impl SupervisorProcess {
    /// Kills the supervisor (by its pidfd, so never another process that reused its pid) and
    /// the group of its shell, if it reported one.
    fn kill(&self) {
        if let Some(pidfd) = &self.pidfd {
            let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
        }
        if let Some(shell) = self.shell {
            let _ = rustix::process::kill_process_group(shell, Signal::KILL);
        }
    }

    async fn reap(&mut self) {
        if let Some(pidfd) = &self.pidfd {
            reap(pidfd).await;
        }
    }
}

impl Drop for SupervisorProcess {
    fn drop(&mut self) {
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        if try_reap(&pidfd) {
            return;
        }
        // A supervisor that said it is exiting is reaped at the next spawn, without a task.
        // One still sweeping (a dropped command) is reaped in the background, or at a later
        // spawn where there is no runtime.
        if self.exiting {
            lock(&EXITING).push(pidfd);
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { reap(&pidfd).await });
            }
            Err(_) => lock(&EXITING).push(pidfd),
        }
    }
}

/// A command running under its supervisor (see the module docs).
#[derive(Debug)]
pub(crate) struct Supervised {
    supervisor: SupervisorProcess,
    /// The shell's pid, which is also its process group id.
    shell: i32,
    stdin: Option<pipe::Sender>,
    stdout: Option<pipe::Receiver>,
    stderr: Option<pipe::Receiver>,
    /// The supervisor's reports: the shell's pid, then its wait status.
    reports: pipe::Receiver,
    /// Bytes of a report word read so far (reads may be cancelled between words).
    partial: Vec<u8>,
    /// The shell's status once reported.
    status: Option<ExitStatus>,
    /// The errno of the shell-to-be's failed start, once reported.
    start_failed: Option<i32>,
    /// Whether the supervisor reported that nothing was left below it when the shell ended.
    empty: bool,
    /// The harness's end of the control pipe: closing it makes the supervisor sweep.
    control: Option<OwnedFd>,
    /// The shell's pidfd, readable once the shell has exited: how the harness notices a
    /// supervisor that no longer reports (stopped by its command) while its shell has ended.
    /// `None` where it could not be opened (the shell had already gone).
    shell_exit: Option<AsyncFd<OwnedFd>>,
}

/// How long a supervisor may take to report its shell's end after the shell has exited, before
/// the harness takes it for stopped or stuck and kills it.
const REPORT_AFTER_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A pidfd of `pid` (not a child of this process: it may only be polled), or `None`.
fn pidfd_of(pid: i32) -> Option<AsyncFd<OwnedFd>> {
    let fd = rustix::process::pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
    readable(fd).ok()
}

/// A descriptor that names the same open file for as long as the value lives: owned, or
/// borrowed (the borrow keeps it open).
trait StableFd: AsRawFd {}
impl StableFd for OwnedFd {}
impl StableFd for BorrowedFd<'_> {}

/// `fd` registered with the runtime, for its readiness to read (a pipe, a pidfd).
// tokio's safe constructors are deprecated as unsound for descriptors in general; this one
// `unsafe` block registers only the two kinds that keep tokio's condition.
#[allow(unsafe_code)]
fn readable<T: StableFd>(fd: T) -> io::Result<AsyncFd<T>> {
    // SAFETY: tokio asks that the descriptor stay open, as the same file, for the `AsyncFd`'s
    // whole life: an `OwnedFd` it owns closes only when it drops, and a `BorrowedFd` cannot
    // outlive its borrow; `as_raw_fd` of either always gives the same number.
    Ok(unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// `fd`, moved to a descriptor above 0–2 if it sits on one (a harness started with its standard
/// streams closed): the shell-to-be installs its streams there and still writes a failed start
/// on the report pipe, and the supervisor must keep its control pipe apart from them.
pub(crate) fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

/// Over this many bytes a command reaches bash on a descriptor instead of as its `-c`
/// argument: the kernel takes no single argument over 128 KiB (`MAX_ARG_STRLEN`).
pub(crate) const ARGUMENT_SCRIPT_MAX: usize = 96 * 1024;

/// `script` in an unnamed temporary file, read from its start: the descriptor (above 0–2,
/// close-on-exec here; the launch passes it on) and the `-c` argument that has bash read it,
/// close it, and run it as if it had been the argument (`eval` in the same shell: `$0`, the
/// positional parameters, `exit` and `set -e` behave alike).
pub(crate) fn script_on_descriptor(script: &str) -> io::Result<(OwnedFd, String)> {
    use std::io::{Seek, Write};
    let mut file = tempfile::tempfile()?;
    file.write_all(script.as_bytes())?;
    file.rewind()?;
    let fd = above_stdio(file.into())?;
    let n = fd.as_raw_fd();
    Ok((
        fd,
        format!(
            "__dsh_script=$(</dev/fd/{n}) || exit 126\nexec {n}<&-\n\
             eval \"unset __dsh_script; $__dsh_script\""
        ),
    ))
}

/// Makes the harness's end of a pipe from [`pipe`] non-blocking, for the runtime (the command's
/// end stays blocking: the two ends are separate open files). One `fcntl` where the runtime's
/// checked conversion takes three: the end is known to be a pipe, and its only status flag is
/// its access mode, which `F_SETFL` leaves alone.
fn nonblocking(fd: OwnedFd) -> io::Result<OwnedFd> {
    rustix::fs::fcntl_setfl(&fd, rustix::fs::OFlags::NONBLOCK)?;
    Ok(fd)
}

/// The oldest kernel the supervisor runs on: the harness waits for a supervisor on its pidfd
/// (`pidfd_open`, Linux 5.3; `waitid(P_PIDFD)`, Linux 5.4).
const MINIMUM_KERNEL: &str = "Linux 5.4";

fn unsupported_kernel() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "the command supervisor needs {MINIMUM_KERNEL} or later (waiting on a pidfd); \
             this kernel lacks it"
        ),
    )
}

/// Whether this kernel can wait on a pidfd, probed once: a pidfd of this process, on which
/// `waitid(P_PIDFD)` fails with `ECHILD` (this process is not its own child) where the kernel
/// knows `P_PIDFD`, and with `EINVAL` before Linux 5.4.
fn pidfd_waits() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let Ok(fd) = rustix::process::pidfd_open(rustix::process::getpid(), PidfdFlags::empty())
        else {
            return false;
        };
        let result = rustix::process::waitid(
            WaitId::PidFd(fd.as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::from_bits_retain(WALL),
        );
        let supported = result.err() != Some(Errno::INVAL);
        if !supported {
            tracing::warn!("this kernel cannot wait on a pidfd: no command can start");
        }
        supported
    })
}

/// The Landlock ABI version of the running kernel: 0 when Landlock is missing or disabled. The
/// sandbox's system probe (`crate::sandbox::SystemProbe`) asks this once per executor.
#[cfg(feature = "sandbox")]
pub(crate) fn landlock_abi() -> u32 {
    hooks::landlock_abi()
}

/// `/dev/null`, opened once: the stdin of every command without stdin bytes.
fn dev_null() -> io::Result<BorrowedFd<'static>> {
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_fd());
    }
    let file = std::fs::File::open("/dev/null")?;
    Ok(NULL.get_or_init(|| file.into()).as_fd())
}

/// Forks the supervisor of `launch` (see [`after_fork::fork_supervisor`]), with the strings and
/// `execve`'s pointer arrays made here, before the fork. Not `async`: the pointers never cross
/// an `await`.
fn fork_supervisor(
    launch: &Launch,
    stdio: [BorrowedFd<'_>; 3],
    control: BorrowedFd<'_>,
    report: BorrowedFd<'_>,
    inherit: &[OwnedFd],
    null_stdin: bool,
) -> io::Result<Pid> {
    let strings = Strings::new(launch)?;
    after_fork::fork_supervisor(&Plan {
        program: &strings.program,
        argv: &strings.argv,
        envp: &strings.envp,
        workdir: &strings.workdir,
        stdio,
        control,
        report,
        confinement: launch.confinement.as_deref(),
        inherit,
        null_stdin,
    })
}

impl Supervised {
    /// Starts `launch` under a supervisor: the supervisor and the shell each lead their own
    /// process group; the shell's stdout and stderr are pipes to the harness.
    pub(crate) async fn spawn(mut launch: Launch) -> io::Result<Supervised> {
        if !pidfd_waits() {
            return Err(unsupported_kernel());
        }
        reap_exiting();
        if launch.inherit.len() > INHERIT_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a launch passes more descriptors than the supervisor takes",
            ));
        }
        let (stdout_read, stdout_write) = pipe()?;
        let (stderr_read, stderr_write) = pipe()?;
        let (stdin_read, stdin_write) = if launch.stdin_piped {
            let (read, write) = pipe()?;
            (Some(read), Some(write))
        } else {
            (None, None)
        };
        let stdin_fd = match &stdin_read {
            Some(read) => read.as_fd(),
            None => dev_null()?,
        };
        let (control_read, control_write) = pipe()?;
        let (report_read, report_write) = pipe()?;
        let (control_read, report_write) = (above_stdio(control_read)?, above_stdio(report_write)?);
        let mut inherited = Vec::with_capacity(launch.inherit.len());
        for fd in std::mem::take(&mut launch.inherit) {
            // Above 0–2, where the shell's standard streams go.
            inherited.push(above_stdio(fd)?);
        }
        let pid = fork_supervisor(
            &launch,
            [stdin_fd, stdout_write.as_fd(), stderr_write.as_fd()],
            control_read.as_fd(),
            report_write.as_fd(),
            &inherited,
            stdin_read.is_none(),
        )?;
        // The child's ends: the supervisor has its copies now.
        drop((
            stdout_write,
            stderr_write,
            stdin_read,
            control_read,
            report_write,
            inherited,
        ));
        // A child not yet reaped keeps its pid, so the pidfd is the supervisor's (unless the
        // harness ignores SIGCHLD and the supervisor already died: the kernel reaped it, and
        // the pidfd either fails or names the dead process, whose report pipe has ended).
        let pidfd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
            Ok(pidfd) => pidfd,
            Err(error) => {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
                let _ = rustix::process::waitpid(
                    Some(pid),
                    rustix::process::WaitOptions::from_bits_retain(WALL),
                );
                return Err(if error == Errno::NOSYS {
                    unsupported_kernel()
                } else {
                    error.into()
                });
            }
        };
        let mut supervisor = SupervisorProcess {
            pidfd: Some(pidfd),
            exiting: false,
            shell: None,
        };
        // The shell's pid comes as soon as the supervisor has forked it (or why it did not
        // start, when that came first); see `first_word` for its bounds. A failed start
        // reported after the pid comes to `shell_end`. Should this future be dropped
        // meanwhile, the control pipe closes with it and the supervisor sweeps whatever it
        // started.
        let first = match supervisor.pidfd.as_ref() {
            Some(pidfd) => first_word(&report_read, pidfd, FIRST_REPORT_LIMIT).await,
            None => Ok(None),
        };
        let shell = match first {
            Ok(Some(shell)) if shell > 0 => shell,
            Ok(Some(error)) => {
                supervisor.exiting = true;
                return Err(io::Error::from_raw_os_error(error.saturating_neg()));
            }
            Ok(None) => {
                // The supervisor died before it reported. Its shell-to-be, if it forked one,
                // waits for the supervisor's word before its `execve` and exits when the
                // supervisor is gone: nothing of the command ran.
                supervisor.exiting = true;
                return Err(io::Error::other(
                    "the command's supervisor exited before it started the shell",
                ));
            }
            Err(error) => {
                // A supervisor that never reported (stopped, say) is killed rather than left
                // behind; its shell-to-be, waiting for its word, exits with it.
                supervisor.kill();
                return Err(error);
            }
        };
        supervisor.shell = Pid::from_raw(shell);
        Ok(Supervised {
            supervisor,
            shell,
            stdin: stdin_write
                .map(|fd| pipe::Sender::from_owned_fd_unchecked(nonblocking(fd)?))
                .transpose()?,
            stdout: Some(pipe::Receiver::from_owned_fd_unchecked(nonblocking(
                stdout_read,
            )?)?),
            stderr: Some(pipe::Receiver::from_owned_fd_unchecked(nonblocking(
                stderr_read,
            )?)?),
            reports: pipe::Receiver::from_owned_fd_unchecked(nonblocking(report_read)?)?,
            partial: Vec::with_capacity(4),
            status: None,
            start_failed: None,
            empty: false,
            control: Some(control_write),
            shell_exit: pidfd_of(shell),
        })
    }

    /// The shell's pid, which is also its process group id.
    pub(crate) fn shell(&self) -> i32 {
        self.shell
    }

    /// The shell's standard output pipe.
    pub(crate) fn stdout(&mut self) -> Option<pipe::Receiver> {
        self.stdout.take()
    }

    /// The shell's standard error pipe.
    pub(crate) fn stderr(&mut self) -> Option<pipe::Receiver> {
        self.stderr.take()
    }

    /// The shell's standard input pipe.
    pub(crate) fn stdin(&mut self) -> Option<pipe::Sender> {
        self.stdin.take()
    }

    /// Reads one native-endian `i32` report; `None` at the end of the pipe. Cancel-safe: bytes
    /// read before a cancellation are kept for the next call.
    async fn next_word(&mut self) -> io::Result<Option<i32>> {
        next_word(&mut self.reports, &mut self.partial).await
    }

    /// Waits until the shell has ended. Cancel-safe. Later calls return the same answer.
    pub(crate) async fn shell_end(&mut self) -> ShellEnd {
        if let Some(status) = self.status {
            return ShellEnd::Status(status);
        }
        if let Some(errno) = self.start_failed {
            return ShellEnd::StartFailed(errno);
        }
        // The status, then whether nothing was left below the supervisor (written together);
        // or, first, `-errno` from a shell-to-be whose `execve` failed. Should the shell exit
        // and the supervisor not say so (its command stopped it), the supervisor is killed
        // and the shell's end is its loss: no call waits for a supervisor that cannot report.
        let unheard = async {
            match &self.shell_exit {
                Some(exit) => {
                    let _ = exit.readable().await;
                    tokio::time::sleep(REPORT_AFTER_EXIT).await;
                }
                None => std::future::pending().await,
            }
        };
        let first = tokio::select! {
            word = next_word(&mut self.reports, &mut self.partial) => Some(word),
            () = unheard => None,
        };
        let Some(first) = first else {
            tracing::warn!(
                shell = self.shell,
                "the shell exited and its supervisor did not report it; killing the supervisor"
            );
            self.supervisor.kill();
            return ShellEnd::SupervisorLost;
        };
        let raw = match first {
            Ok(Some(raw)) if raw < 0 => {
                // Nothing else was started: the supervisor reaps the shell-to-be and exits.
                let errno = raw.saturating_neg();
                self.start_failed = Some(errno);
                self.empty = true;
                self.supervisor.exiting = true;
                return ShellEnd::StartFailed(errno);
            }
            Ok(Some(raw)) => raw,
            Ok(None) | Err(_) => return ShellEnd::SupervisorLost,
        };
        match self.next_word().await {
            Ok(Some(empty)) => {
                self.empty = empty == TREE_EMPTY;
                self.supervisor.exiting = self.empty;
            }
            Ok(None) | Err(_) => return ShellEnd::SupervisorLost,
        }
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        ShellEnd::Status(status)
    }

    /// Asks the supervisor to kill everything below it and exit, and waits (at most `bound`)
    /// until it has. Returns whether it finished within the bound.
    pub(crate) async fn sweep(&mut self, bound: std::time::Duration) -> bool {
        self.control = None;
        if self.empty {
            // Nothing was left below it when the shell ended, and nothing can be re-parented to
            // it any more: it is exiting on its own, and is reaped after this is dropped.
            return true;
        }
        match tokio::time::timeout(bound, self.supervisor.reap()).await {
            Ok(()) => true,
            Err(_) => {
                // Stopped (a command's `kill -STOP` of its parent's parent), or stuck: a
                // supervisor the harness cannot hear from is killed, with the shell's group,
                // so that no wait for it (its report of the shell's end) can hang.
                tracing::warn!(
                    shell = self.shell,
                    "the command's supervisor did not finish its sweep within {bound:?}; \
                     killing it"
                );
                self.supervisor.kill();
                false
            }
        }
    }
}

/// Reads one native-endian `i32` report from `reports`; `None` at the end of the pipe.
/// Cancel-safe: bytes read before a cancellation are kept in `partial` for the next call.
async fn next_word(reports: &mut pipe::Receiver, partial: &mut Vec<u8>) -> io::Result<Option<i32>> {
    while partial.len() < 4 {
        let mut byte = [0u8; 4];
        let wanted = 4 - partial.len();
        let read = reports.read(&mut byte[..wanted]).await?;
        if read == 0 {
            return Ok(None);
        }
        partial.extend_from_slice(&byte[..read]);
    }
    let mut word = [0u8; 4];
    word.copy_from_slice(&partial[..4]);
    partial.clear();
    Ok(Some(i32::from_ne_bytes(word)))
}

#[cfg(test)]
mod tests;
