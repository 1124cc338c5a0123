//! Hard links and what a refusal leaves: a file of the store linked to one outside it is
//! refused (the symbolic-link attack done with `ln`), a refused resume changes nothing, and the
//! log is written to the file the store checked, whatever its name holds later.

use super::tampering::{ended_session, files_at_mode};
use super::{mode, store};
use agent_loop::{Agent, PrunePolicy, SessionStore, StoreError};
use dsh_tools::ToolRegistry;
use mock_adapter::{MockAdapter, Step};
use pretty_assertions::assert_eq;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Every entry beneath `dir` (not following links): its kind, mode and, for a file, text.
fn snapshot(dir: &Path) -> BTreeMap<String, (String, u32, String)> {
    let mut entries = BTreeMap::new();
    for entry in walk(dir) {
        let meta = std::fs::symlink_metadata(&entry).unwrap();
        let kind = format!("{:?}", meta.file_type());
        let text = if meta.file_type().is_file() {
            String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned()
        } else {
            String::new()
        };
        let name = entry.strip_prefix(dir).unwrap().display().to_string();
        entries.insert(name, (kind, meta.mode() & 0o7777, text));
    }
    entries
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        found.push(path.clone());
        if std::fs::symlink_metadata(&path).unwrap().is_dir() {
            found.extend(walk(&path));
        }
    }
    found
}

#[test]
fn a_file_of_the_store_hard_linked_to_one_outside_it_is_refused_and_left_as_it_is() {
    const VICTIM: &str = "the user's own\n{\"unended";
    for entry in ["events.jsonl", "lock", "session.json"] {
        let (dir, store) = store();
        let id = ended_session(&store);
        // Beside the store, on the same file system, so a hard link can be made.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, VICTIM).unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = store.session_dir(&id).unwrap().join(entry);
        std::fs::remove_file(&link).unwrap();
        std::fs::hard_link(&victim, &link).unwrap();
        let untouched = |what: &str| {
            assert_eq!(
                std::fs::read_to_string(&victim).unwrap(),
                VICTIM,
                "{entry}: {what}"
            );
            assert_eq!(mode(&victim), 0o644, "{entry}: {what}");
        };

        let listed = store.list().unwrap();
        untouched("list");
        assert_eq!(
            listed[0].problem.as_deref(),
            Some(
                format!(
                    "{}: has 2 hard links; the session store uses files of its own only",
                    link.display()
                )
                .as_str()
            ),
            "{entry}"
        );
        let error = store.resume(&id).unwrap_err();
        assert!(
            matches!(error, StoreError::Refused { .. }),
            "{entry}: {error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "{}: has 2 hard links; the session store uses files of its own only",
                link.display()
            )
        );
        untouched("resume");
        // A fork reads the parent's log and metadata, never its lock.
        let forked = store.fork(&id);
        assert_eq!(forked.is_ok(), entry == "lock", "{entry}");
        drop(forked);
        untouched("fork");
        store
            .prune(PrunePolicy::older_than(Duration::ZERO))
            .unwrap();
        untouched("prune");
    }
}

#[test]
fn the_spill_files_a_fork_links_stay_readable_through_forks_of_forks() {
    let (_dir, store) = store();
    let id = ended_session(&store);
    let spill = store.session_dir(&id).unwrap().join("spill");
    std::fs::write(spill.join("stdout-1.out"), "mine").unwrap();
    let fork = store.fork(&id).unwrap();
    let fork_id = fork.lease.id().to_owned();
    drop(fork);
    // Linked into the fork: the parent's spill file has two names now, which is the store's
    // own doing; a fork of the fork and a resume of it accept it.
    let again = store.fork(&fork_id).unwrap();
    assert_eq!(
        std::fs::read_to_string(again.lease.spill_dir().join("stdout-1.out")).unwrap(),
        "mine"
    );
    drop(again);
    drop(store.resume(&fork_id).unwrap());
    assert_eq!(
        std::fs::read_to_string(spill.join("stdout-1.out")).unwrap(),
        "mine"
    );
}

#[test]
fn a_refused_resume_leaves_every_file_as_it_was() {
    for tampering in ["symlinked log", "hard-linked log", "hard-linked metadata"] {
        let (dir, store) = store();
        let id = ended_session(&store);
        let session = store.session_dir(&id).unwrap();
        // No lock and no spill directory yet, and metadata others could read: all of which a
        // resume that goes ahead creates or fixes.
        std::fs::remove_file(session.join("lock")).unwrap();
        std::fs::remove_dir(session.join("spill")).unwrap();
        std::fs::set_permissions(
            session.join("session.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "the user's own\n").unwrap();
        match tampering {
            "symlinked log" => {
                std::fs::remove_file(session.join("events.jsonl")).unwrap();
                std::os::unix::fs::symlink(&victim, session.join("events.jsonl")).unwrap();
            }
            "hard-linked log" => {
                std::fs::hard_link(session.join("events.jsonl"), dir.path().join("other")).unwrap();
            }
            _ => {
                std::fs::hard_link(session.join("session.json"), dir.path().join("other")).unwrap();
            }
        }
        let before = snapshot(&session);

        let error = store.resume(&id).unwrap_err();
        assert!(
            matches!(error, StoreError::Refused { .. }),
            "{tampering}: {error}"
        );
        assert_eq!(snapshot(&session), before, "{tampering}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the user's own\n",
            "{tampering}"
        );
    }
}

#[test]
fn a_read_only_look_at_the_store_changes_no_mode() {
    let (_dir, store) = store();
    let (id, files) = files_at_mode(&store, 0o644);
    store.list().unwrap();
    let fork = store.fork(&id).unwrap();
    for file in &files {
        assert_eq!(mode(file), 0o644, "{}", file.display());
    }
    // The fork's own copy of a spill file others could read is private.
    let copy = fork.lease.spill_dir().join("stdout-1.out");
    assert_eq!(mode(&copy), 0o600);
    assert_eq!(std::fs::read_to_string(copy).unwrap(), "output");
}

#[tokio::test]
async fn the_log_is_written_to_the_file_the_store_checked_whatever_its_name_holds_later() {
    let (dir, store) = store();
    let lease = store.create(Path::new("/work")).unwrap();
    // Between the store's checks and the agent's start (an MCP server starting, say), the
    // log's name is made a link to a file outside the store.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "").unwrap();
    let kept = dir.path().join("kept");
    std::fs::rename(lease.log_path(), &kept).unwrap();
    std::os::unix::fs::symlink(&victim, lease.log_path()).unwrap();

    let agent = Agent::builder(
        ToolRegistry::new(),
        Arc::new(MockAdapter::new(Vec::<Step>::new())),
    )
    .session_id(lease.id())
    .session_log(&lease)
    .build()
    .unwrap();
    drop(agent);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "");
    let written = std::fs::read_to_string(&kept).unwrap();
    assert!(written.contains("\"type\":\"session/start\""), "{written}");
}

#[test]
fn a_session_that_never_started_is_discarded_and_a_resumed_one_kept() {
    let (_dir, store) = store();
    let made = store.create(Path::new("/work")).unwrap();
    assert!(made.discard().unwrap());
    assert_eq!(store.list().unwrap(), vec![]);
    let id = ended_session(&store);
    let fork = store.fork(&id).unwrap();
    assert!(fork.lease.discard().unwrap());
    let resumed = store.resume(&id).unwrap();
    assert!(!resumed.lease.discard().unwrap());
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, vec![id]);
}

#[test]
fn a_lease_set_to_discard_on_drop_removes_only_a_session_it_made() {
    let (_dir, store) = store();
    let mut made = store.create(Path::new("/work")).unwrap();
    made.set_discard_on_drop(true);
    drop(made);
    assert_eq!(store.list().unwrap(), vec![]);
    let mut kept = store.create(Path::new("/work")).unwrap();
    kept.set_discard_on_drop(true);
    kept.set_discard_on_drop(false);
    let id = kept.id().to_owned();
    drop(kept);
    let mut resumed = store.resume(&id).unwrap().lease;
    resumed.set_discard_on_drop(true);
    drop(resumed);
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, vec![id]);
}
