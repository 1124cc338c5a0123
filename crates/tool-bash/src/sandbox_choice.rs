//! A host's choice of sandbox for its shell ([`SandboxChoice`]) and what the system made of it
//! ([`ChosenShell`]): the executor, what it enforces, and the fallback a person should be told
//! of.
//!
//! An explicit mode is enforced wholly or refused ([`SandboxChoiceError`]). The default
//! ([`SandboxChoice::DEFAULT_MODE`], asked for with `None`) enforces what the system can
//! ([`SandboxFallback::Partial`]), and turns the sandbox off only where nothing can be
//! confined ([`SandboxFallback::Off`]). A session store the commands could write is refused
//! either way: no fallback may accept it.

use crate::SandboxMode;
use crate::local::{ConfinedProgram, LocalConfig, LocalExecutor, ProgramError, SupervisedProgram};
use crate::shell::ShellExecutor;
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

#[cfg(all(
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
use crate::sandbox::{
    Enforcement, SandboxBackend, SandboxError, SandboxPolicy, SandboxProbe, SandboxReport,
    SandboxedExecutor, SystemProbe,
};

/// What a host asks of its shell's sandbox: a mode (or the default), the workspace it may
/// write, the session store it must not, and the local executor's configuration.
///
/// ```no_run
/// use tool_bash::{SandboxChoice, SandboxMode};
///
/// let shell = SandboxChoice::new(None, "/work/project")
///     .with_session_store("/home/me/.local/state/dsh/sessions")
///     .apply()?;
/// if let Some(fallback) = shell.fallback() {
///     eprintln!("warning: {fallback}");
/// }
/// let _executor = shell.executor();
/// # Ok::<(), tool_bash::SandboxChoiceError>(())
/// ```
#[derive(Clone, Debug)]
pub struct SandboxChoice {
    mode: Option<SandboxMode>,
    workspace: PathBuf,
    session_store: Option<PathBuf>,
    config: LocalConfig,
}

impl SandboxChoice {
    /// The mode when none is asked for, enforced as far as the system can.
    pub const DEFAULT_MODE: SandboxMode = SandboxMode::WorkspaceWrite;

    /// `mode` (`None`: the default) over `workspace`, the commands' working directory and
    /// writable root.
    pub fn new(mode: Option<SandboxMode>, workspace: impl Into<PathBuf>) -> SandboxChoice {
        SandboxChoice {
            mode,
            workspace: workspace.into(),
            session_store: None,
            config: LocalConfig::default(),
        }
    }

    /// Keeps the host's session store read-only to every command, wherever it lies beneath
    /// the workspace; it is created when a sandbox is built, since it must exist to be bound.
    pub fn with_session_store(mut self, store: impl Into<PathBuf>) -> SandboxChoice {
        self.session_store = Some(store.into());
        self
    }

    /// The local executor's configuration (its spill directory, limits).
    pub fn with_config(mut self, config: LocalConfig) -> SandboxChoice {
        self.config = config;
        self
    }

    /// The mode asked for, or [`SandboxChoice::DEFAULT_MODE`].
    pub fn mode(&self) -> SandboxMode {
        self.mode.unwrap_or(Self::DEFAULT_MODE)
    }

    /// The shell this choice gives on the running system.
    pub fn apply(self) -> Result<ChosenShell, SandboxChoiceError> {
        #[cfg(all(
            feature = "sandbox",
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        return self.apply_with_probe(&SystemProbe);
        #[cfg(not(all(
            feature = "sandbox",
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )))]
        match self.mode {
            Some(SandboxMode::FullAccess) => Ok(self.off(None)),
            _ => Err(SandboxChoiceError::Unavailable),
        }
    }

    /// As [`SandboxChoice::apply`], with the system as `probe` reports it.
    #[cfg(all(
        feature = "sandbox",
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    pub fn apply_with_probe(
        self,
        probe: &dyn SandboxProbe,
    ) -> Result<ChosenShell, SandboxChoiceError> {
        let mode = match self.mode {
            Some(SandboxMode::FullAccess) => return Ok(self.off(None)),
            Some(mode) => mode,
            None => Self::DEFAULT_MODE,
        };
        let partly = match self.confined(mode, Enforcement::Required, probe) {
            Ok(shell) => return Ok(shell),
            Err(error) if self.mode.is_some() || error.is_final() => return Err(error),
            Err(error) => error.to_string(),
        };
        match self.confined(mode, Enforcement::BestEffort, probe) {
            Ok(mut shell) => {
                shell.fallback = Some(SandboxFallback::Partial(partly));
                Ok(shell)
            }
            Err(error) if error.is_final() => Err(error),
            Err(error) => Ok(self.off(Some(error.to_string()))),
        }
    }

    /// A shell sandboxed in `mode` on Landlock, enforcing all of it or what the system can.
    /// Best effort that could confine nothing is an error here.
    #[cfg(all(
        feature = "sandbox",
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    fn confined(
        &self,
        mode: SandboxMode,
        enforcement: Enforcement,
        probe: &dyn SandboxProbe,
    ) -> Result<ChosenShell, SandboxChoiceError> {
        let mut policy = SandboxPolicy::new(mode)
            .with_workspace_root(&self.workspace)
            .with_enforcement(enforcement);
        if let Some(store) = &self.session_store {
            std::fs::create_dir_all(store).map_err(|error| SandboxChoiceError::SessionStore {
                place: store.clone(),
                error,
            })?;
            policy = policy.with_protected(store);
        }
        let executor = SandboxedExecutor::with_probe(
            policy,
            SandboxBackend::Landlock,
            self.config.clone(),
            probe,
        )?;
        if executor.report().backend.is_none() {
            return Err(SandboxChoiceError::NothingConfined(
                executor.report().summary(),
            ));
        }
        let report = executor.report().clone();
        Ok(ChosenShell {
            executor: Executor::Sandboxed(Arc::new(executor)),
            applied: SandboxApplied::Confined(report),
            fallback: None,
        })
    }

    /// The unconfined shell, and why when the sandbox was turned off for want of one.
    fn off(&self, reason: Option<String>) -> ChosenShell {
        let fallback = reason.clone().map(SandboxFallback::Off);
        ChosenShell {
            executor: Executor::Local(Arc::new(LocalExecutor::new(self.config.clone()))),
            applied: SandboxApplied::Off { reason },
            fallback,
        }
    }
}

/// The shell a [`SandboxChoice`] gave: its executor, what it enforces, and the fallback taken.
#[derive(Clone, Debug)]
pub struct ChosenShell {
    executor: Executor,
    applied: SandboxApplied,
    fallback: Option<SandboxFallback>,
}

#[derive(Clone, Debug)]
enum Executor {
    Local(Arc<LocalExecutor>),
    #[cfg(all(
        feature = "sandbox",
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    Sandboxed(Arc<SandboxedExecutor>),
}

impl ChosenShell {
    /// The executor for the `bash` tool.
    pub fn executor(&self) -> Arc<dyn ShellExecutor> {
        match &self.executor {
            Executor::Local(executor) => Arc::clone(executor) as Arc<dyn ShellExecutor>,
            #[cfg(all(
                feature = "sandbox",
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Executor::Sandboxed(executor) => Arc::clone(executor) as Arc<dyn ShellExecutor>,
        }
    }

    /// Starts `program` as the shell's commands run: under a supervisor of its own, and inside
    /// the same sandbox when there is one ([`SandboxedExecutor::spawn_program`],
    /// [`LocalExecutor::spawn_program`]). It is how a host starts its stdio MCP servers.
    ///
    /// [`SandboxedExecutor::spawn_program`]: crate::sandbox::SandboxedExecutor::spawn_program
    pub async fn spawn_program(
        &self,
        program: &ConfinedProgram,
    ) -> Result<SupervisedProgram, ProgramError> {
        match &self.executor {
            Executor::Local(executor) => executor.spawn_program(program).await,
            #[cfg(all(
                feature = "sandbox",
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Executor::Sandboxed(executor) => executor.spawn_program(program).await,
        }
    }

    /// What the shell enforces, as a session records it.
    pub fn applied(&self) -> &SandboxApplied {
        &self.applied
    }

    /// The fallback taken from the default, for a warning to the person running the host.
    pub fn fallback(&self) -> Option<&SandboxFallback> {
        self.fallback.as_ref()
    }
}

/// What a [`ChosenShell`] enforces. It serialises as a session's `session/start` records it:
/// `{"mode": "off"}` (with the `reason` when it was turned off for want of a sandbox), or the
/// sandbox's report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxApplied {
    /// No confinement: `full-access` asked for, or nothing to confine with (`reason`).
    Off {
        /// Why the default could not be had.
        reason: Option<String>,
    },
    /// Commands run confined as the report says.
    #[cfg(all(
        feature = "sandbox",
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    Confined(SandboxReport),
}

impl Serialize for SandboxApplied {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SandboxApplied::Off { reason } => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("mode", "off")?;
                if let Some(reason) = reason {
                    map.serialize_entry("reason", reason)?;
                }
                map.end()
            }
            #[cfg(all(
                feature = "sandbox",
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            SandboxApplied::Confined(report) => report.serialize(serializer),
        }
    }
}

/// The fallback the default took, which a host should tell its user of.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxFallback {
    /// Enforced as far as the system can; why the whole policy could not be.
    Partial(String),
    /// Off: nothing could be confined, and why.
    Off(String),
}

impl fmt::Display for SandboxFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxFallback::Partial(why) => {
                write!(f, "the shell sandbox is only partly enforced: {why}")
            }
            SandboxFallback::Off(why) => write!(f, "the shell sandbox is off: {why}"),
        }
    }
}

/// Why a [`SandboxChoice`] gave no shell.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxChoiceError {
    /// The sandboxed executor could not be built: a capability an explicit mode needs is
    /// missing, or the session store lies where the commands could write it.
    #[cfg(all(
        feature = "sandbox",
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The session store could not be created to be bound read-only.
    #[error("the session store {}: {error}", place.display())]
    SessionStore {
        /// The store.
        place: PathBuf,
        /// Why it could not be created.
        error: std::io::Error,
    },
    /// Best effort found nothing to confine with; the report's summary says what is missing.
    #[error("{0}")]
    NothingConfined(String),
    /// This build has no sandboxed executor: it needs Linux (x86-64, AArch64) and the
    /// `sandbox` feature.
    #[error("the shell sandbox needs Linux (Landlock)")]
    Unavailable,
}

impl SandboxChoiceError {
    /// A refusal no fallback may accept: a session store the commands could write.
    fn is_final(&self) -> bool {
        #[cfg(all(
            feature = "sandbox",
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        if let SandboxChoiceError::Sandbox(SandboxError::Unprotected { .. }) = self {
            return true;
        }
        false
    }
}

#[cfg(all(
    test,
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod tests {
    use super::*;
    use crate::sandbox::{Capability, MountNamespace};
    use pretty_assertions::assert_eq;
    use std::path::Path;

    /// A system with this Landlock ABI and mount namespace (or why not), seccomp, no `bwrap`.
    #[derive(Debug)]
    struct Simulated(u32, Result<MountNamespace, String>);

    impl SandboxProbe for Simulated {
        fn landlock_abi(&self) -> u32 {
            self.0
        }
        fn bubblewrap(&self) -> Result<PathBuf, String> {
            Err(String::from("`bwrap` is not on PATH"))
        }
        fn seccomp(&self) -> bool {
            true
        }
        fn mount_namespace(&self) -> Result<MountNamespace, String> {
            self.1.clone()
        }
    }

    /// What `mode` over `workspace` (the store in it) gives on `system`: the record, the
    /// warning, and whether the shell names a sandbox to the model; or the refusal.
    fn check(
        mode: Option<SandboxMode>,
        workspace: &Path,
        system: Simulated,
    ) -> Result<(serde_json::Value, Option<String>, bool), String> {
        let shell = SandboxChoice::new(mode, workspace)
            .with_session_store(workspace.join("sessions"))
            .apply_with_probe(&system)
            .map_err(|e| e.to_string())?;
        let record = serde_json::to_value(shell.applied()).map_err(|e| e.to_string())?;
        let warning = shell.fallback().map(ToString::to_string);
        Ok((record, warning, shell.executor().sandbox_policy().is_some()))
    }

    #[test]
    fn full_access_is_off_with_no_warning_and_no_store_made() {
        let dir = tempfile::tempdir().unwrap();
        let off = check(
            Some(SandboxMode::FullAccess),
            dir.path(),
            Simulated(0, Ok(MountNamespace::Own)),
        );
        assert_eq!(off, Ok((serde_json::json!({"mode": "off"}), None, false)));
        assert!(!dir.path().join("sessions").exists());
    }

    #[test]
    fn an_explicit_mode_the_system_cannot_wholly_enforce_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let refused = check(
            Some(SandboxMode::WorkspaceWrite),
            dir.path(),
            Simulated(5, Ok(MountNamespace::Own)),
        );
        assert_eq!(
            refused,
            Err(format!(
                "the workspace-write sandbox needs {}, which this system lacks (the kernel's \
                 Landlock ABI is 5, 6 is needed)",
                Capability::LandlockScopes
            ))
        );
    }

    #[test]
    fn the_default_enforces_what_it_can_and_says_what_it_could_not() {
        let dir = tempfile::tempdir().unwrap();
        let (record, warning, confined) =
            check(None, dir.path(), Simulated(5, Ok(MountNamespace::Own))).unwrap();
        assert_eq!(
            (
                record["mode"].clone(),
                record["unenforced"].clone(),
                confined
            ),
            (
                serde_json::json!("workspace-write"),
                serde_json::json!(["landlock-scopes"]),
                true
            )
        );
        assert_eq!(
            warning,
            Some(format!(
                "the shell sandbox is only partly enforced: the workspace-write sandbox needs \
                 {}, which this system lacks (the kernel's Landlock ABI is 5, 6 is needed)",
                Capability::LandlockScopes
            ))
        );
        assert!(
            dir.path().join("sessions").is_dir(),
            "the store is made to be bound"
        );
    }

    #[test]
    fn the_default_is_off_only_where_nothing_can_be_confined() {
        let dir = tempfile::tempdir().unwrap();
        let (record, warning, confined) =
            check(None, dir.path(), Simulated(0, Ok(MountNamespace::Own))).unwrap();
        let reason = record["reason"].as_str().unwrap_or_default().to_owned();
        assert!(!reason.is_empty(), "{record}");
        assert_eq!(
            (record, warning, confined),
            (
                serde_json::json!({"mode": "off", "reason": reason}),
                Some(format!("the shell sandbox is off: {reason}")),
                false
            )
        );
    }

    #[test]
    fn a_store_the_commands_could_write_is_refused_even_by_the_default() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [None, Some(SandboxMode::WorkspaceWrite)] {
            let refused = check(
                mode,
                dir.path(),
                Simulated(6, Err(String::from("no mounts"))),
            );
            let message = refused.unwrap_err();
            assert!(
                message.contains(
                    "cannot be protected from the commands here (no mount namespace: no mounts)"
                ),
                "{mode:?}: {message}"
            );
        }
    }
}
