//! What the local executor asks its supervisor for, and what it hears back: the one vocabulary
//! of the Linux supervisor and the portable one.

use std::ffi::{CString, OsString};
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
    /// What the shell-to-be does to itself just before its `execve` (the sandboxed executor's;
    /// see `crate::sandbox`). It is built beforehand, in the harness: the shell-to-be may not
    /// allocate. Only the Linux supervisor applies it; the portable one refuses a launch that
    /// carries one.
    pub(crate) confinement: Option<Arc<Restrictions>>,
    /// Descriptors the shell inherits at their own numbers (a wrapper's seccomp program, a
    /// script too long for an argument); every other descriptor is closed at its `execve`.
    pub(crate) inherit: Vec<OwnedFd>,
}

/// The steps a confined shell-to-be takes on itself before its `execve`, in this order: a
/// mount namespace of its own ([`MountPlan`]), then its working directory, then every
/// capability dropped, `no_new_privs`, the seccomp filter and the Landlock ruleset. Each step
/// is inherited by everything the shell starts and cannot be lifted; a failed step fails the
/// start, so the command never runs with less. Everything here is built in the harness, where
/// allocating is fine: the shell-to-be only reads it (see `crate::supervisor::after_fork`).
#[derive(Debug, Default)]
pub(crate) struct Restrictions {
    /// The mount namespace, when the sandbox makes one.
    pub(crate) mounts: Option<MountPlan>,
    /// Empty the bounding, ambient, effective, permitted and inheritable sets.
    pub(crate) drop_capabilities: bool,
    /// A classic BPF program for `seccomp(SECCOMP_SET_MODE_FILTER)`; empty: no filter.
    pub(crate) seccomp: Vec<BpfInstruction>,
    /// A Landlock ruleset to enforce (created, with its rules, in the harness; the shell-to-be
    /// only restricts itself with it).
    pub(crate) landlock: Option<LandlockRuleset>,
}

/// One instruction of a classic BPF program: seccompiler's `struct sock_filter`, which its
/// `apply_filter` installs.
#[cfg(all(feature = "sandbox", target_os = "linux"))]
pub(crate) use seccompiler::sock_filter as BpfInstruction;

/// One instruction of a classic BPF program. Without the sandbox no program is ever built, and
/// a shell-to-be given one anyway fails its start.
#[cfg(not(all(feature = "sandbox", target_os = "linux")))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BpfInstruction {
    pub(crate) code: u16,
    pub(crate) jt: u8,
    pub(crate) jf: u8,
    pub(crate) k: u32,
}

/// A Landlock ruleset, created with its rules: the `landlock` crate's.
#[cfg(all(feature = "sandbox", target_os = "linux"))]
pub(crate) type LandlockRuleset = landlock::RulesetCreated;

/// Without the sandbox there is no Landlock ruleset to hold.
#[cfg(not(all(feature = "sandbox", target_os = "linux")))]
#[derive(Debug)]
pub(crate) enum LandlockRuleset {}

/// A mount namespace in which the whole tree is read-only but for the writable binds: the
/// shell-to-be enters the executor's user namespace when there is one (made once, see
/// `crate::supervisor::user_namespace`), unshares its mount namespace, takes a copy of each
/// bind's tree, makes every mount read-only, mounts the copies back in order, `nosuid` and
/// `nodev`, read-only where a bind says so, and mounts a devpts of its own on `/dev/pts`.
#[derive(Debug)]
pub(crate) struct MountPlan {
    /// The executor's user namespace, mapping the harness's user and group to themselves;
    /// `None`: none (the harness may mount).
    pub(crate) user_namespace: Option<OwnedFd>,
    /// The binds, parents before children (see [`MOUNT_BINDS_MAX`]): the writable roots, each
    /// directory between a writable root and a place nested in it (so that no command can
    /// rename it: it is a mount point in every command's namespace), and the protected places.
    pub(crate) binds: Vec<MountBind>,
}

/// The most binds a [`MountPlan`] holds: the shell-to-be keeps one descriptor per bind on its
/// stack.
pub(crate) const MOUNT_BINDS_MAX: usize = 32;

/// The lines written to `/proc/self/uid_map` and `gid_map` of a new user namespace: `ID ID 1`.
#[derive(Debug)]
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) struct IdMaps {
    pub(crate) uid_map: CString,
    pub(crate) gid_map: CString,
}

impl IdMaps {
    /// This process's effective user and group, each mapped to itself alone.
    #[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
    pub(crate) fn own() -> IdMaps {
        let line = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
        IdMaps {
            uid_map: line(nix::unistd::geteuid().as_raw()),
            gid_map: line(nix::unistd::getegid().as_raw()),
        }
    }
}

/// A tree mounted back over the read-only copy at its own path.
#[derive(Debug)]
pub(crate) struct MountBind {
    pub(crate) path: CString,
    /// Left writable (a writable root) or made read-only (a protected place beneath one).
    pub(crate) writable: bool,
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
