//! The processes a program leaves when it escapes its process group (`support/escaper.py`),
//! tracked by pid *and* start time, so that a pid reused by another process is not taken for
//! a survivor. Linux only (`/proc`). Included with `#[path]` by every test crate that checks a
//! stopped program left nothing running.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

/// The escaping stdio MCP server (see the script's header).
pub const ESCAPER: &str = include_str!("escaper.py");

/// The files the escaper's processes write their pids to, in the order they are written.
pub const PID_FILES: [&str; 3] = ["setsid.pid", "forked.pid", "server.pid"];

/// The `PATH` the supervised programs of the tests search: the system's, which every user can
/// read (the test's own may lie under a home directory another user cannot enter).
pub const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Where `python3` is on [`SYSTEM_PATH`].
pub fn system_python() -> std::path::PathBuf {
    std::env::split_paths(SYSTEM_PATH)
        .map(|dir| dir.join("python3"))
        .find(|candidate| candidate.is_file())
        .unwrap()
}

/// The escaper written into `dir`, as a program in `dir` found as `python3` on
/// [`SYSTEM_PATH`], with `extra` arguments and `env` besides `PATH`.
pub fn escaper_program(
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> tool_bash::ConfinedProgram {
    let script = write_escaper(dir);
    let mut args = vec![script.into_os_string(), dir.as_os_str().to_owned()];
    args.extend(extra.iter().map(std::ffi::OsString::from));
    let env = std::iter::once(("PATH", SYSTEM_PATH)).chain(env.iter().copied());
    tool_bash::ConfinedProgram::new("python3", dir)
        .with_args(args)
        .with_env(env)
}

/// Sends one `tools/call` line to the program and reads its answer line (within 20 s).
pub async fn ping(program: &mut tool_bash::SupervisedProgram) -> String {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut stdin = program.take_stdin().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}\n")
        .await
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(program.take_stdout().unwrap());
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut line))
        .await
        .expect("no answer")
        .unwrap();
    drop(stdin);
    line
}

/// Writes the escaper into `dir` and returns its path.
pub fn write_escaper(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("escaper.py");
    std::fs::write(&path, ESCAPER).unwrap();
    path
}

/// A process as `/proc/PID/stat` has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    /// Clock ticks after boot at which it started (field 22).
    pub start: u64,
    /// Its process group (field 5) and session (field 6).
    pub group: i32,
    pub session: i32,
}

/// `pid` as it is now, unless it is gone or a zombie (which runs nothing).
pub fn live(pid: i32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which may hold spaces, start after its `) `.
    let rest = &stat[stat.rfind(") ")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (the state).
    if fields.first() == Some(&"Z") {
        return None;
    }
    Some(Process {
        pid,
        start: fields.get(19)?.parse().ok()?,
        group: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
    })
}

/// Whether `process` still runs: the same pid with the same start time, not a zombie.
pub fn still_running(process: &Process) -> bool {
    live(process.pid).is_some_and(|now| now.start == process.start)
}

/// Waits (at most `bound`) until every file of [`PID_FILES`] is in `dir`, and returns the
/// processes they name, live.
pub fn escaped(dir: &Path, bound: Duration) -> Vec<Process> {
    let deadline = Instant::now() + bound;
    let mut pids = Vec::new();
    for name in PID_FILES {
        let path = dir.join(name);
        let text = loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                break text;
            }
            assert!(
                Instant::now() < deadline,
                "{} was not written within {bound:?}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        pids.push(text.trim().parse::<i32>().unwrap());
    }
    pids.into_iter()
        .map(|pid| live(pid).unwrap_or_else(|| panic!("process {pid} is not running")))
        .collect()
}

/// Asserts that the escapees really left: the `setsid` one leads a session other than the
/// server's, the double-forked one a group other than the server's.
pub fn assert_escaped(processes: &[Process]) {
    let [setsid, forked, server] = processes else {
        panic!("expected three processes, got {processes:?}");
    };
    assert_ne!(setsid.session, server.session, "{processes:?}");
    assert_ne!(forked.group, server.group, "{processes:?}");
}

/// The live processes whose environment holds `NAME=VALUE` (`mark`), by pid and start time.
pub fn marked(mark: &str) -> Vec<Process> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|var| var == mark.as_bytes()) {
            found.extend(live(pid));
        }
    }
    found
}

/// Waits (at most `bound`) until none of `processes` runs; panics naming the survivors.
pub fn assert_gone(processes: &[Process], bound: Duration) {
    let deadline = Instant::now() + bound;
    loop {
        let left: Vec<&Process> = processes.iter().filter(|p| still_running(p)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still running {bound:?} after the stop: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
