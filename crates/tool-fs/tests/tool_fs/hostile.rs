//! What a hostile reviewer found and the crate now holds: no call waits for ever on a FIFO or
//! a device, an approved write lands only where the question said, a root swapped for a
//! symlink after the plugin was made leads nowhere, new content never keeps a set-id bit, and
//! a long name can be written.

use crate::confinement::Recorder;
use crate::support::{Policy, fixture, read_string};
use dsh_tools::{ToolCall, ToolRegistry};
use serde_json::json;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::time::Duration;
use tool_fs::{FsOptions, FsPlugin, WritePolicy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_and_devices_are_errors_at_once_for_every_tool() {
    let f = fixture(Policy::Roots);
    let fifo = f.path("p");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let calls = [
        ("read", json!({"file_path": "p"})),
        ("read", json!({"file_path": "/dev/kmsg"})),
        ("write", json!({"file_path": "p", "content": "x"})),
        (
            "edit",
            json!({"file_path": "p", "old_string": "a", "new_string": "b"}),
        ),
        ("grep", json!({"pattern": "x", "path": "p"})),
        ("grep", json!({"pattern": "x"})),
    ];
    for (tool, args) in calls {
        let ended = tokio::time::timeout(Duration::from_secs(10), f.call(tool, args.clone())).await;
        let result = ended.unwrap_or_else(|_| panic!("{tool} {args} waited"));
        if tool != "grep" {
            assert!(result.is_error, "{tool} {args}");
        }
    }
    let read = f.err("read", json!({"file_path": "p"})).await;
    assert!(read.contains("a FIFO"), "{read}");
}

#[tokio::test]
async fn an_approved_write_goes_only_where_the_question_said() {
    let f = fixture(Policy::Roots);
    let recorder = Recorder::new(true);
    f.registry
        .global_scope()
        .set_approver(recorder.clone())
        .unwrap();
    let victim = f.outside.join("victim");
    std::fs::write(&victim, "orig").unwrap();
    symlink(&victim, f.path("notes.txt")).unwrap();
    f.ok("read", json!({"file_path": "notes.txt"})).await;
    let call = ToolCall::new(
        "c9",
        "write",
        json!({"file_path": "notes.txt", "content": "approved"}).to_string(),
    )
    .with_agent(dsh_test_support::RecordingAgent::new("s1"));
    let result = f.registry.execute(call).await;
    assert!(!result.is_error, "{:?}", result.error);
    let asked = recorder.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains(&format!("which leads to {}", victim.display())),
        "the question names where the write lands: {}",
        asked[0]
    );
    assert_eq!(read_string(&victim), "approved");
}

#[tokio::test]
async fn a_root_swapped_for_a_symlink_after_the_start_leads_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (work, outside) = (base.join("work"), base.join("outside"));
    let tmp = work.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    // The nested root first, as a host may list the session's temporary directory.
    let policy = WritePolicy::Roots(vec![tmp.clone(), work.clone()]);
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(FsPlugin::new(FsOptions::new(work.clone(), policy, None)))
        .unwrap();
    std::fs::remove_dir(&tmp).unwrap();
    symlink(&outside, &tmp).unwrap();
    let result = registry
        .execute(ToolCall::new(
            "c1",
            "write",
            json!({"file_path": "tmp/evil", "content": "pwned"}).to_string(),
        ))
        .await;
    assert!(
        result.is_error,
        "{}",
        dsh_tools::content_text(&result.content)
    );
    assert!(!outside.join("evil").exists(), "the write left the roots");
}

#[tokio::test]
async fn new_content_keeps_the_permission_bits_but_never_a_set_id_bit() {
    let f = fixture(Policy::Roots);
    let tool = f.put("tool", "#!/bin/sh\n");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    f.ok("read", json!({"file_path": "tool"})).await;
    f.ok(
        "write",
        json!({"file_path": "tool", "content": "#!/bin/sh\nid\n"}),
    )
    .await;
    let mode = std::fs::metadata(&tool).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);
}

#[tokio::test]
async fn a_name_near_the_systems_limit_is_written() {
    let f = fixture(Policy::Roots);
    let name = "n".repeat(240);
    f.ok("write", json!({"file_path": name, "content": "long\n"}))
        .await;
    assert_eq!(read_string(&f.path(&name)), "long\n");
}
