//! The pass of a table as another user: an ignored entry point of this test binary, run again
//! in a child process, as a throwaway user through `setpriv` when the tests run as root.

/// Whether this process's effective user is root.
pub(super) fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|id| id == "0"))
        .unwrap()
}

/// Runs the ignored test `entry` (its path in this binary, the entry point of a pass) alone in
/// a child process of this test binary, as `user` (`None`: as this process's user; otherwise
/// that id through `setpriv`, owning the child's scratch directory), with `env` added; panics
/// with the child's output, naming `what`, unless it passed.
pub(super) fn pass_as(entry: &str, user: Option<u32>, env: &[(&str, &str)], what: &str) {
    let binary = std::env::current_exe().unwrap();
    let scratch = tempfile::tempdir_in(super::scratch_base()).unwrap();
    let mut command = match user {
        None => std::process::Command::new(&binary),
        Some(id) => {
            std::os::unix::fs::chown(scratch.path(), Some(id), Some(id)).unwrap();
            let mut command = std::process::Command::new("setpriv");
            command.args([
                &format!("--reuid={id}"),
                &format!("--regid={id}"),
                "--clear-groups",
                "--",
            ]);
            command.arg(&binary);
            command
        }
    };
    command
        .args(["--ignored", "--exact"])
        // `entry` is named from the `sandbox` module, which is a module of the test binary.
        .arg(crate::support::test_name(super::PATH, entry))
        .arg("--nocapture")
        .envs(env.iter().copied())
        .env("DSH_SANDBOX_SCRATCH", scratch.path())
        .env("HOME", scratch.path());
    let output = command.output().expect("the pass did not start");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{what} failed as {}:\n{text}",
        user.map_or_else(|| String::from("this user"), |id| format!("user {id}"))
    );
}
