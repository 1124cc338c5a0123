//! One writer per session: the advisory lock on a session's `lock` file, and whether the
//! process it names is still alive.

use super::disk::{FileHow, StoreDir};
use super::{LOCK_FILE, StoreError, io_error};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

/// How long a lock whose recorded holder is dead is waited for (see [`lock_session`]).
const DEAD_HOLDER_GRACE: Duration = Duration::from_secs(2);
/// How often it is tried meanwhile.
const RETRY_EVERY: Duration = Duration::from_millis(10);

/// The locked `lock` file of a session. The lock is an advisory `flock`, which the kernel
/// releases when its holder dies, however it dies: a crashed holder's lock is taken over at
/// once. The file records the holder's PID and start time, for the "in use" error and for
/// [`SessionStore::list`].
#[derive(Debug)]
pub(super) struct SessionLock {
    file: File,
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Emptied before the lock goes, so the file never names a holder that let go.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// Locks a session: its `lock` file, opened beneath its directory (created `0600`).
pub(super) fn lock_session(id: &str, dir: &StoreDir) -> Result<SessionLock, StoreError> {
    let path = dir.join(LOCK_FILE);
    let mut file = dir
        .file(LOCK_FILE, FileHow::ReadWrite)?
        .ok_or_else(|| io_error(&path)(std::io::ErrorKind::NotFound.into()))?;
    let mut waited = Duration::ZERO;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = read_holder(&mut file);
                // The lock belongs to an open file, which a holder's descendants share from
                // their fork until they exec or exit: the lock of a holder that has just died
                // can outlive it by that moment. It is waited for, briefly, rather than the
                // session called in use by a dead process.
                let dead = holder
                    .as_ref()
                    .is_some_and(|(pid, start)| !alive(*pid, start));
                if dead && waited < DEAD_HOLDER_GRACE {
                    std::thread::sleep(RETRY_EVERY);
                    waited += RETRY_EVERY;
                    continue;
                }
                return Err(StoreError::SessionInUse {
                    id: id.to_owned(),
                    pid: holder.map_or(0, |(pid, _)| pid),
                });
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(io_error(&path)(error)),
        }
    }
    let pid = std::process::id();
    let start = process_start(pid).unwrap_or_default();
    let written = file
        .set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(format!("{pid} {start}\n").as_bytes()));
    written.map_err(io_error(&path))?;
    Ok(SessionLock { file })
}

/// The PID and start time a lock file records.
fn read_holder(file: &mut File) -> Option<(u32, String)> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    // A PID and a start time; more than that is not a holder this store wrote.
    file.take(256).read_to_string(&mut text).ok()?;
    let mut words = text.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    Some((pid, words.next().unwrap_or_default().to_owned()))
}

/// Whether the process a session's lock file (opened by the caller) names is alive: the PID
/// exists and, where the start time is known, it is the same process (not a later one given
/// the same PID).
pub(super) fn holder_alive(lock: Option<File>) -> bool {
    let Some(mut file) = lock else {
        return false;
    };
    let Some((pid, start)) = read_holder(&mut file) else {
        return false;
    };
    alive(pid, &start)
}

/// Whether process `pid`, started at `start` (clock ticks since boot; empty when unknown), is
/// alive.
fn alive(pid: u32, start: &str) -> bool {
    if !process_exists(pid) {
        return false;
    }
    match process_start(pid) {
        Some(now) if !start.is_empty() => now == start,
        _ => true,
    }
}

/// Whether a process with this PID exists.
fn process_exists(pid: u32) -> bool {
    if Path::new("/proc/self").exists() {
        return Path::new(&format!("/proc/{pid}")).exists();
    }
    // Without /proc, `kill -0` asks the kernel.
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The start time of a process (clock ticks since boot, from `/proc/PID/stat`), where known.
fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let (_, after) = stat.rsplit_once(')')?;
    // `after` starts at field 3 (the state); the start time is field 22.
    after.split_whitespace().nth(19).map(str::to_owned)
}
