//! The command supervisor: containment of every process a command starts, however it regroups.
//!
//! Size: this file is longer than 800 lines because it is all of the crate's `unsafe` code,
//! the harness side that prepares a supervisor's mapping and the supervisor side that runs on
//! it, with the soundness argument written once above both. Each half depends on the other's
//! memory layout (the mapping, the plan, the report words), so splitting them would scatter
//! one safety argument across files and widen `allow(unsafe_code)` to more modules; it stays
//! one unit to be reviewed as one.
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
//! to its group or session, its processes stay the supervisor's descendants. It starts the shell
//! with `clone(CLONE_VM)` onto a stack of its own and does not wait for its `execve`; a
//! shell-to-be whose `execve` fails reports its errno itself. It reports to the harness on a
//! pipe: the shell's pid, then the shell's wait status together with whether anything was left
//! below it. With nothing left it exits at once (nothing can be re-parented to it any
//! more). Otherwise it waits for one thing: its control pipe closing. Then it *sweeps*: it kills
//! its children, reaps them, kills the orphans that re-parent to it as their parents die, and
//! exits once it has no child left. The control pipe closes when the harness asks (the call
//! ended, the job was killed, the owner was disposed), when the harness drops the command
//! (teardown, a dropped future) and when the harness dies, however it dies: the kernel closes
//! the pipe of a killed process too.
//!
//! # How the supervisor is started: no copy of the harness
//!
//! A `fork` of the harness per command costs the harness's page tables (copied at the fork,
//! freed at the supervisor's exit) and copy-on-write faults on every page the harness writes
//! while the supervisor lives. The supervisor is therefore started with `clone(CLONE_VM)`: a
//! process of its own (its own pid, file table, signal handlers, subreaper flag), sharing the
//! harness's memory instead of copying it. It runs in one anonymous mapping the harness made
//! for it alone, which is reused for another command or unmapped only after the supervisor was
//! reaped and its shell-to-be has left it (called `execve` or exited, which the kernel marks in
//! the mapping: `CLONE_CHILD_CLEARTID`):
//!
//! ```text
//! [guard][stack ↓][guard][shell-to-be's stack ↓][thread area: private TLS][plan: argv, envp, …]
//! ```
//!
//! Sharing memory with a running, multi-threaded harness sets the rules for the code it runs:
//!
//! - It writes only its own mapping, and reads only that and a sandboxed executor's
//!   [`Restrictions`]. The launch (`argv`, `envp`, working directory, descriptor numbers) is
//!   copied into the mapping before the clone, so the harness may drop everything of its own at
//!   any time, a cancelled `spawn` included; the restrictions are immutable and held by the
//!   mapping (an `Arc`) until the shell-to-be has left it, and leaked with a mapping that is
//!   never released.
//! - It calls no C library function and touches no thread-local storage: system calls are made
//!   directly (the `raw` module below), so no `errno` is written. Its thread pointer is set
//!   (`CLONE_SETTLS`) to a zeroed area of its own mapping, so even an accidental access to
//!   thread-local storage cannot reach a harness thread's. The C library calls left are `clone`
//!   for the shell, whose only thread-local access (`errno` on failure) lands there, and
//!   `__errno_location` to read that `errno` back.
//! - It never allocates, locks, or panics (a panic would allocate in the harness's heap).
//! - It starts with every signal blocked (the harness blocks them around the clone), so no
//!   handler of the harness ever runs in it; it hears signals through a `signalfd`. Before it
//!   starts the shell it resets every handled signal of its own copy of the handler table to the
//!   default action, and `SIGPIPE` and `SIGCHLD` even if ignored, as `posix_spawn` does: the
//!   shell-to-be, which unblocks signals just before its `execve`, never runs a handler of the
//!   harness either.
//!
//! What sharing costs in guarantees: the kernel treats processes that share memory as one when
//! it kills for memory (the OOM killer kills every process sharing the memory) and, before Linux
//! 5.16, when one of them dumps core. A harness killed either way takes its supervisors with it;
//! the orphan guard (a separate process) still kills every registered group, but a process that
//! had left its group survives that. A harness killed any other way (`SIGKILL` included) leaves
//! its supervisors running, and they sweep.
//!
//! A sandboxed shell-to-be confines itself before its `execve` ([`confine`]): a mount namespace
//! of its own, its directory, the capabilities dropped, `no_new_privs`, a seccomp filter and a
//! Landlock ruleset, every step a raw system call on data the harness prepared.
//!
//! A command cannot hang its call by stopping its supervisor (`kill -STOP $PPID`, which a
//! sandbox's signal scope forbids and an unconfined command may do): the harness kills a supervisor whose
//! sweep does not finish in time, and one that has not reported its shell's end within
//! [`REPORT_AFTER_EXIT`] of the shell's exit, which the harness sees on a pidfd of the shell.
//!
//! What stays out of reach: an unconfined command that kills or stops its own supervisor before
//! it escapes its group. The harness notices, kills the shell's group and reports the command
//! as killed, but a process that had already left the group is then re-parented to `init` and
//! survives. The docs of the shell page say so.

// The supervisor is raw system calls on memory shared with the harness; each `unsafe` block says
// why it is sound. Nothing else in the crate uses `unsafe`.
#![allow(unsafe_code)]

use crate::launch::{Launch, MOUNT_BINDS_MAX, MountPlan, Restrictions, ShellEnd};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

/// The most descriptors a launch passes to the shell at their own numbers.
const INHERIT_MAX: usize = 2;

/// The second word of a shell's end: nothing was left below the supervisor, which exits.
const TREE_EMPTY: i32 = 1;

/// The supervisor's stack: its frames and the buffers of a sweep; pages never touched cost
/// nothing.
const STACK_BYTES: usize = 128 * 1024;
/// The shell-to-be's stack, next to the supervisor's: `execve` needs little.
const EXEC_STACK_BYTES: usize = 16 * 1024;
/// The private thread area: room below and above the thread pointer, so thread-local storage
/// of either layout (below it on x86-64, above it on AArch64) stays inside the mapping.
const TLS_BELOW: usize = 64 * 1024;
const TLS_ABOVE: usize = 16 * 1024;

/// What the supervisor reads, at the start of the plan area of its mapping. Every pointer
/// points into the same mapping.
#[repr(C)]
struct Plan {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    workdir: *const libc::c_char,
    /// The top of the shell-to-be's stack.
    exec_stack: *mut libc::c_void,
    /// The shell's standard streams, in the supervisor's copy of the harness's file table.
    stdio: [RawFd; 3],
    control: RawFd,
    report: RawFd,
    /// What the shell-to-be does to itself before its `execve`, or null: the executor's, kept
    /// alive by the mapping until the shell-to-be has left it.
    confinement: *const Restrictions,
    /// The descriptors the shell inherits at their own numbers, -1 for none.
    inherit: [RawFd; INHERIT_MAX],
    /// Whether the shell's stdin is `/dev/null` (no stdin bytes), to be reopened inside its
    /// mount namespace.
    null_stdin: bool,
    /// Where the kernel writes the shell's pid when it clones it (`CLONE_PARENT_SETTID`),
    /// before the shell runs: the harness finds it there if the command kills the supervisor
    /// before the supervisor could report it. Atomic, since the kernel writes it behind shared
    /// references.
    shell: AtomicI32,
    /// 1 until the shell-to-be has left this mapping: the kernel zeroes it when the shell-to-be
    /// calls `execve` or exits (`CLONE_CHILD_CLEARTID`). Until then it may still run on the
    /// mapping, whatever became of its supervisor.
    shell_on_mapping: AtomicI32,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the command or its environment contains a NUL byte",
        )
    })
}

/// The strings of a launch, checked for NUL bytes, before they are copied into the mapping.
struct Strings {
    program: CString,
    workdir: CString,
    args: Vec<CString>,
    env: Vec<CString>,
}

impl Strings {
    fn new(launch: &Launch) -> io::Result<Strings> {
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
        Ok(Strings {
            program,
            workdir: c_string(launch.workdir.as_os_str().as_bytes())?,
            args,
            env,
        })
    }

    /// The bytes of the plan area: the header, both pointer arrays, then every string.
    fn plan_bytes(&self) -> usize {
        let pointers = (self.args.len() + 1 + self.env.len() + 1) * size_of::<usize>();
        let strings: usize = [&self.program, &self.workdir]
            .into_iter()
            .chain(&self.args)
            .chain(&self.env)
            .map(|s| s.as_bytes_with_nul().len())
            .sum();
        size_of::<Plan>() + pointers + strings
    }
}

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(page)
            .ok()
            .filter(|p| *p > 0)
            .unwrap_or(4096)
    })
}

fn round_up(bytes: usize, to: usize) -> usize {
    bytes.div_ceil(to) * to
}

/// Where the parts of a supervisor's mapping start, from its base (see the module docs): a
/// guard page, the supervisor's stack, a second guard page, the shell-to-be's stack, the
/// thread area and the plan.
struct Layout {
    stack_top: usize,
    exec_guard: usize,
    exec_stack_top: usize,
    thread_pointer: usize,
    plan: usize,
}

impl Layout {
    fn new() -> Layout {
        let page = page_size();
        let stack_top = page + STACK_BYTES;
        let exec_stack_top = stack_top + page + EXEC_STACK_BYTES;
        let thread_pointer = exec_stack_top + TLS_BELOW;
        Layout {
            stack_top,
            exec_guard: stack_top,
            exec_stack_top,
            thread_pointer,
            plan: round_up(thread_pointer + TLS_ABOVE, 64),
        }
    }
}

/// A supervisor's mapping (see the module docs). Once its supervisor was reaped it goes back
/// to a small pool ([`Mapping::release`]), so the next command's supervisor starts on pages
/// already mapped and touched: no `mmap`, `munmap` (whose TLB shootdowns reach every CPU the
/// harness runs on) or page fault per command. A `Mapping` dropped without `release` is never
/// unmapped: its supervisor may still run on it.
#[derive(Debug)]
struct Mapping {
    base: *mut u8,
    len: usize,
    /// The confinement its plan points to, held for as long as a shell-to-be may read it.
    confinement: Option<Arc<Restrictions>>,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Dropped without `release` (see there), a shell-to-be may still read the confinement:
        // it is leaked with the mapping rather than freed under it.
        if let Some(confinement) = self.confinement.take() {
            std::mem::forget(confinement);
        }
    }
}

// SAFETY: the mapping is plain memory; the harness only writes it while no supervisor runs on
// it, and only unmaps or reuses it after its supervisor was reaped.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared references never touch the memory.
unsafe impl Sync for Mapping {}

/// Mappings whose supervisors were reaped, ready for the next command.
static POOL: Mutex<Vec<Mapping>> = Mutex::new(Vec::new());
/// Mappings of killed supervisors whose shell-to-be may still run on them (see
/// [`Mapping::release`]).
static LINGERING: Mutex<Vec<Mapping>> = Mutex::new(Vec::new());
/// The most mappings the pool keeps (about 200 KiB of address space each, mostly untouched).
const POOL_SIZE: usize = 8;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Mapping {
    /// A mapping with room for a plan of `plan_bytes`: one from the pool, or a new one.
    fn obtain(plan_bytes: usize) -> io::Result<Mapping> {
        let len = round_up(Layout::new().plan + plan_bytes, page_size());
        {
            let mut pool = lock(&POOL);
            if let Some(at) = pool.iter().position(|m| m.len >= len) {
                return Ok(pool.swap_remove(at));
            }
        }
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mapping = Mapping {
            base: base.cast(),
            len,
            confinement: None,
        };
        // SAFETY: both guard pages are inside the mapping just made. A stack overflow then
        // faults instead of writing over the other stack or the thread area.
        let guarded = unsafe {
            libc::mprotect(base, page_size(), libc::PROT_NONE) == 0
                && libc::mprotect(
                    base.cast::<u8>().add(Layout::new().exec_guard).cast(),
                    page_size(),
                    libc::PROT_NONE,
                ) == 0
        };
        if !guarded {
            let error = io::Error::last_os_error();
            mapping.unmap();
            return Err(error);
        }
        Ok(mapping)
    }

    /// Writes the thread area's self-pointers and the plan of `strings`. Returns the
    /// supervisor's stack top, thread pointer and plan.
    fn prepare(
        &mut self,
        strings: &Strings,
        fds: PlanFds,
        confinement: Option<Arc<Restrictions>>,
    ) -> (usize, usize, usize) {
        let confined = confinement
            .as_deref()
            .map_or(std::ptr::null(), std::ptr::from_ref);
        self.confinement = confinement;
        let layout = Layout::new();
        let base = self.base as usize;
        // SAFETY: no supervisor runs on this mapping (it is new, or its supervisor was reaped),
        // and every write stays inside it: `obtain` made room for `plan_bytes`, which counted
        // the header, the pointer arrays and the strings; the thread area's words are inside.
        unsafe {
            // x86-64's thread control block starts with pointers to itself (`%fs:0`,
            // `%fs:16`); AArch64's holds no self-pointer.
            #[cfg(target_arch = "x86_64")]
            {
                let tcb = (base + layout.thread_pointer) as *mut usize;
                tcb.write(base + layout.thread_pointer);
                tcb.add(2).write(base + layout.thread_pointer);
            }
            let plan = (base + layout.plan) as *mut Plan;
            let argv = (base + layout.plan + size_of::<Plan>()) as *mut *const libc::c_char;
            let envp = argv.add(strings.args.len() + 1);
            let mut text = envp.add(strings.env.len() + 1).cast::<u8>();
            let mut put = |s: &CString| {
                let bytes = s.as_bytes_with_nul();
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), text, bytes.len());
                let at = text.cast::<libc::c_char>().cast_const();
                text = text.add(bytes.len());
                at
            };
            let program = put(&strings.program);
            let workdir = put(&strings.workdir);
            for (i, arg) in strings.args.iter().enumerate() {
                argv.add(i).write(put(arg));
            }
            argv.add(strings.args.len()).write(std::ptr::null());
            for (i, entry) in strings.env.iter().enumerate() {
                envp.add(i).write(put(entry));
            }
            envp.add(strings.env.len()).write(std::ptr::null());
            plan.write(Plan {
                program,
                argv,
                envp,
                workdir,
                exec_stack: (base + layout.exec_stack_top) as *mut libc::c_void,
                stdio: fds.stdio,
                control: fds.control,
                report: fds.report,
                confinement: confined,
                inherit: fds.inherit,
                null_stdin: fds.null_stdin,
                shell: AtomicI32::new(0),
                shell_on_mapping: AtomicI32::new(1),
            });
        }
        (
            base + layout.stack_top,
            base + layout.thread_pointer,
            base + layout.plan,
        )
    }

    /// Gives back the mapping of a reaped supervisor (or of one that never started): to the
    /// pool, or unmapped when the pool is full. A supervisor that exited by itself outlived its
    /// shell-to-be (it exits only with no child left), but one that was killed may leave a
    /// shell-to-be still running on the mapping before its `execve`: reusing the mapping then
    /// would have it read another command's plan, and unmapping it might let a later mapping
    /// of the harness take its place. Such a mapping is set aside until the kernel says the
    /// shell-to-be has left it ([`Mapping::shell_gone`]); [`reap_exiting`] looks again at each
    /// spawn. A shell-to-be that never leaves (stopped before its `execve`, its group's
    /// `SIGKILL` refused) keeps its mapping, about 200 KiB of address space, for the harness's
    /// life: a rare leak in place of a use after free.
    fn release(mut self) {
        if !self.shell_gone() {
            lock(&LINGERING).push(self);
            return;
        }
        self.confinement = None;
        let mut pool = lock(&POOL);
        if pool.len() < POOL_SIZE {
            pool.push(self);
        } else {
            drop(pool);
            self.unmap();
        }
    }

    /// Whether no shell-to-be runs on this mapping: none was cloned, or it has called `execve`
    /// or exited. Asked only once the supervisor was reaped, so no shell can be cloned later.
    fn shell_gone(&self) -> bool {
        let plan = (self.base as usize + Layout::new().plan) as *const Plan;
        // SAFETY: the plan is inside the mapping, written by `prepare` and by the kernel (the
        // shell's pid at the clone, the zero when the shell-to-be leaves); only atomics are read.
        unsafe {
            (*plan).shell.load(Ordering::SeqCst) == 0
                || (*plan).shell_on_mapping.load(Ordering::SeqCst) == 0
        }
    }

    /// The shell's pid as the kernel wrote it into the plan at the clone; 0 if the shell was
    /// never cloned. Read only once the supervisor is gone.
    fn cloned_shell(&self) -> libc::pid_t {
        let plan = (self.base as usize + Layout::new().plan) as *const Plan;
        // SAFETY: the plan is inside the mapping, written by `prepare` and (its `shell`) by the
        // kernel at the clone; the supervisor that could clone a shell has exited.
        unsafe { (*plan).shell.load(Ordering::SeqCst) }
    }

    fn unmap(self) {
        // SAFETY: the mapping is this one's own, and no process runs on it: its supervisor was
        // reaped and its shell-to-be has left it (see `release`).
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// The descriptor numbers the supervisor is told.
#[derive(Clone, Copy)]
struct PlanFds {
    stdio: [RawFd; 3],
    control: RawFd,
    report: RawFd,
    /// The descriptors the shell inherits, -1 for none.
    inherit: [RawFd; INHERIT_MAX],
    /// Whether stdin is `/dev/null`.
    null_stdin: bool,
}

/// What reaping a supervisor takes: a pidfd to wait on, and its mapping, released once it was
/// reaped.
#[derive(Debug)]
struct Unreaped {
    pidfd: OwnedFd,
    mapping: Option<Mapping>,
}

/// Supervisors that were exiting when their command was dropped: reaped at the next spawn.
static EXITING: Mutex<Vec<Unreaped>> = Mutex::new(Vec::new());

impl Unreaped {
    /// Reaps the supervisor if it has exited, then releases its mapping. Returns whether it is
    /// gone.
    fn try_reap(&mut self) -> bool {
        if self.mapping.is_none() {
            return true;
        }
        // SAFETY: `info` is a zeroed siginfo the kernel fills; the pidfd is this supervisor's.
        let reaped = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let result = libc::waitid(
                libc::P_PIDFD,
                self.pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::__WALL,
            );
            if result == 0 {
                info.si_pid() != 0
            } else {
                // ECHILD: someone else's `waitpid(-1)` reaped it; it is gone either way.
                io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
            }
        };
        if !reaped {
            return false;
        }
        if let Some(mapping) = self.mapping.take() {
            mapping.release();
        }
        true
    }

    /// Waits until the supervisor has exited (its pidfd becomes readable), then reaps it.
    async fn reap(&mut self) {
        if self.try_reap() {
            return;
        }
        // SAFETY: the pidfd is this process's own and stays open (it is only closed when `self`
        // drops) for the whole life of the registration, which ends in this function.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                self.pidfd.as_raw_fd(),
                tokio::io::Interest::READABLE,
            )
        };
        match registered {
            Ok(exit) => {
                let _ = exit.readable().await;
            }
            Err(error) => drop(error),
        }
        if !self.try_reap() {
            tracing::warn!("a command's supervisor could not be reaped");
        }
    }
}

/// Reaps the supervisors that were exiting when their commands were dropped, and releases the
/// set-aside mappings whose shell-to-be has left them.
fn reap_exiting() {
    let mut exiting = lock(&EXITING);
    if !exiting.is_empty() {
        exiting.retain_mut(|supervisor| !supervisor.try_reap());
    }
    drop(exiting);
    let gone: Vec<Mapping> = {
        let mut lingering = lock(&LINGERING);
        if lingering.is_empty() {
            return;
        }
        let (gone, still) = std::mem::take(&mut *lingering)
            .into_iter()
            .partition(Mapping::shell_gone);
        *lingering = still;
        gone
    };
    for mapping in gone {
        mapping.release();
    }
}

/// The supervisor process as the harness holds it.
#[derive(Debug)]
struct SupervisorProcess {
    unreaped: Option<Unreaped>,
    /// The supervisor said it is exiting (nothing was left below it).
    exiting: bool,
}

impl SupervisorProcess {
    /// Kills the supervisor (by its pidfd, so never another process that reused its pid) and
    /// the group of the shell it cloned, if any.
    fn kill(&self) {
        let Some(unreaped) = self.unreaped.as_ref() else {
            return;
        };
        // SAFETY: `pidfd_send_signal` on this supervisor's own pidfd, and `kill` of a process
        // group; neither touches memory.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                unreaped.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
            let shell = unreaped.mapping.as_ref().map_or(0, Mapping::cloned_shell);
            if shell > 0 {
                libc::kill(-shell, libc::SIGKILL);
            }
        }
    }

    async fn reap(&mut self) {
        if let Some(unreaped) = self.unreaped.as_mut() {
            unreaped.reap().await;
        }
    }
}

impl Drop for SupervisorProcess {
    fn drop(&mut self) {
        let Some(mut unreaped) = self.unreaped.take() else {
            return;
        };
        if unreaped.try_reap() {
            return;
        }
        // A supervisor that said it is exiting is reaped at the next spawn, without a task.
        // One still sweeping (a dropped command) is reaped in the background. Where neither is
        // possible (no runtime, or the runtime is shutting down and drops the background task),
        // its mapping stays mapped: a `Mapping` dropped without `release` is never unmapped,
        // since the supervisor may still run on it.
        if self.exiting {
            lock(&EXITING).push(unreaped);
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { unreaped.reap().await });
            }
            Err(_) => lock(&EXITING).push(unreaped),
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
    shell_exit: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
}

/// How long a supervisor may take to report its shell's end after the shell has exited, before
/// the harness takes it for stopped or stuck and kills it.
const REPORT_AFTER_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A pidfd of `pid` (not a child of this process: it may only be polled), or `None`.
fn pidfd_of(pid: libc::pid_t) -> Option<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: `pidfd_open` reads no memory; on success the descriptor is new and owned by
    // nobody else, so wrapping it in `OwnedFd` is sound.
    let fd = unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        OwnedFd::from_raw_fd(RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?)
    };
    // SAFETY: the `AsyncFd` owns the descriptor, so it stays open for as long as it is
    // registered and is deregistered before it is closed.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE).ok()
    }
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

/// How long the harness blocks its thread for the supervisor's first report before it waits
/// through the runtime instead: the report comes within a millisecond or so, and blocking (as
/// `posix_spawn` blocks its caller) saves a wake-up of another thread.
const FIRST_REPORT_BLOCKING_MS: libc::c_int = 50;
/// How long the harness waits for the first report at all. A supervisor that never reports
/// (stopped by a signal, say) fails the spawn instead of hanging the call.
const FIRST_REPORT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a look at the supervisor's first report found.
enum FirstReport {
    /// The shell's pid, or `-errno`.
    Word(i32),
    /// The supervisor is gone (or its report pipe ended) without a whole word.
    Gone,
    /// Nothing yet.
    Pending,
}

/// The first report read so far from the still blocking report pipe: the word's bytes, and how
/// many arrived.
struct FirstWord {
    bytes: [u8; 4],
    filled: usize,
}

impl FirstWord {
    /// Waits at most `timeout_ms` (`poll`'s units) for the report pipe or the supervisor's
    /// pidfd to be ready, and reads what the pipe holds. The pipe comes first: a supervisor
    /// that reported and then exited has its report read.
    fn poll(&mut self, report: &OwnedFd, pidfd: &OwnedFd, timeout_ms: libc::c_int) -> FirstReport {
        let mut fds = [
            libc::pollfd {
                fd: report.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `poll` on two descriptors of a stack array this function owns.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) } <= 0 {
            return FirstReport::Pending;
        }
        if fds[0].revents != 0 {
            let rest = &mut self.bytes[self.filled..];
            // SAFETY: a read into the unfilled part of a buffer this function borrows; the pipe
            // is ready, so the read does not block.
            let read =
                unsafe { libc::read(report.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len()) };
            return match read {
                0 => FirstReport::Gone,
                n if n > 0 => {
                    self.filled += n.unsigned_abs();
                    if self.filled == self.bytes.len() {
                        FirstReport::Word(i32::from_ne_bytes(self.bytes))
                    } else {
                        FirstReport::Pending
                    }
                }
                // EINTR: look again.
                _ => FirstReport::Pending,
            };
        }
        if fds[1].revents != 0 {
            FirstReport::Gone
        } else {
            FirstReport::Pending
        }
    }
}

/// Reads the supervisor's first report: `Some` word (the shell's pid, or `-errno`), or `None`
/// if the supervisor left without one. It blocks this thread briefly
/// ([`FIRST_REPORT_BLOCKING_MS`]), then waits through the runtime for the report pipe or the
/// supervisor's pidfd, at most `limit` in all ([`FIRST_REPORT_LIMIT`]).
async fn first_word(
    report: &OwnedFd,
    pidfd: &OwnedFd,
    limit: std::time::Duration,
) -> io::Result<Option<i32>> {
    let mut word = FirstWord {
        bytes: [0; 4],
        filled: 0,
    };
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(FIRST_REPORT_BLOCKING_MS as u64) {
        match word.poll(report, pidfd, FIRST_REPORT_BLOCKING_MS) {
            FirstReport::Word(word) => return Ok(Some(word)),
            FirstReport::Gone => return Ok(None),
            FirstReport::Pending => {}
        }
    }
    // SAFETY: both descriptors are borrowed for this whole function, so they stay open for the
    // life of these registrations, which end in it (before the report pipe is registered again
    // as the command's `pipe::Receiver`, and the pidfd for the supervisor's reaping).
    let (report_ready, supervisor_gone) = unsafe {
        (
            tokio::io::unix::AsyncFd::register_with_interest(
                report.as_raw_fd(),
                tokio::io::Interest::READABLE,
            )?,
            tokio::io::unix::AsyncFd::register_with_interest(
                pidfd.as_raw_fd(),
                tokio::io::Interest::READABLE,
            )?,
        )
    };
    let wait = async {
        loop {
            match word.poll(report, pidfd, 0) {
                FirstReport::Word(word) => return Ok(Some(word)),
                FirstReport::Gone => return Ok(None),
                FirstReport::Pending => {}
            }
            tokio::select! {
                ready = report_ready.readable() => ready?.clear_ready(),
                ready = supervisor_gone.readable() => ready?.clear_ready(),
            }
        }
    };
    match tokio::time::timeout(limit.saturating_sub(started.elapsed()), wait).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the command's supervisor did not report within {limit:?}"),
        )),
    }
}

/// `fd`, moved to a descriptor above 0–2 if it sits on one (a harness started with its standard
/// streams closed): the shell-to-be installs its streams there and still writes a failed start
/// on the report pipe, and enforces the sandbox's Landlock ruleset after it installed them, and
/// the supervisor must keep its control pipe apart from them.
pub(crate) fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: `fcntl` on a descriptor this function owns; on success the copy is a new
    // descriptor owned by nobody else, so wrapping it in `OwnedFd` is sound.
    unsafe {
        let copy = libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3);
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(copy))
    }
}

/// Makes every child `command` starts confine itself just before its `execve`, as the
/// shell-to-be does ([`confine`]), in `workdir`: a program that is not a shell command (a stdio
/// MCP server) confined like one. A failed step fails the spawn, so the program never runs with
/// less. The ruleset's descriptor sits above 0–2 ([`above_stdio`]), where the child's standard
/// streams cannot replace it, and is close-on-exec, so the program does not inherit it.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) fn confine_at_exec(
    command: &mut std::process::Command,
    confinement: Arc<Restrictions>,
    workdir: &std::path::Path,
) {
    use std::os::unix::process::CommandExt;
    // A directory with a NUL byte cannot be entered; the spawn fails with the hook's error.
    let workdir = CString::new(workdir.as_os_str().as_bytes()).ok();
    // SAFETY: the hook runs in the forked child between `fork` and `execve`, a single process
    // of its own: `open`, `ioctl`, `close` and `confine`'s raw system calls are all
    // async-signal-safe, on constant strings and the confinement and directory the hook owns
    // (so they live for as long as `command` can spawn); it allocates nothing and takes no
    // lock, and the error is built from a number.
    unsafe {
        command.pre_exec(move || {
            let Some(workdir) = &workdir else {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            };
            // No controlling terminal: the program cannot take the user's terminal's
            // foreground, read it or change it through `/dev/tty`. (It stays in its caller's
            // session and group, which the caller may have chosen; a process that does not
            // lead its session only loses the terminal.)
            let tty = libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if tty >= 0 {
                libc::ioctl(tty, libc::TIOCNOTTY);
                libc::close(tty);
            }
            let result = confine(&confinement, workdir.as_ptr(), false);
            if result < 0 {
                return Err(io::Error::from_raw_os_error(errno(result)));
            }
            Ok(())
        });
    }
}

/// Makes every child `command` starts keep `fd` across its `execve`, at its own number (a
/// wrapper's seccomp pipe). The hook owns the descriptor, so it stays open for as long as
/// `command` can spawn; the harness's copy stays close-on-exec, so no other program it starts
/// inherits it.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) fn keep_at_exec(command: &mut std::process::Command, fd: OwnedFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child between `fork` and `execve` and makes one
    // `fcntl`, which is async-signal-safe, on a descriptor it owns, in the child's own copy of
    // the descriptor table.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Whether a process can confine itself as `restrictions` say, in `workdir`: a child is forked
/// that takes every step and exits; no program is executed. The sandboxed executor asks this
/// once, so that a refusal of the system is its construction's error, not every command's.
#[cfg(feature = "sandbox")]
pub(crate) fn try_restrictions(
    restrictions: Arc<Restrictions>,
    workdir: &std::path::Path,
) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let workdir = c_string(workdir.as_os_str().as_bytes())?;
    // Never executed: the hook ends the child first.
    let mut command = std::process::Command::new("/");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: as in `confine_at_exec`; after the steps the child exits with a raw system call,
    // which runs nothing of the harness's.
    unsafe {
        command.pre_exec(move || {
            let result = confine(&restrictions, workdir.as_ptr(), true);
            if result < 0 {
                return Err(io::Error::from_raw_os_error(errno(result)));
            }
            exit(0)
        });
    }
    let status = command.spawn()?.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "the trial process ended with {status}"
        )))
    }
}

/// Whether a process can make the commands' read-only mount namespace here: of its own
/// (`user_namespace` `None`: the harness may mount), or in `user_namespace`.
#[cfg(feature = "sandbox")]
pub(crate) fn try_mount_namespace(user_namespace: Option<OwnedFd>) -> io::Result<()> {
    let restrictions = Restrictions {
        mounts: Some(MountPlan {
            user_namespace,
            binds: Vec::new(),
        }),
        ..Restrictions::default()
    };
    try_restrictions(Arc::new(restrictions), std::path::Path::new("/"))
}

/// A user namespace that maps this process's user and group to themselves alone, for the
/// commands' mount namespaces when the harness may not mount. A child makes it: a forked
/// copy of the harness that makes itself dumpable again (a non-dumpable process's
/// `/proc/self` files are root's, so it could not write its own maps; the copy's flag is its
/// own), unshares its user namespace, writes its maps, and executes `waiter` (a shell that
/// reads its stdin), which waits while the harness opens its `ns/user` and ends when its stdin
/// closes. Every command of the executor enters the same namespace.
#[cfg(feature = "sandbox")]
pub(crate) fn user_namespace(waiter: &std::path::Path) -> io::Result<OwnedFd> {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    let maps = crate::launch::IdMaps::own();
    let mut command = std::process::Command::new(waiter);
    command
        .args(["-c", "read -r _"])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook runs in the forked child between `fork` and `execve`, a single process
    // with its own copy of the memory: `prctl`, `unshare` and raw `open`/`write`/`close` on the
    // maps the hook owns and on constant strings, all async-signal-safe; nothing allocated,
    // no lock taken.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) != 0
                || libc::unshare(libc::CLONE_NEWUSER) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // A process without `CAP_SETGID` outside may map its group only once `setgroups`
            // is denied in the namespace.
            for (path, text) in [
                (c"/proc/self/setgroups", c"deny"),
                (c"/proc/self/uid_map", maps.uid_map.as_c_str()),
                (c"/proc/self/gid_map", maps.gid_map.as_c_str()),
            ] {
                let result = write_file(path, text);
                if result < 0 {
                    return Err(io::Error::from_raw_os_error(errno(result)));
                }
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let namespace = std::fs::File::open(format!("/proc/{}/ns/user", child.id()));
    // Its stdin closing ends the waiter, whatever the open gave.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"\n");
    }
    let _ = child.wait();
    Ok(namespace?.into())
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
    // SAFETY: `fcntl` on a descriptor this function owns.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The oldest kernel the supervisor runs on: the harness waits for a supervisor on its pidfd
/// (`CLONE_PIDFD`, Linux 5.2; `waitid(P_PIDFD)`, Linux 5.4).
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
        // SAFETY: `pidfd_open` of this process; on success the descriptor is new and owned by
        // nobody else, so wrapping it in `OwnedFd` is sound; `info` is a zeroed siginfo the
        // kernel may fill.
        unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0);
            let Ok(fd) = RawFd::try_from(fd) else {
                return false;
            };
            if fd < 0 {
                return false;
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let result = libc::waitid(
                libc::P_PIDFD,
                fd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::__WALL,
            );
            let supported =
                result == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL);
            if !supported {
                tracing::warn!("this kernel cannot wait on a pidfd: no command can start");
            }
            supported
        }
    })
}

/// The Landlock ABI version of the running kernel: 0 when Landlock is missing or disabled. The
/// sandbox's system probe (`crate::sandbox::SystemProbe`) asks this once per executor.
#[cfg(feature = "sandbox")]
pub(crate) fn landlock_abi() -> u32 {
    // SAFETY: `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)` reads and
    // writes no memory; it returns the ABI version or fails (ENOSYS, EOPNOTSUPP).
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    u32::try_from(version).unwrap_or(0)
}

/// `/dev/null`, opened once: the stdin of every command without stdin bytes.
fn dev_null() -> io::Result<RawFd> {
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let file = std::fs::File::open("/dev/null")?;
    Ok(NULL.get_or_init(|| file.into()).as_raw_fd())
}

impl Supervised {
    /// Starts `launch` under a supervisor: the supervisor and the shell each lead their own
    /// process group; the shell's stdout and stderr are pipes to the harness.
    pub(crate) async fn spawn(launch: Launch) -> io::Result<Supervised> {
        if !pidfd_waits() {
            return Err(unsupported_kernel());
        }
        reap_exiting();
        let strings = Strings::new(&launch)?;
        let (stdout_read, stdout_write) = pipe()?;
        let (stderr_read, stderr_write) = pipe()?;
        let (stdin_read, stdin_write) = if launch.stdin_piped {
            let (read, write) = pipe()?;
            (Some(read), Some(write))
        } else {
            (None, None)
        };
        let stdin_fd = match &stdin_read {
            Some(read) => read.as_raw_fd(),
            None => dev_null()?,
        };
        let (control_read, control_write) = pipe()?;
        let (report_read, report_write) = pipe()?;
        let (control_read, report_write) = (above_stdio(control_read)?, above_stdio(report_write)?);
        if launch.inherit.len() > INHERIT_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a launch passes more descriptors than the supervisor takes",
            ));
        }
        let mut inherited = Vec::with_capacity(launch.inherit.len());
        let mut inherit = [-1; INHERIT_MAX];
        for (slot, fd) in inherit.iter_mut().zip(launch.inherit) {
            // Above 0–2, where the shell's standard streams go.
            let fd = above_stdio(fd)?;
            *slot = fd.as_raw_fd();
            inherited.push(fd);
        }
        let fds = PlanFds {
            stdio: [stdin_fd, stdout_write.as_raw_fd(), stderr_write.as_raw_fd()],
            control: control_read.as_raw_fd(),
            report: report_write.as_raw_fd(),
            inherit,
            null_stdin: stdin_read.is_none(),
        };
        let mut mapping = Mapping::obtain(strings.plan_bytes())?;
        let (stack_top, thread_pointer, plan) = mapping.prepare(&strings, fds, launch.confinement);
        let mut pidfd: libc::c_int = -1;
        // SAFETY: the supervisor runs `supervisor_main` on the stack, thread area and plan of
        // its own mapping, which is neither reused nor unmapped until it was reaped, and
        // touches nothing else of the shared memory (see the module docs). Every signal is
        // blocked in this thread across the clone, so the supervisor starts with all of them
        // blocked and no handler of the harness can run in it; the mask is restored right
        // after. The descriptors the plan names are open here, so its copy of the file table
        // holds them.
        let mut supervisor = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
            let pid = libc::clone(
                supervisor_main,
                stack_top as *mut libc::c_void,
                // No exit signal: the harness waits on the pidfd, and a SIGCHLD per command
                // would wake the runtime's signal driver (and any other SIGCHLD listener of
                // the harness) for nothing. `__WALL` reaps such a child.
                libc::CLONE_VM | libc::CLONE_SETTLS | libc::CLONE_PIDFD,
                plan as *mut libc::c_void,
                &raw mut pidfd,
                thread_pointer as *mut libc::c_void,
                std::ptr::null_mut::<libc::pid_t>(),
            );
            let error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            if pid == -1 {
                mapping.release();
                return Err(error);
            }
            if pidfd < 0 {
                // A kernel that ignored `CLONE_PIDFD` (the probe said it would not): the
                // supervisor cannot be waited for on a pidfd, so it is killed and reaped here.
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
                mapping.release();
                return Err(unsupported_kernel());
            }
            // The supervisor makes a session of its own (`setsid`), which it cannot do once it
            // leads a group: the harness leaves its group alone, and kills it by its pidfd.
            SupervisorProcess {
                unreaped: Some(Unreaped {
                    pidfd: OwnedFd::from_raw_fd(pidfd),
                    mapping: Some(mapping),
                }),
                exiting: false,
            }
        };
        // The child's ends: the supervisor has its copies now.
        drop((
            stdout_write,
            stderr_write,
            stdin_read,
            control_read,
            report_write,
            inherited,
        ));
        // The shell's pid comes as soon as the supervisor has cloned it (or why it did not
        // start, when that came first), a wait shorter than `posix_spawn`'s, which blocks its
        // caller the same way; see `first_word` for its bounds. A failed start reported after
        // the pid comes to `shell_end`. Should this future be dropped meanwhile, the control
        // pipe closes with it and the supervisor sweeps whatever it started.
        let first = match supervisor.unreaped.as_ref() {
            Some(unreaped) => first_word(&report_read, &unreaped.pidfd, FIRST_REPORT_LIMIT).await,
            None => Ok(None),
        };
        let shell = match first {
            Ok(Some(shell)) if shell > 0 => shell,
            Ok(Some(error)) => {
                supervisor.exiting = true;
                return Err(io::Error::from_raw_os_error(error.saturating_neg()));
            }
            Ok(None) => {
                // The supervisor died before it reported. If it had cloned the shell, the
                // command may have killed it: the command started, and its end is reported as
                // the supervisor's loss. Otherwise nothing started.
                supervisor.exiting = true;
                let cloned = supervisor
                    .unreaped
                    .as_ref()
                    .and_then(|unreaped| unreaped.mapping.as_ref())
                    .map_or(0, Mapping::cloned_shell);
                if cloned <= 0 {
                    return Err(io::Error::other(
                        "the command's supervisor exited before it started the shell",
                    ));
                }
                cloned
            }
            Err(error) => {
                // A supervisor that never reported (stopped, say) is killed, and with it
                // whatever shell it started, rather than left behind.
                supervisor.kill();
                return Err(error);
            }
        };
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

// ---------------------------------------------------------------------------------------------
// The supervisor's side. Everything below runs in the supervisor, on memory shared with the
// harness: raw system calls, its own stack and mapping only; no allocation, lock, panic, C
// library call (but `clone`) or thread-local storage.

/// Raw Linux system calls: the result, or `-errno`. No `errno` is written.
mod raw {
    /// # Safety
    /// The arguments must be valid for system call `number`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) unsafe fn syscall(number: libc::c_long, args: [usize; 6]) -> isize {
        let result: isize;
        // SAFETY: the `syscall` instruction with the kernel's calling convention; it clobbers
        // rcx and r11 only. The caller vouches for the arguments.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") number as isize => result,
                in("rdi") args[0],
                in("rsi") args[1],
                in("rdx") args[2],
                in("r10") args[3],
                in("r8") args[4],
                in("r9") args[5],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, preserves_flags),
            );
        }
        result
    }

    /// # Safety
    /// The arguments must be valid for system call `number`.
    #[cfg(target_arch = "aarch64")]
    #[inline(always)]
    pub(super) unsafe fn syscall(number: libc::c_long, args: [usize; 6]) -> isize {
        let result: isize;
        // SAFETY: `svc 0` with the kernel's calling convention; it clobbers x0 only. The caller
        // vouches for the arguments.
        unsafe {
            core::arch::asm!(
                "svc 0",
                in("x8") number,
                inlateout("x0") args[0] => result,
                in("x1") args[1],
                in("x2") args[2],
                in("x3") args[3],
                in("x4") args[4],
                in("x5") args[5],
                options(nostack, preserves_flags),
            );
        }
        result
    }
}

/// A system call with up to six arguments, each converted to `usize` (integers sign-extend,
/// which the kernel reads back as the `int` it takes), through [`raw::syscall`].
macro_rules! sys {
    ($number:ident) => {
        raw::syscall(libc::$number, [0; 6])
    };
    ($number:ident, $a:expr) => {
        raw::syscall(libc::$number, [$a as usize, 0, 0, 0, 0, 0])
    };
    ($number:ident, $a:expr, $b:expr) => {
        raw::syscall(libc::$number, [$a as usize, $b as usize, 0, 0, 0, 0])
    };
    ($number:ident, $a:expr, $b:expr, $c:expr) => {
        raw::syscall(libc::$number, [$a as usize, $b as usize, $c as usize, 0, 0, 0])
    };
    ($number:ident, $a:expr, $b:expr, $c:expr, $d:expr) => {
        raw::syscall(
            libc::$number,
            [$a as usize, $b as usize, $c as usize, $d as usize, 0, 0],
        )
    };
    ($number:ident, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
        raw::syscall(
            libc::$number,
            [$a as usize, $b as usize, $c as usize, $d as usize, $e as usize, 0],
        )
    };
}

/// The kernel's signal set: one bit per signal.
fn signal_bit(signal: libc::c_int) -> u64 {
    1u64 << (signal - 1)
}

/// The signals the supervisor hears on its signalfd: its children's ends, and the ones that
/// mean "stop" (sent to it directly; its group is its own).
const HANDLED: [libc::c_int; 5] = [
    libc::SIGCHLD,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
];

/// Leaves the supervisor.
///
/// # Safety
/// Only in the supervisor.
unsafe fn exit(code: i32) -> ! {
    loop {
        // SAFETY: exit_group ends this process (its own thread group) only.
        unsafe {
            sys!(SYS_exit_group, code);
        }
    }
}

/// The supervisor's entry point: `arg` is its [`Plan`]. Starts the shell as its child and
/// supervises; never returns.
extern "C" fn supervisor_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the plan in this supervisor's mapping, alive until it was reaped; every
    // call below is a raw system call on that mapping or this stack (see the module docs).
    unsafe {
        let plan = &*(arg as *const Plan);
        // The harness blocked every signal it may; this also blocks the two the C library keeps
        // for itself, whose handlers are the harness's.
        let all = !0u64;
        sys!(
            SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const all,
            0,
            size_of::<u64>()
        );
        // A session of its own, and with it a group: no command below it has a controlling
        // terminal (`/dev/tty` fails; a terminal it finds cannot be its own to inject input
        // into), and none of them can acquire one, since only a session's leader can.
        sys!(SYS_setsid);
        // Its name in `ps` and `/proc/PID/comm`: it shares the harness's memory, so its command
        // line is the harness's, and it would pass for another copy of the harness.
        sys!(
            SYS_prctl,
            libc::PR_SET_NAME,
            c"dsh-supervisor".as_ptr(),
            0,
            0,
            0
        );
        reset_handlers();
        let subreaper = sys!(SYS_prctl, libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        if subreaper < 0 {
            report_failure(plan.report, errno(subreaper));
        }
        let mut handled = 0u64;
        for signal in HANDLED {
            handled |= signal_bit(signal);
        }
        // Every signal has been blocked since the clone, so none of the shell's SIGCHLDs can be
        // missed.
        let signals = sys!(
            SYS_signalfd4,
            -1i32,
            &raw const handled,
            size_of::<u64>(),
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK
        );
        if signals < 0 {
            report_failure(plan.report, errno(signals));
        }
        let signals = signals as RawFd;
        let shell = match start_shell(plan) {
            Ok(shell) => shell,
            Err(error) => report_failure(plan.report, error),
        };
        supervise(shell, plan.control, plan.report, signals)
    }
}

/// Resets the harness's signal handlers in this supervisor's own copy of the handler table (it
/// was cloned without `CLONE_SIGHAND`), which the shell-to-be copies in turn, as `posix_spawn`
/// does: every handled signal goes back to its default action, so a signal that reaches the
/// shell-to-be before its `execve` (a `SIGTERM` of a call cancelled at once) acts on it as on
/// the shell, instead of running a handler of the harness on the harness's memory (telling the
/// harness of a signal nobody sent it, and swallowing the signal). Ignored signals stay ignored,
/// as a spawned program inherits them, but for two: `SIGPIPE`, which the harness ignores and the
/// shell must not (an ignored signal stays ignored across `execve`), and `SIGCHLD`, whose
/// `SIG_IGN` would have the kernel reap the shell before the supervisor could read its status.
///
/// # Safety
/// Only in the supervisor, with every signal blocked.
unsafe fn reset_handlers() {
    // The kernel's sigaction: the handler first, then flags, (restorer,) mask; four words hold
    // either architecture's. A zeroed one is SIG_DFL with no flags.
    let default = [0u64; 4];
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        let mut old = [0u64; 4];
        // SAFETY: reads into and from stack memory of this supervisor's handler table only;
        // a signal the kernel refuses is left as it is.
        unsafe {
            let always = signal == libc::SIGPIPE || signal == libc::SIGCHLD;
            if !always
                && sys!(
                    SYS_rt_sigaction,
                    signal,
                    0,
                    old.as_mut_ptr(),
                    size_of::<u64>()
                ) != 0
            {
                continue;
            }
            let handler = old[0] as usize;
            if always || (handler != libc::SIG_DFL && handler != libc::SIG_IGN) {
                sys!(
                    SYS_rt_sigaction,
                    signal,
                    default.as_ptr(),
                    0,
                    size_of::<u64>()
                );
            }
        }
    }
}

fn errno(result: isize) -> i32 {
    i32::try_from(result.unsigned_abs()).unwrap_or(libc::EINVAL)
}

/// Tells the harness why the shell could not start (`-errno` in place of its pid), and exits.
///
/// # Safety
/// Only in the supervisor.
unsafe fn report_failure(report: RawFd, error: i32) -> ! {
    // SAFETY: a write of stack memory, then exit.
    unsafe {
        write_word(report, error.saturating_neg().min(-1));
        exit(1)
    }
}

/// The shell-to-be: runs on its own stack in the supervisor's mapping, alongside the supervisor
/// (which only waits for signals meanwhile), sets up its streams, directory, group and signal
/// mask, and executes the shell. A failure is reported to the harness by the shell-to-be itself
/// (`-errno`, ahead of the status the supervisor reports when it reaps it).
extern "C" fn exec_shell(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the plan in the supervisor's mapping, which is neither reused nor
    // unmapped before this process has left it by `execve` or exit, whatever becomes of the
    // supervisor (see `Mapping::release`); only raw system calls follow.
    unsafe {
        let plan = &*(arg as *const Plan);
        // First out of the way of 0–2 (a descriptor may already sit on one of them), then in.
        let mut moved = [0 as RawFd; 3];
        let mut result = 0;
        for (slot, fd) in moved.iter_mut().zip(plan.stdio) {
            let copy = sys!(SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, 3);
            if copy < 0 {
                result = copy;
            }
            *slot = copy as RawFd;
        }
        if result == 0 {
            for (target, fd) in (0..).zip(moved) {
                // The copies sit at 3 or above, so each lands on a different descriptor; `dup3`
                // leaves the new one open across `execve`.
                let installed = sys!(SYS_dup3, fd, target, 0);
                if installed < 0 {
                    result = installed;
                }
            }
        }
        if result == 0 {
            for fd in plan.inherit {
                if fd >= 0 {
                    // Its own copy of the descriptor table: the harness's stays close-on-exec.
                    let kept = sys!(SYS_fcntl, fd, libc::F_SETFD, 0);
                    if kept < 0 {
                        result = kept;
                    }
                }
            }
        }
        if result == 0 {
            result = match plan.confinement.as_ref() {
                // The sandbox, last before the shell (see `confine`).
                Some(confinement) => confine(confinement, plan.workdir, plan.null_stdin),
                None => sys!(SYS_chdir, plan.workdir),
            };
        }
        if result == 0 {
            // Its own group first, while every signal is still blocked. The handlers are the
            // defaults (`reset_handlers`), so a signal already pending for the group acts on the
            // shell-to-be as it would on the shell.
            sys!(SYS_setpgid, 0, 0);
            let empty = 0u64;
            sys!(
                SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &raw const empty,
                0,
                size_of::<u64>()
            );
            result = sys!(SYS_execve, plan.program, plan.argv, plan.envp);
        }
        write_word(plan.report, errno(result).saturating_neg().min(-1));
        exit(127)
    }
}

/// The kernel's mount API (Linux 5.2 and 5.12), stable values from `linux/mount.h` and
/// `linux/fcntl.h`.
mod mount_api {
    pub(super) const OPEN_TREE_CLONE: u32 = 1;
    pub(super) const AT_RECURSIVE: u32 = 0x8000;
    pub(super) const AT_EMPTY_PATH: u32 = 0x1000;
    pub(super) const MOVE_MOUNT_F_EMPTY_PATH: u32 = 4;
    pub(super) const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
    pub(super) const MOUNT_ATTR_RDONLY: u64 = 1;
    pub(super) const MOUNT_ATTR_NOSUID: u64 = 2;
    pub(super) const MOUNT_ATTR_NODEV: u64 = 4;

    /// `struct mount_attr`.
    #[repr(C)]
    pub(super) struct MountAttr {
        pub(super) attr_set: u64,
        pub(super) attr_clr: u64,
        pub(super) propagation: u64,
        pub(super) userns_fd: u64,
    }
}

/// Confines the calling process, which is about to `execve` (a shell-to-be, or a program's
/// forked child): the mount namespace, then `workdir` as its directory (a directory entered
/// before the mounts would still be the read-only copy), then every capability dropped,
/// `no_new_privs`, the seccomp filter and the Landlock ruleset. Returns 0, or `-errno` of the
/// first step that failed.
///
/// # Safety
/// Only in a single process about to `execve` or exit: raw system calls on `confinement`,
/// which the caller keeps alive and unchanged, on `workdir` (NUL-terminated) and on this
/// stack; nothing is allocated.
unsafe fn confine(
    confinement: &Restrictions,
    workdir: *const libc::c_char,
    null_stdin: bool,
) -> isize {
    // SAFETY: as the function's contract says; each call below reads only the memory named.
    unsafe {
        if let Some(mounts) = &confinement.mounts {
            let entered = enter_mount_namespace(mounts, null_stdin);
            if entered < 0 {
                return entered;
            }
        }
        let entered = sys!(SYS_chdir, workdir);
        if entered < 0 {
            return entered;
        }
        if confinement.drop_capabilities {
            let dropped = drop_capabilities();
            if dropped < 0 {
                return dropped;
            }
        }
        // `no_new_privs` before the filter and the ruleset (the kernel requires it of a caller
        // without `CAP_SYS_ADMIN`); it also keeps a setuid program or one with file
        // capabilities from gaining what was just dropped.
        let result = sys!(SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if result < 0 {
            return result;
        }
        if !confinement.seccomp.is_empty() {
            let program = libc::sock_fprog {
                len: u16::try_from(confinement.seccomp.len()).unwrap_or(u16::MAX),
                filter: confinement.seccomp.as_ptr().cast_mut().cast(),
            };
            let result = sys!(
                SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &raw const program
            );
            if result < 0 {
                return result;
            }
        }
        if let Some(ruleset) = &confinement.landlock {
            let result = sys!(SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0);
            if result < 0 {
                return result;
            }
        }
        0
    }
}

/// Writes `text` (without its NUL) to the file at `path`.
///
/// # Safety
/// As [`confine`]; `path` and `text` are NUL-terminated.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
unsafe fn write_file(path: &std::ffi::CStr, text: &std::ffi::CStr) -> isize {
    // SAFETY: raw system calls on the two strings and a descriptor of this function's own.
    unsafe {
        let fd = sys!(
            SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC
        );
        if fd < 0 {
            return fd;
        }
        let bytes = text.to_bytes();
        let written = sys!(SYS_write, fd, bytes.as_ptr(), bytes.len());
        sys!(SYS_close, fd);
        if written < 0 { written } else { 0 }
    }
}

/// Opens `path` as an `O_PATH` directory without following a symbolic link anywhere on it
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6): a bind's place is looked up as the harness
/// resolved it, or not at all.
///
/// # Safety
/// As [`confine`]; `path` is NUL-terminated.
unsafe fn open_place(path: *const libc::c_char) -> isize {
    /// `struct open_how`.
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `openat2` reads the path and `how` only.
    unsafe {
        sys!(
            SYS_openat2,
            libc::AT_FDCWD,
            path,
            &raw const how,
            size_of::<OpenHow>()
        )
    }
}

/// A mount namespace of this process's own in which everything is read-only but the plan's
/// writable binds (see [`MountPlan`]), with a devpts of its own on `/dev/pts` (no terminal of
/// the host's can be opened), and, when `null_stdin`, standard input reopened on its
/// `/dev/null` (a descriptor of the host's `/dev/null` would let `chmod /dev/stdin` change
/// the host's device).
///
/// # Safety
/// As [`confine`].
unsafe fn enter_mount_namespace(plan: &MountPlan, null_stdin: bool) -> isize {
    use mount_api::*;
    // SAFETY: raw system calls on the plan's strings, constant strings and this stack.
    unsafe {
        if let Some(user_namespace) = &plan.user_namespace {
            let result = sys!(SYS_setns, user_namespace.as_raw_fd(), libc::CLONE_NEWUSER);
            if result < 0 {
                return result;
            }
        }
        let result = sys!(SYS_unshare, libc::CLONE_NEWNS);
        if result < 0 {
            return result;
        }
        // Nothing mounted or unmounted here propagates back to the harness's namespace, nor
        // later mounts of the host in (they would be writable).
        let result = sys!(
            SYS_mount,
            0usize,
            c"/".as_ptr(),
            0usize,
            libc::MS_REC | libc::MS_PRIVATE,
            0usize
        );
        if result < 0 {
            return result;
        }
        let binds = &plan.binds[..plan.binds.len().min(MOUNT_BINDS_MAX)];
        // Copies of the binds' trees as they are, taken before everything becomes read-only.
        let mut copies = [-1isize; MOUNT_BINDS_MAX];
        for (copy, bind) in copies.iter_mut().zip(binds) {
            let place = open_place(bind.path.as_ptr());
            if place < 0 {
                return place;
            }
            *copy = sys!(
                SYS_open_tree,
                place,
                c"".as_ptr(),
                OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | libc::O_CLOEXEC as u32
            );
            sys!(SYS_close, place);
            if *copy < 0 {
                return *copy;
            }
        }
        let read_only = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let result = sys!(
            SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/".as_ptr(),
            AT_RECURSIVE,
            &raw const read_only,
            size_of::<MountAttr>()
        );
        if result < 0 {
            return result;
        }
        for (copy, bind) in copies.iter().zip(binds) {
            let attributes = MountAttr {
                attr_set: MOUNT_ATTR_NOSUID
                    | MOUNT_ATTR_NODEV
                    | if bind.writable { 0 } else { MOUNT_ATTR_RDONLY },
                attr_clr: 0,
                propagation: 0,
                userns_fd: 0,
            };
            let mut result = sys!(
                SYS_mount_setattr,
                *copy,
                c"".as_ptr(),
                AT_EMPTY_PATH | AT_RECURSIVE,
                &raw const attributes,
                size_of::<MountAttr>()
            );
            if result == 0 {
                let place = open_place(bind.path.as_ptr());
                result = place;
                if place >= 0 {
                    result = sys!(
                        SYS_move_mount,
                        *copy,
                        c"".as_ptr(),
                        place,
                        c"".as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH
                    );
                    sys!(SYS_close, place);
                }
            }
            sys!(SYS_close, *copy);
            if result < 0 {
                return result;
            }
        }
        // A devpts instance of the command's own: the host's terminals (the user's, other
        // sessions') are out of its sight, to read as to write. A pseudo-terminal the command
        // makes through `/dev/ptmx` lives in the host's instance, where it cannot open its
        // other end: there are none under Landlock (its rules cannot name an instance made
        // after them).
        let result = sys!(
            SYS_mount,
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620".as_ptr()
        );
        if result < 0 {
            return result;
        }
        if null_stdin {
            let null = sys!(
                SYS_openat,
                libc::AT_FDCWD,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC
            );
            if null < 0 {
                return null;
            }
            let result = sys!(SYS_dup3, null, 0, 0);
            sys!(SYS_close, null);
            if result < 0 {
                return result;
            }
        }
        0
    }
}

/// Empties every capability set: the bounding set (so that not even an `execve` by root gives
/// any back), the ambient set, and the effective, permitted and inheritable sets.
///
/// # Safety
/// As [`confine`].
unsafe fn drop_capabilities() -> isize {
    // SAFETY: raw system calls on plain values and this stack.
    unsafe {
        for capability in 0..64 {
            let result = sys!(SYS_prctl, libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
            if result == -(libc::EINVAL as isize) {
                // Past the kernel's last capability.
                break;
            }
            // Without `CAP_SETPCAP` the bounding set stays: harmless for a process that is not
            // root, since `no_new_privs` keeps its `execve` from granting any capability; root
            // would get them all back at its `execve`, so that fails the start.
            if result < 0 && (result != -(libc::EPERM as isize) || sys!(SYS_geteuid) == 0) {
                return result;
            }
        }
        // Older kernels lack ambient capabilities, and with them anything to clear.
        let result = sys!(
            SYS_prctl,
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0
        );
        if result < 0 && result != -(libc::EINVAL as isize) {
            return result;
        }
        // `_LINUX_CAPABILITY_VERSION_3` with this process (0), and two zeroed data words.
        let header: [u32; 2] = [0x2008_0522, 0];
        let data = [0u32; 6];
        sys!(SYS_capset, header.as_ptr(), data.as_ptr())
    }
}

/// Starts the shell the way `posix_spawn` does, `clone(CLONE_VM)` onto a stack of its own (no
/// page table is copied), but without waiting for its `execve`: the shell-to-be reports a
/// failed start itself, so the harness hears the pid one wake-up sooner and the shell's
/// `execve` overlaps the harness's own work. The kernel writes the pid into the plan at the
/// clone (`CLONE_PARENT_SETTID`), and zeroes `shell_on_mapping` when the shell-to-be leaves the
/// mapping (`CLONE_CHILD_CLEARTID`), so the harness knows when it may reuse the mapping.
///
/// # Safety
/// Only in the supervisor, with every signal blocked.
unsafe fn start_shell(plan: &Plan) -> Result<libc::pid_t, i32> {
    // SAFETY: the shell-to-be's stack and the plan are in this supervisor's mapping, which
    // outlives the shell-to-be's use of it (`shell_on_mapping`, see `Mapping::release`); the C library's `clone` touches thread-local storage only to set
    // `errno` on failure, which is this supervisor's private thread area.
    unsafe {
        let shell = libc::clone(
            exec_shell,
            plan.exec_stack,
            libc::CLONE_VM | libc::CLONE_PARENT_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD,
            std::ptr::from_ref(plan).cast_mut().cast(),
            plan.shell.as_ptr(),
            std::ptr::null_mut::<libc::c_void>(),
            plan.shell_on_mapping.as_ptr(),
        );
        if shell == -1 {
            // The C library set `errno` in this supervisor's private thread area; reading it
            // back is one more C library call, a thread-pointer offset.
            return Err(*libc::__errno_location());
        }
        // Also from this side, so the shell's group exists before the harness hears its pid.
        sys!(SYS_setpgid, shell, shell);
        Ok(shell)
    }
}

/// The supervisor's life (see the module docs). Never returns.
///
/// # Safety
/// Only in the supervisor, with every signal blocked and `signals` its signalfd.
unsafe fn supervise(shell: libc::pid_t, control: RawFd, report: RawFd, signals: RawFd) -> ! {
    // SAFETY: raw system calls on plain values and stack memory only.
    unsafe {
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
            if sys!(SYS_ppoll, fds.as_mut_ptr(), 2, 0, 0, size_of::<u64>()) < 0 {
                continue;
            }
            if fds[1].revents & libc::POLLIN != 0 {
                let mut info = [0u8; size_of::<libc::signalfd_siginfo>()];
                let mut stop = false;
                while sys!(SYS_read, signals, info.as_mut_ptr(), info.len()) == info.len() as isize
                {
                    // `ssi_signo` is the first field.
                    let signo = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
                    if signo != libc::SIGCHLD as u32 {
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
            if fds[0].revents != 0 {
                sweep(shell, report);
                exit(0);
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
/// Only in the supervisor.
unsafe fn reap_exited(shell: libc::pid_t, report: RawFd) -> Reaped {
    // SAFETY: raw system calls on stack memory only.
    unsafe {
        loop {
            let mut status: libc::c_int = 0;
            match sys!(
                SYS_wait4,
                -1i32,
                &raw mut status,
                libc::WNOHANG | libc::__WALL,
                0
            ) {
                0 => return Reaped::Running,
                pid if pid > 0 => {
                    if pid == shell as isize {
                        report_end(report, status);
                    }
                }
                error if error == -(libc::EINTR as isize) => {}
                _ => return Reaped::None,
            }
        }
    }
}

/// Kills every process below the supervisor and reaps them all: children first, then each
/// orphan as it is re-parented here, until no child is left.
///
/// # Safety
/// Only in the supervisor.
unsafe fn sweep(shell: libc::pid_t, report: RawFd) {
    // SAFETY: raw system calls on stack memory only.
    unsafe {
        loop {
            if reap_exited(shell, report) != Reaped::Running {
                return;
            }
            kill_children();
            let mut status: libc::c_int = 0;
            match sys!(SYS_wait4, -1i32, &raw mut status, libc::__WALL, 0) {
                pid if pid > 0 => {
                    if pid == shell as isize {
                        write_pair(report, status, 0);
                    }
                }
                error if error == -(libc::EINTR as isize) => {}
                _ => return,
            }
        }
    }
}

/// Sends SIGKILL to each child of this (single-threaded) process, as listed by
/// `/proc/thread-self/children`, or by a scan of `/proc` where that file is missing.
///
/// # Safety
/// Only in the supervisor.
unsafe fn kill_children() {
    // SAFETY: raw system calls on stack memory only.
    unsafe {
        let fd = sys!(
            SYS_openat,
            libc::AT_FDCWD,
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC
        );
        if fd < 0 {
            kill_children_by_scan();
            return;
        }
        let mut buffer = [0u8; 4096];
        let mut pid: libc::pid_t = 0;
        let mut digits = false;
        loop {
            let read = sys!(SYS_read, fd, buffer.as_mut_ptr(), buffer.len());
            let Some(bytes) = usize::try_from(read).ok().and_then(|n| buffer.get(..n)) else {
                break;
            };
            if bytes.is_empty() {
                break;
            }
            for &byte in bytes {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(i32::from(byte - b'0'));
                    digits = true;
                } else {
                    if digits {
                        sys!(SYS_kill, pid, libc::SIGKILL);
                    }
                    pid = 0;
                    digits = false;
                }
            }
        }
        if digits {
            sys!(SYS_kill, pid, libc::SIGKILL);
        }
        sys!(SYS_close, fd);
    }
}

/// The fallback of [`kill_children`]: every `/proc/PID/stat` whose parent is this process.
///
/// # Safety
/// Only in the supervisor.
unsafe fn kill_children_by_scan() {
    // SAFETY: raw system calls on stack memory only.
    unsafe {
        let me = sys!(SYS_getpid) as libc::pid_t;
        let dir = sys!(
            SYS_openat,
            libc::AT_FDCWD,
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC
        );
        if dir < 0 {
            return;
        }
        let mut entries = [0u8; 8192];
        loop {
            let read = sys!(SYS_getdents64, dir, entries.as_mut_ptr(), entries.len());
            let Some(listed) = usize::try_from(read).ok().and_then(|n| entries.get(..n)) else {
                break;
            };
            if listed.is_empty() {
                break;
            }
            let mut offset = 0usize;
            // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
            while let Some(record) = listed.get(offset..) {
                let (Some(&low), Some(&high)) = (record.get(16), record.get(17)) else {
                    break;
                };
                let length = usize::from(u16::from_ne_bytes([low, high]));
                if length == 0 {
                    break;
                }
                let name = record.get(19..length.min(record.len())).unwrap_or(&[]);
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
                    sys!(SYS_kill, pid, libc::SIGKILL);
                }
                offset = offset.saturating_add(length);
            }
        }
        sys!(SYS_close, dir);
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
/// Raw system calls only; safe anywhere.
unsafe fn stat_fields(pid: libc::pid_t, buffer: &mut [u8; 512]) -> Option<&[u8]> {
    let mut path = [0u8; 64];
    let path = proc_path(&mut path, pid, b"stat")?;
    // SAFETY: `path` is NUL-terminated; `buffer` is stack memory of the given length.
    let read = unsafe {
        let fd = sys!(
            SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC
        );
        if fd < 0 {
            return None;
        }
        let read = sys!(SYS_read, fd, buffer.as_mut_ptr(), buffer.len());
        sys!(SYS_close, fd);
        read
    };
    let text = buffer.get(..usize::try_from(read).ok()?)?;
    let close = text.iter().rposition(|&b| b == b')')?;
    text.get(close + 2..)
}

/// The parent pid of `pid`, from `/proc/PID/stat` (`state ppid …` after the name).
///
/// # Safety
/// Raw system calls only; safe anywhere.
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
/// Only in the supervisor.
unsafe fn report_end(report: RawFd, status: libc::c_int) {
    // SAFETY: raw system calls on stack memory only.
    unsafe {
        let mut info = [0u8; size_of::<libc::siginfo_t>()];
        let empty = sys!(
            SYS_waitid,
            libc::P_ALL,
            0,
            info.as_mut_ptr(),
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
            0
        ) == -(libc::ECHILD as isize);
        write_pair(report, status, if empty { TREE_EMPTY } else { 0 });
    }
}

/// Writes two native-endian words in one write (eight bytes to a pipe are written whole).
///
/// # Safety
/// Only in the supervisor.
unsafe fn write_pair(fd: RawFd, first: i32, second: i32) {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&first.to_ne_bytes());
    bytes[4..].copy_from_slice(&second.to_ne_bytes());
    // SAFETY: a write of eight bytes of stack memory.
    unsafe {
        sys!(SYS_write, fd, bytes.as_ptr(), bytes.len());
    }
}

/// Writes one native-endian word; a harness that is gone is not an error here (SIGPIPE is
/// blocked: the write fails with EPIPE).
///
/// # Safety
/// Only in the supervisor.
unsafe fn write_word(fd: RawFd, word: i32) {
    let bytes = word.to_ne_bytes();
    // SAFETY: a write of four bytes of stack memory; four bytes to a pipe are written whole.
    unsafe {
        sys!(SYS_write, fd, bytes.as_ptr(), bytes.len());
    }
}

/// Closes every descriptor but `keep`, so the supervisor holds no pipe of the command's (its
/// output must end when the command's processes are gone) nor of other commands.
///
/// # Safety
/// Only in the supervisor.
unsafe fn close_all_but(mut keep: [RawFd; 3]) {
    keep.sort_unstable();
    // SAFETY: closing descriptors of this process's own file table only.
    unsafe {
        let mut low: libc::c_uint = 0;
        let mut fallback = false;
        for fd in keep {
            let fd = fd as libc::c_uint;
            if fd > low && sys!(SYS_close_range, low, fd - 1, 0) != 0 {
                fallback = true;
            }
            low = fd + 1;
        }
        if sys!(SYS_close_range, low, libc::c_uint::MAX, 0) != 0 {
            fallback = true;
        }
        if fallback {
            // Kernels before 5.9 have no close_range: close one by one up to the limit.
            let mut limit = [0u64; 2];
            let top = if sys!(SYS_prlimit64, 0, libc::RLIMIT_NOFILE, 0, limit.as_mut_ptr()) == 0 {
                limit[0].min(1 << 16) as RawFd
            } else {
                1024
            };
            for fd in 0..top {
                if !keep.contains(&fd) {
                    sys!(SYS_close, fd);
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

    /// The mapping of a supervisor is marked free of its shell-to-be as soon as the shell has
    /// called `execve`, while it still runs: a killed supervisor's mapping is then reusable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_kernel_marks_the_mapping_once_the_shell_has_left_it() {
        let launch = Launch {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "echo started; exec sleep 30".into()],
            env: Vec::new(),
            workdir: "/".into(),
            stdin_piped: false,
            confinement: None,
            inherit: Vec::new(),
        };
        let mut supervised = Supervised::spawn(launch).await.unwrap();
        let mapping_gone = |supervised: &Supervised| {
            supervised
                .supervisor
                .unreaped
                .as_ref()
                .and_then(|unreaped| unreaped.mapping.as_ref())
                .map(Mapping::shell_gone)
        };
        let mut stdout = supervised.stdout().unwrap();
        let mut line = [0u8; 8];
        stdout.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"started\n");
        assert_eq!(mapping_gone(&supervised), Some(true));
        assert!(supervised.sweep(std::time::Duration::from_secs(10)).await);
    }

    /// Before the kernel has marked it, a mapping with a cloned shell is not free.
    #[test]
    fn a_mapping_whose_shell_to_be_has_not_left_is_not_free() {
        let strings = Strings::new(&Launch {
            program: "/bin/sh".into(),
            args: Vec::new(),
            env: Vec::new(),
            workdir: "/".into(),
            stdin_piped: false,
            confinement: None,
            inherit: Vec::new(),
        })
        .unwrap();
        let mut mapping = Mapping::obtain(strings.plan_bytes()).unwrap();
        let fds = PlanFds {
            stdio: [0, 1, 2],
            control: 0,
            report: 0,
            inherit: [-1; INHERIT_MAX],
            null_stdin: true,
        };
        let (_, _, plan) = mapping.prepare(&strings, fds, None);
        assert!(mapping.shell_gone(), "no shell was cloned yet");
        // SAFETY: the plan was just written by `prepare`; no supervisor runs on the mapping.
        unsafe { (*(plan as *const Plan)).shell.store(4242, Ordering::SeqCst) };
        assert!(!mapping.shell_gone());
        mapping.unmap();
    }

    /// A process to stand for a supervisor, its pidfd, and a report pipe whose write end the
    /// test holds (so the pipe never ends by itself).
    fn stand_in() -> (std::process::Child, OwnedFd, OwnedFd, OwnedFd) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // SAFETY: `pidfd_open` of a child of this process; the new descriptor is owned here.
        let pidfd = unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0);
            assert!(fd >= 0, "{}", io::Error::last_os_error());
            OwnedFd::from_raw_fd(fd as RawFd)
        };
        let (read, write) = pipe().unwrap();
        (child, pidfd, read, write)
    }

    // The stand-in's report and death come 300 ms late on purpose: after the 50 ms the harness
    // blocks its thread, so these tests cover the wait through the runtime.

    #[tokio::test]
    async fn a_first_report_after_the_blocking_wait_is_read_through_the_runtime() {
        let (mut child, pidfd, read, write) = stand_in();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::io::Write::write_all(&mut std::fs::File::from(write), &4242i32.to_ne_bytes())
                .unwrap();
        });
        let word = first_word(&read, &pidfd, std::time::Duration::from_secs(20)).await;
        assert_eq!(word.unwrap(), Some(4242));
        writer.join().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn a_supervisor_gone_without_a_report_ends_the_wait_though_its_pipe_stays_open() {
        let (mut child, pidfd, read, _write) = stand_in();
        let pid = child.id() as libc::pid_t;
        let killer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            // SAFETY: kills the child this test started, which is not reaped before the join.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let word = first_word(&read, &pidfd, std::time::Duration::from_secs(20)).await;
        assert_eq!(word.unwrap(), None);
        killer.join().unwrap();
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn a_supervisor_that_never_reports_fails_the_wait_at_the_limit() {
        let (mut child, pidfd, read, _write) = stand_in();
        let started = std::time::Instant::now();
        let word = first_word(&read, &pidfd, std::time::Duration::from_millis(400)).await;
        assert_eq!(word.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= std::time::Duration::from_millis(400));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_pidfd_probe_agrees_with_the_kernel_release() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().unwrap());
        let version = (numbers.next().unwrap(), numbers.next().unwrap());
        assert_eq!(pidfd_waits(), version >= (5, 4), "kernel {release}");
    }

    #[test]
    fn the_parent_of_this_process_is_read_from_proc() {
        // SAFETY: reading /proc of this process; no fork involved.
        let parent = unsafe { parent_of(std::process::id() as libc::pid_t) };
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent, Some(unsafe { libc::getppid() }));
    }
}
