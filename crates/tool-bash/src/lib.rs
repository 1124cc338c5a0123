//! The production shell tool for dsh-rs agents.
//!
//! Its parts, with one-way dependencies (`tool → shell ← local`):
//!
//! - [`shell`]: the executor contract ([`ShellExecutor`]: resolve, run, start) and its data. A
//!   downstream crate can implement it (a sandboxed or remote executor) without the local
//!   executor.
//! - [`local`] (feature `local`, on by default; Unix only): the local executor. `bash -c` with
//!   stdin on `/dev/null`, in its own process group under a per-command supervisor that contains
//!   every process the command starts (on Linux, a child subreaper: processes that leave the
//!   group are still swept), watched by an orphan guard; the environment decided by an
//!   [`EnvPolicy`] (credentials and shell start-up variables withheld by default) and `DSH_*`
//!   facts managed; SIGTERM → grace → SIGKILL on the whole group; bounded draining after exit;
//!   head-and-tail output windows with byte-exact spill files in a private directory. A
//!   long-running program that is not a command (a stdio MCP server) runs under the same
//!   supervisor ([`LocalExecutor::spawn_program`], giving a [`SupervisedProgram`] with piped
//!   streams): stopped or dropped, it takes everything it started with it.
//! - `sandbox` (feature `sandbox`, on by default; Linux): the local executor with every command
//!   confined (read-only, workspace-write or full access; network denied unless allowed), on
//!   Landlock or bubblewrap, with a seccomp filter and a read-only mount namespace, holding
//!   against a hostile command also as root, and failing closed when the kernel cannot
//!   enforce the policy; `SandboxedExecutor::spawn_program` starts a program under the same
//!   confinement and supervisor.
//! - [`tool`]: the model-facing `bash` tool and the generic job controls (`job_output`,
//!   `job_list`, `job_kill`) as plugins, with cards from the `presenters` crate; their
//!   canonical values are types ([`value`] for `bash`, [`tool::JobOutputValue`] and its
//!   siblings for the job tools) from which their output schemas are generated.
//! - [`builtin`]: [`BuiltinTools`], the built-in set (`bash` and the job tools over one jobs
//!   runtime) that a host loads in one call.
//! - [`env`](mod@env) (the environment policy) and [`output`] (the output collector: head-and-tail
//!   windows, spill files, offset reads), shared by the local executor and executors of your
//!   own.
//!
//! Another background producer can offer the job-control tools without the shell: depend on
//! `tool-bash` with `default-features = false` (no local executor is built), start jobs on a
//! [`JobRuntime`](dsh_tools::jobs::JobRuntime) and load [`JobToolsPlugin`] over it.
//!
//! It never hangs (timeouts, cancellation and inherited pipes all end a call), never leaks a
//! process (termination is tree-scoped and checked), never loses a byte (whatever does not fit
//! the window is in the spill file, and results say where), and never lets a failure look like
//! a success (exit codes, signals, timeouts and truncation are all in the text).
//!
//! # Example
//!
//! ```
//! use dsh_tools::{ToolCall, ToolRegistry};
//! use std::sync::Arc;
//! use tool_bash::{BashPlugin, LocalExecutor};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = ToolRegistry::new();
//! registry.global_scope().load(BashPlugin::new(Arc::new(LocalExecutor::default())))?;
//! let args = r#"{"command": "echo hello; exit 3", "description": "Print a greeting"}"#;
//! let result = registry.execute(ToolCall::new("c1", "bash", args)).await;
//! assert!(!result.is_error, "a non-zero exit is a value, not an error");
//! assert_eq!(dsh_tools::content_text(&result.content), "hello\n[exit code: 3]");
//! # Ok::<(), dsh_tools::PluginError>(())
//! # }).unwrap();
//! ```
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `local` | yes | on Unix, the local executor ([`LocalExecutor`]) and its dependencies (`nix`, `rustix`, `libc`, `tempfile`, `fastrand`, tokio's process support) |
//! | `sandbox` | yes | on Linux (x86-64, AArch64), the sandboxed executor ([`sandbox::SandboxedExecutor`]): Landlock (`landlock`), or bubblewrap where installed, with a seccomp filter (`seccompiler`) and a read-only mount namespace; implies `local` |
//!
//! # Unsafe code
//!
//! Unsafe budget: 13 — the Linux launcher's fork/exec step, where no safe wrapper exists
//!
//! They are: two `fork`s, the reset of signal handlers (`sigaction`), `close_range`,
//! `mount_setattr`, `execve`, `_exit`, four `pre_exec` hooks of spawned programs, the Landlock
//! ABI probe, and the runtime's registration of a pipe or pidfd. Every block is in
//! `supervisor.rs` and `supervisor/` (Linux only) and carries a `SAFETY:` comment;
//! the code that runs after a `fork` keeps one written rule (async-signal-safe calls on data
//! prepared before the fork, no allocation, lock or panic), stated once in its module.
//! `docs/design/launcher.md` says why the launcher is built this way.
//!
//! # Platforms
//!
//! The local executor is Unix-only: it relies on process groups and signals, and on Linux on a
//! child subreaper. Elsewhere the crate builds without it, whatever the features: the executor
//! contract ([`ShellExecutor`]), the `bash` tool and the job tools are there for an executor of
//! your own.

#![deny(missing_docs)]
// The confinement vocabulary (restrictions, mount plans, wrappers) is shared by the executor on
// every Unix, but only the Linux supervisor and the sandboxed executor ever fill or read it.
#![cfg_attr(
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )),
    allow(dead_code, unused_imports)
)]

/// The README's example, compiled and run by `cargo test --doc`. It uses the local executor,
/// so it runs where that exists.
#[cfg(all(doctest, feature = "local", unix))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod builtin;
pub mod env;
#[cfg(all(feature = "local", unix))]
mod launch;
#[cfg(all(feature = "local", unix))]
pub mod local;
pub mod output;
#[cfg(all(
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod sandbox;
#[cfg(all(feature = "local", unix))]
mod sandbox_choice;
mod sandbox_mode;
pub mod shell;
#[cfg(all(
    feature = "local",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod supervisor;
#[cfg(all(
    feature = "local",
    unix,
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))
))]
#[path = "supervisor_portable.rs"]
mod supervisor;
pub mod tool;
pub mod value;

pub use builtin::BuiltinTools;
pub use env::{EnvInherit, EnvPolicy};
#[cfg(all(feature = "local", unix))]
pub use local::{
    ConfinedProgram, LocalConfig, LocalExecutor, ProgramError, SupervisedProgram,
    default_max_concurrent_commands,
};
#[cfg(all(
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub use sandbox::{SandboxBackend, SandboxError, SandboxPolicy, SandboxReport, SandboxedExecutor};
#[cfg(all(feature = "local", unix))]
pub use sandbox_choice::{
    ChosenShell, SandboxApplied, SandboxChoice, SandboxChoiceError, SandboxFallback,
};
pub use sandbox_mode::{SandboxMode, UnknownSandboxMode};
pub use shell::{ShellExecutor, ShellProcess, ShellRequest, ShellRunResult, ShellSpec};
pub use tool::{
    BashConfig, BashPlugin, JobToolsConfig, JobToolsPlugin, render_bash, render_bash_output,
};
pub use value::{BackgroundStart, BashOutput, ForegroundRun, StreamOutput};
