//! The orphan guard: a process that kills every registered process group when the harness
//! dies, replaced at once when a command kills it.

use super::group::signal_group;
use super::process::lock;
use nix::sys::signal::Signal;
use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

/// The orphan guard: one small `bash` process per executor that kills every live process group
/// the executor started once the harness is gone. The harness keeps the register of live groups
/// in a private file (`add <pgid>` / `del <pgid>` lines, mode 0600); the guard does nothing but
/// wait for the end of a pipe from the harness, which comes when the harness exits or crashes,
/// however it dies. Then it reads the register and kills every group still in it. It is the
/// second line of crash protection, behind each command's supervisor (see
/// [`crate::supervisor`]), which sweeps its own tree when the harness dies.
///
/// The register is a file rather than lines sent to the guard so that a command costs the
/// harness one `write` to a file, not two wake-ups of another process (about 50 µs per command).
///
/// The register never outlives the harness while its guard runs: it is created only once the
/// guard that removes it runs, and a compaction writes its new copy under a name the guard
/// removes too (`<register>.new.<random>`), so a harness killed at any moment leaves no file
/// behind. (A guard killed by a command removes nothing; the harness replaces it at once.)
///
/// A command may kill the guard (it runs as the same user). The harness notices at once: a
/// watcher thread holds the read end of the guard's stdout, which reaches its end when the guard
/// dies, and starts a new guard on the same register. Each spawn also checks the guard first.
pub(super) const GUARD_SCRIPT: &str = r#"read -r _
declare -A live
while read -r op id; do
  case "$op" in
    add) live[$id]=1 ;;
    del) unset "live[$id]" ;;
  esac
done < "$1"
for id in "${!live[@]}"; do kill -KILL -- "-$id" 2>/dev/null; done
rm -f -- "$1" "$1".new.*
"#;

/// The register is rewritten with only its live groups once it grows past this.
pub(super) const REGISTER_COMPACT_BYTES: u64 = 1 << 20;

/// After the register could not be created, the next attempt waits this long: each attempt
/// starts a `bash`, which a command must not pay for while the temporary directory is unusable.
pub(super) const REGISTER_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug)]
pub(super) struct OrphanGuard {
    pub(super) state: Mutex<GuardState>,
    /// Where the register is created; the system's temporary directory unless a test says.
    dir: Option<PathBuf>,
}

#[derive(Debug, Default)]
pub(super) struct GuardState {
    /// The guard process, while it runs.
    pub(super) process: Option<GuardProcess>,
    /// The register file, once created.
    pub(super) register: Option<Register>,
    /// Every group registered and not yet unregistered: what a compacted register holds.
    pub(super) live: BTreeSet<i32>,
    /// Counts the guards started, so a watcher restarts only the guard it watched.
    pub(super) generation: u64,
    /// No guard is started before this, after the register could not be created.
    pub(super) retry_after: Option<std::time::Instant>,
}

#[derive(Debug)]
pub(super) struct Register {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) bytes: u64,
}

impl Register {
    /// A fresh name for a register in `dir`: unique to this process and random, so nothing
    /// else holds it (the file is created with `create_new`, which fails rather than reuse it).
    pub(super) fn fresh_path(dir: &Path) -> PathBuf {
        dir.join(format!(
            "dsh-guard-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ))
    }

    /// Creates the register at `path` (which must not exist), listing `live`.
    pub(super) fn create(path: PathBuf, live: &BTreeSet<i32>) -> std::io::Result<Register> {
        let (file, bytes) = write_new(&path, live)?;
        Ok(Register { path, file, bytes })
    }

    /// Appends one line (a small write to a file is written whole).
    pub(super) fn append(&mut self, line: &str) -> std::io::Result<()> {
        use std::io::Write;
        self.file.write_all(line.as_bytes())?;
        self.bytes += line.len() as u64;
        Ok(())
    }

    /// Replaces the register with one that lists only `live`, under the same path (the guard
    /// opens it by path when the harness is gone). The new copy is written under a random
    /// name the guard also removes (`<path>.new.<random>`), then renamed over the register.
    pub(super) fn compact(&mut self, live: &BTreeSet<i32>) -> std::io::Result<()> {
        let fresh = new_copy_path(&self.path);
        let (file, bytes) = write_new(&fresh, live)?;
        match std::fs::rename(&fresh, &self.path) {
            Ok(()) => {
                self.file = file;
                self.bytes = bytes;
                Ok(())
            }
            Err(error) => {
                let _ = std::fs::remove_file(&fresh);
                Err(error)
            }
        }
    }
}

/// A name for a compaction's new copy of `register`, one the guard removes.
pub(super) fn new_copy_path(register: &Path) -> PathBuf {
    let mut name = register.as_os_str().to_owned();
    name.push(format!(".new.{:016x}", fastrand::u64(..)));
    PathBuf::from(name)
}

/// Creates a file at `path` that only this user can read, failing if anything (a symlink
/// included) is there, and writes an `add` line for each of `live` to it. Returns the file and
/// the bytes written; a file that could not be written whole is removed.
fn write_new(path: &Path, live: &BTreeSet<i32>) -> std::io::Result<(File, u64)> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let text: String = live.iter().map(|pgid| format!("add {pgid}\n")).collect();
    match file.write_all(text.as_bytes()) {
        Ok(()) => Ok((file, text.len() as u64)),
        Err(error) => {
            let _ = std::fs::remove_file(path);
            Err(error)
        }
    }
}

#[derive(Debug)]
pub(super) struct GuardProcess {
    pub(super) child: std::process::Child,
    pub(super) stdin: std::process::ChildStdin,
    pub(super) generation: u64,
}

impl OrphanGuard {
    pub(super) fn new() -> Arc<OrphanGuard> {
        Arc::new(OrphanGuard {
            state: Mutex::default(),
            dir: None,
        })
    }

    /// A guard whose register is created in `dir`.
    #[cfg(test)]
    pub(super) fn new_in(dir: &Path) -> Arc<OrphanGuard> {
        Arc::new(OrphanGuard {
            state: Mutex::default(),
            dir: Some(dir.to_path_buf()),
        })
    }

    pub(super) fn register(self: &Arc<Self>, bash: &Path, pgid: i32) {
        let mut state = lock(&self.state);
        state.live.insert(pgid);
        self.record(&mut state, bash, &format!("add {pgid}\n"));
    }

    pub(super) fn unregister(self: &Arc<Self>, bash: &Path, pgid: i32) {
        let mut state = lock(&self.state);
        if state.live.remove(&pgid) {
            self.record(&mut state, bash, &format!("del {pgid}\n"));
        }
    }

    /// Starts a guard if none runs or the one that ran has died.
    pub(super) fn ensure_running(self: &Arc<Self>, bash: &Path) {
        let mut state = lock(&self.state);
        let dead = match state.process.as_mut() {
            None => !state.live.is_empty(),
            Some(process) => !matches!(process.child.try_wait(), Ok(None)),
        };
        if dead {
            self.restart(&mut state, bash);
        }
    }

    /// Replaces the guard process (reaping the old one).
    pub(super) fn restart(self: &Arc<Self>, state: &mut GuardState, bash: &Path) {
        if let Some(mut old) = state.process.take() {
            tracing::warn!("the orphan guard exited; starting a new one");
            let _ = old.child.kill();
            let _ = old.child.wait();
        }
        self.try_start(state, bash);
    }

    /// Records one line in the register (the line's change is already in `live`), compacting
    /// the register when it has grown, and starts the guard (creating the register, which then
    /// lists every live group) when none runs.
    pub(super) fn record(self: &Arc<Self>, state: &mut GuardState, bash: &Path, line: &str) {
        let live = &state.live;
        if let Some(register) = state.register.as_mut() {
            // A register that cannot be compacted still takes the line.
            let compacted = register.bytes >= REGISTER_COMPACT_BYTES
                && register
                    .compact(live)
                    .inspect_err(|error| {
                        tracing::warn!("cannot compact the orphan guard's register: {error}");
                    })
                    .is_ok();
            if !compacted && let Err(error) = register.append(line) {
                tracing::warn!("cannot update the orphan guard's register: {error}");
            }
        }
        if state.process.is_none() {
            self.try_start(state, bash);
        }
    }

    /// Starts a guard unless the register could not be created a moment ago.
    pub(super) fn try_start(self: &Arc<Self>, state: &mut GuardState, bash: &Path) {
        if state
            .retry_after
            .is_some_and(|after| std::time::Instant::now() < after)
        {
            return;
        }
        state.generation += 1;
        state.process = self.start(state, bash);
    }

    /// Starts a guard on the register, first creating the register (listing every live group)
    /// when there is none: the guard runs before the file exists, so no moment leaves a
    /// register that nothing would remove.
    pub(super) fn start(
        self: &Arc<Self>,
        state: &mut GuardState,
        bash: &Path,
    ) -> Option<GuardProcess> {
        use std::os::unix::process::CommandExt as _;
        let generation = state.generation;
        let path = match &state.register {
            Some(register) => register.path.clone(),
            None => {
                let dir = self.dir.clone().unwrap_or_else(std::env::temp_dir);
                Register::fresh_path(&dir)
            }
        };
        let spawned = std::process::Command::new(bash)
            .arg("-c")
            .arg(GUARD_SCRIPT)
            .arg("dsh-orphan-guard")
            .arg(&path)
            .env_clear()
            // Never written: its end tells the guard that the harness is gone.
            .stdin(Stdio::piped())
            // Never written: its end tells the watcher that the guard died.
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own group: killing a command's group never reaches the guard.
            .process_group(0)
            .spawn();
        let (mut child, stdin, stdout) = match spawned {
            Ok(mut child) => {
                let stdin = child.stdin.take()?;
                let stdout = child.stdout.take()?;
                (child, stdin, stdout)
            }
            Err(error) => {
                tracing::warn!(
                    "cannot start the orphan guard: {error}; a crashed harness may leave commands running"
                );
                return None;
            }
        };
        if state.register.is_none() {
            match Register::create(path, &state.live) {
                Ok(register) => {
                    state.register = Some(register);
                    state.retry_after = None;
                }
                Err(error) => {
                    tracing::warn!(
                        "cannot create the orphan guard's register: {error}; a crashed harness may leave commands running"
                    );
                    state.retry_after = Some(std::time::Instant::now() + REGISTER_RETRY);
                    // Killed, not told the harness is gone: whatever is at the path is not
                    // ours to remove.
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        }
        let watched = Arc::downgrade(self);
        let bash = bash.to_path_buf();
        let watcher = std::thread::Builder::new()
            .name("dsh-orphan-guard".into())
            .spawn(move || {
                use std::io::Read;
                let mut stdout = stdout;
                let mut sink = [0u8; 64];
                while matches!(stdout.read(&mut sink), Ok(n) if n > 0) {}
                // The guard is gone. Restart it unless the executor is gone too (an orderly
                // shutdown) or a newer guard already replaced it.
                let Some(guard) = watched.upgrade() else {
                    return;
                };
                let mut state = lock(&guard.state);
                if state.process.as_ref().map(|p| p.generation) == Some(generation) {
                    guard.restart(&mut state, &bash);
                }
            });
        if let Err(error) = watcher {
            tracing::warn!("cannot watch the orphan guard: {error}");
        }
        Some(GuardProcess {
            child,
            stdin,
            generation,
        })
    }
}

impl Drop for OrphanGuard {
    fn drop(&mut self) {
        // Closing the pipe makes the guard kill whatever is still registered (nothing, after an
        // orderly shutdown), remove the register and exit; reap it so no zombie is left.
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(GuardProcess {
            mut child, stdin, ..
        }) = state.process.take()
        {
            drop(stdin);
            let _ = child.wait();
        }
        // A guard killed just before (its watcher may not have replaced it yet) kills nothing:
        // the harness is alive here, so it kills what is still registered itself.
        for pgid in std::mem::take(&mut state.live) {
            signal_group(pgid, Signal::SIGKILL);
        }
        // A compaction's copy never outlives the call that writes it.
        if let Some(register) = state.register.take() {
            let _ = std::fs::remove_file(register.path);
        }
    }
}

#[cfg(test)]
mod tests;
