//! The file tools in `dsh-agent`: offered by `run`, `schemas` and `sdk` (`--no-fs` leaves
//! them out), writing only where `--sandbox` lets the shell write, and every change undone
//! by `dsh-agent undo`.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{run, scratch, stderr, stdout, text_step, write_script};

fn call(id: &str, tool: &str, arguments: Value) -> Value {
    json!({ "toolCalls": [ { "id": id, "name": tool, "arguments": arguments } ] })
}

fn names(schemas: &str) -> Vec<String> {
    let schemas: Vec<Value> = serde_json::from_str(schemas).unwrap();
    schemas
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_file_tools_are_offered_unless_left_out() {
    let all = names(&stdout(&run(&["schemas"])));
    for tool in ["read", "write", "edit", "glob", "grep", "run_code"] {
        assert!(all.contains(&tool.to_owned()), "{tool} in {all:?}");
    }
    let without = names(&stdout(&run(&["schemas", "--no-fs"])));
    assert!(!without.contains(&"edit".to_owned()), "{without:?}");
    assert!(without.contains(&"bash".to_owned()));
    let sdk = stdout(&run(&["sdk"]));
    for tool in ["read", "write", "edit", "glob", "grep"] {
        assert!(
            sdk.contains(&format!("  {tool}: {{")),
            "Code Mode declares {tool}:\n{sdk}"
        );
    }
}

#[test]
fn a_sessions_changes_are_listed_and_undone_and_writes_stay_in_the_workspace() {
    let dir = scratch();
    let (work, sessions) = (dir.path().join("work"), dir.path().join("sessions"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("a.txt"), "one\ntwo\n").unwrap();
    let outside = dir.path().join("outside.txt");
    let steps = json!([
        call("c1", "read", json!({"file_path": "a.txt"})),
        call(
            "c2",
            "edit",
            json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"})
        ),
        call(
            "c3",
            "write",
            json!({"file_path": "b/new.txt", "content": "new\n"})
        ),
        call(
            "c4",
            "write",
            json!({"file_path": outside, "content": "escaped\n"})
        ),
        text_step("Done."),
    ]);
    let script = write_script(dir.path(), steps);
    let (work_s, sessions_s) = (work.to_str().unwrap(), sessions.to_str().unwrap());
    let ran = run(&[
        "--session-dir",
        sessions_s,
        "run",
        "--json",
        "--script",
        script.to_str().unwrap(),
        "--cwd",
        work_s,
        "--sandbox",
        "workspace-write",
    ]);
    let events = stdout(&ran);
    assert!(ran.status.success(), "{}\n{events}", stderr(&ran));
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "one\n2\n"
    );
    assert!(!outside.exists(), "a write left the workspace");
    assert!(
        events.contains("not allowed by the sandbox policy"),
        "{events}"
    );

    let listed = run(&["--session-dir", sessions_s, "undo", "--list"]);
    let text = stdout(&listed);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("(created)"), "{text}");

    for _ in 0..2 {
        let undone = run(&["--session-dir", sessions_s, "undo"]);
        assert!(undone.status.success(), "{}", stderr(&undone));
    }
    assert!(!work.join("b/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    let nothing = run(&["--session-dir", sessions_s, "undo"]);
    assert_eq!(nothing.status.code(), Some(2), "{}", stderr(&nothing));
    assert!(stderr(&nothing).contains("no change is left to undo"));
}

#[test]
fn an_undo_over_a_later_change_is_refused_with_the_difference() {
    let dir = scratch();
    let (work, sessions) = (dir.path().join("work"), dir.path().join("sessions"));
    std::fs::create_dir_all(&work).unwrap();
    let steps = json!([
        call(
            "c1",
            "write",
            json!({"file_path": "a.txt", "content": "mine\n"})
        ),
        text_step("Done."),
    ]);
    let script = write_script(dir.path(), steps);
    let sessions_s = sessions.to_str().unwrap();
    let ran = run(&[
        "--session-dir",
        sessions_s,
        "run",
        "--script",
        script.to_str().unwrap(),
        "--cwd",
        work.to_str().unwrap(),
    ]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    std::fs::write(work.join("a.txt"), "mine\nyours\n").unwrap();
    let refused = run(&["--session-dir", sessions_s, "undo", "--change", "1"]);
    assert_eq!(refused.status.code(), Some(1));
    let errors = stderr(&refused);
    assert!(errors.contains("changed after change 1"), "{errors}");
    assert!(errors.contains("+yours"), "{errors}");
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "mine\nyours\n"
    );
}
