use super::*;
use crate::local::group::resolve_program;
use std::time::{Duration, Instant};

/// The names of the files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A `sleep` in a process group of its own.
fn sleeper() -> std::process::Child {
    use std::os::unix::process::CommandExt as _;
    std::process::Command::new("sleep")
        .arg("100")
        .process_group(0)
        .spawn()
        .unwrap()
}

#[test]
fn a_compacted_register_lists_only_the_live_groups() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = Register::fresh_path(dir.path());
    let mut register = Register::create(path.clone(), &[10].into_iter().collect()).unwrap();
    for line in ["add 11\n", "add 12\n", "del 11\n", "add 13\n"] {
        register.append(line).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "add 10\nadd 11\nadd 12\ndel 11\nadd 13\n"
    );
    register.compact(&[12, 13].into_iter().collect()).unwrap();
    // Same path (the guard opens it by path), only the live groups, still private, and no
    // copy left beside it.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "add 12\nadd 13\n");
    assert_eq!(register.bytes, 14);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(files_in(dir.path()).len(), 1);
    // Later lines go to the compacted file.
    register.append("del 12\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "add 12\nadd 13\ndel 12\n"
    );
    // A register is never created over anything already there.
    assert_eq!(
        Register::create(path, &BTreeSet::new()).unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
}

#[test]
fn a_register_is_on_disk_only_while_a_guard_runs_to_remove_it() {
    let dir = tempfile::tempdir().unwrap();
    let guard = OrphanGuard::new_in(dir.path());
    let (mut first, mut second) = (sleeper(), sleeper());
    let (first_id, second_id) = (first.id() as i32, second.id() as i32);
    // No guard can start: no register is written that nothing would remove.
    guard.register(Path::new("/nonexistent/bash"), first_id);
    assert_eq!(files_in(dir.path()), Vec::<String>::new());

    // Once a guard starts, the register lists every live group, the earlier one too.
    let bash = resolve_program(Path::new("bash"));
    guard.register(&bash, second_id);
    let names = files_in(dir.path());
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("dsh-guard-"), "{names:?}");
    let path = dir.path().join(&names[0]);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("add {first_id}\nadd {second_id}\n")
    );
    guard.unregister(&bash, first_id);
    guard.unregister(&bash, second_id);
    for child in [&mut first, &mut second] {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    // The harness dies (its end of the pipe closes) with a compaction's copy half-written:
    // the guard removes both files, with nothing of the harness's own cleanup run.
    std::fs::write(new_copy_path(&path), "add 1\n").unwrap();
    close_pipe(&guard);
    assert_eq!(files_in(dir.path()), Vec::<String>::new());
}

/// Closes the guard's pipe as a harness's death does, and waits for the guard to finish,
/// without the executor's own cleanup.
fn close_pipe(guard: &OrphanGuard) {
    let process = lock(&guard.state).process.take().unwrap();
    let GuardProcess {
        mut child, stdin, ..
    } = process;
    drop(stdin);
    child.wait().unwrap();
}

#[test]
fn a_replaced_guard_still_kills_the_groups_registered_before_it() {
    use std::os::unix::process::ExitStatusExt as _;
    let dir = tempfile::tempdir().unwrap();
    let bash = resolve_program(Path::new("bash"));
    let guard = OrphanGuard::new_in(dir.path());
    let mut first = sleeper();
    guard.register(&bash, first.id() as i32);
    {
        // Someone kills the guard.
        let mut state = lock(&guard.state);
        let process = state.process.as_mut().unwrap();
        process.child.kill().unwrap();
        process.child.wait().unwrap();
    }
    // The next command's spawn checks the guard first, as the executor's does, and replaces
    // it (unless its watcher already has).
    guard.ensure_running(&bash);
    let mut second = sleeper();
    guard.register(&bash, second.id() as i32);
    // The harness goes away: the pipe closes, and the new guard kills what it knows (the
    // executor's own cleanup, which would kill them too, does not run).
    close_pipe(&guard);
    let deadline = Instant::now() + Duration::from_secs(10);
    for child in [&mut first, &mut second] {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("a registered group outlived the guard");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));
    }
    assert_eq!(files_in(dir.path()), Vec::<String>::new());
    drop(guard);
}

#[test]
fn a_register_that_cannot_be_compacted_still_takes_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let bash = resolve_program(Path::new("bash"));
    let guard = OrphanGuard::new_in(dir.path());
    let (mut first, mut second) = (sleeper(), sleeper());
    let (first_id, second_id) = (first.id() as i32, second.id() as i32);
    guard.register(&bash, first_id);
    // The register is due for compaction, and nothing can be renamed over it (a directory
    // with something in it stands at its path; the file itself moved, its handle with it).
    let moved = dir.path().join("moved");
    {
        let mut state = lock(&guard.state);
        let register = state.register.as_mut().unwrap();
        std::fs::rename(&register.path, &moved).unwrap();
        std::fs::create_dir(&register.path).unwrap();
        std::fs::write(register.path.join("x"), "").unwrap();
        register.bytes = REGISTER_COMPACT_BYTES;
    }
    guard.register(&bash, second_id);
    assert_eq!(
        std::fs::read_to_string(&moved).unwrap(),
        format!("add {first_id}\nadd {second_id}\n")
    );
    // No copy is left behind.
    let mut names = files_in(dir.path());
    names.retain(|name| name.contains(".new."));
    assert_eq!(names, Vec::<String>::new());
    guard.unregister(&bash, first_id);
    guard.unregister(&bash, second_id);
    for child in [&mut first, &mut second] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn a_register_that_cannot_be_created_is_tried_again_only_after_a_pause() {
    let dir = tempfile::tempdir().unwrap();
    let bash = resolve_program(Path::new("bash"));
    let guard = OrphanGuard::new_in(&dir.path().join("gone"));
    let mut sleepers: Vec<_> = (0..3).map(|_| sleeper()).collect();
    for child in &sleepers {
        guard.register(&bash, child.id() as i32);
    }
    {
        // One attempt (one `bash` started and killed), not one per command.
        let state = lock(&guard.state);
        assert_eq!(state.generation, 1);
        assert!(state.process.is_none() && state.register.is_none());
        assert!(state.retry_after.is_some());
    }
    // Once the pause is over, the next command tries again.
    lock(&guard.state).retry_after = Some(std::time::Instant::now());
    let another = sleeper();
    guard.register(&bash, another.id() as i32);
    assert_eq!(lock(&guard.state).generation, 2);
    sleepers.push(another);
    for child in &mut sleepers {
        guard.unregister(&bash, child.id() as i32);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
