//! Process groups: finding `bash`, signalling and watching a group, terminating a command
//! (SIGTERM, grace, SIGKILL), and reading how the shell ended.

use crate::launch::ShellEnd;
use crate::supervisor::Supervised;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Finds `bash` on `PATH` once. Spawning by absolute path keeps the standard library on
/// `posix_spawn`: with a cleared environment and a bare name it would fall back to `fork`.
pub(super) fn resolve_program(program: &Path) -> PathBuf {
    if program.components().count() > 1 || program.is_absolute() {
        return program.to_path_buf();
    }
    find_on_path(program).unwrap_or_else(|| program.to_path_buf())
}

/// The first executable file named `name` in a directory of `PATH`.
pub(crate) fn find_on_path(name: &Path) -> Option<PathBuf> {
    find_in(name, std::env::split_paths(&std::env::var_os("PATH")?))
}

/// The first executable file named `name` in one of `dirs`.
pub(super) fn find_in(name: &Path, dirs: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Sends `signal` to a process group; `false` when the group no longer exists.
pub(super) fn signal_group(pgid: i32, signal: Signal) -> bool {
    killpg(Pid::from_raw(pgid), signal).is_ok()
}

/// Whether any process of the group is still alive (zombies waiting for their reaper count as
/// gone: they run nothing and hold no pipe).
pub(super) fn group_alive(pgid: i32) -> bool {
    if killpg(Pid::from_raw(pgid), None).is_err() {
        return false;
    }
    // `kill(2)` also succeeds for zombies; on Linux look closer.
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        for entry in entries.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Fields after the command name (which may contain spaces) start after ") ".
            let Some(rest) = stat.rfind(") ").map(|i| &stat[i + 2..]) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // fields[0] = state, fields[2] = pgrp
            if fields.get(2).and_then(|p| p.parse::<i32>().ok()) == Some(pgid)
                && fields.first() != Some(&"Z")
            {
                return true;
            }
        }
        false
    }
    #[cfg(not(target_os = "linux"))]
    true
}

/// Waits (bounded) until no live process is left in the group.
pub(super) async fn await_group_gone(pgid: i32, bound: Duration) {
    let deadline = Instant::now() + bound;
    while group_alive(pgid) {
        if Instant::now() >= deadline {
            tracing::warn!(pgid, "a process of the group is still alive after SIGKILL");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// TERM the shell's group, give it `grace`, then KILL it and sweep everything below the
/// supervisor; returns the shell's status.
pub(super) async fn terminate(supervised: &mut Supervised, grace: Duration) -> ShellEnd {
    let pgid = supervised.shell();
    signal_group(pgid, Signal::SIGTERM);
    match tokio::time::timeout(grace, supervised.shell_end()).await {
        Ok(end) => end,
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            supervised.sweep(grace).await;
            supervised.shell_end().await
        }
    }
}

/// The shell's exit status; a supervisor that vanished (something killed it) counts as the
/// command being killed, and its group is killed at once.
pub(super) fn shell_status(end: ShellEnd, pgid: i32) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match end {
        ShellEnd::Status(status) => status,
        // Only where a timeout or a kill raced with a failed start: the shell never ran, and
        // 127 is what a shell reports for a command it cannot execute.
        ShellEnd::StartFailed(_) => ExitStatus::from_raw(127 << 8),
        ShellEnd::SupervisorLost => {
            tracing::warn!(
                pgid,
                "the command's supervisor was killed; killing the command's group"
            );
            signal_group(pgid, Signal::SIGKILL);
            ExitStatus::from_raw(Signal::SIGKILL as i32)
        }
    }
}

pub(super) fn signal_name(status: &ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    status
        .signal()
        .map(|number| match Signal::try_from(number) {
            Ok(signal) => signal.as_str().to_owned(),
            Err(_) => format!("signal {number}"),
        })
}
