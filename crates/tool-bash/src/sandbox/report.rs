//! What the system offers a sandbox ([`SandboxProbe`]), what a policy needs of it
//! ([`Capability`]), and what an executor enforces, right by right ([`SandboxReport`]).

use super::{SandboxBackend, SandboxMode};
use crate::local::find_on_path;
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// A capability of the system a policy needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Capability {
    /// Landlock file-system rules (ABI 1, Linux 5.13).
    LandlockFilesystem,
    /// Landlock's truncate right (ABI 3, Linux 6.2): without it `truncate` escapes the rules.
    LandlockTruncate,
    /// Landlock's TCP rules (ABI 4, Linux 6.7).
    LandlockNetwork,
    /// Landlock's scopes (ABI 6, Linux 6.12): without them a command can signal any process of
    /// its user and reach abstract unix sockets.
    LandlockScopes,
    /// Seccomp filters: they deny the sockets, device nodes, terminal input injection and
    /// `io_uring` that Landlock does not mediate.
    Seccomp,
    /// A mount namespace the commands' tree is made read-only in, made by the harness itself
    /// (`CAP_SYS_ADMIN`) or in a user namespace of the command's own (Linux 5.12 for
    /// `mount_setattr`): without it the metadata of files outside the roots (mode, owner,
    /// times, extended attributes) can change, and the session store beneath a root is
    /// writable.
    MountNamespace,
    /// A working `bwrap` on `PATH`.
    Bubblewrap,
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Capability::LandlockFilesystem => {
                "Landlock file-system rules (Landlock ABI 1, Linux 5.13)"
            }
            Capability::LandlockTruncate => "Landlock's truncate right (Landlock ABI 3, Linux 6.2)",
            Capability::LandlockNetwork => "Landlock TCP rules (Landlock ABI 4, Linux 6.7)",
            Capability::LandlockScopes => {
                "Landlock's signal and abstract-socket scopes (Landlock ABI 6, Linux 6.12)"
            }
            Capability::Seccomp => "seccomp filters",
            Capability::MountNamespace => {
                "a read-only mount namespace (CAP_SYS_ADMIN or unprivileged user namespaces, \
                 Linux 5.12)"
            }
            Capability::Bubblewrap => "bubblewrap (a working `bwrap` on PATH)",
        })
    }
}

/// Why a sandboxed executor could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The system lacks a capability the policy needs.
    #[error("the {mode} sandbox needs {capability}, which this system lacks ({detail})")]
    Unsupported {
        /// The policy's mode.
        mode: SandboxMode,
        /// The missing capability.
        capability: Capability,
        /// What the probe found.
        detail: String,
    },
    /// A protected place lies beneath a writable root, and without a mount namespace nothing
    /// can keep the commands from writing it: refused even in best effort.
    #[error(
        "`{}` lies beneath a writable root and cannot be protected from the commands here \
         (no mount namespace: {detail}); place it elsewhere or work in another directory",
        place.display()
    )]
    Unprotected {
        /// The place.
        place: PathBuf,
        /// Why there is no mount namespace.
        detail: String,
    },
    /// Setting the sandbox up failed (a root that cannot be opened, the temporary directory).
    #[error("cannot set up the sandbox: {0}")]
    Setup(String),
}

/// How the commands' mount namespace is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum MountNamespace {
    /// The harness may mount (`CAP_SYS_ADMIN`, as root usually): a mount namespace alone, and
    /// files keep the owners they have.
    Own,
    /// In a user namespace of the command's own, which maps only the harness's user and group
    /// to themselves: files of other users show as `nobody`.
    User,
}

/// What the executor found about the system: the seam through which tests simulate an old
/// kernel or a missing `bwrap`.
pub trait SandboxProbe: Send + Sync + fmt::Debug {
    /// The kernel's Landlock ABI version; 0 without Landlock.
    fn landlock_abi(&self) -> u32;

    /// The `bwrap` program, when one is installed and can create its namespaces here; or why
    /// not.
    fn bubblewrap(&self) -> Result<PathBuf, String>;

    /// Whether the kernel filters system calls with seccomp programs.
    fn seccomp(&self) -> bool;

    /// How a command's read-only mount namespace can be made here, or why it cannot.
    fn mount_namespace(&self) -> Result<MountNamespace, String>;
}

/// The running system, as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemProbe;

impl SandboxProbe for SystemProbe {
    fn landlock_abi(&self) -> u32 {
        crate::supervisor::landlock_abi()
    }

    fn bubblewrap(&self) -> Result<PathBuf, String> {
        let program = find_on_path(Path::new("bwrap"))
            .ok_or_else(|| String::from("`bwrap` is not on PATH"))?;
        // Installed is not enough: it needs namespaces (unprivileged user namespaces, or root).
        let output = std::process::Command::new(&program)
            .args([
                "--ro-bind",
                "/",
                "/",
                "--unshare-net",
                "--unshare-user",
                "--unshare-pid",
                "--unshare-uts",
                "--proc",
                "/proc",
                "--",
                "true",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("`{}` did not start: {e}", program.display()))?;
        if output.status.success() {
            Ok(program)
        } else {
            Err(format!(
                "`{}` cannot create its namespaces here: {}",
                program.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }

    fn seccomp(&self) -> bool {
        // The kernel lists the filters of a process only where it has seccomp filters.
        std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
            status
                .lines()
                .any(|line| line.starts_with("Seccomp_filters:"))
        })
    }

    fn mount_namespace(&self) -> Result<MountNamespace, String> {
        let own = if may_mount() {
            match crate::supervisor::try_mount_namespace(None) {
                Ok(()) => return Ok(MountNamespace::Own),
                Err(error) => format!("a mount namespace of its own failed: {error}; "),
            }
        } else {
            String::new()
        };
        let tried = user_namespace_waiter()
            .and_then(|waiter| crate::supervisor::user_namespace(&waiter))
            .and_then(|namespace| crate::supervisor::try_mount_namespace(Some(namespace)));
        match tried {
            Ok(()) => Ok(MountNamespace::User),
            Err(error) => Err(format!("{own}a user namespace failed: {error}")),
        }
    }
}

/// The shell that holds a new user namespace open while the harness takes it
/// (`crate::supervisor::user_namespace`): `bash` on `PATH`, else `/bin/sh`.
pub(super) fn user_namespace_waiter() -> std::io::Result<PathBuf> {
    let sh = Path::new("/bin/sh");
    find_on_path(Path::new("bash"))
        .or_else(|| sh.exists().then(|| sh.to_path_buf()))
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no shell to wait in"))
}

/// Whether this process has `CAP_SYS_ADMIN` in its effective set.
fn may_mount() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|bits| u64::from_str_radix(bits.trim(), 16).ok())
        .is_some_and(|bits| bits & (1 << CAP_SYS_ADMIN) != 0)
}

/// What a sandbox promises to deny a confined command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Right {
    /// Writing, creating, removing, renaming or truncating anything outside the writable roots.
    Writes,
    /// Changing the mode, owner, times or extended attributes of anything outside them.
    Metadata,
    /// Writing the places beneath a root that the policy protects (the session store).
    ProtectedPlaces,
    /// Creating a block or character device node anywhere.
    DeviceNodes,
    /// Device ioctls beyond the bit buckets and terminals, and typing into a terminal
    /// (`TIOCSTI`, `TIOCLINUX`).
    DeviceIoctls,
    /// Holding any capability (all five sets are empty; `no_new_privs` is set).
    Capabilities,
    /// Having a controlling terminal (every command runs in a session of its own).
    Terminal,
    /// TCP `bind` and `connect` (when the network is denied).
    Tcp,
    /// Every other socket of the network: UDP, raw, packet, netlink (when it is denied).
    OtherSockets,
    /// Connecting to a unix socket by path outside the writable roots (when it is denied).
    UnixSockets,
    /// Connecting to an abstract unix socket made outside the command (when it is denied).
    AbstractUnixSockets,
    /// Signalling a process that is not the command's own.
    Signals,
    /// Reading the harness's or the supervisor's memory and environment (`ptrace`,
    /// `/proc/PID/mem`, `/proc/PID/environ`).
    HarnessMemory,
}

/// A mechanism that enforces a right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Mechanism {
    /// Landlock's file-system rules, TCP rules or scopes.
    Landlock,
    /// The seccomp filter.
    Seccomp,
    /// A mount namespace with everything read-only but the writable roots.
    MountNamespace,
    /// A PID namespace of the command's own (bubblewrap).
    PidNamespace,
    /// A network namespace of the command's own (bubblewrap).
    NetworkNamespace,
    /// Every capability set emptied, and `no_new_privs`.
    CapabilityDrop,
    /// A session of the command's own, without a controlling terminal.
    Session,
}

/// How one right is enforced on this system.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RightReport {
    /// The right.
    pub right: Right,
    /// Whether it is denied.
    pub enforced: bool,
    /// The mechanisms that deny it here (empty when it is not enforced).
    pub by: Vec<Mechanism>,
}

/// What a sandboxed executor enforces: recorded in the `session/start` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SandboxReport {
    /// The policy's mode.
    pub mode: SandboxMode,
    /// The mechanism; `None` when nothing is confined.
    pub backend: Option<SandboxBackend>,
    /// Whether commands may use the network.
    pub network: bool,
    /// The roots commands may write (besides their temporary directory).
    pub writable_roots: Vec<PathBuf>,
    /// Places beneath the writable roots commands may not write (the session store).
    pub protected: Vec<PathBuf>,
    /// The commands' private temporary directory (`TMPDIR`), when confined.
    pub temp_dir: Option<PathBuf>,
    /// The kernel's Landlock ABI version, for the Landlock backend.
    pub landlock_abi: Option<u32>,
    /// How the commands' mount namespace is made, when they have one.
    pub mount_namespace: Option<MountNamespace>,
    /// Each right the policy denies, and what enforces it here.
    pub rights: Vec<RightReport>,
    /// What the policy asks and the system cannot enforce (best-effort mode only).
    pub unenforced: Vec<Capability>,
}

impl SandboxReport {
    /// One line for people and models: mode, backend, network, what is not enforced.
    pub fn summary(&self) -> String {
        let Some(backend) = self.backend else {
            if self.unenforced.is_empty() {
                return format!("{} (not confined)", self.mode);
            }
            let missing: Vec<String> = self.unenforced.iter().map(ToString::to_string).collect();
            return format!(
                "{} NOT enforced (not confined): {}",
                self.mode,
                missing.join(", ")
            );
        };
        let mut line = format!(
            "{} via {backend}; network {}",
            self.mode,
            if self.network { "allowed" } else { "denied" }
        );
        if !self.unenforced.is_empty() {
            let missing: Vec<String> = self.unenforced.iter().map(ToString::to_string).collect();
            line.push_str(&format!("; NOT enforced: {}", missing.join(", ")));
        }
        line
    }

    /// Whether `right` is denied here.
    pub fn enforces(&self, right: Right) -> bool {
        self.rights
            .iter()
            .any(|report| report.right == right && report.enforced)
    }
}
