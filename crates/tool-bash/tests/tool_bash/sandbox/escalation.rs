//! Escalation through the registry's approver: a `bash` call that asks to run outside the
//! sandbox runs so only when the approver grants it, and still within the executor's limits.

use super::*;
use dsh_test_support::RecordingAgent;
use dsh_tools::{Approval, ApprovalRequest, Approver, ToolCall, ToolRegistry};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use std::sync::{Arc, Mutex};
use tool_bash::BashPlugin;

/// An approver that answers every request the same way and records what it was shown.
struct Answering {
    grant: bool,
    asked: Mutex<Vec<String>>,
}

impl Approver for Answering {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval> {
        self.asked
            .lock()
            .unwrap()
            .push(request.reason.clone().unwrap_or_default());
        let answer = if self.grant {
            Approval::Grant
        } else {
            Approval::Refuse {
                reason: Some(String::from("not today")),
            }
        };
        Box::pin(async move { answer })
    }
}

async fn escalate(dirs: &Dirs, approver: Option<Arc<Answering>>) -> (bool, String) {
    let registry = ToolRegistry::new();
    let executor = sandboxed(
        dirs.policy(SandboxMode::WorkspaceWrite),
        SandboxBackend::Landlock,
    );
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(executor)))
        .unwrap();
    if let Some(approver) = approver {
        registry.global_scope().set_approver(approver).unwrap();
    }
    let target = dirs.outside().join("escalated");
    let args = serde_json::json!({
        "command": format!("echo x > '{}' && echo wrote", target.display()),
        "description": "Write outside the workspace",
        "workdir": dirs.root().display().to_string(),
        "sandbox": "escalate",
        "justification": "the user asked for a file next to the workspace",
    });
    let call = ToolCall::new("c1", "bash", args).with_agent(RecordingAgent::new("s1"));
    let result = registry.execute(call).await;
    (
        !result.is_error,
        dsh_tools::content_text(&result.content).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalation_runs_unconfined_only_when_the_approver_grants_it() {
    let dirs = Dirs::new();
    let target = dirs.outside().join("escalated");

    let refusing = Arc::new(Answering {
        grant: false,
        asked: Mutex::new(Vec::new()),
    });
    let (ok, text) = escalate(&dirs, Some(Arc::clone(&refusing))).await;
    assert!(!ok, "{text}");
    assert!(
        text.contains(
            "the request to run outside the sandbox was denied (approval refused: not today)"
        ),
        "{text}"
    );
    assert!(!target.exists());
    let asked = refusing.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].ends_with("justification: the user asked for a file next to the workspace"),
        "{asked:?}"
    );
    assert!(
        asked[0].starts_with("leave the sandbox: run `echo x > "),
        "{asked:?}"
    );
    assert!(asked[0].contains("outside the sandbox (workspace-write via landlock"));

    let (ok, text) = escalate(&dirs, None).await;
    assert!(!ok, "{text}");
    assert!(text.contains("no approval service is available"), "{text}");
    assert!(!target.exists());

    let granting = Arc::new(Answering {
        grant: true,
        asked: Mutex::new(Vec::new()),
    });
    let (ok, text) = escalate(&dirs, Some(Arc::clone(&granting))).await;
    assert!(ok, "{text}");
    assert_eq!(text, "wrote");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x\n");
    assert_eq!(granting.asked.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_write_through_the_tool_names_the_policy() {
    let dirs = Dirs::new();
    let registry = ToolRegistry::new();
    let executor = sandboxed(
        dirs.policy(SandboxMode::WorkspaceWrite),
        SandboxBackend::Landlock,
    );
    let executor_temp = executor.report().temp_dir.clone().unwrap();
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(executor)))
        .unwrap();
    let target = dirs.outside().join("via-tool");
    let args = serde_json::json!({
        "command": format!("echo x > '{}'", target.display()),
        "description": "Write outside the workspace",
        "workdir": dirs.root().display().to_string(),
    });
    let result = registry.execute(ToolCall::new("c1", "bash", args)).await;
    let text = dsh_tools::content_text(&result.content).to_string();
    assert!(!result.is_error);
    let temp = executor_temp.display();
    assert_eq!(
        text,
        format!(
            "[stderr]\nbash: line 1: {target}: Read-only file system\n[exit code: 1]\n[sandbox: this \
             command ran under the `workspace-write` sandbox policy (Landlock), which allows \
             writes only to {root}, {temp} (TMPDIR) and denies network connections; the error \
             above may be the sandbox's denial. If the command must run outside it, call again \
             with `sandbox: \"escalate\"` and a `justification` the user will be asked to \
             approve.]",
            target = target.display(),
            root = std::fs::canonicalize(dirs.root()).unwrap().display(),
        )
    );
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escalation_parameters_come_with_a_sandbox_and_are_checked() {
    let dirs = Dirs::new();
    let names = |plugin: BashPlugin| -> Vec<String> {
        let parameters = plugin.definition().unwrap().schema().parameters.to_value();
        let mut names: Vec<String> = parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    };
    let executor = sandboxed(
        dirs.policy(SandboxMode::WorkspaceWrite),
        SandboxBackend::Landlock,
    );
    let plugin = BashPlugin::new(Arc::new(executor));
    assert_eq!(
        names(plugin.clone()),
        [
            "command",
            "description",
            "justification",
            "sandbox",
            "timeout_ms",
            "workdir"
        ]
    );
    assert!(
        plugin
            .definition()
            .unwrap()
            .description()
            .contains("Commands run in a sandbox (workspace-write via landlock; network denied)")
    );
    assert_eq!(
        names(BashPlugin::new(Arc::new(
            tool_bash::LocalExecutor::default()
        ))),
        ["command", "description", "timeout_ms", "workdir"]
    );
    // Full access confines nothing: there is no sandbox to name or to leave.
    let unconfined = sandboxed(
        dirs.policy(SandboxMode::FullAccess),
        SandboxBackend::Landlock,
    );
    assert_eq!(unconfined.sandbox_policy(), None);
    assert_eq!(
        names(BashPlugin::new(Arc::new(unconfined))),
        ["command", "description", "timeout_ms", "workdir"]
    );

    let registry = ToolRegistry::new();
    registry.global_scope().load(plugin).unwrap();
    for (args, message) in [
        (
            serde_json::json!({"command": "true", "description": "Nothing", "sandbox": "escalate"}),
            "/justification: required with `sandbox: \"escalate\"`",
        ),
        (
            serde_json::json!({"command": "true", "description": "Nothing", "justification": "x"}),
            "/justification: only with `sandbox: \"escalate\"`",
        ),
        (
            serde_json::json!({"command": "true", "description": "Nothing", "sandbox": "off", "justification": "x"}),
            "/sandbox",
        ),
    ] {
        let result = registry.execute(ToolCall::new("c", "bash", args)).await;
        let text = dsh_tools::content_text(&result.content).to_string();
        assert!(result.is_error, "{text}");
        assert!(text.contains(message), "{text}");
    }
}

/// A kept spill directory is a session's: the commands' private temporary directory is made in
/// it, so a harness killed before it could remove that directory leaves nothing loose in the
/// system temporary directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_private_temp_dir_lives_in_a_kept_spill_directory() {
    let dirs = Dirs::new();
    let session = tempfile::tempdir().unwrap();
    let spill = session.path().join("spill");
    let mut config = config();
    config.spill_dir = Some(spill.clone());
    let executor = SandboxedExecutor::new(
        dirs.policy(SandboxMode::WorkspaceWrite),
        SandboxBackend::Landlock,
        config,
    )
    .unwrap();
    let result = run_in(
        &executor,
        "printf %s \"$TMPDIR\" && touch \"$TMPDIR/made\"",
        dirs.root(),
    )
    .await;
    assert_eq!(result.exit_code, Some(0), "{result:?}");
    let temp = PathBuf::from(result.stdout.text.trim());
    assert_eq!(temp.parent(), Some(spill.as_path()), "{result:?}");
    assert!(temp.join("made").is_file());
    drop(executor);
    assert!(
        !temp.exists(),
        "the executor removes its temp dir when dropped"
    );
}

/// An approved escalation runs on the sandboxed executor's own slots: the limit on commands at
/// once is one limit, however many of them left the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalated_command_waits_for_a_slot_of_the_same_limit() {
    let dirs = Dirs::new();
    let mut config = config();
    config.max_concurrent_commands = 1;
    let executor = SandboxedExecutor::new(
        dirs.policy(SandboxMode::WorkspaceWrite),
        SandboxBackend::Landlock,
        config,
    )
    .unwrap();
    let escalated = executor.escalated().unwrap();
    let root = dirs.root().to_path_buf();
    let first = tokio::spawn({
        let executor = executor.clone();
        let root = root.clone();
        async move {
            run_in(
                &executor,
                "touch started; while [ ! -e go ]; do sleep 0.01; done; echo first",
                &root,
            )
            .await
        }
    });
    while !root.join("started").exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = tokio::spawn({
        let root = root.clone();
        async move {
            run_in(
                escalated.as_ref(),
                "test -e go && echo after the first",
                &root,
            )
            .await
        }
    });
    // Time for the escalated command to run, were it not waiting for the first one's slot.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(root.join("go"), "").unwrap();
    assert_eq!(first.await.unwrap().stdout.text, "first\n");
    let second = second.await.unwrap();
    assert_eq!(
        (second.exit_code, second.stdout.text.as_str()),
        (Some(0), "after the first\n")
    );
}
