//! A store someone else has changed: nothing is followed through a symbolic link, a log
//! ending in more than a line is refused, a log that cannot be read is left as it is, what
//! others can write is refused with the fix named, what others could read is made private
//! again by a resume (never by a look), and a fork copies only the spill files the store made.

use super::{log_text, mode, store};
use agent_loop::{
    FsSessionStore, PrunePolicy, SessionEvent, SessionState, SessionStore, StoreError,
};
use pretty_assertions::assert_eq;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// A session of `store` whose log holds one line, released.
pub(super) fn ended_session(store: &FsSessionStore) -> String {
    let lease = store.create(Path::new("/work")).unwrap();
    let events = [SessionEvent::SessionStart {
        session_id: lease.id().into(),
        cwd: "/work".into(),
        tools: vec![],
        sandbox: None,
    }];
    std::fs::write(lease.log_path(), log_text(events)).unwrap();
    lease.id().to_owned()
}

/// The text `StoreError::Refused` gives for `path`.
fn refused(path: &Path, reason: &str) -> String {
    format!("{}: {reason}", path.display())
}

#[test]
fn nothing_in_the_store_is_followed_through_a_symbolic_link() {
    // Each entry of a session replaced by a link to a file (or directory) outside the store,
    // holding a last line without its newline that a resume would otherwise cut.
    for entry in ["events.jsonl", "lock", "session.json", "spill"] {
        let (_dir, store) = store();
        let id = ended_session(&store);
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        let original = "{\"seq\":1}\n{\"torn";
        if entry == "spill" {
            std::fs::create_dir(&target).unwrap();
            std::fs::write(target.join("file"), original).unwrap();
        } else {
            std::fs::write(&target, original).unwrap();
        }
        let link = store.session_dir(&id).unwrap().join(entry);
        if link.is_dir() {
            std::fs::remove_dir_all(&link).unwrap();
        } else {
            std::fs::remove_file(&link).unwrap();
        }
        std::os::unix::fs::symlink(&target, &link).unwrap();

        let error = store.resume(&id).unwrap_err();
        assert_eq!(
            error.to_string(),
            refused(
                &link,
                "is a symbolic link, and the session store follows none"
            ),
            "{entry}"
        );
        assert!(matches!(error, StoreError::Refused { .. }), "{entry}");
        // A fork reads the parent's log, metadata and spill files, never its lock (the
        // parent may be in use).
        let forked = store.fork(&id);
        if entry == "lock" {
            drop(forked.unwrap());
        } else {
            let error = forked.unwrap_err();
            assert!(
                matches!(error, StoreError::Refused { .. }),
                "{entry}: {error}"
            );
            // A failed fork leaves no session behind.
            let listed: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
            assert_eq!(listed, vec![id.clone()], "{entry}");
        }
        let read = if entry == "spill" {
            std::fs::read_to_string(target.join("file")).unwrap()
        } else {
            std::fs::read_to_string(&target).unwrap()
        };
        assert_eq!(read, original, "{entry}: the outside file changed");
        // `list` says why the session cannot be used.
        let listed = store.list().unwrap();
        assert_eq!(listed[0].state, SessionState::Unreadable, "{entry}");
    }
}

#[test]
fn a_session_directory_linking_outside_the_store_is_refused() {
    let (_dir, store) = store();
    let (_elsewhere, other) = self::store();
    let id = ended_session(&other);
    let log = other.session_dir(&id).unwrap().join("events.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"{\"torn")
        .unwrap();
    let before = std::fs::read(&log).unwrap();
    std::fs::create_dir_all(store.root()).unwrap();
    let link = store.root().join(&id);
    std::os::unix::fs::symlink(other.session_dir(&id).unwrap(), &link).unwrap();

    let error = store.resume(&id).unwrap_err();
    assert_eq!(
        error.to_string(),
        refused(
            &link,
            "is a symbolic link, and the session store follows none"
        )
    );
    assert!(matches!(store.fork(&id), Err(StoreError::Refused { .. })));
    assert_eq!(std::fs::read(&log).unwrap(), before);
    // `list` and `prune` pass it over, as before; nothing of the other store is removed.
    assert_eq!(store.list().unwrap(), vec![]);
    let report = store
        .prune(PrunePolicy::older_than(Duration::ZERO))
        .unwrap();
    assert_eq!(report.removed, Vec::<String>::new());
    assert_eq!(std::fs::read(&log).unwrap(), before);
}

#[test]
fn an_unended_tail_longer_than_a_line_is_refused_and_the_log_left_as_it_is() {
    let limit = agent_loop::MAX_LINE_BYTES as u64;
    // (bytes after the last newline, whether resume cuts them as a torn line)
    for (tail, cut) in [(limit, true), (limit + 1, false), (1 << 30, false)] {
        let (_dir, store) = store();
        let id = ended_session(&store);
        let log = store.session_dir(&id).unwrap().join("events.jsonl");
        let head = std::fs::metadata(&log).unwrap().len();
        // Sparse: the tail is zeros the file system does not store.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(head + tail)
            .unwrap();
        if cut {
            let resumed = store.resume(&id).unwrap();
            let torn = resumed.torn_tail.clone().unwrap();
            assert_eq!((torn.line, torn.bytes), (2, tail));
            assert_eq!(std::fs::metadata(&log).unwrap().len(), head);
            continue;
        }
        let error = store.resume(&id).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "cannot resume session {id}: {} ends in more than {limit} bytes without a newline, \
                 more than any log line holds, so it is not a line torn by a crash; the log is \
                 left as it is",
                log.display()
            ),
            "{tail}"
        );
        assert!(matches!(error, StoreError::UnendedTail { .. }));
        assert_eq!(std::fs::metadata(&log).unwrap().len(), head + tail);
        // `list` calls it unreadable, as before.
        assert_eq!(store.list().unwrap()[0].state, SessionState::Unreadable);
    }
}

#[test]
fn a_log_that_cannot_be_read_is_left_as_it_is_torn_tail_included() {
    let (_dir, store) = store();
    let id = ended_session(&store);
    let log = store.session_dir(&id).unwrap().join("events.jsonl");
    let mut huge = vec![b'x'; agent_loop::MAX_LINE_BYTES + 1];
    huge.extend_from_slice(b"\n{\"torn");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(&huge)
        .unwrap();
    let before = std::fs::metadata(&log).unwrap().len();
    let error = store.resume(&id).unwrap_err();
    assert!(matches!(error, StoreError::Log { .. }), "{error}");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), before);
}

#[test]
fn a_store_other_users_can_write_is_refused_with_the_fix_named() {
    // Each directory of the store made writable by others in turn.
    for (what, bits) in [("root", 0o777), ("session", 0o770), ("spill", 0o757)] {
        let (_dir, store) = store();
        let id = ended_session(&store);
        let session = store.session_dir(&id).unwrap();
        let place = match what {
            "root" => store.root().to_owned(),
            "session" => session.clone(),
            _ => session.join("spill"),
        };
        std::fs::set_permissions(&place, std::fs::Permissions::from_mode(bits)).unwrap();
        let error = store.resume(&id).unwrap_err();
        assert_eq!(
            error.to_string(),
            refused(
                &place,
                &format!(
                    "is writable by other users (mode {bits:o}): make it private with `chmod go-w {}`",
                    place.display()
                )
            ),
            "{what}"
        );
        assert!(matches!(error, StoreError::Refused { .. }));
        assert!(store.fork(&id).is_err(), "{what}");
        match what {
            "root" => {
                assert!(store.create(Path::new("/work")).is_err());
                assert!(store.list().is_err());
            }
            "session" => {
                let listed = store.list().unwrap();
                assert_eq!(listed[0].state, SessionState::Unreadable);
                assert_eq!(
                    listed[0].problem.as_deref(),
                    Some(error.to_string().as_str())
                );
            }
            _ => {}
        }
        // The refusal changed nothing.
        assert_eq!(mode(&place), bits, "{what}");
        let ids: Vec<String> = std::fs::read_dir(store.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            ids,
            vec![id.clone()],
            "{what}: a failed fork left a session"
        );
    }
}

#[test]
fn files_of_ours_that_others_could_read_or_write_are_made_private_again() {
    let (_dir, store) = store();
    let (id, files) = files_at_mode(&store, 0o666);
    let resumed = store.resume(&id).unwrap();
    // What a resume writes it makes private, once everything is checked.
    for file in &files[..3] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    drop(resumed);
    // A fork only reads the parent's spill file, so leaves its mode; its own copy is private
    // (copied, not linked, for that).
    let fork = store.fork(&id).unwrap();
    assert_eq!(mode(&files[3]), 0o666);
    assert_eq!(mode(&fork.lease.spill_dir().join("stdout-1.out")), 0o600);
}

#[test]
fn a_fork_copies_only_the_spill_files_the_store_made() {
    let (_dir, store) = store();
    let id = ended_session(&store);
    let spill = store.session_dir(&id).unwrap().join("spill");
    std::fs::write(spill.join("stdout-1.out"), "mine").unwrap();
    // A sandbox's temporary directory left by a run killed before it could remove it, a link
    // to a file outside and a FIFO: none of them a spill file.
    let leftover = spill.join("dsh-sandbox-tmp-abc");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("scratch"), "temporary").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "not the store's").unwrap();
    std::os::unix::fs::symlink(&secret, spill.join("link.out")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(spill.join("fifo.out"))
        .status()
        .unwrap();
    assert!(fifo.success());

    let fork = store.fork(&id).unwrap();
    let mut copied: Vec<String> = std::fs::read_dir(fork.lease.spill_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    copied.sort();
    assert_eq!(copied, vec!["stdout-1.out"]);
    assert_eq!(
        std::fs::read_to_string(fork.lease.spill_dir().join("stdout-1.out")).unwrap(),
        "mine"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "not the store's");
    assert_eq!(store.list().unwrap().len(), 2);
}

/// An ended session of `store` with a spill file, whose four files (log, metadata, lock, spill
/// file) are all set to `mode`: its id and those files.
pub(super) fn files_at_mode(
    store: &FsSessionStore,
    mode: u32,
) -> (String, [std::path::PathBuf; 4]) {
    let id = ended_session(store);
    let session = store.session_dir(&id).unwrap();
    let spilled = session.join("spill").join("stdout-1.out");
    std::fs::write(&spilled, "output").unwrap();
    let files = [
        session.join("events.jsonl"),
        session.join("session.json"),
        session.join("lock"),
        spilled,
    ];
    for file in &files {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    (id, files)
}
