//! Every overwritten byte recoverable: with a history, each `write` and `edit` keeps what it
//! replaced, and an undo puts it back unless the file changed again after it.

use dsh_tools::{ToolCall, ToolRegistry};
use serde_json::json;
use tool_fs::history::{FileHistory, HistoryError};
use tool_fs::{FsOptions, FsPlugin, WritePolicy};

async fn call(registry: &ToolRegistry, id: &str, tool: &str, args: serde_json::Value) {
    let result = registry
        .execute(ToolCall::new(id, tool, args.to_string()))
        .await;
    assert!(
        !result.is_error,
        "{tool}: {}",
        dsh_tools::content_text(&result.content)
    );
}

#[tokio::test]
async fn each_change_is_kept_and_undone_back_to_the_bytes_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().canonicalize().unwrap();
    let changes = work.join(".changes");
    let options = FsOptions::new(work.clone(), WritePolicy::Roots(vec![work.clone()]), None);
    let registry = ToolRegistry::new();
    let plugin = FsPlugin::new(options).keeping_history(FileHistory::new(&changes));
    registry.global_scope().load(plugin).unwrap();
    let file = work.join("a.txt");
    std::fs::write(&file, "one\r\ntwo\u{a0}\r\n").unwrap();

    call(&registry, "c1", "read", json!({"file_path": "a.txt"})).await;
    let edit = json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"});
    call(&registry, "c2", "edit", edit).await;
    call(
        &registry,
        "c3",
        "write",
        json!({"file_path": "new/b.txt", "content": "b"}),
    )
    .await;

    let history = FileHistory::new(&changes);
    let listed = history.list().unwrap();
    let tools: Vec<&str> = listed.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["edit", "write"]);
    assert!(listed[1].before.is_none(), "the write created its file");

    history.undo(None).unwrap();
    assert!(!work.join("new/b.txt").exists());
    history.undo(None).unwrap();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        "one\r\ntwo\u{a0}\r\n".as_bytes()
    );
}

#[tokio::test]
async fn an_undo_over_a_later_change_is_refused_and_a_change_that_cannot_be_kept_is_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().canonicalize().unwrap();
    let changes = work.join(".changes");
    let options = FsOptions::new(work.clone(), WritePolicy::Anywhere, None);
    let registry = ToolRegistry::new();
    let plugin = FsPlugin::new(options).keeping_history(FileHistory::new(&changes));
    registry.global_scope().load(plugin).unwrap();
    call(
        &registry,
        "c1",
        "write",
        json!({"file_path": "a.txt", "content": "mine\n"}),
    )
    .await;
    std::fs::write(work.join("a.txt"), "mine\nyours\n").unwrap();
    let refused = FileHistory::new(&changes).undo(None).unwrap_err();
    assert!(
        matches!(refused, HistoryError::ChangedSince { change: 1, .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("+yours"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "mine\nyours\n"
    );

    // A history that cannot be written (its directory is a file) refuses the change.
    std::fs::remove_dir_all(&changes).unwrap();
    std::fs::write(&changes, "in the way").unwrap();
    let result = registry
        .execute(ToolCall::new(
            "c2",
            "write",
            json!({"file_path": "c.txt", "content": "x"}).to_string(),
        ))
        .await;
    assert!(result.is_error);
    let text = dsh_tools::content_text(&result.content);
    assert!(
        text.contains("previous content could not be kept"),
        "{text}"
    );
    assert!(!work.join("c.txt").exists());
}
