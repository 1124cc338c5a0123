//! The sandboxed executor: every denial is checked from inside the command (its exit code, its
//! stderr, and the file that must not exist), on Landlock and on bubblewrap.

#![cfg(all(
    feature = "sandbox",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tool_bash::local::LocalConfig;
use tool_bash::sandbox::{
    Capability, ConfinedProgram, Enforcement, Mechanism, MountNamespace, Right, SandboxBackend,
    SandboxError, SandboxMode, SandboxPolicy, SandboxProbe, SandboxReport, SandboxedExecutor,
    SystemProbe,
};
use tool_bash::shell::{ProcessStatus, ShellExecutor, ShellRequest, ShellRunResult, Stream};

/// Escalation through the registry's approver, with the fixtures below.
/// This module's path: the child-process entry points below it are named from here.
const PATH: &str = module_path!();

#[path = "sandbox/escalation.rs"]
mod escalation;

/// The hostile table, on both backends, as root and as a user.
#[path = "sandbox/hostile.rs"]
mod hostile;

/// Supervised programs (`SandboxedExecutor::spawn_program`), on both backends, as root and as
/// a user.
#[path = "sandbox/program.rs"]
mod program;

use crate::escapees;

/// Running an ignored pass again as another user.
#[path = "sandbox/as_user.rs"]
mod as_user;

/// Where the tests' directories go: `DSH_SANDBOX_SCRATCH` when set (the hostile table's pass as
/// another user), else the target's temporary directory, unless it is under `/tmp` (a checkout
/// there), which bubblewrap hides behind a private one; then `/var/tmp`.
fn scratch_base() -> &'static Path {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        if let Some(base) = std::env::var_os("DSH_SANDBOX_SCRATCH") {
            return PathBuf::from(base);
        }
        let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        if target_tmp.starts_with("/tmp") {
            PathBuf::from("/var/tmp")
        } else {
            target_tmp.to_path_buf()
        }
    })
}

/// A workspace root the command may write, a directory outside every root with a file to read,
/// and a directory for the test's own tools. Under the target's temporary directory, not
/// `/tmp`, which bubblewrap replaces with a private one (see [`scratch_base`]).
struct Dirs {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let base = scratch_base();
        let dirs = Dirs {
            root: tempfile::tempdir_in(base).unwrap(),
            outside: tempfile::tempdir_in(base).unwrap(),
        };
        std::fs::write(dirs.outside.path().join("readme"), "readable\n").unwrap();
        dirs
    }

    fn root(&self) -> &Path {
        self.root.path()
    }

    fn outside(&self) -> &Path {
        self.outside.path()
    }

    fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy::new(mode).with_workspace_root(self.root())
    }
}

fn config() -> LocalConfig {
    let mut config = LocalConfig::default();
    config.grace = Duration::from_millis(500);
    config
}

fn sandboxed(policy: SandboxPolicy, backend: SandboxBackend) -> SandboxedExecutor {
    SandboxedExecutor::new(policy, backend, config()).unwrap()
}

async fn run_in(executor: &dyn ShellExecutor, command: &str, workdir: &Path) -> ShellRunResult {
    let mut request = ShellRequest::new(command);
    request.workdir = Some(workdir.to_path_buf());
    let spec = executor.resolve(request, None).unwrap();
    executor.run(spec).await.unwrap()
}

/// What a denied write looks like on stderr: on both backends the read-only mount namespace
/// refuses it (`EROFS`) before Landlock would (`EACCES`).
fn denied_write(_backend: SandboxBackend) -> &'static str {
    "Read-only file system"
}

/// The backends to run the table on. Bubblewrap must be there (CI installs it): its absence
/// fails the table, loudly, unless `DSH_SANDBOX_WITHOUT_BWRAP=1` says the machine has none
/// on purpose, and then the skip is printed.
fn bubblewrap_available() -> bool {
    match SystemProbe.bubblewrap() {
        Ok(_) => true,
        Err(why) if std::env::var_os("DSH_SANDBOX_WITHOUT_BWRAP").is_some() => {
            eprintln!(
                "\n!!! SKIPPED: the bubblewrap table did NOT run: {why} \
                 (DSH_SANDBOX_WITHOUT_BWRAP is set) !!!\n"
            );
            false
        }
        Err(why) => panic!(
            "the bubblewrap table cannot run: {why}. Install bubblewrap (`apt-get install -y \
             bubblewrap`), or set DSH_SANDBOX_WITHOUT_BWRAP=1 to skip it knowingly"
        ),
    }
}

async fn writes_outside_the_roots_are_denied_and_inside_allowed(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let executor = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
    let target = dirs.outside().join("written");
    let denied = run_in(
        &executor,
        &format!("echo x > '{}'", target.display()),
        dirs.root(),
    )
    .await;
    assert_eq!(denied.exit_code, Some(1), "{denied:?}");
    assert!(
        denied.stderr.text.contains(denied_write(backend)),
        "{:?}",
        denied.stderr.text
    );
    assert!(!target.exists(), "{backend}: the write went through");
    assert_eq!(denied.notes.len(), 1, "{denied:?}");
    assert!(
        denied.notes[0].contains("`workspace-write` sandbox policy"),
        "{:?}",
        denied.notes
    );

    let allowed = run_in(
        &executor,
        "echo inside > made && cat made && echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
        dirs.root(),
    )
    .await;
    assert_eq!(
        (
            allowed.exit_code,
            allowed.stdout.text.as_str(),
            allowed.stderr.text.as_str()
        ),
        (Some(0), "inside\ntmp\n", "")
    );
    assert_eq!(allowed.notes, Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(dirs.root().join("made")).unwrap(),
        "inside\n"
    );

    // Read-only: not even the workspace root, but still the private temporary directory.
    let read_only = sandboxed(dirs.policy(SandboxMode::ReadOnly), backend);
    let inside = dirs.root().join("read-only");
    let result = run_in(
        &read_only,
        &format!(
            "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo x > '{}'",
            inside.display()
        ),
        dirs.root(),
    )
    .await;
    assert_eq!(
        (result.exit_code, result.stdout.text.as_str()),
        (Some(1), "t\n")
    );
    assert!(result.stderr.text.contains(denied_write(backend)));
    assert!(!inside.exists());
}

async fn reads_work(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let executor = sandboxed(dirs.policy(SandboxMode::ReadOnly), backend);
    let result = run_in(
        &executor,
        &format!(
            "cat '{}' && head -c 5 /etc/passwd >/dev/null && echo read",
            dirs.outside().join("readme").display()
        ),
        dirs.root(),
    )
    .await;
    assert_eq!(
        (
            result.exit_code,
            result.stdout.text.as_str(),
            result.stderr.text.as_str()
        ),
        (Some(0), "readable\nread\n", "")
    );
}

async fn network_is_denied_unless_allowed(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let denied = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
    let result = run_in(&denied, &connect, dirs.root()).await;
    assert_eq!(result.exit_code, Some(1), "{result:?}");
    assert_eq!(result.stdout.text, "");
    // On both backends the seccomp filter refuses the socket before Landlock's TCP rule or
    // bubblewrap's network namespace would refuse the connection.
    assert!(
        result
            .stderr
            .text
            .contains("socket: Operation not permitted"),
        "{:?}",
        result.stderr.text
    );
    assert!(result.notes[0].contains("denies network connections"));

    let allowed = sandboxed(
        dirs.policy(SandboxMode::WorkspaceWrite).with_network(true),
        backend,
    );
    let result = run_in(&allowed, &connect, dirs.root()).await;
    assert_eq!(
        (
            result.exit_code,
            result.stdout.text.as_str(),
            result.stderr.text.as_str()
        ),
        (Some(0), "connected\n", "")
    );
}

/// A setuid copy of `touch` (the test runs as root, so it is a setuid-root program), `mount`
/// over the outside directory and a new user namespace: none of them writes outside the roots,
/// and `no_new_privs` is set.
async fn the_confinement_survives_setuid_and_cannot_be_lifted(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let tools = tempfile::tempdir_in(scratch_base()).unwrap();
    let touch = tools.path().join("setuid-touch");
    std::fs::copy("/usr/bin/touch", &touch).unwrap();
    std::fs::set_permissions(&touch, std::fs::Permissions::from_mode(0o4755)).unwrap();
    assert_eq!(
        std::fs::metadata(&touch).unwrap().permissions().mode() & 0o4000,
        0o4000
    );
    let out = dirs.outside();
    let executor = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
    let command = format!(
        "grep NoNewPrivs /proc/self/status
         '{touch}' '{out}/by-setuid'; echo \"setuid=$?\"
         mount -t tmpfs none '{out}' 2>/dev/null; echo \"mount=$?\"
         echo x > '{out}/after-mount'; echo \"after-mount=$?\"
         unshare -Urm sh -c 'echo x > \"$0/in-userns\"' '{out}'; echo \"userns=$?\"",
        touch = touch.display(),
        out = out.display()
    );
    let result = run_in(&executor, &command, dirs.root()).await;
    assert_eq!(
        result.stdout.text, "NoNewPrivs:\t1\nsetuid=1\nmount=32\nafter-mount=1\nuserns=1\n",
        "{result:?}"
    );
    for name in ["by-setuid", "after-mount", "in-userns"] {
        assert!(!out.join(name).exists(), "{backend}: {name} was written");
    }
}

async fn background_jobs_are_confined(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let executor = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
    let target = dirs.outside().join("from-job");
    let mut request =
        ShellRequest::new(format!("echo ok > in-job; echo x > '{}'", target.display()));
    request.workdir = Some(dirs.root().to_path_buf());
    let process = executor.start(executor.resolve(request, None).unwrap());
    tokio::time::timeout(Duration::from_secs(30), process.done())
        .await
        .unwrap();
    assert_eq!(
        (process.status(), process.exit_code()),
        (ProcessStatus::Exited, Some(1))
    );
    let stderr = process.read_from(Stream::Stderr, 0, 4096).text;
    assert!(stderr.contains(denied_write(backend)), "{stderr:?}");
    assert!(!target.exists());
    assert!(dirs.root().join("in-job").exists());
}

/// The note is for errors the sandbox can cause: a refused connection with the network allowed
/// is the listener's absence, and Landlock never reports an unreachable network.
async fn failures_the_sandbox_cannot_cause_get_no_note(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let allowed = sandboxed(
        dirs.policy(SandboxMode::WorkspaceWrite).with_network(true),
        backend,
    );
    let result = run_in(
        &allowed,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
        dirs.root(),
    )
    .await;
    assert_eq!(result.exit_code, Some(1), "{result:?}");
    assert!(
        result.stderr.text.contains("Connection refused"),
        "{:?}",
        result.stderr.text
    );
    assert_eq!(result.notes, Vec::<String>::new(), "{backend}");

    if backend == SandboxBackend::Landlock {
        let denied = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
        let result = run_in(
            &denied,
            "echo 'Network is unreachable; Connection refused' >&2; exit 1",
            dirs.root(),
        )
        .await;
        assert_eq!(result.exit_code, Some(1), "{result:?}");
        assert_eq!(result.notes, Vec::<String>::new());
    }
}

/// A program that is not a shell command (a stdio MCP server) started through
/// `SandboxedExecutor::command` and, supervised, `SandboxedExecutor::spawn_program`: the same
/// roots, private `TMPDIR`, network rule and
/// `no_new_privs` as the shell's commands, checked from inside the program; its environment is
/// exactly the one given, and it runs in the given directory.
async fn a_program_started_through_the_sandbox_is_confined(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let executor = sandboxed(dirs.policy(SandboxMode::WorkspaceWrite), backend);
    let out = dirs.outside();
    let script = format!(
        "grep NoNewPrivs /proc/self/status
         echo in > inside; echo \"inside=$?\"
         echo x > '{out}/written' 2>/dev/null; echo \"outside=$?\"
         echo t > \"$TMPDIR/t\"; echo \"tmp=$?\"
         cat '{out}/readme'
         (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; echo \"connect=$?\"
         echo \"pwd=$(pwd) given=$GIVEN host=${{HOST_ONLY:-unset}}\"",
        out = out.display()
    );
    let program = ConfinedProgram::new("bash", dirs.root())
        .with_args(["-c", script.as_str()])
        .with_env([
            ("PATH", std::env::var_os("PATH").unwrap()),
            ("GIVEN", "yes".into()),
        ]);
    let expected = (
        Some(0),
        format!(
            "NoNewPrivs:\t1\ninside=0\noutside=1\ntmp=0\nreadable\nconnect=1\n\
             pwd={} given=yes host=unset\n",
            dirs.root().display()
        ),
    );
    let supervised = program::output_of(executor.spawn_program(&program).await.unwrap()).await;
    let output = tokio::task::spawn_blocking(move || {
        executor
            .command(&program)
            .env_remove("IGNORED")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    for (how, output) in [("command", output), ("spawn_program", supervised)] {
        assert_eq!(
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned()
            ),
            expected,
            "{backend}, {how}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(
        !out.join("written").exists(),
        "{backend}: the write went through"
    );
    assert_eq!(
        std::fs::read_to_string(dirs.root().join("inside")).unwrap(),
        "in\n"
    );
}

async fn table(backend: SandboxBackend) {
    writes_outside_the_roots_are_denied_and_inside_allowed(backend).await;
    reads_work(backend).await;
    network_is_denied_unless_allowed(backend).await;
    the_confinement_survives_setuid_and_cannot_be_lifted(backend).await;
    background_jobs_are_confined(backend).await;
    failures_the_sandbox_cannot_cause_get_no_note(backend).await;
    a_program_started_through_the_sandbox_is_confined(backend).await;
    program::a_supervised_program_loses_what_it_started_on_stop_and_drop(backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_landlock_table() {
    table(SandboxBackend::Landlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bubblewrap_table() {
    if bubblewrap_available() {
        table(SandboxBackend::Bubblewrap).await;
    }
}

/// The system as a test says it is.
#[derive(Debug)]
struct Simulated {
    landlock_abi: u32,
    bubblewrap: Result<PathBuf, String>,
    seccomp: bool,
    mount_namespace: Result<MountNamespace, String>,
}

impl Simulated {
    /// This system, but for its Landlock ABI, and without `bwrap`.
    fn abi(landlock_abi: u32) -> Simulated {
        Simulated {
            landlock_abi,
            bubblewrap: Err(String::from("`bwrap` is not on PATH")),
            seccomp: SystemProbe.seccomp(),
            mount_namespace: SystemProbe.mount_namespace(),
        }
    }
}

impl SandboxProbe for Simulated {
    fn landlock_abi(&self) -> u32 {
        self.landlock_abi
    }

    fn bubblewrap(&self) -> Result<PathBuf, String> {
        self.bubblewrap.clone()
    }

    fn seccomp(&self) -> bool {
        self.seccomp
    }

    fn mount_namespace(&self) -> Result<MountNamespace, String> {
        self.mount_namespace.clone()
    }
}

fn unsupported(result: Result<SandboxedExecutor, SandboxError>) -> (Capability, String) {
    match result {
        Err(SandboxError::Unsupported {
            capability, detail, ..
        }) => (capability, detail),
        other => panic!("expected an unsupported capability, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unsupported_kernel_fails_closed_naming_the_capability() {
    let dirs = Dirs::new();
    let build = |policy: SandboxPolicy, backend, abi| {
        SandboxedExecutor::with_probe(policy, backend, config(), &Simulated::abi(abi))
    };
    let policy = dirs.policy(SandboxMode::WorkspaceWrite);
    assert_eq!(
        unsupported(build(policy.clone(), SandboxBackend::Landlock, 0)),
        (
            Capability::LandlockFilesystem,
            String::from("the kernel's Landlock ABI is 0, 1 is needed")
        )
    );
    assert_eq!(
        unsupported(build(policy.clone(), SandboxBackend::Landlock, 2)).0,
        Capability::LandlockTruncate
    );
    assert_eq!(
        unsupported(build(policy.clone(), SandboxBackend::Landlock, 3)),
        (
            Capability::LandlockNetwork,
            String::from("the kernel's Landlock ABI is 3, 4 is needed")
        )
    );
    let error = build(policy.clone(), SandboxBackend::Landlock, 3).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the workspace-write sandbox needs Landlock TCP rules (Landlock ABI 4, Linux 6.7), \
         which this system lacks (the kernel's Landlock ABI is 3, 4 is needed)"
    );
    assert_eq!(
        unsupported(build(policy.clone(), SandboxBackend::Bubblewrap, 7)).0,
        Capability::Bubblewrap
    );
    // Signals and abstract sockets need Landlock's scopes, whatever the network.
    assert_eq!(
        unsupported(build(
            policy.clone().with_network(true),
            SandboxBackend::Landlock,
            5
        )),
        (
            Capability::LandlockScopes,
            String::from("the kernel's Landlock ABI is 5, 6 is needed")
        )
    );
    assert!(build(policy.clone(), SandboxBackend::Landlock, 6).is_ok());
    // Without seccomp or a mount namespace, the sockets and the metadata outside stay open.
    let without = |probe: Simulated| {
        unsupported(SandboxedExecutor::with_probe(
            policy.clone(),
            SandboxBackend::Landlock,
            config(),
            &probe,
        ))
    };
    assert_eq!(
        without(Simulated {
            seccomp: false,
            ..Simulated::abi(7)
        }),
        (
            Capability::Seccomp,
            String::from("the kernel filters no system calls")
        )
    );
    assert_eq!(
        without(Simulated {
            mount_namespace: Err(String::from("user namespaces are off")),
            ..Simulated::abi(7)
        }),
        (
            Capability::MountNamespace,
            String::from("user namespaces are off")
        )
    );
    // Full access needs nothing.
    assert!(
        build(
            dirs.policy(SandboxMode::FullAccess),
            SandboxBackend::Landlock,
            0
        )
        .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_effort_reports_what_it_could_not_enforce_and_enforces_the_rest() {
    let dirs = Dirs::new();
    let probe = Simulated::abi(3);
    let policy = dirs
        .policy(SandboxMode::WorkspaceWrite)
        .with_enforcement(Enforcement::BestEffort);
    let executor =
        SandboxedExecutor::with_probe(policy, SandboxBackend::Landlock, config(), &probe).unwrap();
    let report: &SandboxReport = executor.report();
    assert_eq!(
        report.unenforced,
        vec![Capability::LandlockNetwork, Capability::LandlockScopes]
    );
    assert_eq!(report.backend, Some(SandboxBackend::Landlock));
    assert!(
        report.summary().ends_with(
            "NOT enforced: Landlock TCP rules (Landlock ABI 4, Linux 6.7), Landlock's signal \
                 and abstract-socket scopes (Landlock ABI 6, Linux 6.12)"
        ),
        "{}",
        report.summary()
    );
    let json = serde_json::to_value(report).unwrap();
    assert_eq!(
        json["unenforced"],
        serde_json::json!(["landlock-network", "landlock-scopes"])
    );
    // Signals are not denied; TCP still is, by the seccomp filter alone.
    let signals = report
        .rights
        .iter()
        .find(|r| r.right == Right::Signals)
        .unwrap();
    assert_eq!((signals.enforced, signals.by.clone()), (false, vec![]));
    let tcp = report
        .rights
        .iter()
        .find(|r| r.right == Right::Tcp)
        .unwrap();
    assert_eq!(
        (tcp.enforced, tcp.by.clone()),
        (true, vec![Mechanism::Seccomp])
    );
    // Writes are still confined, and so is the network, by seccomp alone.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = dirs.outside().join("best-effort");
    let result = run_in(
        &executor,
        &format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; echo x > '{}'",
            target.display()
        ),
        dirs.root(),
    )
    .await;
    assert_eq!(
        (result.exit_code, result.stdout.text.as_str()),
        (Some(1), "")
    );
    assert!(
        result.stderr.text.contains("Operation not permitted"),
        "{}",
        result.stderr.text
    );
    assert!(result.stderr.text.contains("Read-only file system"));
    assert!(!target.exists());
}

#[test]
fn best_effort_without_landlock_says_that_nothing_is_confined() {
    let dirs = Dirs::new();
    let probe = Simulated::abi(0);
    let policy = dirs
        .policy(SandboxMode::ReadOnly)
        .with_enforcement(Enforcement::BestEffort);
    let executor =
        SandboxedExecutor::with_probe(policy, SandboxBackend::Landlock, config(), &probe).unwrap();
    assert_eq!(executor.report().backend, None);
    assert_eq!(
        executor.report().summary(),
        "read-only NOT enforced (not confined): Landlock file-system rules (Landlock ABI 1, \
         Linux 5.13), Landlock's truncate right (Landlock ABI 3, Linux 6.2), Landlock TCP rules \
         (Landlock ABI 4, Linux 6.7), Landlock's signal and abstract-socket scopes (Landlock ABI \
         6, Linux 6.12)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spilled_output_is_written_by_the_harness_and_not_writable_by_the_command() {
    let dirs = Dirs::new();
    let mut config = config();
    config.visible_bytes = 1000;
    let executor = SandboxedExecutor::new(
        dirs.policy(SandboxMode::WorkspaceWrite),
        SandboxBackend::Landlock,
        config,
    )
    .unwrap();
    let result = run_in(
        &executor,
        "head -c 100000 /dev/zero | tr '\\0' a",
        dirs.root(),
    )
    .await;
    let spill = result.stdout.spill_path.clone().unwrap();
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 100_000);
    let tamper = run_in(
        &executor,
        &format!("echo forged > '{}'", spill.display()),
        dirs.root(),
    )
    .await;
    assert_eq!(tamper.exit_code, Some(1));
    assert!(
        tamper.stderr.text.contains("Read-only file system"),
        "{}",
        tamper.stderr.text
    );
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 100_000);
}

/// The `full output` path a result names is readable by the next command in the sandbox, on
/// either backend: bubblewrap's private `/tmp` must not hide the spill directory under the
/// system's.
async fn a_spill_file_is_readable_by_the_next_command(backend: SandboxBackend) {
    let dirs = Dirs::new();
    let mut config = config();
    config.visible_bytes = 1000;
    // The system's `/tmp`, the default's usual place, which bubblewrap replaces.
    config.spill_root = Some(PathBuf::from("/tmp"));
    let executor =
        SandboxedExecutor::new(dirs.policy(SandboxMode::WorkspaceWrite), backend, config).unwrap();
    let result = run_in(
        &executor,
        "head -c 100000 /dev/zero | tr '\\0' a",
        dirs.root(),
    )
    .await;
    let spill = result.stdout.spill_path.clone().unwrap();
    let read = run_in(
        &executor,
        &format!("wc -c < '{}'", spill.display()),
        dirs.root(),
    )
    .await;
    assert_eq!(
        (
            read.exit_code,
            read.stdout.text.as_str(),
            read.stderr.text.as_str()
        ),
        (Some(0), "100000\n", ""),
        "{backend}: {}",
        spill.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spill_file_is_readable_by_the_next_command_on_both_backends() {
    a_spill_file_is_readable_by_the_next_command(SandboxBackend::Landlock).await;
    if bubblewrap_available() {
        a_spill_file_is_readable_by_the_next_command(SandboxBackend::Bubblewrap).await;
    }
}

/// Without a mount namespace a protected place beneath a writable root cannot be protected:
/// even best effort refuses to start rather than leave the session store writable.
#[test]
fn a_store_beneath_a_root_is_refused_where_it_cannot_be_protected() {
    let dirs = Dirs::new();
    let store = dirs.root().join("store");
    std::fs::create_dir(&store).unwrap();
    let probe = Simulated {
        mount_namespace: Err(String::from("user namespaces are off")),
        ..Simulated::abi(7)
    };
    let build = |policy: SandboxPolicy| {
        SandboxedExecutor::with_probe(policy, SandboxBackend::Landlock, config(), &probe)
    };
    let best_effort = dirs
        .policy(SandboxMode::WorkspaceWrite)
        .with_enforcement(Enforcement::BestEffort);
    match build(best_effort.clone().with_protected(&store)) {
        Err(SandboxError::Unprotected { place, detail }) => assert_eq!(
            (place, detail.as_str()),
            (
                std::fs::canonicalize(&store).unwrap(),
                "user namespaces are off"
            )
        ),
        other => panic!("expected the store refused, got {other:?}"),
    }
    // A store elsewhere leaves best effort to run, the metadata right reported unenforced.
    let executor = build(best_effort).unwrap();
    assert_eq!(
        executor.report().unenforced,
        vec![Capability::MountNamespace]
    );
    assert!(!executor.report().enforces(Right::Metadata));
}
