//! Writes under the roots policy: every escape attempt is refused and names the policy, and
//! nothing outside changes. None of these rely on permission bits (the tests run as root).

use crate::support::{Fixture, Policy, fixture, read_string};
use serde_json::json;
use std::os::unix::fs::symlink;

/// Both tools refuse `file_path`, name the policy, and leave `victim` as it was.
async fn assert_refused(f: &Fixture, file_path: &str, victim: &std::path::Path) {
    let before = std::fs::read(victim).ok();
    let write = f
        .err("write", json!({"file_path": file_path, "content": "pwned"}))
        .await;
    assert!(
        write.contains("refused") && write.contains("workspace-write"),
        "{file_path}: {write}"
    );
    assert!(
        write.contains(&f.work.display().to_string()),
        "the roots are named: {write}"
    );
    assert_eq!(
        std::fs::read(victim).ok(),
        before,
        "{file_path}: the outside file changed"
    );
}

fn victim(f: &Fixture) -> std::path::PathBuf {
    let path = f.outside.join("secret.txt");
    std::fs::write(&path, "secret\n").unwrap();
    path
}

#[tokio::test]
async fn an_absolute_path_outside_the_roots_is_refused() {
    let f = fixture(Policy::Roots);
    let v = victim(&f);
    assert_refused(&f, &v.display().to_string(), &v).await;
    assert_refused(&f, &f.outside.join("new.txt").display().to_string(), &v).await;
    assert!(!f.outside.join("new.txt").exists());
}

#[tokio::test]
async fn dot_dot_out_of_a_root_is_refused() {
    let f = fixture(Policy::Roots);
    let v = victim(&f);
    assert_refused(&f, "../outside/secret.txt", &v).await;
    assert_refused(&f, "sub/../../outside/secret.txt", &v).await;
}

#[tokio::test]
async fn a_symlink_to_outside_is_not_followed() {
    let f = fixture(Policy::Roots);
    let v = victim(&f);
    symlink(&v, f.path("link.txt")).unwrap();
    f.ok("read", json!({"file_path": "link.txt"})).await;
    assert_refused(&f, "link.txt", &v).await;
    let edit = f
        .err(
            "edit",
            json!({"file_path": "link.txt", "old_string": "secret", "new_string": "x"}),
        )
        .await;
    assert!(edit.contains("refused"), "{edit}");
    assert_eq!(read_string(&v), "secret\n");
}

#[tokio::test]
async fn a_symlinked_parent_directory_is_not_followed() {
    let f = fixture(Policy::Roots);
    let v = victim(&f);
    symlink(&f.outside, f.path("out")).unwrap();
    assert_refused(&f, "out/secret.txt", &v).await;
    assert_refused(&f, "out/fresh.txt", &v).await;
    assert!(!f.outside.join("fresh.txt").exists());
    // Nor are parents created through it.
    assert_refused(&f, "out/deeper/fresh.txt", &v).await;
    assert!(!f.outside.join("deeper").exists());
}

#[tokio::test]
async fn a_symlink_inside_the_roots_is_written_through() {
    let f = fixture(Policy::Roots);
    let real = f.put("real.txt", "a\n");
    symlink(&real, f.path("alias.txt")).unwrap();
    f.ok("read", json!({"file_path": "alias.txt"})).await;
    f.ok("write", json!({"file_path": "alias.txt", "content": "b\n"}))
        .await;
    assert_eq!(read_string(&real), "b\n");
}

#[tokio::test]
async fn a_hard_link_to_an_outside_file_leaves_the_outside_file_untouched() {
    let f = fixture(Policy::Roots);
    let v = victim(&f);
    let inside = f.path("hard.txt");
    std::fs::hard_link(&v, &inside).unwrap();
    f.ok("read", json!({"file_path": "hard.txt"})).await;
    f.ok(
        "write",
        json!({"file_path": "hard.txt", "content": "mine\n"}),
    )
    .await;
    assert_eq!(read_string(&inside), "mine\n");
    assert_eq!(
        read_string(&v),
        "secret\n",
        "the rename replaced the entry, not the inode"
    );
}

#[tokio::test]
async fn the_temporary_root_is_writable_too() {
    let f = fixture(Policy::Roots);
    let path = f.tmp.join("scratch/x.txt");
    f.ok(
        "write",
        json!({"file_path": path.display().to_string(), "content": "t"}),
    )
    .await;
    assert_eq!(read_string(&path), "t");
}

#[tokio::test]
async fn read_only_refuses_every_write_and_names_the_policy() {
    let f = fixture(Policy::ReadOnly);
    let path = f.put("r.txt", "r\n");
    f.ok("read", json!({"file_path": "r.txt"})).await;
    for (tool, args) in [
        ("write", json!({"file_path": "r.txt", "content": "x"})),
        ("write", json!({"file_path": "new.txt", "content": "x"})),
        (
            "edit",
            json!({"file_path": "r.txt", "old_string": "r", "new_string": "x"}),
        ),
    ] {
        let error = f.err(tool, args).await;
        assert!(
            error.contains("refused") && error.contains("read-only"),
            "{error}"
        );
    }
    assert_eq!(read_string(&path), "r\n");
    assert!(!f.path("new.txt").exists());
}

#[tokio::test]
async fn a_parent_swapped_for_a_symlink_between_calls_is_not_followed() {
    // The write resolves nothing ahead of time: a directory read, then replaced by a link to
    // outside, is opened beneath the root at write time and refused.
    let f = fixture(Policy::Roots);
    let v = victim(&f);
    f.put("d/secret.txt", "inside\n");
    f.ok("read", json!({"file_path": "d/secret.txt"})).await;
    std::fs::rename(f.path("d"), f.path("d-moved")).unwrap();
    symlink(&f.outside, f.path("d")).unwrap();
    assert_refused(&f, "d/secret.txt", &v).await;
}

/// An approver that answers every request with `grant` and keeps the reasons it was given.
pub(crate) struct Recorder {
    grant: bool,
    asked: std::sync::Mutex<Vec<String>>,
}

impl dsh_tools::Approver for Recorder {
    fn approve(
        &self,
        request: dsh_tools::ApprovalRequest,
    ) -> futures::future::BoxFuture<'static, dsh_tools::Approval> {
        self.asked
            .lock()
            .unwrap()
            .push(request.reason.unwrap_or_default());
        let answer = if self.grant {
            dsh_tools::Approval::Grant
        } else {
            dsh_tools::Approval::Refuse {
                reason: Some(String::from("not today")),
            }
        };
        Box::pin(async move { answer })
    }
}

impl Recorder {
    pub(crate) fn new(grant: bool) -> std::sync::Arc<Recorder> {
        std::sync::Arc::new(Recorder {
            grant,
            asked: std::sync::Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

async fn escalated_write(grant: bool) -> (dsh_tools::ToolResult, Vec<String>, std::path::PathBuf) {
    let f = fixture(Policy::Roots);
    let recorder = std::sync::Arc::new(Recorder {
        grant,
        asked: std::sync::Mutex::new(Vec::new()),
    });
    f.registry
        .global_scope()
        .set_approver(recorder.clone())
        .unwrap();
    let target = f.outside.join("approved.txt");
    let args = json!({"file_path": target.display().to_string(), "content": "ok\n"});
    let call = dsh_tools::ToolCall::new("c1", "write", args.to_string())
        .with_agent(dsh_test_support::RecordingAgent::new("s1"));
    let result = f.registry.execute(call).await;
    let asked = recorder.asked.lock().unwrap().clone();
    let written = std::fs::read_to_string(&target).ok();
    assert_eq!(written.is_some(), grant && !result.is_error);
    (result, asked, f.outside.clone())
}

#[tokio::test]
async fn a_refused_write_is_asked_of_the_approver_as_leaving_the_sandbox() {
    let (result, asked, outside) = escalated_write(true).await;
    assert!(!result.is_error, "{:?}", result.error);
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].starts_with(dsh_tools::approval::ESCALATION_PREFIX),
        "{}",
        asked[0]
    );
    assert!(
        asked[0].contains("workspace-write") && asked[0].contains(&outside.display().to_string())
    );

    let (result, asked, _) = escalated_write(false).await;
    let message = result.error.unwrap().message;
    assert!(
        message.contains("refused") && message.contains("not today"),
        "{message}"
    );
    assert_eq!(asked.len(), 1);
}
