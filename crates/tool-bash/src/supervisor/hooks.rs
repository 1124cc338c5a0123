//! Confinement for processes the standard library spawns (a stdio MCP server, the sandbox's
//! trial process, the user namespace's waiter): `pre_exec` hooks, which run in the forked child
//! between `fork` and `execve` and so keep the rule of [`after_fork`](super::after_fork), and
//! the probe of the kernel's Landlock ABI.

// `CommandExt::pre_exec` is unsafe (the hook runs after a fork), and the Landlock ABI has no
// safe query; each block says why it is sound.
#![allow(unsafe_code)]

use super::after_fork::confine;
#[cfg(feature = "sandbox")]
use super::after_fork::{exit, write_file};
#[cfg(feature = "sandbox")]
use crate::launch::MountPlan;
use crate::launch::Restrictions;
use rustix::fd::OwnedFd;
use rustix::fs::{CWD, Mode, OFlags};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::sync::Arc;

/// Makes every child `command` starts confine itself just before its `execve`, as the
/// shell-to-be does ([`confine`]), in `workdir`: a program that is not a shell command (a stdio
/// MCP server) confined like one. A failed step fails the spawn, so the program never runs with
/// less.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) fn confine_at_exec(
    command: &mut std::process::Command,
    confinement: Arc<Restrictions>,
    workdir: &std::path::Path,
) {
    // A directory with a NUL byte cannot be entered; the spawn fails with the hook's error.
    let workdir = CString::new(workdir.as_os_str().as_bytes()).ok();
    // SAFETY: the hook runs in the forked child, a single-threaded copy of the harness, and
    // keeps the rule of `after_fork`: `rustix` system calls, one `ioctl(TIOCNOTTY)` (no
    // argument, async-signal-safe) and `confine`, on constant strings
    // and the confinement and directory the hook owns (so they live for as long as `command`
    // can spawn); it allocates nothing and takes no lock, and the error is built from a number.
    unsafe {
        command.pre_exec(move || {
            let Some(workdir) = &workdir else {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            };
            // No controlling terminal: the program cannot take the user's terminal's
            // foreground, read it or change it through `/dev/tty`. (It stays in its caller's
            // session and group, which the caller may have chosen; a process that does not
            // lead its session only loses the terminal.)
            if let Ok(tty) = rustix::fs::openat(
                CWD,
                c"/dev/tty",
                OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                // `TIOCNOTTY` takes no argument; `rustix` does not wrap it.
                libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&tty), libc::TIOCNOTTY);
            }
            confine(&confinement, workdir, false).map_err(io::Error::from)
        });
    }
}

/// Makes every child `command` starts keep `fd` across its `execve`, at its own number (a
/// wrapper's seccomp pipe). The hook owns the descriptor, so it stays open for as long as
/// `command` can spawn; the harness's copy stays close-on-exec, so no other program it starts
/// inherits it.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) fn keep_at_exec(command: &mut std::process::Command, fd: OwnedFd) {
    // SAFETY: the hook runs in the forked child and makes one `fcntl`, which is
    // async-signal-safe, on a descriptor it owns, in the child's own copy of the table.
    unsafe {
        command.pre_exec(move || {
            rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty())?;
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
    let workdir = super::c_string(workdir.as_os_str().as_bytes())?;
    // Never executed: the hook ends the child first.
    let mut command = std::process::Command::new("/");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: as in `confine_at_exec`; after the steps the child leaves with `_exit`, which
    // runs nothing of the harness's.
    unsafe {
        command.pre_exec(move || {
            confine(&restrictions, &workdir, true)?;
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
    let maps = crate::launch::IdMaps::own();
    let mut command = std::process::Command::new(waiter);
    command
        .args(["-c", "read -r _"])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook runs in the forked child, a single-threaded copy of the harness with
    // its own memory, and keeps the rule of `after_fork`: `prctl`, `unshare` and
    // `open`/`write`/`close` on the maps the hook owns and on constant strings; nothing
    // allocated, no lock taken.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)?;
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)?;
            // A process without `CAP_SETGID` outside may map its group only once `setgroups`
            // is denied in the namespace.
            for (path, text) in [
                (c"/proc/self/setgroups", c"deny"),
                (c"/proc/self/uid_map", maps.uid_map.as_c_str()),
                (c"/proc/self/gid_map", maps.gid_map.as_c_str()),
            ] {
                write_file(path, text)?;
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

/// The Landlock ABI version of the running kernel: 0 when Landlock is missing or disabled.
#[cfg(feature = "sandbox")]
pub(super) fn landlock_abi() -> u32 {
    // SAFETY: `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)` reads and
    // writes no memory; it returns the ABI version or fails (ENOSYS, EOPNOTSUPP). Neither
    // `landlock` (which keeps the version to itself on purpose) nor `rustix` offers it.
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
