//! The command supervisor: containment of every process a command starts, however it regroups.
//!
//! Killing a command's process group misses whatever left the group: job control in the shell
//! (`set -m`), `setsid`, a program calling `setpgid`/`setsid`, a double fork into a new session.
//! On Linux each command therefore runs under a small supervisor process of its own:
//!
//! ```text
//! harness ── supervisor (child subreaper, its own group) ── bash -c COMMAND (its own group) ── …
//! ```
//!
//! The supervisor is forked from the harness (it never calls `exec`) and marks itself a *child
//! subreaper* (`PR_SET_CHILD_SUBREAPER`), so every process orphaned anywhere below it is
//! re-parented to it instead of to `init`: whatever a command does to its group or session, its
//! processes stay the supervisor's descendants. It starts the shell the way `posix_spawn` does
//! (`clone(CLONE_VM | CLONE_VFORK)` onto a stack of its own, then `execve`), so a failed `execve`
//! comes back to `spawn` as its error. It reports to the harness on a pipe: the shell's pid, then
//! the shell's wait status together with whether anything was left below it. With nothing left
//! it exits at once (nothing can be re-parented to it any more). Otherwise it waits for one
//! thing: its control pipe closing. Then it *sweeps*: it kills its children, reaps them, kills
//! the orphans that re-parent to it as their parents die, and exits once it has no child left.
//! The control pipe closes when the harness asks (the call ended, the job was killed, the owner
//! was disposed), when the harness drops the command (teardown, a dropped future) and when the
//! harness dies, however it dies: the kernel closes the pipe of a killed process too.
//!
//! What stays out of reach: a command that kills its own supervisor (a `SIGKILL` to its parent's
//! parent) before it escapes its group. The harness notices the supervisor's death, kills the
//! shell's group at once and reports the command as killed, but a process that had already left
//! the group is then re-parented to `init` and survives. The docs of the shell page say so.
//!
//! Everything the supervisor runs happens in a forked child of a multi-threaded process, where
//! only async-signal-safe functions may be called: the code below uses raw system calls, stack
//! buffers and no allocation, lock, or Rust standard-library I/O.

// The supervisor is a `pre_exec` hook and raw system calls; each `unsafe` block says why it is
// sound. Nothing else in the crate uses `unsafe`.
#![allow(unsafe_code)]

use crate::launch::{Launch, ShellEnd};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// The second word of a shell's end: nothing was left below the supervisor, which exits.
const TREE_EMPTY: i32 = 1;

/// A launch turned into the C strings `execve` takes, built in the harness before the fork so
/// the forked side only reads them.
struct ExecPlan {
    program: CString,
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _env: Vec<CString>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into the `CString`s the plan owns, which are never mutated; the
// plan is read (never written) by the forked side only.
unsafe impl Send for ExecPlan {}
// SAFETY: as above: shared access is read-only.
unsafe impl Sync for ExecPlan {}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the command or its environment contains a NUL byte",
        )
    })
}

impl ExecPlan {
    fn new(launch: &Launch) -> io::Result<ExecPlan> {
        let program = c_string(launch.program.as_os_str().as_bytes())?;
        let zeroth = launch.program.file_name().map_or_else(
            || program.clone(),
            |name| CString::new(name.as_bytes()).unwrap_or_default(),
        );
        let mut args = vec![zeroth];
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
        let argv = args
            .iter()
            .map(|a| a.as_ptr())
            .chain([std::ptr::null()])
            .collect();
        let envp = env
            .iter()
            .map(|e| e.as_ptr())
            .chain([std::ptr::null()])
            .collect();
        Ok(ExecPlan {
            program,
            _args: args,
            argv,
            _env: env,
            envp,
        })
    }
}

/// A command running under its supervisor (see the module docs).
#[derive(Debug)]
pub(crate) struct Supervised {
    /// The supervisor process: the harness's child.
    process: Child,
    /// The shell's pid, which is also its process group id.
    shell: i32,
    /// The supervisor's reports: the shell's pid, then its wait status.
    reports: tokio::net::unix::pipe::Receiver,
    /// Bytes of a report word read so far (reads may be cancelled between words).
    partial: Vec<u8>,
    /// The shell's status once reported.
    status: Option<ExitStatus>,
    /// Whether the supervisor reported that nothing was left below it when the shell ended.
    empty: bool,
    /// The harness's end of the control pipe: closing it makes the supervisor sweep.
    control: Option<OwnedFd>,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe2` writes; on success both are new
    // descriptors owned by nobody else, so wrapping them in `OwnedFd` is sound.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

impl Supervised {
    /// Starts `launch` under a supervisor: the supervisor and the shell each lead their own
    /// process group; the shell's stdout and stderr are pipes to the harness.
    pub(crate) async fn spawn(launch: Launch) -> io::Result<Supervised> {
        let plan = ExecPlan::new(&launch)?;
        let (control_read, control_write) = pipe()?;
        let (report_read, report_write) = pipe()?;
        let control = control_read.as_raw_fd();
        let report = report_write.as_raw_fd();
        // The standard library forks the supervisor and sets up its stdio, working directory
        // and group; the supervisor never returns to it, so its program is never executed.
        let mut command = Command::new(&launch.program);
        command
            .current_dir(&launch.workdir)
            .stdin(if launch.stdin_piped {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        command.as_std_mut().process_group(0);
        // SAFETY: the hook runs in the forked child and calls only async-signal-safe functions
        // (see `become_supervisor`); the descriptors it uses stay open in the parent until
        // `spawn` has returned, so the child inherits them, and the plan it reads is owned by
        // the hook itself.
        unsafe {
            command.pre_exec(move || become_supervisor(&plan, control, report));
        }
        let spawned = command.spawn();
        // The child's ends: the supervisor has its copies now.
        drop(control_read);
        drop(report_write);
        let process = spawned?;
        let reports = tokio::net::unix::pipe::Receiver::from_owned_fd(report_read)?;
        let mut supervised = Supervised {
            process,
            shell: 0,
            reports,
            partial: Vec::with_capacity(4),
            status: None,
            empty: false,
            control: Some(control_write),
        };
        match supervised.next_word().await? {
            Some(shell) => supervised.shell = shell,
            None => {
                return Err(io::Error::other(
                    "the command's supervisor exited before it started the shell",
                ));
            }
        }
        Ok(supervised)
    }

    /// The shell's pid, which is also its process group id.
    pub(crate) fn shell(&self) -> i32 {
        self.shell
    }

    /// The shell's standard output pipe.
    pub(crate) fn stdout(&mut self) -> Option<ChildStdout> {
        self.process.stdout.take()
    }

    /// The shell's standard error pipe.
    pub(crate) fn stderr(&mut self) -> Option<ChildStderr> {
        self.process.stderr.take()
    }

    /// The shell's standard input pipe.
    pub(crate) fn stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        self.process.stdin.take()
    }

    /// Reads one native-endian `i32` report; `None` at the end of the pipe. Cancel-safe: bytes
    /// read before a cancellation are kept for the next call.
    async fn next_word(&mut self) -> io::Result<Option<i32>> {
        while self.partial.len() < 4 {
            let mut byte = [0u8; 4];
            let wanted = 4 - self.partial.len();
            let read = self.reports.read(&mut byte[..wanted]).await?;
            if read == 0 {
                return Ok(None);
            }
            self.partial.extend_from_slice(&byte[..read]);
        }
        let mut word = [0u8; 4];
        word.copy_from_slice(&self.partial[..4]);
        self.partial.clear();
        Ok(Some(i32::from_ne_bytes(word)))
    }

    /// Waits until the shell has ended. Cancel-safe. Later calls return the same answer.
    pub(crate) async fn shell_end(&mut self) -> ShellEnd {
        if let Some(status) = self.status {
            return ShellEnd::Status(status);
        }
        // The status, then whether nothing was left below the supervisor (written together).
        let raw = match self.next_word().await {
            Ok(Some(raw)) => raw,
            Ok(None) | Err(_) => return ShellEnd::SupervisorLost,
        };
        match self.next_word().await {
            Ok(Some(empty)) => self.empty = empty == TREE_EMPTY,
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
            // it any more: it is exiting on its own, and the runtime reaps it.
            return true;
        }
        match tokio::time::timeout(bound, self.process.wait()).await {
            Ok(_) => true,
            Err(_) => {
                tracing::warn!(
                    shell = self.shell,
                    "the command's supervisor is still sweeping after {bound:?}"
                );
                false
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The forked side. Nothing below may allocate, lock, or use the standard library's I/O: it runs
// between `fork` and `exec` of a multi-threaded process (and, for the supervisor, forever after).

/// The `pre_exec` hook: turns the forked child into the supervisor and starts the shell as its
/// child, then supervises. It returns only with an error (which the standard library reports to
/// `spawn`): the supervisor's program is never executed.
fn become_supervisor(plan: &ExecPlan, control: RawFd, report: RawFd) -> io::Result<()> {
    // SAFETY: only async-signal-safe system calls on plain values, stack memory and the plan.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut handled: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut handled);
        for signal in [
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
        ] {
            libc::sigaddset(&mut handled, signal);
        }
        let mut previous: libc::sigset_t = std::mem::zeroed();
        // Blocked before the shell starts, so none of its SIGCHLDs can be missed.
        if libc::sigprocmask(libc::SIG_BLOCK, &handled, &mut previous) != 0 {
            return Err(io::Error::last_os_error());
        }
        let shell = start_shell(plan, &previous)?;
        supervise(shell, control, report, &handled)
    }
}

/// What the shell-to-be reads: the plan, the signal mask to restore, and where to leave the
/// error of a failed `execve`.
struct ShellStart<'a> {
    plan: &'a ExecPlan,
    mask: &'a libc::sigset_t,
    failed: *mut libc::c_int,
}

/// The shell-to-be: runs on its own stack in the supervisor's memory (the supervisor waits,
/// suspended, until `execve` succeeds or this exits), so it only reads the plan and writes the
/// error of a failed `execve` where the supervisor will look.
extern "C" fn exec_shell(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ShellStart` the supervisor passed, alive until this returns or
    // execs (the supervisor is suspended meanwhile); only async-signal-safe calls follow.
    unsafe {
        let start = &*(arg as *const ShellStart<'_>);
        libc::sigprocmask(libc::SIG_SETMASK, start.mask, std::ptr::null_mut());
        libc::setpgid(0, 0);
        libc::execve(
            start.plan.program.as_ptr(),
            start.plan.argv.as_ptr(),
            start.plan.envp.as_ptr(),
        );
        *start.failed = *libc::__errno_location();
        libc::_exit(127)
    }
}

/// Starts the shell the way `posix_spawn` does: `clone(CLONE_VM | CLONE_VFORK)` onto a stack
/// of its own, so no page table is copied, and returns once it has executed `bash`. A failed
/// `execve` comes back as its error.
///
/// # Safety
/// As for [`supervise`]; `previous` is the signal mask the shell gets.
unsafe fn start_shell(plan: &ExecPlan, previous: &libc::sigset_t) -> io::Result<libc::pid_t> {
    // The shell-to-be's stack: `execve` needs little, and the supervisor is suspended while it
    // is in use.
    let mut stack = [0u8; 32 * 1024];
    let mut failed: libc::c_int = 0;
    let start = ShellStart {
        plan,
        mask: previous,
        failed: &mut failed,
    };
    // SAFETY: the stack is this frame's, 16-byte aligned at its top and unused by anything
    // else while the child runs; `start` outlives the child's use of it (CLONE_VFORK).
    unsafe {
        let top = stack.as_mut_ptr().add(stack.len());
        let top = top.sub(top as usize % 16);
        let shell = libc::clone(
            exec_shell,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw const start).cast_mut().cast(),
        );
        if shell == -1 {
            return Err(io::Error::last_os_error());
        }
        let errno = std::ptr::read_volatile(&raw const failed);
        if errno != 0 {
            let mut status = 0;
            libc::waitpid(shell, &mut status, 0);
            return Err(io::Error::from_raw_os_error(errno));
        }
        // Also from this side, so the shell's group exists before the harness hears its pid.
        libc::setpgid(shell, shell);
        Ok(shell)
    }
}

/// The supervisor's life (see the module docs). Never returns.
///
/// # Safety
/// Must run in a forked child that has blocked `handled` and owns the two descriptors.
unsafe fn supervise(
    shell: libc::pid_t,
    control: RawFd,
    report: RawFd,
    handled: &libc::sigset_t,
) -> ! {
    // SAFETY: async-signal-safe system calls on plain values and stack memory only.
    unsafe {
        // A harness gone mid-report must not kill the supervisor with SIGPIPE.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let signals = libc::signalfd(-1, handled, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if signals < 0 {
            // Without a way to wait, contain what exists and leave.
            libc::kill(shell, libc::SIGKILL);
            sweep(shell, report);
            libc::_exit(1);
        }
        close_all_but([control, report, signals]);
        write_word(report, shell);
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: control,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: signals,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                continue;
            }
            if fds[1].revents & libc::POLLIN != 0 {
                let mut info: libc::signalfd_siginfo = std::mem::zeroed();
                let size = std::mem::size_of::<libc::signalfd_siginfo>();
                let mut stop = false;
                while libc::read(signals, (&raw mut info).cast(), size) == size as isize {
                    if info.ssi_signo != libc::SIGCHLD as u32 {
                        stop = true;
                    }
                }
                if reap_exited(shell, report) == Reaped::None {
                    // The shell was reaped and nothing is left below: nothing can ever be
                    // re-parented here again, so there is nothing to sweep.
                    libc::_exit(0);
                }
                if stop {
                    sweep(shell, report);
                    libc::_exit(0);
                }
            }
            // Any event on the control pipe (a byte, its end, an error) means sweep.
            if fds[0].revents != 0 {
                sweep(shell, report);
                libc::_exit(0);
            }
        }
    }
}

#[derive(PartialEq, Eq)]
enum Reaped {
    /// Children are still running.
    Running,
    /// No child is left.
    None,
}

/// Reaps every child that has exited, reporting the shell's status when it is among them.
///
/// # Safety
/// As for [`supervise`].
unsafe fn reap_exited(shell: libc::pid_t, report: RawFd) -> Reaped {
    // SAFETY: async-signal-safe system calls on stack memory only.
    unsafe {
        loop {
            let mut status = 0;
            match libc::waitpid(-1, &mut status, libc::WNOHANG) {
                0 => return Reaped::Running,
                pid if pid > 0 => {
                    if pid == shell {
                        report_end(report, status);
                    }
                }
                _ => {
                    if *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    return Reaped::None;
                }
            }
        }
    }
}

/// Kills every process below the supervisor and reaps them all: children first, then each
/// orphan as it is re-parented here, until no child is left.
///
/// # Safety
/// As for [`supervise`].
unsafe fn sweep(shell: libc::pid_t, report: RawFd) {
    // SAFETY: async-signal-safe system calls on stack memory only.
    unsafe {
        loop {
            if reap_exited(shell, report) != Reaped::Running {
                return;
            }
            kill_children();
            let mut status = 0;
            match libc::waitpid(-1, &mut status, 0) {
                pid if pid > 0 => {
                    if pid == shell {
                        write_pair(report, status, 0);
                    }
                }
                _ => {
                    if *libc::__errno_location() != libc::EINTR {
                        return;
                    }
                }
            }
        }
    }
}

/// Sends SIGKILL to each child of this (single-threaded) process, as listed by
/// `/proc/thread-self/children`, or by a scan of `/proc` where that file is missing.
///
/// # Safety
/// As for [`supervise`].
unsafe fn kill_children() {
    // SAFETY: async-signal-safe system calls on stack memory only.
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            kill_children_by_scan();
            return;
        }
        let mut buffer = [0u8; 4096];
        let mut pid: libc::pid_t = 0;
        let mut digits = false;
        loop {
            let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
            if read <= 0 {
                break;
            }
            for &byte in &buffer[..read as usize] {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(i32::from(byte - b'0'));
                    digits = true;
                } else {
                    if digits {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    pid = 0;
                    digits = false;
                }
            }
        }
        if digits {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::close(fd);
    }
}

/// The fallback of [`kill_children`]: every `/proc/PID/stat` whose parent is this process.
///
/// # Safety
/// As for [`supervise`].
unsafe fn kill_children_by_scan() {
    // SAFETY: async-signal-safe system calls on stack memory only.
    unsafe {
        let me = libc::getpid();
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return;
        }
        let mut entries = [0u8; 8192];
        loop {
            let read = libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                entries.len(),
            );
            if read <= 0 {
                break;
            }
            let mut offset = 0usize;
            while offset < read as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let record = &entries[offset..];
                let length = usize::from(u16::from_ne_bytes([record[16], record[17]]));
                if length == 0 {
                    break;
                }
                let name = &record[19..length.min(record.len())];
                let mut pid: libc::pid_t = 0;
                let mut numeric = false;
                for &byte in name {
                    if byte == 0 {
                        break;
                    }
                    if !byte.is_ascii_digit() {
                        numeric = false;
                        break;
                    }
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(i32::from(byte - b'0'));
                    numeric = true;
                }
                if numeric && parent_of(pid) == Some(me) {
                    libc::kill(pid, libc::SIGKILL);
                }
                offset += length;
            }
        }
        libc::close(dir);
    }
}

/// Writes `/proc/PID/FILE` into `path` (NUL-terminated); `None` if it does not fit.
fn proc_path<'a>(path: &'a mut [u8; 64], pid: libc::pid_t, file: &[u8]) -> Option<&'a [u8]> {
    let mut digits = [0u8; 12];
    let mut count = 0;
    let mut rest = pid.unsigned_abs();
    loop {
        digits[count] = b'0' + (rest % 10) as u8;
        count += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let prefix = b"/proc/";
    let length = prefix.len() + count + 1 + file.len() + 1;
    if length > path.len() {
        return None;
    }
    path[..prefix.len()].copy_from_slice(prefix);
    for i in 0..count {
        path[prefix.len() + i] = digits[count - 1 - i];
    }
    let mut at = prefix.len() + count;
    path[at] = b'/';
    at += 1;
    path[at..at + file.len()].copy_from_slice(file);
    at += file.len();
    path[at] = 0;
    Some(&path[..=at])
}

/// Reads `/proc/PID/stat` into `buffer`; the bytes after the command name's closing `") "`.
///
/// # Safety
/// As for [`supervise`].
unsafe fn stat_fields(pid: libc::pid_t, buffer: &mut [u8; 512]) -> Option<&[u8]> {
    let mut path = [0u8; 64];
    let path = proc_path(&mut path, pid, b"stat")?;
    // SAFETY: `path` is NUL-terminated; `buffer` is stack memory of the given length.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        libc::close(fd);
        read
    };
    let text = &buffer[..usize::try_from(read).ok()?];
    let close = text.iter().rposition(|&b| b == b')')?;
    text.get(close + 2..)
}

/// The parent pid of `pid`, from `/proc/PID/stat` (`state ppid …` after the name).
///
/// # Safety
/// As for [`supervise`].
unsafe fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut buffer = [0u8; 512];
    // SAFETY: forwarded to the caller's contract.
    let fields = unsafe { stat_fields(pid, &mut buffer)? };
    let mut parts = fields.split(|&b| b == b' ');
    parts.next()?;
    let mut parent: libc::pid_t = 0;
    for &byte in parts.next()? {
        if !byte.is_ascii_digit() {
            return None;
        }
        parent = parent
            .saturating_mul(10)
            .saturating_add(i32::from(byte - b'0'));
    }
    Some(parent)
}

/// Reports the shell's end found while reaping: its status, and whether nothing is left below
/// the supervisor (then it exits without waiting for a sweep).
///
/// # Safety
/// As for [`supervise`].
unsafe fn report_end(report: RawFd, status: libc::c_int) {
    // SAFETY: async-signal-safe system calls on stack memory only.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let empty = libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == -1
            && *libc::__errno_location() == libc::ECHILD;
        write_pair(report, status, if empty { TREE_EMPTY } else { 0 });
    }
}

/// Writes two native-endian words in one write (eight bytes to a pipe are written whole).
///
/// # Safety
/// As for [`supervise`].
unsafe fn write_pair(fd: RawFd, first: i32, second: i32) {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&first.to_ne_bytes());
    bytes[4..].copy_from_slice(&second.to_ne_bytes());
    // SAFETY: a write of eight bytes of stack memory.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Writes one native-endian word; a harness that is gone is not an error here.
///
/// # Safety
/// As for [`supervise`].
unsafe fn write_word(fd: RawFd, word: i32) {
    let bytes = word.to_ne_bytes();
    // SAFETY: a write of four bytes of stack memory; four bytes to a pipe are written whole.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Closes every descriptor but `keep`, so the supervisor holds no pipe of the command's (its
/// output must end when the command's processes are gone) nor of other commands.
///
/// # Safety
/// As for [`supervise`].
unsafe fn close_all_but(mut keep: [RawFd; 3]) {
    keep.sort_unstable();
    // SAFETY: closing descriptors of this forked process only.
    unsafe {
        let mut low: libc::c_uint = 0;
        let mut fallback = false;
        for fd in keep {
            let fd = fd as libc::c_uint;
            if fd > low && libc::syscall(libc::SYS_close_range, low, fd - 1, 0 as libc::c_uint) != 0
            {
                fallback = true;
            }
            low = fd + 1;
        }
        if libc::syscall(
            libc::SYS_close_range,
            low,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        ) != 0
        {
            fallback = true;
        }
        if fallback {
            // Kernels before 5.9 have no close_range: close one by one up to the limit.
            let mut limit: libc::rlimit = std::mem::zeroed();
            let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 16) as RawFd
            } else {
                1024
            };
            for fd in 0..top {
                if !keep.contains(&fd) {
                    libc::close(fd);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_paths_are_built_without_allocation_and_nul_terminated() {
        let mut path = [0u8; 64];
        assert_eq!(
            proc_path(&mut path, 12345, b"stat"),
            Some(&b"/proc/12345/stat\0"[..])
        );
        let mut path = [0u8; 64];
        assert_eq!(
            proc_path(&mut path, 0, b"comm"),
            Some(&b"/proc/0/comm\0"[..])
        );
        let mut path = [0u8; 64];
        assert_eq!(proc_path(&mut path, 1, &[b'x'; 60]), None);
    }

    #[test]
    fn the_parent_of_this_process_is_read_from_proc() {
        // SAFETY: reading /proc of this process; no fork involved.
        let parent = unsafe { parent_of(std::process::id() as libc::pid_t) };
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent, Some(unsafe { libc::getppid() }));
    }
}
