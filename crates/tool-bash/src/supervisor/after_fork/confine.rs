//! The confinement a shell-to-be, or a sandboxed program's forked child, takes on itself just
//! before its `execve`. It runs after a `fork`, so it keeps the rule of
//! [`after_fork`](super): `rustix`, `nix`, `seccompiler` and `landlock` calls on the
//! [`Restrictions`] the harness built, nothing allocated, no lock, no panic.

// `mount_setattr`, which no safe crate wraps; the block says why it is sound.
#![allow(unsafe_code)]

use super::raw;
use crate::launch::{MOUNT_BINDS_MAX, MountPlan, Restrictions};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::CStr;

/// The kernel's `struct mount_attr` (`linux/mount.h`).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 1;
const MOUNT_ATTR_NOSUID: u64 = 2;
const MOUNT_ATTR_NODEV: u64 = 4;
const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = 0x1000;

/// `mount_setattr` (Linux 5.12), which neither `rustix` nor `nix` wraps.
fn mount_setattr(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: u32,
    attr: &MountAttr,
) -> Result<(), Errno> {
    // SAFETY: the kernel reads the NUL-terminated `path` and `size_of::<MountAttr>()` bytes of
    // `attr`, both borrowed for the call; it writes no memory. A raw system call is
    // async-signal-safe.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            raw(dir),
            path.as_ptr(),
            flags,
            std::ptr::from_ref(attr),
            size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::INVAL))
    }
}

/// The errno of a `nix` call.
fn from_nix(error: nix::Error) -> Errno {
    Errno::from_raw_os_error(error as i32)
}

/// The errno inside a crate's error, found along its sources: `EPERM` if none says.
#[cfg(all(feature = "sandbox", target_os = "linux"))]
fn errno_of(error: &(dyn std::error::Error + 'static)) -> Errno {
    let mut at = Some(error);
    while let Some(error) = at {
        if let Some(errno) = error
            .downcast_ref::<std::io::Error>()
            .and_then(Errno::from_io_error)
        {
            return errno;
        }
        at = error.source();
    }
    Errno::PERM
}

/// Confines the calling process, which is about to `execve` (a shell-to-be, or a program's
/// forked child): the mount namespace, then `workdir` as its directory (a directory entered
/// before the mounts would still be the read-only copy), then every capability dropped,
/// `no_new_privs`, the seccomp filter and the Landlock ruleset. Keeps this module's rule.
pub(crate) fn confine(
    confinement: &Restrictions,
    workdir: &CStr,
    null_stdin: bool,
) -> Result<(), Errno> {
    if let Some(mounts) = &confinement.mounts {
        enter_mount_namespace(mounts, null_stdin)?;
    }
    rustix::process::chdir(workdir)?;
    if confinement.drop_capabilities {
        drop_capabilities()?;
    }
    // `no_new_privs` before the filter and the ruleset (the kernel requires it of a caller
    // without `CAP_SYS_ADMIN`); it also keeps a setuid program or one with file capabilities
    // from gaining what was just dropped.
    rustix::thread::set_no_new_privs(true)?;
    if !confinement.seccomp.is_empty() {
        apply_seccomp(confinement)?;
    }
    if let Some(ruleset) = &confinement.landlock {
        restrict_self(ruleset)?;
    }
    Ok(())
}

#[cfg(all(feature = "sandbox", target_os = "linux"))]
fn apply_seccomp(confinement: &Restrictions) -> Result<(), Errno> {
    seccompiler::apply_filter(&confinement.seccomp).map_err(|error| errno_of(&error))
}

#[cfg(not(all(feature = "sandbox", target_os = "linux")))]
fn apply_seccomp(_: &Restrictions) -> Result<(), Errno> {
    // Fail closed: without the sandbox feature there is nothing to install a filter with.
    Err(Errno::NOSYS)
}

/// Enforces the ruleset on this process: a copy of it (a `dup`, onto 3 or above), which
/// `restrict_self` consumes. Anything short of full enforcement fails the start.
#[cfg(all(feature = "sandbox", target_os = "linux"))]
fn restrict_self(ruleset: &crate::launch::LandlockRuleset) -> Result<(), Errno> {
    let copy = ruleset.try_clone().map_err(|error| errno_of(&error))?;
    let status = copy.restrict_self().map_err(|error| errno_of(&error))?;
    if status.ruleset == landlock::RulesetStatus::FullyEnforced {
        Ok(())
    } else {
        Err(Errno::NOSYS)
    }
}

#[cfg(not(all(feature = "sandbox", target_os = "linux")))]
fn restrict_self(ruleset: &crate::launch::LandlockRuleset) -> Result<(), Errno> {
    match *ruleset {}
}

/// Opens `path` as an `O_PATH` directory without following a symbolic link anywhere on it
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6): a bind's place is looked up as the harness
/// resolved it, or not at all.
fn open_place(path: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )
}

/// A mount namespace of this process's own in which everything is read-only but the plan's
/// writable binds (see [`MountPlan`]), with a devpts of its own on `/dev/pts` (no terminal of
/// the host's can be opened), and, when `null_stdin`, standard input reopened on its
/// `/dev/null` (a descriptor of the host's `/dev/null` would let `chmod /dev/stdin` change
/// the host's device).
fn enter_mount_namespace(plan: &MountPlan, null_stdin: bool) -> Result<(), Errno> {
    use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};
    if let Some(user_namespace) = &plan.user_namespace {
        rustix::thread::move_into_link_name_space(
            user_namespace.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::User),
        )?;
    }
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(from_nix)?;
    // Nothing mounted or unmounted here propagates back to the harness's namespace, nor later
    // mounts of the host in (they would be writable).
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    let binds = plan
        .binds
        .get(..plan.binds.len().min(MOUNT_BINDS_MAX))
        .unwrap_or(&[]);
    // Copies of the binds' trees as they are, taken before everything becomes read-only.
    let mut copies: [Option<OwnedFd>; MOUNT_BINDS_MAX] = [const { None }; MOUNT_BINDS_MAX];
    for (copy, bind) in copies.iter_mut().zip(binds) {
        let place = open_place(&bind.path)?;
        *copy = Some(rustix::mount::open_tree(
            &place,
            c"",
            OpenTreeFlags::OPEN_TREE_CLONE
                | OpenTreeFlags::AT_RECURSIVE
                | OpenTreeFlags::AT_EMPTY_PATH
                | OpenTreeFlags::OPEN_TREE_CLOEXEC,
        )?);
    }
    let read_only = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    mount_setattr(CWD, c"/", AT_RECURSIVE, &read_only)?;
    for (copy, bind) in copies.iter().zip(binds) {
        let Some(copy) = copy else {
            return Err(Errno::BADF);
        };
        let attributes = MountAttr {
            attr_set: MOUNT_ATTR_NOSUID
                | MOUNT_ATTR_NODEV
                | if bind.writable { 0 } else { MOUNT_ATTR_RDONLY },
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        mount_setattr(copy.as_fd(), c"", AT_EMPTY_PATH | AT_RECURSIVE, &attributes)?;
        let place = open_place(&bind.path)?;
        rustix::mount::move_mount(
            copy,
            c"",
            &place,
            c"",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
        )?;
    }
    drop(copies);
    // A devpts instance of the command's own: the host's terminals (the user's, other
    // sessions') are out of its sight, to read as to write. A pseudo-terminal the command
    // makes through `/dev/ptmx` lives in the host's instance, where it cannot open its other
    // end: there are none under Landlock (its rules cannot name an instance made after them).
    rustix::mount::mount(
        c"devpts",
        c"/dev/pts",
        c"devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
    )?;
    if null_stdin {
        let null = rustix::fs::openat(
            CWD,
            c"/dev/null",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::stdio::dup2_stdin(&null)?;
    }
    Ok(())
}

/// Empties every capability set: the bounding set (so that not even an `execve` by root gives
/// any back), the ambient set, and the effective, permitted and inheritable sets.
fn drop_capabilities() -> Result<(), Errno> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for capability in 0..64 {
        match rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(
            1 << capability,
        )) {
            Ok(()) => {}
            // Past the kernel's last capability.
            Err(Errno::INVAL) => break,
            // Without `CAP_SETPCAP` the bounding set stays: harmless for a process that is not
            // root, since `no_new_privs` keeps its `execve` from granting any capability; root
            // would get them all back at its `execve`, so that fails the start.
            Err(Errno::PERM) if !rustix::process::geteuid().is_root() => {}
            Err(error) => return Err(error),
        }
    }
    // Older kernels lack ambient capabilities, and with them anything to clear.
    match rustix::thread::clear_ambient_capability_set() {
        Ok(()) | Err(Errno::INVAL) => {}
        Err(error) => return Err(error),
    }
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
}

/// Writes `text` (without its NUL) to the file at `path`.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) fn write_file(path: &CStr, text: &CStr) -> Result<(), Errno> {
    let fd = rustix::fs::openat(CWD, path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, text.to_bytes())?;
    Ok(())
}
