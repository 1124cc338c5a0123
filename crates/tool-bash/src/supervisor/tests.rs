//! Unit tests of the harness side of the supervisor.

use super::*;

#[test]
fn proc_paths_are_built_without_allocation_and_nul_terminated() {
    let mut path = [0u8; 64];
    assert_eq!(
        after_fork::proc_path(&mut path, 12345, b"stat"),
        Some(c"/proc/12345/stat")
    );
    let mut path = [0u8; 64];
    assert_eq!(
        after_fork::proc_path(&mut path, 0, b"comm"),
        Some(c"/proc/0/comm")
    );
    let mut path = [0u8; 64];
    assert_eq!(after_fork::proc_path(&mut path, 1, &[b'x'; 60]), None);
}

/// A process to stand for a supervisor, its pidfd, and a report pipe whose write end the
/// test holds (so the pipe never ends by itself).
fn stand_in() -> (std::process::Child, OwnedFd, OwnedFd, OwnedFd) {
    let child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).unwrap();
    let (read, write) = pipe().unwrap();
    (child, pidfd, read, write)
}

// The stand-in's report and death come 300 ms late on purpose: well after the spawn began
// waiting through the runtime.

#[tokio::test]
async fn a_late_first_report_is_read_through_the_runtime() {
    let (mut child, pidfd, read, write) = stand_in();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::io::Write::write_all(&mut std::fs::File::from(write), &4242i32.to_ne_bytes()).unwrap();
    });
    let word = first_word(&read, &pidfd, std::time::Duration::from_secs(20)).await;
    assert_eq!(word.unwrap(), Some(4242));
    writer.join().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_supervisor_gone_without_a_report_ends_the_wait_though_its_pipe_stays_open() {
    let (mut child, pidfd, read, _write) = stand_in();
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        // The child this test started, which is not reaped before the join.
        rustix::process::kill_process(pid, Signal::KILL).unwrap();
    });
    let word = first_word(&read, &pidfd, std::time::Duration::from_secs(20)).await;
    assert_eq!(word.unwrap(), None);
    killer.join().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_supervisor_that_never_reports_fails_the_wait_at_the_limit() {
    let (mut child, pidfd, read, _write) = stand_in();
    let started = std::time::Instant::now();
    let word = first_word(&read, &pidfd, std::time::Duration::from_millis(400)).await;
    assert_eq!(word.unwrap_err().kind(), io::ErrorKind::TimedOut);
    assert!(started.elapsed() >= std::time::Duration::from_millis(400));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn the_pidfd_probe_agrees_with_the_kernel_release() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap());
    let version = (numbers.next().unwrap(), numbers.next().unwrap());
    assert_eq!(pidfd_waits(), version >= (5, 4), "kernel {release}");
}

#[test]
fn the_parent_of_this_process_is_read_from_proc() {
    let parent = after_fork::parent_of(std::process::id() as i32);
    let expected = rustix::process::getppid().map(|pid| pid.as_raw_nonzero().get());
    assert_eq!(parent, expected);
}

/// The strings and pointer arrays `execve` gets are made before the fork, null-terminated.
#[test]
fn the_launch_strings_end_in_null_pointers() {
    let strings = Strings::new(&Launch {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "true".into()],
        env: vec![("A".into(), "b".into())],
        workdir: "/".into(),
        stdin_piped: false,
        confinement: None,
        inherit: Vec::new(),
    })
    .unwrap();
    assert_eq!(strings.argv.len(), 4);
    assert!(strings.argv[3].is_null());
    assert_eq!(strings.envp.len(), 2);
    assert!(strings.envp[1].is_null());
    assert_eq!(strings._args[0].as_c_str(), c"sh");
    assert_eq!(strings.argv[0], strings._args[0].as_ptr());
    assert_eq!(strings.envp[0], strings._env[0].as_ptr());
    assert_eq!(strings._env[0].as_c_str(), c"A=b");
}
