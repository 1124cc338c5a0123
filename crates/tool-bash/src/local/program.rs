//! Long-running programs that are not shell commands (a stdio MCP server, a helper the host runs
//! for the model), started under the same supervisor as the executor's commands: whatever the
//! program starts, however it regroups (`setsid`, a double fork, a group of its own), is killed
//! when the program is stopped or dropped, and swept by its supervisor when the host dies.

use super::LocalExecutor;
use super::group::{find_in, signal_group};
use super::guard::OrphanGuard;
use crate::launch::{Launch, ShellEnd};
use crate::supervisor::Supervised;
use nix::sys::signal::Signal;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// A program that is not a shell command, to start under an executor's supervisor
/// ([`LocalExecutor::spawn_program`]) and, on a sandboxed executor, under its confinement
/// (`SandboxedExecutor::command` and `SandboxedExecutor::spawn_program`): a stdio MCP server, a
/// helper the host runs for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfinedProgram {
    /// The program, found on `PATH` (the one in `env`) when it has no slash; a relative path
    /// with a slash is taken relative to `workdir`.
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

    /// The program as an absolute path: as given when absolute, joined to the working
    /// directory when relative with a slash, else the first executable file of that name in a
    /// directory of the `PATH` of its own environment (not the host's; its relative
    /// directories are the working directory's).
    fn resolve(&self) -> Result<PathBuf, ProgramError> {
        let program = Path::new(&self.program);
        if program.is_absolute() || program.components().count() > 1 {
            // Checked here, so that a missing program fails the start rather than the first
            // read of its output.
            let path = self.workdir.join(program);
            return match std::fs::metadata(&path) {
                Ok(_) => Ok(path),
                Err(source) => Err(ProgramError::Start {
                    program: path,
                    source,
                }),
            };
        }
        let path = self
            .env
            .iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.clone());
        // A relative directory of `PATH` (an empty one is `.`) is the program's working
        // directory's, as the program itself would see it.
        let dirs = path.iter().flat_map(std::env::split_paths).map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                self.workdir.join(dir)
            }
        });
        match find_in(program, dirs) {
            Some(found) => Ok(found),
            None => Err(ProgramError::NotFound {
                program: self.program.clone(),
                path,
            }),
        }
    }
}

/// Why a program could not be started or waited for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProgramError {
    /// A program named without a slash is on no directory of the `PATH` of its environment.
    #[error("`{}` was not found on {}", program.to_string_lossy(), match path {
        Some(path) => format!("PATH ({})", path.to_string_lossy()),
        None => String::from("PATH: its environment has no PATH"),
    })]
    NotFound {
        /// The program as given.
        program: OsString,
        /// The `PATH` searched, `None` when its environment has none.
        path: Option<OsString>,
    },
    /// Starting the program (or its supervisor) failed.
    #[error("cannot start `{}`: {source}", program.display())]
    Start {
        /// The program, resolved.
        program: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The program's supervisor vanished (something killed it) before it reported the
    /// program's end; the program's group was killed.
    #[error("the supervisor of `{}` was killed before it reported the program's end", program.display())]
    SupervisorLost {
        /// The program, resolved.
        program: PathBuf,
    },
}

/// A program's standard input, as [`SupervisedProgram::take_stdin`] gives it.
pub type ProgramStdin = Pin<Box<dyn AsyncWrite + Send + Sync>>;
/// A program's standard output or error, as [`SupervisedProgram::take_stdout`] gives it.
pub type ProgramOutput = Pin<Box<dyn AsyncRead + Send + Sync>>;

/// A long-running program under its supervisor (see [`LocalExecutor::spawn_program`]), with
/// its standard streams piped to the host.
///
/// Dropping it without [`SupervisedProgram::stop`] closes its supervisor's control pipe: the
/// supervisor kills the program and everything below it, at once and in the background.
pub struct SupervisedProgram {
    supervised: Supervised,
    /// The program's pid, which is also its process group id.
    pid: i32,
    /// The program, resolved (for messages).
    program: PathBuf,
    stdin: Option<ProgramStdin>,
    stdout: Option<ProgramOutput>,
    stderr: Option<ProgramOutput>,
    /// How long the supervisor's sweep may take before it is killed itself.
    sweep_bound: Duration,
    /// The orphan guard the program's group is registered with, until it is unregistered.
    guard: Option<(Arc<OrphanGuard>, Arc<PathBuf>)>,
    /// Whether the program is known to have ended (its group may then be gone and its id
    /// reused, so it is signalled no more).
    ended: bool,
}

impl fmt::Debug for SupervisedProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SupervisedProgram")
            .field("pid", &self.pid)
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl SupervisedProgram {
    /// The program's pid, which is also its process group id. Under bubblewrap it is the
    /// wrapper's.
    pub fn pid(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// The program as it was started: its absolute path (under bubblewrap, the wrapper's).
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The program's standard input (a pipe), once; dropping it closes the program's stdin.
    pub fn take_stdin(&mut self) -> Option<ProgramStdin> {
        self.stdin.take()
    }

    /// The program's standard output (a pipe), once.
    pub fn take_stdout(&mut self) -> Option<ProgramOutput> {
        self.stdout.take()
    }

    /// The program's standard error (a pipe), once. A program whose stderr nobody reads
    /// blocks once the pipe is full: take it and read it, or drop it (its writes then fail).
    pub fn take_stderr(&mut self) -> Option<ProgramOutput> {
        self.stderr.take()
    }

    /// Waits until the program has ended, and returns how. What the program started may still
    /// run: it is killed by [`SupervisedProgram::stop`] or the drop. Cancel-safe; later calls
    /// return the same answer.
    pub async fn wait(&mut self) -> Result<ExitStatus, ProgramError> {
        let end = self.supervised.shell_end().await;
        self.ended = true;
        match end {
            ShellEnd::Status(status) => Ok(status),
            ShellEnd::StartFailed(errno) => Err(ProgramError::Start {
                program: self.program.clone(),
                source: std::io::Error::from_raw_os_error(errno),
            }),
            ShellEnd::SupervisorLost => {
                signal_group(self.pid, Signal::SIGKILL);
                Err(ProgramError::SupervisorLost {
                    program: self.program.clone(),
                })
            }
        }
    }

    /// Stops the program: closes its stdin (the one [`SupervisedProgram::take_stdin`] gave
    /// must be dropped by then), gives it `grace` to exit on its own, then kills it and
    /// everything it started, wherever it went (its supervisor's sweep), and reaps it. Returns
    /// how the program ended (killed by `SIGKILL` when `grace` ran out).
    pub async fn stop(mut self, grace: Duration) -> Result<ExitStatus, ProgramError> {
        self.stdin = None;
        let ended = tokio::time::timeout(grace, self.wait()).await.ok();
        if ended.is_none() {
            signal_group(self.pid, Signal::SIGKILL);
        }
        self.supervised.sweep(self.sweep_bound).await;
        let end = match ended {
            Some(end) => end,
            // Killed and swept: the supervisor reports the end, or has exited (its report
            // pipe then closes), within its bound.
            None => tokio::time::timeout(self.sweep_bound, self.wait())
                .await
                .unwrap_or_else(|_| {
                    Err(ProgramError::SupervisorLost {
                        program: self.program.clone(),
                    })
                }),
        };
        self.unregister();
        end
    }

    fn unregister(&mut self) {
        if let Some((guard, bash)) = self.guard.take() {
            guard.unregister(&bash, self.pid);
        }
    }
}

impl Drop for SupervisedProgram {
    fn drop(&mut self) {
        // Dropping `supervised` closes the control pipe: the supervisor sweeps. The program's
        // group is killed here too, in case its supervisor was killed.
        if self.guard.is_some() && !self.ended {
            signal_group(self.pid, Signal::SIGKILL);
        }
        self.unregister();
    }
}

impl LocalExecutor {
    /// Starts `program` under a supervisor of its own, as this executor starts a command (on
    /// Linux a child subreaper in a session of its own; see the shell page): its stdin, stdout
    /// and stderr are pipes, its environment is exactly `program.env`, and its process group is
    /// registered with the orphan guard. Unlike a command it takes no slot of
    /// [`LocalConfig::max_concurrent_commands`](super::LocalConfig::max_concurrent_commands)
    /// and has no timeout: it runs until it exits or is stopped. The program is found on the
    /// `PATH` of `program.env` when it has no slash.
    ///
    /// `SandboxedExecutor::spawn_program` does the same under the sandbox's confinement.
    pub async fn spawn_program(
        &self,
        program: &ConfinedProgram,
    ) -> Result<SupervisedProgram, ProgramError> {
        let resolved = program.resolve()?;
        let start_error = |source: std::io::Error| ProgramError::Start {
            program: resolved.clone(),
            source,
        };
        let launch = self
            .program_launch(program, &resolved)
            .map_err(start_error)?;
        let started_as = launch.program.clone();
        self.guard.ensure_running(&self.bash);
        let mut supervised = Supervised::spawn(launch).await.map_err(start_error)?;
        let pid = supervised.shell();
        self.guard.register(&self.bash, pid);
        let stdin = supervised
            .stdin()
            .map(|stdin| Box::pin(stdin) as ProgramStdin);
        let stdout = supervised
            .stdout()
            .map(|out| Box::pin(out) as ProgramOutput);
        let stderr = supervised
            .stderr()
            .map(|err| Box::pin(err) as ProgramOutput);
        Ok(SupervisedProgram {
            supervised,
            pid,
            program: started_as,
            stdin,
            stdout,
            stderr,
            sweep_bound: self.config.grace,
            guard: Some((Arc::clone(&self.guard), Arc::clone(&self.bash))),
            ended: false,
        })
    }

    /// What starts `program` (resolved to `resolved`): under this executor's confinement when
    /// it has one, the same way as its commands (the restrictions the program takes on itself
    /// before its `execve`, or the wrapper it runs in, and the confinement's variables over
    /// its environment).
    fn program_launch(
        &self,
        program: &ConfinedProgram,
        resolved: &Path,
    ) -> std::io::Result<Launch> {
        let mut launch = Launch {
            program: resolved.to_path_buf(),
            args: program.args.clone(),
            env: program.env.clone(),
            workdir: program.workdir.clone(),
            stdin_piped: true,
            confinement: None,
            inherit: Vec::new(),
        };
        self.confine(&mut launch, false)?;
        Ok(launch)
    }
}
