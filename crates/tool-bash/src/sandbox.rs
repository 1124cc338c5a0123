//! The sandboxed executor: the local executor with every command it starts confined by a
//! [`SandboxPolicy`], on Landlock (default) or bubblewrap.
//!
//! | mode | the command may write | network |
//! |---|---|---|
//! | [`SandboxMode::ReadOnly`] | its private temporary directory (`TMPDIR`) and terminal devices (`/dev/null`, `/dev/tty`, …) | denied unless [`SandboxPolicy::network`] |
//! | [`SandboxMode::WorkspaceWrite`] | also the workspace roots and the extra roots | denied unless [`SandboxPolicy::network`] |
//! | [`SandboxMode::FullAccess`] | anything its user may | allowed |
//!
//! Reads and execution are never confined. With Landlock ([`SandboxBackend::Landlock`]) the
//! shell enforces a ruleset on itself just before its `execve` (after `no_new_privs`), so the
//! confinement covers everything the command starts, foreground and background, and survives
//! `exec` of setuid programs; the network is denied with Landlock's TCP rules (`bind` and
//! `connect` on every port). With bubblewrap ([`SandboxBackend::Bubblewrap`]) the shell runs in
//! `bwrap`: a read-only bind of `/`, a private `/tmp` (the command's `TMPDIR`), writable binds of
//! the roots, and a network namespace of its own unless the network is allowed.
//!
//! Spill files are written by the harness from the command's pipes, in a directory the command
//! may not write: a command cannot forge or truncate its own recorded output.
//!
//! # Fail closed
//!
//! [`SandboxedExecutor::new`] fails with [`SandboxError::Unsupported`], naming the
//! [`Capability`] that is missing, when the kernel (as a [`SandboxProbe`] reports it) cannot
//! enforce the policy. Only [`Enforcement::BestEffort`] runs with less, and its
//! [`SandboxReport::unenforced`] lists what is not enforced. There is no silent fallback.
//!
//! # Escalation
//!
//! [`ShellExecutor::escalated`] hands the `bash` tool an unconfined executor for one call that
//! asked for it (`sandbox: "escalate"` with a `justification`) and that the registry's approver
//! granted; the tool never leaves the sandbox on its own say-so.

use crate::local::{Confinement, LocalConfig, LocalExecutor, Wrapper, find_on_path};
use crate::shell::{
    ShellError, ShellExecutor, ShellProcess, ShellRequest, ShellRunResult, ShellSpec,
};
use futures::future::BoxFuture;
use landlock::{
    ABI, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr,
};
use serde::Serialize;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A program that is not a shell command, to start under a sandboxed executor's confinement
/// ([`SandboxedExecutor::command`]): a stdio MCP server, a helper the host runs for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfinedProgram {
    /// The program, found on `PATH` (the one in `env`) when it has no slash.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its working directory.
    pub workdir: PathBuf,
    /// Its whole environment: nothing of the host's is inherited.
    pub env: Vec<(OsString, OsString)>,
}

impl ConfinedProgram {
    /// `program` with no arguments and an empty environment, in `workdir`.
    pub fn new(program: impl Into<OsString>, workdir: impl Into<PathBuf>) -> ConfinedProgram {
        ConfinedProgram {
            program: program.into(),
            args: Vec::new(),
            workdir: workdir.into(),
            env: Vec::new(),
        }
    }

    /// With `args`.
    pub fn with_args<I, A>(mut self, args: I) -> ConfinedProgram
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// With `env` as its environment.
    pub fn with_env<I, N, V>(mut self, env: I) -> ConfinedProgram
    where
        I: IntoIterator<Item = (N, V)>,
        N: Into<OsString>,
        V: Into<OsString>,
    {
        self.env = env
            .into_iter()
            .map(|(name, value)| (name.into(), value.into()))
            .collect();
        self
    }
}

/// What a sandboxed command may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SandboxMode {
    /// Read everything; write only the private temporary directory.
    ReadOnly,
    /// Also write the workspace roots and the extra roots.
    WorkspaceWrite,
    /// No confinement.
    FullAccess,
}

impl SandboxMode {
    /// The mode's name: `read-only`, `workspace-write` or `full-access`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which mechanism confines the commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SandboxBackend {
    /// Linux Landlock, enforced by the shell on itself before its `execve`.
    Landlock,
    /// `bwrap` (bubblewrap): mount and network namespaces.
    Bubblewrap,
}

impl fmt::Display for SandboxBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SandboxBackend::Landlock => "landlock",
            SandboxBackend::Bubblewrap => "bubblewrap",
        })
    }
}

/// What to do when the system cannot enforce the whole policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Enforcement {
    /// Fail the executor's construction, naming the missing capability (the default).
    #[default]
    Required,
    /// Enforce what the system supports and report the rest ([`SandboxReport::unenforced`]).
    BestEffort,
}

/// The policy of a sandboxed executor.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxPolicy {
    /// What commands may do.
    pub mode: SandboxMode,
    /// The working directory's roots, writable in [`SandboxMode::WorkspaceWrite`].
    pub workspace_roots: Vec<PathBuf>,
    /// Further roots writable in [`SandboxMode::WorkspaceWrite`].
    pub extra_roots: Vec<PathBuf>,
    /// Allow TCP `bind` and `connect` in the confined modes (default: denied).
    pub network: bool,
    /// Fail closed (default) or enforce what the system supports.
    pub enforcement: Enforcement,
}

impl SandboxPolicy {
    /// A policy of `mode` with no roots, no network and required enforcement.
    pub fn new(mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy {
            mode,
            workspace_roots: Vec::new(),
            extra_roots: Vec::new(),
            network: false,
            enforcement: Enforcement::Required,
        }
    }

    /// Adds a workspace root.
    pub fn with_workspace_root(mut self, root: impl Into<PathBuf>) -> SandboxPolicy {
        self.workspace_roots.push(root.into());
        self
    }

    /// Adds an extra writable root.
    pub fn with_extra_root(mut self, root: impl Into<PathBuf>) -> SandboxPolicy {
        self.extra_roots.push(root.into());
        self
    }

    /// Allows or denies the network.
    pub fn with_network(mut self, network: bool) -> SandboxPolicy {
        self.network = network;
        self
    }

    /// Sets the enforcement.
    pub fn with_enforcement(mut self, enforcement: Enforcement) -> SandboxPolicy {
        self.enforcement = enforcement;
        self
    }

    /// The roots commands may write besides their temporary directory.
    fn writable_roots(&self) -> Vec<PathBuf> {
        match self.mode {
            SandboxMode::WorkspaceWrite => self
                .workspace_roots
                .iter()
                .chain(&self.extra_roots)
                .cloned()
                .collect(),
            SandboxMode::ReadOnly | SandboxMode::FullAccess => Vec::new(),
        }
    }

    fn confined(&self) -> bool {
        self.mode != SandboxMode::FullAccess
    }
}

/// A capability of the system a policy needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Capability {
    /// Landlock file-system rules (ABI 1, Linux 5.13).
    LandlockFilesystem,
    /// Landlock's truncate right (ABI 3, Linux 6.2): without it `truncate` escapes the rules.
    LandlockTruncate,
    /// Landlock's TCP rules (ABI 4, Linux 6.7): without them the network stays open.
    LandlockNetwork,
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
    /// Setting the sandbox up failed (a root that cannot be opened, the temporary directory).
    #[error("cannot set up the sandbox: {0}")]
    Setup(String),
}

/// What the executor found about the system: the seam through which tests simulate an old
/// kernel or a missing `bwrap`.
pub trait SandboxProbe: Send + Sync + fmt::Debug {
    /// The kernel's Landlock ABI version; 0 without Landlock.
    fn landlock_abi(&self) -> u32;

    /// The `bwrap` program, when one is installed and can create its namespaces here; or why
    /// not.
    fn bubblewrap(&self) -> Result<PathBuf, String>;
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
            .args(["--ro-bind", "/", "/", "--unshare-net", "--", "true"])
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
    /// The commands' private temporary directory (`TMPDIR`), when confined.
    pub temp_dir: Option<PathBuf>,
    /// The kernel's Landlock ABI version, for the Landlock backend.
    pub landlock_abi: Option<u32>,
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
}

/// The local executor with every command confined by a [`SandboxPolicy`] (see the module docs).
#[derive(Debug, Clone)]
pub struct SandboxedExecutor {
    /// Confined unless the report has no backend; an approved escalation runs on it without
    /// its confinement ([`LocalExecutor::unconfined`]).
    confined: LocalExecutor,
    report: Arc<SandboxReport>,
}

/// Device files every confined command may write: the bit buckets and its terminal.
const WRITABLE_DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/ptmx",
];

impl SandboxedExecutor {
    /// A sandboxed executor with `config`, on `backend`, probing the running system.
    pub fn new(
        policy: SandboxPolicy,
        backend: SandboxBackend,
        config: LocalConfig,
    ) -> Result<SandboxedExecutor, SandboxError> {
        SandboxedExecutor::with_probe(policy, backend, config, &SystemProbe)
    }

    /// As [`SandboxedExecutor::new`], with the system as `probe` reports it.
    pub fn with_probe(
        policy: SandboxPolicy,
        backend: SandboxBackend,
        config: LocalConfig,
        probe: &dyn SandboxProbe,
    ) -> Result<SandboxedExecutor, SandboxError> {
        let writable_roots = policy
            .writable_roots()
            .into_iter()
            .map(|root| {
                std::fs::canonicalize(&root).map_err(|e| {
                    SandboxError::Setup(format!("writable root `{}`: {e}", root.display()))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut report = SandboxReport {
            mode: policy.mode,
            backend: None,
            network: policy.network || !policy.confined(),
            writable_roots: writable_roots.clone(),
            temp_dir: None,
            landlock_abi: None,
            unenforced: Vec::new(),
        };
        if !policy.confined() {
            return Ok(SandboxedExecutor {
                confined: LocalExecutor::new(config),
                report: Arc::new(report),
            });
        }
        let missing = |capability: Capability, detail: String| -> Result<(), SandboxError> {
            match policy.enforcement {
                Enforcement::Required => Err(SandboxError::Unsupported {
                    mode: policy.mode,
                    capability,
                    detail,
                }),
                Enforcement::BestEffort => {
                    tracing::warn!(%capability, %detail, "the sandbox cannot enforce this");
                    Ok(())
                }
            }
        };
        let mut confinement = Confinement::default();
        match backend {
            SandboxBackend::Landlock => {
                let abi = probe.landlock_abi();
                report.landlock_abi = Some(abi);
                let needs: [(Capability, u32, bool); 3] = [
                    (Capability::LandlockFilesystem, 1, true),
                    (Capability::LandlockTruncate, 3, true),
                    (Capability::LandlockNetwork, 4, !policy.network),
                ];
                for (capability, since, needed) in needs {
                    if needed && abi < since {
                        missing(
                            capability,
                            format!("the kernel's Landlock ABI is {abi}, {since} is needed"),
                        )?;
                        report.unenforced.push(capability);
                    }
                }
                if abi == 0 {
                    // Best effort with no Landlock at all: nothing can be confined.
                    return Ok(SandboxedExecutor {
                        confined: LocalExecutor::new(config),
                        report: Arc::new(report),
                    });
                }
                let temp = private_temp_dir(config.spill_dir.as_deref())?;
                let mut writable = writable_roots.clone();
                writable.push(temp.path().to_path_buf());
                let ruleset = landlock_ruleset(abi, &writable, !policy.network && abi >= 4)?;
                confinement.landlock = Some(Arc::new(ruleset));
                confinement.env.push(("TMPDIR".into(), temp.path().into()));
                report.temp_dir = Some(temp.path().to_path_buf());
                confinement._temp_dir = Some(temp);
            }
            SandboxBackend::Bubblewrap => {
                let program = match probe.bubblewrap() {
                    Ok(program) => program,
                    Err(detail) => {
                        missing(Capability::Bubblewrap, detail)?;
                        report.unenforced.push(Capability::Bubblewrap);
                        return Ok(SandboxedExecutor {
                            confined: LocalExecutor::new(config),
                            report: Arc::new(report),
                        });
                    }
                };
                confinement.wrapper = Some(bubblewrap(program, &writable_roots, policy.network));
                confinement.env.push(("TMPDIR".into(), "/tmp".into()));
                report.temp_dir = Some(PathBuf::from("/tmp"));
            }
        }
        report.backend = Some(backend);
        Ok(SandboxedExecutor {
            confined: LocalExecutor::confined(config, confinement),
            report: Arc::new(report),
        })
    }

    /// What this executor enforces.
    pub fn report(&self) -> &SandboxReport {
        &self.report
    }

    /// A command that starts `program` confined as this executor's shell commands are: the
    /// same writable places, private temporary directory (`TMPDIR`) and network rule, on the
    /// same backend, with `no_new_privs`. It is how a host confines the other programs it
    /// starts for the model, such as stdio MCP servers. The command's environment is exactly
    /// `program.env` (plus `TMPDIR` when confined), and its working directory
    /// `program.workdir`; the caller adds its standard streams, process group and the like.
    /// Without confinement (mode `full-access`, or best effort with nothing to enforce with)
    /// it is a plain command.
    pub fn command(&self, program: &ConfinedProgram) -> std::process::Command {
        let confinement = self.confined.confinement();
        let (launcher, args) = match confinement.and_then(|c| c.wrapper.as_ref()) {
            Some(wrapper) => wrapper.wrap(
                &program.program,
                program.args.clone(),
                &program.workdir,
                None,
            ),
            None => (PathBuf::from(&program.program), program.args.clone()),
        };
        let mut command = std::process::Command::new(launcher);
        command
            .args(args)
            .env_clear()
            .envs(program.env.iter().map(|(name, value)| (name, value)))
            .current_dir(&program.workdir);
        if let Some(confinement) = confinement {
            command.envs(confinement.env.iter().map(|(name, value)| (name, value)));
            if let Some(ruleset) = &confinement.landlock {
                crate::supervisor::restrict_at_exec(&mut command, Arc::clone(ruleset));
            }
        }
        command
    }

    /// A note for a result that looks like a denial by the sandbox: a non-zero exit with an
    /// error on stderr that the backend reports when it refuses (see [`denial_signs`]).
    fn denial_note(&self, result: &ShellRunResult) -> Option<String> {
        let backend = self.report.backend?;
        if result.exit_code == Some(0) || result.exit_code.is_none() {
            return None;
        }
        let stderr = &result.stderr.text;
        if !denial_signs(backend, self.report.network)
            .iter()
            .any(|sign| stderr.contains(sign))
        {
            return None;
        }
        let writable = match &self.report.temp_dir {
            Some(temp) => {
                let mut places: Vec<String> = self
                    .report
                    .writable_roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect();
                places.push(format!("{} (TMPDIR)", temp.display()));
                places.join(", ")
            }
            None => String::from("nothing"),
        };
        Some(format!(
            "sandbox: this command ran under the `{}` sandbox policy ({}), which allows writes \
             only to {writable}{}; the error above may be the sandbox's denial. If the command \
             must run outside it, call again with `sandbox: \"escalate\"` and a `justification` \
             the user will be asked to approve.",
            self.report.mode,
            match backend {
                SandboxBackend::Landlock => "Landlock",
                SandboxBackend::Bubblewrap => "bubblewrap",
            },
            if self.report.network {
                ""
            } else {
                " and denies network connections"
            }
        ))
    }
}

/// The errors, as commands print them, that `backend` gives a command it refuses. Landlock
/// refuses a write or a connection with `EACCES` and a mount with `EPERM`. Bubblewrap's
/// read-only binds give `EROFS`, its dropped capabilities `EACCES` or `EPERM`, and its network
/// namespace, when the network is denied, an unreachable network or, on its own loopback, a
/// refused connection. Anything else (a refused connection with the network allowed, a
/// read-only file system under Landlock) is not the sandbox's doing and gets no note.
fn denial_signs(backend: SandboxBackend, network: bool) -> &'static [&'static str] {
    const SIGNS: [&str; 5] = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
        "Network is unreachable",
        "Connection refused",
    ];
    match (backend, network) {
        (SandboxBackend::Landlock, _) => &SIGNS[..2],
        (SandboxBackend::Bubblewrap, true) => &SIGNS[..3],
        (SandboxBackend::Bubblewrap, false) => &SIGNS,
    }
}

/// The commands' private temporary directory: `0700`, an unguessable name, removed with the
/// executor. With a kept spill directory (a session's) it is made inside it, so that a harness
/// killed before it could remove it leaves it to the session (removed with it), never loose in
/// the system temporary directory.
fn private_temp_dir(spill_dir: Option<&Path>) -> Result<tempfile::TempDir, SandboxError> {
    let mut builder = tempfile::Builder::new();
    builder
        .prefix("dsh-sandbox-tmp-")
        .permissions(std::fs::Permissions::from_mode(0o700));
    match spill_dir {
        Some(dir) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| builder.tempdir_in(dir)),
        None => builder.tempdir(),
    }
    .map_err(|e| SandboxError::Setup(format!("cannot create the private temp dir: {e}")))
}

fn setup_error(what: impl fmt::Display) -> SandboxError {
    SandboxError::Setup(format!("Landlock ruleset: {what}"))
}

/// Builds the ruleset (in the harness, where allocating is fine): every write right the ABI
/// knows is handled, and granted only beneath `writable` and on the writable devices; with
/// `deny_network`, TCP `bind` and `connect` are handled and granted nowhere. Reads and
/// execution are not handled, so they stay allowed. Hard requirements: the crate fails rather
/// than quietly dropping a right the probe said the kernel has.
fn landlock_ruleset(
    abi: u32,
    writable: &[PathBuf],
    deny_network: bool,
) -> Result<std::os::fd::OwnedFd, SandboxError> {
    let fs_abi = match abi {
        1 => ABI::V1,
        2 => ABI::V2,
        _ => ABI::V3,
    };
    let handled = AccessFs::from_write(fs_abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(setup_error)?;
    if deny_network {
        let network: BitFlags<AccessNet> = AccessNet::BindTcp | AccessNet::ConnectTcp;
        ruleset = ruleset.handle_access(network).map_err(setup_error)?;
    }
    let mut created = ruleset.create().map_err(setup_error)?;
    for root in writable {
        let fd = PathFd::new(root)
            .map_err(|e| SandboxError::Setup(format!("`{}`: {e}", root.display())))?;
        created = created
            .add_rule(PathBeneath::new(fd, handled))
            .map_err(setup_error)?;
    }
    let file_rights = handled & AccessFs::from_file(fs_abi);
    for device in WRITABLE_DEVICES {
        // A device this system lacks is simply not granted.
        let Ok(fd) = PathFd::new(device) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, file_rights))
            .map_err(setup_error)?;
    }
    let ruleset = Option::<std::os::fd::OwnedFd>::from(created)
        .ok_or_else(|| setup_error("the kernel returned no ruleset"))?;
    // The shell-to-be installs its standard streams on 0–2 before it enforces the ruleset: a
    // harness started with a standard stream closed may have been given one of those numbers.
    crate::supervisor::above_stdio(ruleset).map_err(setup_error)
}

/// The `bwrap` wrapper: `/` read-only, a fresh `/dev`, a private `/tmp`, the roots writable, and
/// without the network a namespace of its own. The working directory and the spill directory
/// are bound read-only first when the private `/tmp` would hide them.
fn bubblewrap(program: PathBuf, writable: &[PathBuf], network: bool) -> Wrapper {
    let head: Vec<OsString> = ["--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/tmp"]
        .into_iter()
        .map(OsString::from)
        .collect();
    let mut tail: Vec<OsString> = Vec::new();
    for root in writable {
        tail.extend(["--bind".into(), root.clone().into(), root.clone().into()]);
    }
    if !network {
        tail.push("--unshare-net".into());
    }
    // Without this a harness running as root would give the command every capability inside
    // the namespaces: enough to remount the read-only binds writable.
    tail.extend(["--cap-drop".into(), "ALL".into()]);
    tail.push("--die-with-parent".into());
    let roots = writable.to_vec();
    Wrapper {
        program,
        head,
        tail,
        hidden: Box::new(move |place: &Path| {
            place.starts_with("/tmp") && !roots.iter().any(|root| place.starts_with(root))
        }),
    }
}

impl Wrapper {
    /// The wrapper's command line for `program ARGS…` in `workdir`: `(wrapper, HEAD…
    /// [--ro-bind P P]… TAIL… --chdir workdir -- program ARGS…)`. The working directory and
    /// `visible` (the spill directory) are bound read-only first where the wrapper would hide
    /// them.
    pub(crate) fn wrap<'a>(
        &self,
        program: &std::ffi::OsStr,
        mut args: Vec<OsString>,
        workdir: &'a Path,
        visible: Option<&'a Path>,
    ) -> (PathBuf, Vec<OsString>) {
        let mut line = self.head.clone();
        for place in std::iter::once(workdir).chain(visible) {
            if (self.hidden)(place) {
                line.extend(["--ro-bind".into(), place.into(), place.into()]);
            }
        }
        line.extend(self.tail.iter().cloned());
        line.extend([
            "--chdir".into(),
            workdir.into(),
            "--".into(),
            program.to_owned(),
        ]);
        line.append(&mut args);
        (self.program.clone(), line)
    }
}

impl ShellExecutor for SandboxedExecutor {
    fn required_drivers(&self) -> &[dsh_tools::runtime::RuntimeDriver] {
        self.confined.required_drivers()
    }

    fn resolve(
        &self,
        request: ShellRequest,
        session_cwd: Option<&Path>,
    ) -> Result<ShellSpec, ShellError> {
        self.confined.resolve(request, session_cwd)
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'static, Result<ShellRunResult, ShellError>> {
        let executor = self.clone();
        Box::pin(async move {
            let mut result = executor.confined.run(spec).await?;
            if let Some(note) = executor.denial_note(&result) {
                result.notes.push(note);
            }
            Ok(result)
        })
    }

    fn start(&self, spec: ShellSpec) -> Arc<dyn ShellProcess> {
        self.confined.start(spec)
    }

    fn sandbox_policy(&self) -> Option<String> {
        // Full access, or best effort where the system could enforce nothing, confines no
        // command: there is no sandbox to name to the model or to leave.
        self.report.backend?;
        Some(self.report.summary())
    }

    fn escalated(&self) -> Option<Arc<dyn ShellExecutor>> {
        self.report.backend?;
        Some(Arc::new(self.confined.unconfined()))
    }
}
