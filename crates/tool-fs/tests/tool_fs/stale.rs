//! The stale-read guard: unread files, files changed since the read, files the session made.

use crate::support::{Policy, fixture, read_string};
use serde_json::json;

#[tokio::test]
async fn an_unread_existing_file_is_not_written_or_edited() {
    let f = fixture(Policy::Roots);
    let path = f.put("s.txt", "original\n");
    let write = f
        .err("write", json!({"file_path": "s.txt", "content": "x"}))
        .await;
    assert!(
        write.contains("has not been read in this session") && write.contains("`read`"),
        "{write}"
    );
    let edit = f
        .err(
            "edit",
            json!({"file_path": "s.txt", "old_string": "original", "new_string": "x"}),
        )
        .await;
    assert!(edit.contains("has not been read"), "{edit}");
    assert_eq!(read_string(&path), "original\n");
}

#[tokio::test]
async fn a_file_changed_since_the_read_must_be_read_again() {
    let f = fixture(Policy::Roots);
    let path = f.put("s.txt", "original\n");
    f.ok("read", json!({"file_path": "s.txt"})).await;
    std::fs::write(&path, "changed by someone\n").unwrap();
    let edit = f
        .err(
            "edit",
            json!({"file_path": "s.txt", "old_string": "changed", "new_string": "x"}),
        )
        .await;
    assert!(
        edit.contains("has changed since it was last read") && edit.contains("read it again"),
        "{edit}"
    );
    f.ok("read", json!({"file_path": "s.txt"})).await;
    f.ok(
        "edit",
        json!({"file_path": "s.txt", "old_string": "changed", "new_string": "x"}),
    )
    .await;
    assert_eq!(read_string(&path), "x by someone\n");
}

#[tokio::test]
async fn the_same_size_and_time_with_other_content_is_caught_by_the_hash() {
    let f = fixture(Policy::Roots);
    let path = f.put("h.txt", "aaaa\n");
    f.ok("read", json!({"file_path": "h.txt"})).await;
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "bbbb\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    let error = f
        .err("write", json!({"file_path": "h.txt", "content": "c"}))
        .await;
    assert!(error.contains("its contents differ"), "{error}");
}

#[tokio::test]
async fn a_file_the_session_created_or_changed_may_be_changed_again() {
    let f = fixture(Policy::Roots);
    f.ok("write", json!({"file_path": "new.txt", "content": "v1\n"}))
        .await;
    f.ok(
        "edit",
        json!({"file_path": "new.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .await;
    f.ok("write", json!({"file_path": "new.txt", "content": "v3\n"}))
        .await;
    assert_eq!(read_string(&f.path("new.txt")), "v3\n");
}

#[tokio::test]
async fn the_guard_is_per_plugin_instance() {
    let a = fixture(Policy::Anywhere);
    let path = a.put("shared.txt", "x\n");
    a.ok("read", json!({"file_path": "shared.txt"})).await;
    let b = fixture(Policy::Anywhere);
    let abs = path.display().to_string();
    let error = b
        .err("write", json!({"file_path": abs, "content": "y"}))
        .await;
    assert!(error.contains("has not been read"), "{error}");
}
