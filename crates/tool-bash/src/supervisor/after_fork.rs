//! Everything that runs after a `fork`: the supervisor, the shell-to-be, and the confinement
//! both it and a sandboxed program's forked child take on themselves ([`confine`]).
//!
//! # The rule
//!
//! A `fork` of the harness copies one thread of a multi-threaded process. Whatever another
//! thread held at that instant (the allocator's locks, a `Mutex`, the standard streams' lock,
//! a `tracing` subscriber's state) stays held in the copy forever. So code that runs after a
//! `fork` and before an `execve` or `_exit`:
//!
//! - calls only async-signal-safe operations: system calls through `rustix` (its `linux_raw`
//!   backend calls the kernel directly, with no C library and no `errno`) or `nix`, and the
//!   few C library functions named where they are called (`fork`, `sigaction`, `execve`,
//!   `_exit`, `close`, `syscall` for `close_range` and `mount_setattr`; the `landlock` and
//!   `seccompiler` crates' `prctl` and `syscall`);
//! - reads only data the harness prepared before the `fork` ([`Plan`], [`Restrictions`]: its
//!   own copy of them, since a `fork` copies the memory), and writes only its own stack;
//! - allocates nothing, takes no lock, logs nothing, and cannot panic: no indexing that can
//!   fail, no `unwrap`, no formatting; errors are [`Errno`] values, which are plain numbers;
//! - never returns into the harness's code: every path ends in `execve` or [`exit`].
//!
//! Dropping an `OwnedFd` of the copy is allowed: it closes the copy's descriptor (the process
//! has a descriptor table of its own), and nothing else in the process owns that number.
//!
//! The `unsafe` blocks of this module are the two `fork`s, the handler reset, the descriptor
//! sweep, `mount_setattr` (which `rustix` does not wrap), `execve` and `_exit`; each says why
//! it is sound.

// The fork/exec step of the crate's unsafe budget (see the crate docs): each block is one call
// of a function that has no safe wrapper, and says why it is sound.
#![allow(unsafe_code)]

use crate::launch::Restrictions;
use nix::sys::signal::{SigSet, SigmaskHow, Signal as NixSignal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{CWD, Mode, OFlags};
use rustix::io::{Errno, FdFlags};
use rustix::process::{Pid, Signal, WaitIdOptions, WaitOptions};
use std::ffi::{CStr, c_char};

mod confine;
pub(crate) use confine::confine;
#[cfg(feature = "sandbox")]
pub(crate) use confine::write_file;

/// What the supervisor and its shell-to-be read, all of it prepared by the harness before the
/// `fork`. The pointer arrays are `execve`'s: null-terminated, pointing into strings the
/// harness keeps alive across the `fork` (so the copy has them too).
pub(super) struct Plan<'a> {
    pub(super) program: &'a CStr,
    pub(super) argv: &'a [*const c_char],
    pub(super) envp: &'a [*const c_char],
    pub(super) workdir: &'a CStr,
    /// The shell's standard streams.
    pub(super) stdio: [BorrowedFd<'a>; 3],
    pub(super) control: BorrowedFd<'a>,
    pub(super) report: BorrowedFd<'a>,
    /// What the shell-to-be does to itself before its `execve`.
    pub(super) confinement: Option<&'a Restrictions>,
    /// The descriptors the shell inherits at their own numbers.
    pub(super) inherit: &'a [OwnedFd],
    /// Whether stdin is `/dev/null`, to be reopened inside the mount namespace.
    pub(super) null_stdin: bool,
}

/// The second word of a shell's end: nothing was left below the supervisor, which exits.
pub(super) const TREE_EMPTY: i32 = 1;

/// `__WALL`: wait for every child, whatever signal it sends its parent at its end. An orphan
/// re-parented to the supervisor may have been cloned with another exit signal, or none.
const WALL: u32 = 0x4000_0000;

/// Forks the supervisor. In the harness it returns the supervisor's pid; the supervisor never
/// returns from it. Every signal is blocked in the calling thread across the `fork`, so the
/// supervisor starts with all of them blocked and no handler of the harness ever runs in it.
pub(super) fn fork_supervisor(plan: &Plan<'_>) -> std::io::Result<Pid> {
    let mut previous = SigSet::empty();
    nix::sys::signal::pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut previous),
    )?;
    // SAFETY: the child runs `supervisor`, which keeps this module's rule (see the module
    // docs): async-signal-safe calls on the plan, which the child has its own copy of, and it
    // ends in `_exit`, never returning here.
    let forked = unsafe { nix::unistd::fork() };
    if let Ok(nix::unistd::ForkResult::Child) = forked {
        supervisor(plan)
    }
    let restored =
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
    let child = match forked? {
        nix::unistd::ForkResult::Parent { child } => child,
        nix::unistd::ForkResult::Child => exit(1),
    };
    restored?;
    Pid::from_raw(child.as_raw()).ok_or_else(|| std::io::Error::other("fork returned pid 0"))
}

/// Leaves the process at once: `_exit`, no `atexit` handler or destructor of the harness's.
pub(super) fn exit(code: i32) -> ! {
    // SAFETY: `_exit` ends the calling process (a copy after a `fork`) without running
    // anything of the harness's; it is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// The signals the supervisor hears on its signalfd: its children's ends, and the ones that
/// mean "stop" (sent to it directly; its group is its own).
const HANDLED: [NixSignal; 5] = [
    NixSignal::SIGCHLD,
    NixSignal::SIGTERM,
    NixSignal::SIGINT,
    NixSignal::SIGHUP,
    NixSignal::SIGQUIT,
];

/// The supervisor: a session of its own, a child subreaper, the shell as its child, then
/// supervision (see the supervisor's docs). Never returns.
fn supervisor(plan: &Plan<'_>) -> ! {
    // The harness blocked every signal across the fork; once more, for the process.
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::all()), None);
    // A session of its own, and with it a group: no command below it has a controlling
    // terminal, and none of them can acquire one, since only a session's leader can.
    let _ = rustix::process::setsid();
    // Its name in `ps` and `/proc/PID/comm`: a fork of the harness would pass for another
    // copy of it.
    let _ = rustix::thread::set_name(c"dsh-supervisor");
    reset_handlers();
    // The kernel takes any non-zero argument as "on"; rustix passes the pid it is given.
    if let Err(error) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        report_failure(plan.report, error);
    }
    let mut handled = SigSet::empty();
    for signal in HANDLED {
        handled.add(signal);
    }
    // Every signal has been blocked since the fork, so none of the shell's SIGCHLDs can be
    // missed.
    let signals =
        match SignalFd::with_flags(&handled, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
            Ok(signals) => signals,
            Err(error) => report_failure(plan.report, Errno::from_raw_os_error(error as i32)),
        };
    let shell = match start_shell(plan) {
        Ok(shell) => shell,
        Err(error) => report_failure(plan.report, error),
    };
    close_all_but([raw(plan.control), raw(plan.report), raw(signals.as_fd())]);
    supervise(shell, plan.control, plan.report, &signals)
}

fn raw(fd: BorrowedFd<'_>) -> i32 {
    std::os::fd::AsRawFd::as_raw_fd(&fd)
}

/// Resets the harness's signal handlers in the supervisor, which the shell-to-be inherits in
/// turn, as `posix_spawn` does: every handled signal goes back to its default action, so a
/// signal that reaches the shell-to-be before its `execve` acts on it as on the shell, instead
/// of running a handler of the harness on its copy of the harness's memory (telling the
/// harness of a signal nobody sent it through a shared pipe, and swallowing the signal).
/// Ignored signals stay ignored, as a spawned program inherits them, but for two: `SIGPIPE`,
/// which the harness ignores and the shell must not, and `SIGCHLD`, whose `SIG_IGN` would have
/// the kernel reap the shell before the supervisor could read its status. The C library keeps
/// two signals for itself (32 and 33), refuses to change them, and its handlers act only on
/// signals the process sent itself.
fn reset_handlers() {
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        let always = signal == libc::SIGPIPE || signal == libc::SIGCHLD;
        // SAFETY: `sigaction` reads and writes the two structures on this stack; a new action
        // installed is `SIG_DFL` (a zeroed `sigaction`), which runs no code. It is
        // async-signal-safe; a signal the C library refuses is left as it is.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if always || handled {
                let default: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

/// Tells the harness why the shell could not start (`-errno` in place of its pid), and exits.
fn report_failure(report: BorrowedFd<'_>, error: Errno) -> ! {
    write_word(report, error.raw_os_error().saturating_neg().min(-1));
    exit(1)
}

/// Forks the shell-to-be, puts it in a group of its own, tells the harness its pid, and only
/// then lets it go on to its `execve`: a command that kills its supervisor at once cannot keep
/// the harness from hearing which group to kill. The shell-to-be waits on a pipe of its own
/// for that (a byte: go; its end: the supervisor is gone, so it exits).
fn start_shell(plan: &Plan<'_>) -> Result<Pid, Errno> {
    let (go_read, go_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // Above 0–2, where the shell-to-be installs its standard streams before it reads the pipe
    // (a harness started with a standard stream closed leaves such a number free).
    let go_read = above_stdio(go_read)?;
    // SAFETY: the supervisor is a single-threaded process; the child runs `shell_to_be`, which
    // keeps this module's rule and ends in `execve` or `_exit`.
    let forked = unsafe { nix::unistd::fork() };
    let shell = match forked {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(go_write);
            shell_to_be(plan, go_read)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => child,
        Err(error) => return Err(Errno::from_raw_os_error(error as i32)),
    };
    drop(go_read);
    let shell = Pid::from_raw(shell.as_raw()).ok_or(Errno::INVAL)?;
    // From this side too, so the shell's group exists before the harness hears its pid.
    let _ = rustix::process::setpgid(Some(shell), Some(shell));
    write_word(plan.report, shell.as_raw_nonzero().get());
    // A harness that already gave the command up (a spawn dropped before this report) has
    // closed the control pipe: the shell-to-be then never runs the command (the go pipe's end
    // makes it exit), and the sweep follows at once.
    if !control_closed(plan.control) {
        let _ = rustix::io::write(&go_write, b"g");
    }
    Ok(shell)
}

/// Whether the control pipe has an event now (a byte, its end, an error), without waiting: the
/// harness asked for a sweep.
fn control_closed(control: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(&control, PollFlags::IN)];
    let now = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0) && !fds[0].revents().is_empty()
}

/// `fd`, or a copy of it on 3 or above if it sits on 0–2.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, Errno> {
    if raw(fd.as_fd()) > 2 {
        return Ok(fd);
    }
    rustix::io::fcntl_dupfd_cloexec(&fd, 3)
}

/// The shell-to-be: its streams, its inherited descriptors, its confinement or directory,
/// then (once its supervisor said go) its group, an empty signal mask and `execve`. A failure
/// is reported to the harness by the shell-to-be itself (`-errno`, ahead of the status the
/// supervisor reports when it reaps it).
fn shell_to_be(plan: &Plan<'_>, go: OwnedFd) -> ! {
    let prepared = prepare_shell(plan);
    let mut byte = [0u8; 1];
    if !matches!(rustix::io::read(&go, &mut byte), Ok(1)) {
        // The supervisor is gone before it told the harness this pid: nothing may run.
        exit(127)
    }
    drop(go);
    let error = match prepared {
        Ok(()) => {
            // Its own group, while every signal is still blocked. The handlers are the
            // defaults (`reset_handlers`), so a signal already pending for the group acts on
            // the shell-to-be as it would on the shell.
            let _ = rustix::process::setpgid(None, None);
            let _ = nix::sys::signal::sigprocmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            );
            execve(plan)
        }
        Err(error) => error,
    };
    write_word(plan.report, error.raw_os_error().saturating_neg().min(-1));
    exit(127)
}

fn prepare_shell(plan: &Plan<'_>) -> Result<(), Errno> {
    // First out of the way of 0–2 (a descriptor may already sit on one of them), then in.
    let [stdin, stdout, stderr] = plan.stdio;
    let stdin = rustix::io::fcntl_dupfd_cloexec(stdin, 3)?;
    let stdout = rustix::io::fcntl_dupfd_cloexec(stdout, 3)?;
    let stderr = rustix::io::fcntl_dupfd_cloexec(stderr, 3)?;
    rustix::stdio::dup2_stdin(&stdin)?;
    rustix::stdio::dup2_stdout(&stdout)?;
    rustix::stdio::dup2_stderr(&stderr)?;
    drop((stdin, stdout, stderr));
    for fd in plan.inherit {
        // Its own copy of the descriptor table: the harness's stays close-on-exec.
        rustix::io::fcntl_setfd(fd, FdFlags::empty())?;
    }
    match plan.confinement {
        // The sandbox, last before the shell (see `confine`).
        Some(confinement) => confine(confinement, plan.workdir, plan.null_stdin),
        None => rustix::process::chdir(plan.workdir),
    }
}

/// `execve` of the plan's program; returns only if it failed, with its error.
fn execve(plan: &Plan<'_>) -> Errno {
    let terminated = plan.argv.last().is_some_and(|p| p.is_null())
        && plan.envp.last().is_some_and(|p| p.is_null());
    if !terminated {
        return Errno::INVAL;
    }
    // SAFETY: both arrays are null-terminated (checked above) and point into NUL-terminated
    // strings the harness prepared before the fork and that this copy of its memory holds;
    // `execve` is async-signal-safe and returns only on failure.
    unsafe {
        libc::execve(
            plan.program.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr(),
        )
    };
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::NOEXEC)
}

/// The supervisor's life (see the supervisor's docs). Never returns.
fn supervise(shell: Pid, control: BorrowedFd<'_>, report: BorrowedFd<'_>, signals: &SignalFd) -> ! {
    loop {
        let mut fds = [
            PollFd::new(&control, PollFlags::IN),
            PollFd::new(signals, PollFlags::IN),
        ];
        if poll(&mut fds, None).is_err() {
            continue;
        }
        let control_event = !fds[0].revents().is_empty();
        let signal_event = fds[1].revents().contains(PollFlags::IN);
        if signal_event {
            let mut stop = false;
            while let Ok(Some(info)) = signals.read_signal() {
                if info.ssi_signo != libc::SIGCHLD as u32 {
                    stop = true;
                }
            }
            if reap_exited(shell, report) == Reaped::None {
                // The shell was reaped and nothing is left below: nothing can ever be
                // re-parented here again, so there is nothing to sweep.
                exit(0);
            }
            if stop {
                sweep(shell, report);
                exit(0);
            }
        }
        // Any event on the control pipe (a byte, its end, an error) means sweep.
        if control_event {
            sweep(shell, report);
            exit(0);
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

fn wait_options(options: WaitOptions) -> WaitOptions {
    options | WaitOptions::from_bits_retain(WALL)
}

/// Reaps every child that has exited, reporting the shell's status when it is among them.
fn reap_exited(shell: Pid, report: BorrowedFd<'_>) -> Reaped {
    loop {
        match rustix::process::wait(wait_options(WaitOptions::NOHANG)) {
            Ok(None) => return Reaped::Running,
            Ok(Some((pid, status))) => {
                if pid == shell {
                    report_end(report, status.as_raw());
                }
            }
            Err(Errno::INTR) => {}
            Err(_) => return Reaped::None,
        }
    }
}

/// Kills every process below the supervisor and reaps them all: children first, then each
/// orphan as it is re-parented here, until no child is left.
fn sweep(shell: Pid, report: BorrowedFd<'_>) {
    loop {
        if reap_exited(shell, report) != Reaped::Running {
            return;
        }
        kill_children();
        match rustix::process::wait(wait_options(WaitOptions::empty())) {
            Ok(Some((pid, status))) => {
                if pid == shell {
                    write_pair(report, status.as_raw(), 0);
                }
            }
            Ok(None) | Err(Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

/// Sends SIGKILL to each child of this (single-threaded) process, as listed by
/// `/proc/thread-self/children`, or by a scan of `/proc` where that file is missing.
fn kill_children() {
    let Ok(fd) = rustix::fs::openat(
        CWD,
        c"/proc/thread-self/children",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        kill_children_by_scan();
        return;
    };
    let mut buffer = [0u8; 4096];
    let mut pid: i32 = 0;
    let mut digits = false;
    while let Some(bytes) = rustix::io::read(&fd, &mut buffer)
        .ok()
        .and_then(|n| buffer.get(..n))
        .filter(|bytes| !bytes.is_empty())
    {
        for &byte in bytes {
            if byte.is_ascii_digit() {
                pid = pid
                    .saturating_mul(10)
                    .saturating_add(i32::from(byte - b'0'));
                digits = true;
            } else {
                if digits {
                    kill(pid);
                }
                pid = 0;
                digits = false;
            }
        }
    }
    if digits {
        kill(pid);
    }
}

fn kill(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// The fallback of [`kill_children`]: every `/proc/PID/stat` whose parent is this process.
fn kill_children_by_scan() {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let Ok(dir) = rustix::fs::openat(
        CWD,
        c"/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let mut buffer = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let mut entries = rustix::fs::RawDir::new(&dir, &mut buffer);
    while let Some(Ok(entry)) = entries.next() {
        let mut pid: i32 = 0;
        let mut numeric = false;
        for &byte in entry.file_name().to_bytes() {
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
            kill(pid);
        }
    }
}

/// Writes `/proc/PID/FILE` into `path` (NUL-terminated); `None` if it does not fit.
pub(super) fn proc_path<'a>(path: &'a mut [u8; 64], pid: i32, file: &[u8]) -> Option<&'a CStr> {
    let mut digits = [0u8; 12];
    let mut count = 0;
    let mut rest = pid.unsigned_abs();
    loop {
        *digits.get_mut(count)? = b'0' + (rest % 10) as u8;
        count += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let prefix = b"/proc/";
    let length = prefix.len() + count + 1 + file.len() + 1;
    let out = path.get_mut(..length)?;
    let (head, tail) = out.split_at_mut(prefix.len());
    head.copy_from_slice(prefix);
    let (number, tail) = tail.split_at_mut(count);
    for (slot, digit) in number.iter_mut().zip(digits.get(..count)?.iter().rev()) {
        *slot = *digit;
    }
    let (slash, tail) = tail.split_at_mut(1);
    slash.copy_from_slice(b"/");
    let (name, nul) = tail.split_at_mut(file.len());
    name.copy_from_slice(file);
    nul.copy_from_slice(&[0]);
    CStr::from_bytes_with_nul(path.get(..length)?).ok()
}

/// The parent pid of `pid`, from `/proc/PID/stat` (`state ppid …` after the name).
pub(super) fn parent_of(pid: i32) -> Option<i32> {
    let mut path = [0u8; 64];
    let path = proc_path(&mut path, pid, b"stat")?;
    let fd = rustix::fs::openat(CWD, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut buffer = [0u8; 512];
    let read = rustix::io::read(&fd, &mut buffer).ok()?;
    let text = buffer.get(..read)?;
    let close = text.iter().rposition(|&b| b == b')')?;
    let fields = text.get(close + 2..)?;
    let mut parts = fields.split(|&b| b == b' ');
    parts.next()?;
    let mut parent: i32 = 0;
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
fn report_end(report: BorrowedFd<'_>, status: i32) {
    let empty = matches!(
        rustix::process::waitid(
            rustix::process::WaitId::All,
            WaitIdOptions::EXITED
                | WaitIdOptions::NOHANG
                | WaitIdOptions::NOWAIT
                | WaitIdOptions::from_bits_retain(WALL),
        ),
        Err(Errno::CHILD)
    );
    write_pair(report, status, if empty { TREE_EMPTY } else { 0 });
}

/// Writes two native-endian words in one write (eight bytes to a pipe are written whole).
fn write_pair(fd: BorrowedFd<'_>, first: i32, second: i32) {
    let mut bytes = [0u8; 8];
    let (low, high) = bytes.split_at_mut(4);
    low.copy_from_slice(&first.to_ne_bytes());
    high.copy_from_slice(&second.to_ne_bytes());
    let _ = rustix::io::write(fd, &bytes);
}

/// Writes one native-endian word; a harness that is gone is not an error here (SIGPIPE is
/// blocked: the write fails with EPIPE).
fn write_word(fd: BorrowedFd<'_>, word: i32) {
    let _ = rustix::io::write(fd, &word.to_ne_bytes());
}

/// Closes every descriptor but `keep`, so the supervisor holds no pipe of the command's (its
/// output must end when the command's processes are gone) nor of other commands: a fork holds
/// a copy of every descriptor of the harness, close-on-exec or not.
fn close_all_but(mut keep: [i32; 3]) {
    keep.sort_unstable();
    // SAFETY: closes descriptors of this process's own table (a copy of the harness's, made by
    // the fork). The objects of the harness's that own them are never used or dropped in this
    // process, which ends in `_exit`; the descriptors it goes on using are the three kept.
    unsafe {
        let mut low: libc::c_uint = 0;
        let mut fallback = false;
        for fd in keep {
            let fd = fd as libc::c_uint;
            if fd > low && libc::syscall(libc::SYS_close_range, low, fd - 1, 0) != 0 {
                fallback = true;
            }
            low = fd + 1;
        }
        if libc::syscall(libc::SYS_close_range, low, libc::c_uint::MAX, 0) != 0 {
            fallback = true;
        }
        if fallback {
            // Kernels before 5.9 have no close_range: close one by one up to the limit.
            let top = rustix::process::getrlimit(rustix::process::Resource::Nofile)
                .current
                .map_or(1024, |limit| limit.min(1 << 16)) as i32;
            for fd in 0..top {
                if !keep.contains(&fd) {
                    libc::close(fd);
                }
            }
        }
    }
}
