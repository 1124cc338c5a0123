//! The command supervisor where Linux's child subreaper is not available: the shell is spawned
//! directly in a process group of its own, and containment is the group's (a process that leaves
//! the group is out of reach). The API matches the Linux supervisor, so the local executor has
//! one code path.

use crate::launch::{Launch, ShellEnd};
use std::io;
use std::process::{ExitStatus, Stdio};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// A command running in its own process group.
#[derive(Debug)]
pub(crate) struct Supervised {
    process: Child,
    shell: i32,
    status: Option<ExitStatus>,
}

impl Supervised {
    pub(crate) async fn spawn(launch: Launch) -> io::Result<Supervised> {
        if launch.confinement.is_some() {
            // Fail closed: this supervisor has no step before `execve` to confine the shell in.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a sandbox's restrictions can only be enforced by the Linux supervisor",
            ));
        }
        let mut command = Command::new(&launch.program);
        command
            .args(&launch.args)
            .current_dir(&launch.workdir)
            .env_clear()
            .envs(launch.env)
            .stdin(if launch.stdin_piped {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false)
            .process_group(0);
        let process = command.spawn()?;
        let shell = process
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| io::Error::other("the shell exited before its pid was known"))?;
        Ok(Supervised {
            process,
            shell,
            status: None,
        })
    }

    pub(crate) fn shell(&self) -> i32 {
        self.shell
    }

    pub(crate) fn stdout(&mut self) -> Option<ChildStdout> {
        self.process.stdout.take()
    }

    pub(crate) fn stderr(&mut self) -> Option<ChildStderr> {
        self.process.stderr.take()
    }

    pub(crate) fn stdin(&mut self) -> Option<ChildStdin> {
        self.process.stdin.take()
    }

    pub(crate) async fn shell_end(&mut self) -> ShellEnd {
        if let Some(status) = self.status {
            return ShellEnd::Status(status);
        }
        match self.process.wait().await {
            Ok(status) => {
                self.status = Some(status);
                ShellEnd::Status(status)
            }
            Err(_) => ShellEnd::SupervisorLost,
        }
    }

    /// Nothing to sweep beyond the group, which the caller kills.
    pub(crate) async fn sweep(&mut self, _bound: std::time::Duration) -> bool {
        true
    }
}
