//! One writer per session: the advisory lock on a session's `lock` file, and whether the
//! process it names is still alive.

use super::{LOCK_FILE, StoreError, io_error};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

pub(super) fn lock_session(id: &str, dir: &Path) -> Result<SessionLock, StoreError> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io_error(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = read_holder(&mut file).map_or(0, |(pid, _)| pid);
            return Err(StoreError::SessionInUse {
                id: id.to_owned(),
                pid,
            });
        }
        Err(std::fs::TryLockError::Error(error)) => return Err(io_error(&path)(error)),
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
    file.read_to_string(&mut text).ok()?;
    let mut words = text.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    Some((pid, words.next().unwrap_or_default().to_owned()))
}

/// Whether the process a session's lock file names is alive: the PID exists and, where the
/// start time is known, it is the same process (not a later one given the same PID).
pub(super) fn holder_alive(dir: &Path) -> bool {
    let Ok(mut file) = File::open(dir.join(LOCK_FILE)) else {
        return false;
    };
    let Some((pid, start)) = read_holder(&mut file) else {
        return false;
    };
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
