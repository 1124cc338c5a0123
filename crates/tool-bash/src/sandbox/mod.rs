//! The sandboxed executor: the local executor with every command it starts confined by a
//! [`SandboxPolicy`], on Landlock (default) or bubblewrap.
//!
//! | mode | the command may write | network |
//! |---|---|---|
//! | [`SandboxMode::ReadOnly`] | its private temporary directory (`TMPDIR`) and terminal devices (`/dev/null`, `/dev/tty`, …) | denied unless [`SandboxPolicy::network`] |
//! | [`SandboxMode::WorkspaceWrite`] | also the workspace roots and the extra roots, but not the [`protected`](SandboxPolicy::protected) places beneath them | denied unless [`SandboxPolicy::network`] |
//! | [`SandboxMode::FullAccess`] | anything its user may | allowed |
//!
//! Reads and execution are never confined. The confinement holds against a hostile command,
//! also when the harness runs as root ([`Right`] lists what it denies; the shell page of the
//! docs says what enforces each right on each backend):
//!
//! - With Landlock ([`SandboxBackend::Landlock`]) the shell-to-be confines itself just before
//!   its `execve`: a mount namespace in which everything is read-only but the writable roots
//!   (so metadata outside cannot change and the protected places cannot be written), then
//!   every capability dropped, `no_new_privs`, a seccomp filter (no socket of the network, no
//!   unix socket but a stream or sequenced-packet pair, no device node, no setuid bit, no
//!   terminal injection, no `io_uring`, no other process's limits or priority) and
//!   the Landlock ruleset (writes beneath the roots, device ioctls, TCP, the signal and
//!   abstract-socket scopes). All of it covers everything the command starts, foreground and
//!   background, and survives `exec` of setuid programs.
//! - With bubblewrap ([`SandboxBackend::Bubblewrap`]) the shell runs in `bwrap`: a read-only
//!   bind of `/`, fresh read-only `/dev` and `/proc`, a private `/tmp` (the command's
//!   `TMPDIR`), writable binds of the roots and read-only ones of the protected places; user,
//!   PID, UTS and IPC namespaces, a network namespace unless the network is allowed, a session
//!   of its own, no capability, and the same seccomp filter.
//!
//! Spill files are written by the harness from the command's pipes, in a directory the command
//! may not write: a command cannot forge or truncate its own recorded output. A host keeps its
//! own secrets out of its commands' reach with [`withdraw_secrets`].
//!
//! # Fail closed
//!
//! [`SandboxedExecutor::new`] fails with [`SandboxError::Unsupported`], naming the
//! [`Capability`] that is missing, when the kernel (as a [`SandboxProbe`] reports it) cannot
//! enforce the policy. Only [`Enforcement::BestEffort`] runs with less, and its
//! [`SandboxReport::unenforced`] lists what is not enforced, and [`SandboxReport::rights`] what
//! enforces each right. There is no silent fallback.
//!
//! # Escalation
//!
//! [`ShellExecutor::escalated`] hands the `bash` tool an unconfined executor for one call that
//! asked for it (`sandbox: "escalate"` with a `justification`) and that the registry's approver
//! granted; the tool never leaves the sandbox on its own say-so.

mod bubblewrap;
mod confine;
mod report;
mod secrets;

/// The mode, compiled on every platform; re-exported here, where it was first.
pub use crate::sandbox_mode::{SandboxMode, UnknownSandboxMode};
pub use report::{
    Capability, Mechanism, MountNamespace, Right, RightReport, SandboxError, SandboxProbe,
    SandboxReport, SystemProbe,
};
pub use secrets::withdraw_secrets;

use crate::launch::Restrictions;
use crate::local::{Confinement, LocalConfig, LocalExecutor};
use crate::shell::{
    ShellError, ShellExecutor, ShellProcess, ShellRequest, ShellRunResult, ShellSpec,
};
use confine::Offered;
use futures::future::BoxFuture;
use serde::Serialize;
use std::fmt;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A program that is not a shell command, to start under a sandboxed executor's confinement
/// ([`SandboxedExecutor::spawn_program`], [`SandboxedExecutor::command`]).
pub use crate::local::ConfinedProgram;

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
    /// Places beneath the writable roots commands may not write: the session store, whose
    /// logs and spill files only the harness writes. Read-only in the commands' mount
    /// namespace; each must exist.
    pub protected: Vec<PathBuf>,
    /// Allow the network in the confined modes (default: denied).
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
            protected: Vec::new(),
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

    /// Protects `place` (beneath a writable root) from the commands' writes.
    pub fn with_protected(mut self, place: impl Into<PathBuf>) -> SandboxPolicy {
        self.protected.push(place.into());
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

/// The local executor with every command confined by a [`SandboxPolicy`] (see the module docs).
#[derive(Debug, Clone)]
pub struct SandboxedExecutor {
    /// Confined unless the report has no backend; an approved escalation runs on it without
    /// its confinement ([`LocalExecutor::unconfined`]).
    confined: LocalExecutor,
    report: Arc<SandboxReport>,
}

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
        mut config: LocalConfig,
        probe: &dyn SandboxProbe,
    ) -> Result<SandboxedExecutor, SandboxError> {
        let canonical = |what: &str, place: &Path| {
            std::fs::canonicalize(place)
                .map_err(|e| SandboxError::Setup(format!("{what} `{}`: {e}", place.display())))
        };
        let writable_roots = policy
            .writable_roots()
            .iter()
            .map(|root| canonical("writable root", root))
            .collect::<Result<Vec<_>, _>>()?;
        let mut protected = policy
            .protected
            .iter()
            .map(|place| canonical("protected place", place))
            .collect::<Result<Vec<_>, _>>()?;
        let mut report = SandboxReport {
            mode: policy.mode,
            backend: None,
            network: policy.network || !policy.confined(),
            writable_roots: writable_roots.clone(),
            protected: Vec::new(),
            temp_dir: None,
            landlock_abi: None,
            mount_namespace: None,
            rights: Vec::new(),
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
        let unconfined = |config: LocalConfig, report: SandboxReport| SandboxedExecutor {
            confined: LocalExecutor::new(config),
            report: Arc::new(report),
        };
        let mut confinement = Confinement::default();
        let mut offered = Offered {
            backend,
            landlock_abi: 0,
            seccomp: probe.seccomp(),
            mount_namespace: false,
            deny_network: !policy.network,
            protects: false,
        };
        let seccomp_program = if offered.seccomp {
            confine::seccomp_program(!policy.network, probe_abi(backend, probe))?
        } else {
            missing(
                Capability::Seccomp,
                String::from("the kernel filters no system calls"),
            )?;
            report.unenforced.push(Capability::Seccomp);
            Vec::new()
        };
        match backend {
            SandboxBackend::Landlock => {
                let abi = probe.landlock_abi();
                report.landlock_abi = Some(abi);
                offered.landlock_abi = abi;
                let needs: [(Capability, u32, bool); 4] = [
                    (Capability::LandlockFilesystem, 1, true),
                    (Capability::LandlockTruncate, 3, true),
                    (Capability::LandlockNetwork, 4, !policy.network),
                    (Capability::LandlockScopes, 6, true),
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
                    return Ok(unconfined(config, report));
                }
                let mount_namespace = probe.mount_namespace();
                let spill = sandbox_spill_dir(&mut config, &mut confinement)?;
                protected.push(spill.clone());
                let mount_namespace = match mount_namespace {
                    Ok(kind) => Some(kind),
                    Err(detail) => {
                        // The session store's logs, the spill files: never left writable.
                        if let Some(place) = protected
                            .iter()
                            .find(|place| writable_roots.iter().any(|root| place.starts_with(root)))
                        {
                            return Err(SandboxError::Unprotected {
                                place: place.clone(),
                                detail,
                            });
                        }
                        missing(Capability::MountNamespace, detail)?;
                        report.unenforced.push(Capability::MountNamespace);
                        None
                    }
                };
                let temp = private_temp_dir(Some(&spill))?;
                let mut writable = writable_roots.clone();
                writable.push(temp.path().to_path_buf());
                let mounts = mount_namespace
                    .map(|kind| confine::mount_plan(kind, &writable, &protected))
                    .transpose()?;
                let restrictions = Arc::new(Restrictions {
                    mounts,
                    drop_capabilities: true,
                    seccomp: seccomp_program,
                    landlock: Some(confine::landlock_ruleset(abi, &writable, !policy.network)?),
                });
                // Every step once, before any command depends on it: a failure here names the
                // system's refusal instead of failing each command's start.
                crate::supervisor::try_restrictions(Arc::clone(&restrictions), temp.path())
                    .map_err(|e| {
                        SandboxError::Setup(format!("a confined process could not start: {e}"))
                    })?;
                confinement.restrictions = Some(restrictions);
                confinement.env.push(("TMPDIR".into(), temp.path().into()));
                report.temp_dir = Some(temp.path().to_path_buf());
                report.mount_namespace = mount_namespace;
                offered.mount_namespace = mount_namespace.is_some();
                confinement._temp_dir = Some(temp);
            }
            SandboxBackend::Bubblewrap => {
                let program = match probe.bubblewrap() {
                    Ok(program) => program,
                    Err(detail) => {
                        missing(Capability::Bubblewrap, detail)?;
                        report.unenforced.push(Capability::Bubblewrap);
                        return Ok(unconfined(config, report));
                    }
                };
                let spill = sandbox_spill_dir(&mut config, &mut confinement)?;
                protected.push(spill);
                confinement.wrapper = Some(bubblewrap::wrapper(
                    program,
                    &writable_roots,
                    &protected,
                    policy.network,
                    confine::program_bytes(&seccomp_program),
                ));
                confinement.env.push(("TMPDIR".into(), "/tmp".into()));
                report.temp_dir = Some(PathBuf::from("/tmp"));
            }
        }
        protected.retain(|place| writable_roots.iter().any(|root| place.starts_with(root)));
        offered.protects = !protected.is_empty();
        report.protected = protected;
        report.rights = confine::rights(offered);
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
    ///
    /// The command is not supervised: what the program starts outside its process group
    /// (`setsid`, a double fork) outlives it. [`SandboxedExecutor::spawn_program`] starts the
    /// same program under a supervisor that kills all of it.
    pub fn command(&self, program: &ConfinedProgram) -> std::process::Command {
        let confinement = self.confined.confinement();
        let wrapper = confinement.and_then(|c| c.wrapper.as_ref());
        // The wrapper reads its seccomp filter from a pipe the command passes on. Without the
        // pipe (out of descriptors) the wrapper is told of descriptor -1, which `bwrap`
        // refuses: the program fails to start rather than running unfiltered.
        let seccomp = wrapper
            .filter(|wrapper| !wrapper.seccomp.is_empty())
            .map(|wrapper| {
                wrapper
                    .seccomp_pipe()
                    .and_then(crate::supervisor::above_stdio)
                    .inspect_err(|error| {
                        tracing::warn!(%error, "the seccomp filter's pipe could not be made");
                    })
            });
        let seccomp_fd = seccomp
            .as_ref()
            .map(|pipe| pipe.as_ref().map_or(-1, AsRawFd::as_raw_fd));
        let (launcher, args) = match wrapper {
            Some(wrapper) => wrapper.wrap(
                &program.program,
                program.args.clone(),
                &program.workdir,
                None,
                seccomp_fd,
            ),
            None => (PathBuf::from(&program.program), program.args.clone()),
        };
        let mut command = std::process::Command::new(launcher);
        command
            .args(args)
            .env_clear()
            .envs(program.env.iter().map(|(name, value)| (name, value)))
            .current_dir(&program.workdir);
        if let Some(Ok(pipe)) = seccomp {
            crate::supervisor::keep_at_exec(&mut command, pipe);
        }
        if let Some(confinement) = confinement {
            command.envs(confinement.env.iter().map(|(name, value)| (name, value)));
            if let Some(restrictions) = &confinement.restrictions {
                crate::supervisor::confine_at_exec(
                    &mut command,
                    Arc::clone(restrictions),
                    &program.workdir,
                );
            }
        }
        command
    }

    /// Starts `program` confined exactly as [`SandboxedExecutor::command`] would (the same
    /// places, `TMPDIR`, network rule, backend and `no_new_privs`; under bubblewrap inside the
    /// same `bwrap` command line), and under a supervisor of its own as this executor's commands
    /// run ([`LocalExecutor::spawn_program`]): whatever the program starts is killed when it is
    /// stopped or dropped, or when the host dies. It is how a host starts its stdio MCP servers
    /// inside the sandbox. Without confinement (mode `full-access`, or best effort with nothing
    /// to enforce with) it is a plain supervised program.
    pub async fn spawn_program(
        &self,
        program: &ConfinedProgram,
    ) -> Result<crate::local::SupervisedProgram, crate::local::ProgramError> {
        self.confined.spawn_program(program).await
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
/// refuses a write or a TCP connection with `EACCES`; the seccomp filter refuses a socket, and
/// the empty capability sets a mount, with `EPERM`; the read-only mount namespace (both
/// backends) refuses writes and metadata changes with `EROFS`; bubblewrap's network
/// namespace, when the network is denied, gives an unreachable network or, on its own
/// loopback, a refused connection. A refused connection with the network allowed is not the
/// sandbox's doing and gets no note.
fn denial_signs(backend: SandboxBackend, network: bool) -> &'static [&'static str] {
    const SIGNS: [&str; 5] = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
        "Network is unreachable",
        "Connection refused",
    ];
    match (backend, network) {
        (SandboxBackend::Landlock, _) | (SandboxBackend::Bubblewrap, true) => &SIGNS[..3],
        (SandboxBackend::Bubblewrap, false) => &SIGNS,
    }
}

/// The Landlock ABI the seccomp filter is made for: the kernel's on the Landlock backend (from
/// ABI 9 Landlock confines unix sockets itself), none on bubblewrap.
fn probe_abi(backend: SandboxBackend, probe: &dyn SandboxProbe) -> u32 {
    match backend {
        SandboxBackend::Landlock => probe.landlock_abi(),
        SandboxBackend::Bubblewrap => 0,
    }
}

/// The spill directory, made before the commands' confinement is planned so that it can be
/// protected from them: `config.spill_dir` (a session's), or a private one in the spill root,
/// removed with the executor, which then becomes `config.spill_dir`.
fn sandbox_spill_dir(
    config: &mut LocalConfig,
    confinement: &mut Confinement,
) -> Result<PathBuf, SandboxError> {
    let dir = match &config.spill_dir {
        Some(dir) => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    SandboxError::Setup(format!("spill directory `{}`: {e}", dir.display()))
                })?;
            dir.clone()
        }
        None => {
            let root = config.spill_root.clone().unwrap_or_else(std::env::temp_dir);
            let dir = tempfile::Builder::new()
                .prefix("dsh-spill-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir_in(&root)
                .map_err(|e| {
                    SandboxError::Setup(format!(
                        "cannot create a spill directory in `{}`: {e}",
                        root.display()
                    ))
                })?;
            let path = dir.path().to_path_buf();
            config.spill_dir = Some(path.clone());
            confinement._spill_dir = Some(dir);
            path
        }
    };
    std::fs::canonicalize(&dir)
        .map_err(|e| SandboxError::Setup(format!("spill directory `{}`: {e}", dir.display())))
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

impl ShellExecutor for SandboxedExecutor {
    fn limits(&self) -> crate::shell::ShellLimits {
        self.confined.limits()
    }

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
