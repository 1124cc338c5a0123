//! The hostile table: commands that try to get out of the `workspace-write` sandbox, on both
//! backends, as root and as an ordinary user. Each case runs through the executor as a
//! model's command would; after each, the test checks from outside that the world is as it was
//! (the files outside the roots and the protected store, to the nanosecond of their change
//! times; the listeners the test holds; a process of the test's; the host's network links and
//! name; a terminal the test holds) and that the call ended in time.
//!
//! `the_hostile_table_holds_as_root_and_as_a_user` runs the table in two child processes of
//! this test binary: as the user running the tests, and, when that is root (as in CI), as a
//! throwaway user (`setpriv`), each with a secret in its environment that no command may read
//! back. `hostile_pass` is the table itself, ignored when the tests run, since it is the child
//! processes' entry point.

use super::{Dirs, bubblewrap_available, config, scratch_base};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tool_bash::sandbox::{Right, SandboxBackend, SandboxMode, SandboxedExecutor};
use tool_bash::shell::{ShellExecutor, ShellRequest, ShellRunResult};

/// The secret the passes carry in their environment: a name the environment policy withholds
/// from commands, and a value no command may print.
const SECRET_NAME: &str = "HOSTILE_TABLE_API_KEY";
const SECRET_VALUE: &str = "sk-hostile-table-secret-0123456789";

/// The throwaway user of the second pass.
const THROWAWAY_ID: u32 = 61_234;

/// What a case's call may take at most: its own timeout plus the executor's grace periods.
const CALL_BOUND: Duration = Duration::from_secs(15);

/// Everything outside the sandbox the table watches.
struct World {
    dirs: Dirs,
    store: PathBuf,
    tools: tempfile::TempDir,
    tcp: TcpListener,
    tcp6: Option<TcpListener>,
    udp: UdpSocket,
    unix: UnixListener,
    unix_dgram: UnixDatagram,
    abstract_listener: UnixListener,
    abstract_name: String,
    victim: Child,
    terminal: Terminal,
    hostname: String,
    /// The host's `/dev/null`, to its change time.
    dev_null: (u32, i64, i64),
}

fn dev_null() -> (u32, i64, i64) {
    let meta = std::fs::metadata("/dev/null").unwrap();
    (meta.mode(), meta.ctime(), meta.ctime_nsec())
}

/// A pseudo-terminal the test holds, as a user's terminal: a helper keeps its other end and
/// says whether anything was typed into it.
struct Terminal {
    helper: Child,
    answers: BufReader<std::process::ChildStdout>,
    path: String,
}

const TERMINAL_HELPER: &str = r#"
import os, pty, select, sys, tty
master, slave = pty.openpty()
tty.setraw(slave)
print(os.ttyname(slave), flush=True)
for _ in sys.stdin:
    ready, _, _ = select.select([slave], [], [], 0.05)
    data = os.read(slave, 4096) if ready else b""
    print("typed:" + data.hex() if data else "clean", flush=True)
"#;

impl Terminal {
    fn open() -> Terminal {
        let mut helper = Command::new("python3")
            .args(["-c", TERMINAL_HELPER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the hostile table needs python3 on PATH");
        let mut answers = BufReader::new(helper.stdout.take().unwrap());
        let mut path = String::new();
        answers.read_line(&mut path).unwrap();
        Terminal {
            helper,
            answers,
            path: path.trim().to_owned(),
        }
    }

    /// What was typed into the terminal since the last look: `clean`, or `typed:HEX`.
    fn typed(&mut self) -> String {
        let stdin = self.helper.stdin.as_mut().unwrap();
        stdin.write_all(b"look\n").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.answers.read_line(&mut answer).unwrap();
        answer.trim().to_owned()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.victim.kill();
        let _ = self.victim.wait();
        let _ = self.terminal.helper.kill();
        let _ = self.terminal.helper.wait();
    }
}

/// A file's or directory's state, to the change time: a write, a mode, owner, times or
/// extended attribute change, a new link or a removal all show.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    path: PathBuf,
    mode: u32,
    uid: u32,
    gid: u32,
    links: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    content: Option<Vec<u8>>,
}

fn snapshot(dir: &Path) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        // A place that vanished, or became unreadable, shows as missing from the snapshot.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(&path)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.path())
                .collect();
            children.sort();
            pending.extend(children);
        }
        entries.push(Entry {
            content: meta.is_file().then(|| std::fs::read(&path).ok()).flatten(),
            path,
            mode: meta.mode(),
            uid: meta.uid(),
            gid: meta.gid(),
            links: meta.nlink(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        });
    }
    entries
}

impl World {
    fn new() -> World {
        let dirs = Dirs::new();
        let out = dirs.outside();
        std::fs::write(out.join("f"), "outside\n").unwrap();
        std::fs::create_dir(out.join("dir")).unwrap();
        std::fs::write(out.join("dir/deep"), "deep\n").unwrap();
        let store = dirs.root().join("state/store");
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("log.jsonl"), "{\"event\":\"session/start\"}\n").unwrap();
        let tools = tempfile::tempdir_in(scratch_base()).unwrap();
        std::fs::write(tools.path().join("probe.py"), include_str!("probe.py")).unwrap();
        let nonblocking = |listener: TcpListener| {
            listener.set_nonblocking(true).unwrap();
            listener
        };
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let unix = UnixListener::bind(out.join("sock")).unwrap();
        unix.set_nonblocking(true).unwrap();
        let unix_dgram = UnixDatagram::bind(out.join("dsock")).unwrap();
        unix_dgram.set_nonblocking(true).unwrap();
        let abstract_name = format!("dsh-hostile-{}", std::process::id());
        let abstract_listener =
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap())
                .unwrap();
        abstract_listener.set_nonblocking(true).unwrap();
        World {
            store,
            tools,
            tcp: nonblocking(TcpListener::bind("127.0.0.1:0").unwrap()),
            tcp6: TcpListener::bind("[::1]:0").ok().map(nonblocking),
            udp,
            unix,
            unix_dgram,
            abstract_listener,
            abstract_name,
            victim: Command::new("sleep").arg("600").spawn().unwrap(),
            terminal: Terminal::open(),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
            dev_null: dev_null(),
            dirs,
        }
    }

    fn probe(&self, case: &str, args: &[&str]) -> String {
        let mut line = format!(
            "python3 '{}' {case}",
            self.tools.path().join("probe.py").display()
        );
        for arg in args {
            line.push_str(&format!(" '{arg}'"));
        }
        line
    }

    /// The state the table compares before and after each case.
    fn state(&mut self) -> (Vec<Entry>, Vec<Entry>, Vec<String>) {
        let mut listeners = Vec::new();
        let mut heard = |what: &str, got: std::io::Result<()>| match got {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => listeners.push(format!("{what}: {other:?}")),
        };
        heard("tcp", self.tcp.accept().map(drop));
        if let Some(tcp6) = &self.tcp6 {
            heard("tcp6", tcp6.accept().map(drop));
        }
        heard("udp", self.udp.recv(&mut [0; 16]).map(drop));
        heard("unix", self.unix.accept().map(drop));
        heard("unix dgram", self.unix_dgram.recv(&mut [0; 16]).map(drop));
        heard("abstract", self.abstract_listener.accept().map(drop));
        let mut host = listeners;
        match self.victim.try_wait() {
            Ok(None) => {}
            other => host.push(format!("the test's process ended: {other:?}")),
        }
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.victim.id())).unwrap_or_default();
        let state = stat
            .rsplit(") ")
            .next()
            .and_then(|rest| rest.split(' ').next());
        if state == Some("T") || state == Some("t") {
            host.push(String::from("the test's process was stopped"));
            let _ = Command::new("kill")
                .args(["-CONT", &self.victim.id().to_string()])
                .status();
        }
        if Path::new("/sys/class/net/dshprobe0").exists() {
            host.push(String::from("a network link was added"));
        }
        if dev_null() != self.dev_null {
            host.push(String::from("the host's /dev/null changed"));
        }
        if std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap() != self.hostname {
            host.push(String::from("the host's name changed"));
        }
        let typed = self.terminal.typed();
        if typed != "clean" {
            host.push(format!("the terminal got {typed}"));
        }
        (snapshot(self.dirs.outside()), snapshot(&self.store), host)
    }
}

/// One hostile command, with what its output must and must not contain.
struct Case {
    name: &'static str,
    command: String,
    timeout: Option<Duration>,
    /// Text the command's stdout must contain (its own report of being refused, or the state
    /// it found).
    expect: Option<String>,
}

fn case(name: &'static str, command: String) -> Case {
    Case {
        name,
        command,
        timeout: None,
        expect: None,
    }
}

fn cases(world: &World) -> Vec<Case> {
    let out = world.dirs.outside().display().to_string();
    let store = world.store.display().to_string();
    let harness = std::process::id();
    let victim = world.victim.id();
    let tty = world.terminal.path.clone();
    let tcp = world.tcp.local_addr().unwrap().port().to_string();
    let udp = world.udp.local_addr().unwrap().port().to_string();
    let p = |case: &str, args: &[&str]| world.probe(case, args);
    let mut table = vec![
        // Files and their metadata outside the roots.
        case(
            "write a new file outside",
            format!("echo x > '{out}/new' && echo ALLOWED"),
        ),
        case(
            "append to a file outside",
            format!("echo x >> '{out}/f' && echo ALLOWED"),
        ),
        case(
            "truncate a file outside",
            format!("truncate -s 0 '{out}/f' && echo ALLOWED"),
        ),
        case(
            "remove a file outside",
            format!("rm -f '{out}/f' && echo ALLOWED"),
        ),
        case(
            "rename a file out of its place",
            format!("mv '{out}/f' moved && echo ALLOWED"),
        ),
        case(
            "make a directory outside",
            format!("mkdir '{out}/made' && echo ALLOWED"),
        ),
        case(
            "hard-link a file outside into the workspace",
            format!("ln '{out}/f' linked && echo x >> linked"),
        ),
        case(
            "write through a symlink in the workspace",
            format!("ln -s '{out}/f' sym; echo x >> sym"),
        ),
        case(
            "chmod a file outside",
            format!("chmod 777 '{out}/f' && echo ALLOWED"),
        ),
        case(
            "chmod a directory outside",
            format!("chmod 700 '{out}/dir' && echo ALLOWED"),
        ),
        case(
            "chmod through a symlink",
            format!("ln -s '{out}/dir/deep' s2; chmod 600 s2"),
        ),
        case(
            "chown a file outside",
            format!("chown 1:1 '{out}/f' && echo ALLOWED"),
        ),
        case(
            "change a file's times outside",
            format!("touch -d 2001-01-01 '{out}/f' && echo ALLOWED"),
        ),
        case(
            "touch a file outside to now",
            format!("touch '{out}/dir/deep' && echo ALLOWED"),
        ),
        case(
            "set an extended attribute outside",
            p("setxattr", &[&format!("{out}/f")]),
        ),
        case(
            "remount the outside writable",
            format!("mount -t tmpfs none '{out}'; mount -o remount,rw /; echo x > '{out}/m'"),
        ),
        case(
            "a new user namespace's mount",
            format!("unshare -Urm sh -c 'mount -t tmpfs none \"$0\"; echo x > \"$0/u\"' '{out}'"),
        ),
        // Device nodes, and devices.
        case(
            "mknod a block device in the workspace",
            p("mknod", &["sda", "b", "8", "0"]),
        ),
        case(
            "mknod a character device in the workspace",
            p("mknod", &["mem", "c", "1", "1"]),
        ),
        case(
            "mknod the kernel log in the workspace",
            p("mknod", &["kmsg", "c", "1", "11"]),
        ),
        case(
            "mknod a device outside",
            p("mknod", &[&format!("{out}/null"), "c", "1", "3"]),
        ),
        case(
            "write the kernel log",
            String::from("echo hostile > /dev/kmsg && echo ALLOWED"),
        ),
        // Terminals.
        case("type into a terminal the user holds", p("tiocsti", &[&tty])),
        case(
            "make the terminal its own, then type",
            p("tiocsti-own", &[&tty]),
        ),
        case("type into its controlling terminal", p("dev-tty", &[])),
        // The network and sockets.
        case(
            "tcp through bash",
            format!("exec 3<>/dev/tcp/127.0.0.1/{tcp} && echo ALLOWED tcp"),
        ),
        case("tcp", p("tcp", &["127.0.0.1", &tcp])),
        case("udp", p("udp", &["127.0.0.1", &udp])),
        case(
            "udp through bash",
            format!("echo x > /dev/udp/127.0.0.1/{udp} && echo ALLOWED"),
        ),
        case("raw and datagram icmp", p("icmp", &[])),
        case("a packet socket", p("packet", &[])),
        case(
            "a unix socket outside",
            p("unix", &[&format!("{out}/sock")]),
        ),
        case(
            "a unix datagram socket outside",
            p("unix-dgram", &[&format!("{out}/dsock")]),
        ),
        case(
            "an abstract unix socket",
            p("abstract", &[&world.abstract_name]),
        ),
        case("add a network link", p("new-link", &["dshprobe0"])),
        case("io_uring", p("io-uring", &[])),
        case("an x32 socket", p("x32-socket", &[])),
        // Other processes, the harness and the supervisor.
        case(
            "kill a process outside",
            format!("kill -9 {victim}; echo \"kill=$?\""),
        ),
        case(
            "stop a process outside",
            format!("kill -STOP {victim}; echo \"stop=$?\""),
        ),
        case(
            "kill the supervisor",
            String::from("kill -9 $PPID; echo \"kill=$?\""),
        ),
        case(
            "read the harness's environment",
            format!("tr '\\0' '\\n' < /proc/{harness}/environ"),
        ),
        case(
            "read the supervisor's environment",
            String::from("tr '\\0' '\\n' < /proc/$PPID/environ"),
        ),
        case(
            "read the harness's memory",
            p("read-mem", &[&harness.to_string()]),
        ),
        case("ptrace the harness", p("ptrace", &[&harness.to_string()])),
        case("read the kernel's key rings", p("keyring", &[])),
        case("rename the host", p("hostname", &["hostile"])),
        case(
            "rename the host through /proc",
            String::from("echo hostile > /proc/sys/kernel/hostname && echo ALLOWED"),
        ),
        // The session store beneath the workspace.
        case(
            "append to the store's log",
            format!("echo forged >> '{store}/log.jsonl' && echo ALLOWED"),
        ),
        case(
            "replace the store's log",
            format!("echo forged > '{store}/new' && mv '{store}/new' '{store}/log.jsonl'"),
        ),
        case(
            "remove the store",
            format!("rm -rf '{store}' && echo ALLOWED"),
        ),
        case(
            "move the store away",
            format!("mv '{store}' elsewhere && echo ALLOWED"),
        ),
        case("limit the harness", p("limit", &[&harness.to_string()])),
        case(
            "limit the supervisor",
            String::from(
                "python3 -c 'import resource, os; \
                 resource.prlimit(os.getppid(), resource.RLIMIT_CORE, (0, 0)); print(\"ALLOWED\")'",
            ),
        ),
        case(
            "renice a process outside",
            p("renice", &[&victim.to_string()]),
        ),
        case("read a terminal the user holds", p("read-tty", &[&tty])),
        case(
            "change the host's /dev/null through stdin",
            // On bubblewrap stdin is an empty pipe: the mode it may change is the pipe's. The
            // host's `/dev/null` is watched from outside.
            String::from("chmod 0600 /dev/stdin; touch -d 2001-01-01 /dev/stdin"),
        ),
        case(
            "plant a setuid program",
            String::from(
                "cp /bin/true suid && chmod 4755 suid && echo ALLOWED; chmod g+s . && echo ALLOWED",
            ),
        ),
        case(
            "move the store's parent away, then write the store",
            String::from(
                "mv state state-moved && echo ALLOWED; echo forged >> state-moved/store/log.jsonl && echo ALLOWED",
            ),
        ),
        case(
            "put a link in the store's parent's place",
            String::from("mv state state-gone && ln -s /tmp state && echo ALLOWED"),
        ),
        // What the command holds.
        Case {
            expect: Some(String::from(
                "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n\
                 CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n\
                 CapAmb:\t0000000000000000\n",
            )),
            ..case(
                "hold no capability",
                String::from("grep ^Cap /proc/self/status"),
            )
        },
        Case {
            expect: Some(String::from("no controlling terminal")),
            ..case(
                "have no controlling terminal",
                String::from("(: </dev/tty) 2>/dev/null || echo no controlling terminal"),
            )
        },
        // What stays allowed.
        Case {
            expect: Some(String::from("pair p q")),
            ..case(
                "a stream pair and a pseudo-terminal of its own",
                p("pair", &[]),
            )
        },
        Case {
            expect: Some(String::from("inside ok")),
            ..case(
                "change what is inside the workspace",
                String::from(
                    "echo x > own && chmod 600 own && touch -d 2001-01-01 own && mkfifo fifo \
                 && echo inside ok",
                ),
            )
        },
        // A call always ends.
        Case {
            timeout: Some(Duration::from_secs(1)),
            ..case(
                "stop the supervisor, then outlive the timeout",
                String::from("kill -STOP $PPID; sleep 30"),
            )
        },
        case(
            "stop the supervisor, then exit",
            String::from("kill -STOP $PPID; echo stopped"),
        ),
    ];
    if let Some(tcp6) = &world.tcp6 {
        let port = tcp6.local_addr().unwrap().port().to_string();
        table.push(case("tcp over IPv6", p("tcp", &["::1", &port])));
    }
    table
}

/// Runs the table on `backend`; returns the failures, each with its case's name.
async fn run_table(backend: SandboxBackend) -> Vec<String> {
    let mut world = World::new();
    let policy = world
        .dirs
        .policy(SandboxMode::WorkspaceWrite)
        .with_protected(&world.store);
    let executor = SandboxedExecutor::new(policy, backend, config()).unwrap();
    let mut failures = Vec::new();
    for right in [Right::Metadata, Right::ProtectedPlaces, Right::Signals] {
        if !executor.report().enforces(right) {
            failures.push(format!("{backend}: {right:?} is not enforced here"));
        }
    }
    let table = cases(&world);
    assert!(table.len() >= 40, "only {} cases", table.len());
    for case in table {
        let before = world.state();
        let started = Instant::now();
        let result = run(&executor, &case, world.dirs.root()).await;
        let took = started.elapsed();
        let after = world.state();
        let name = format!("{backend}: {}", case.name);
        let stdout = result.as_ref().map_or("", |r| r.stdout.text.as_str());
        let shown = format!(
            "{stdout:?} {:?}",
            result.as_ref().map_or("", |r| r.stderr.text.as_str())
        );
        if took > CALL_BOUND {
            failures.push(format!("{name}: the call took {took:?}"));
        }
        if stdout.contains("ALLOWED") {
            failures.push(format!("{name}: the command was let through: {shown}"));
        }
        if stdout.contains(SECRET_VALUE) || shown.contains(SECRET_NAME) {
            failures.push(format!("{name}: the secret was read back: {shown}"));
        }
        if let Some(expected) = &case.expect
            && !stdout.contains(expected.as_str())
        {
            failures.push(format!("{name}: expected {expected:?} in {shown}"));
        }
        if before.0 != after.0 {
            failures.push(format!("{name}: the outside changed: {shown}"));
        }
        if before.1 != after.1 {
            failures.push(format!("{name}: the store changed: {shown}"));
        }
        for change in after.2 {
            failures.push(format!("{name}: {change}: {shown}"));
        }
        if let Err(error) = result {
            failures.push(format!("{name}: the call failed: {error}"));
        }
    }
    failures
}

async fn run(
    executor: &dyn ShellExecutor,
    case: &Case,
    workdir: &Path,
) -> Result<ShellRunResult, String> {
    let mut request = ShellRequest::new(case.command.clone());
    request.workdir = Some(workdir.to_path_buf());
    request.timeout = case.timeout.or(Some(Duration::from_secs(10)));
    let spec = executor.resolve(request, None).map_err(|e| e.to_string())?;
    tokio::time::timeout(CALL_BOUND * 2, executor.run(spec))
        .await
        .map_err(|_| String::from("the call never ended"))?
        .map_err(|e| e.to_string())
}

/// The table in this process, as whoever runs it: the entry point of the two passes below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the entry point of the_hostile_table_holds_as_root_and_as_a_user's child processes"]
async fn hostile_pass() {
    // As a host does first thing: the harness becomes non-dumpable (which must not keep its
    // commands' user namespaces from being made) and blanks its secrets.
    let withdrawn = tool_bash::sandbox::withdraw_secrets();
    assert!(
        std::env::var_os(SECRET_NAME).is_none()
            || withdrawn.contains_key(std::ffi::OsStr::new(SECRET_NAME)),
        "the secret was not withdrawn"
    );
    let mut failures = run_table(SandboxBackend::Landlock).await;
    if bubblewrap_available() {
        failures.extend(run_table(SandboxBackend::Bubblewrap).await);
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs [`hostile_pass`] in a child process of this test binary, as `user` (`None`: as this
/// process's user), with the secret in its environment; panics with its output if it failed.
fn pass(user: Option<u32>) {
    super::as_user::pass_as(
        "hostile::hostile_pass",
        user,
        &[(SECRET_NAME, SECRET_VALUE)],
        "the hostile table",
    );
}

#[test]
fn the_hostile_table_holds_as_root_and_as_a_user() {
    pass(None);
    if super::as_user::running_as_root() {
        pass(Some(THROWAWAY_ID));
    } else {
        eprintln!(
            "the hostile table ran as this user only: the pass as root needs the tests to run \
             as root (CI does)"
        );
    }
}
