//! The shared fixture: a temporary tree with a working directory, a temporary directory and an
//! outside directory, and a registry with the file tools under a chosen policy.

use dsh_tools::{ToolCall, ToolRegistry, ToolResult, content_text};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tool_fs::{FsLimits, FsOptions, FsPlugin, WritePolicy};

/// Which policy a fixture's plugin has.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Policy {
    Anywhere,
    Roots,
    ReadOnly,
}

pub(crate) struct Fixture {
    pub(crate) _dir: tempfile::TempDir,
    /// The working directory (a root under `Policy::Roots`).
    pub(crate) work: PathBuf,
    /// The session's temporary directory (the other root).
    pub(crate) tmp: PathBuf,
    /// A directory outside the roots.
    pub(crate) outside: PathBuf,
    pub(crate) spill: PathBuf,
    pub(crate) registry: ToolRegistry,
    calls: std::sync::atomic::AtomicU64,
}

pub(crate) fn fixture(policy: Policy) -> Fixture {
    fixture_with(policy, FsLimits::default())
}

pub(crate) fn fixture_with(policy: Policy, limits: FsLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let work = root.join("work");
    let tmp = root.join("tmp");
    let outside = root.join("outside");
    let spill = root.join("spill");
    for d in [&work, &tmp, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    let policy = match policy {
        Policy::Anywhere => WritePolicy::Anywhere,
        Policy::Roots => WritePolicy::Roots(vec![work.clone(), tmp.clone()]),
        Policy::ReadOnly => WritePolicy::ReadOnly,
    };
    let options = FsOptions::new(work.clone(), policy, Some(spill.clone())).with_limits(limits);
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(FsPlugin::new(options))
        .unwrap();
    Fixture {
        _dir: dir,
        work,
        tmp,
        outside,
        spill,
        registry,
        calls: std::sync::atomic::AtomicU64::new(0),
    }
}

impl Fixture {
    pub(crate) async fn call(&self, tool: &str, args: Value) -> ToolResult {
        let n = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.registry
            .execute(ToolCall::new(format!("c{n}"), tool, args.to_string()))
            .await
    }

    /// A call that must succeed: its model text.
    pub(crate) async fn ok(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args).await;
        assert!(!result.is_error, "{tool} failed: {}", text(&result));
        text(&result)
    }

    /// A call that must fail: its error message.
    pub(crate) async fn err(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args).await;
        assert!(result.is_error, "{tool} succeeded: {}", text(&result));
        result.error.unwrap().message
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.work.join(rel)
    }

    pub(crate) fn put(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }
}

pub(crate) fn text(result: &ToolResult) -> String {
    content_text(&result.content)
}

pub(crate) fn value<T: DeserializeOwned>(result: &ToolResult) -> T {
    serde_json::from_value((**result.value.as_ref().expect("a value")).clone()).unwrap()
}

pub(crate) fn read_string(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}
