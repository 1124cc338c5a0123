//! Scopes, plugins and hot reload; agent scopes, shadowing, restrictions and `tools/change`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_test_support::RecordingAgent;
use dsh_tools::{
    AgentRef, ContentBlock, ExecContext, FailureCode, Plugin, PluginError, PreDecision,
    RegistrationError, RestrictError, Restriction, Scope, ScopeError, ToolDefinition, ToolOutput,
    ToolRegistry, ToolsChange, ToolsChangeKind, ValueSchema,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::{Arc, Mutex};
use support::{constant_tool, expect_failure, expect_value, run, run_as};
use tokio::sync::oneshot;

fn names(registry: &ToolRegistry, session: Option<&str>) -> Vec<String> {
    registry
        .schemas(session)
        .into_iter()
        .map(|s| s.name)
        .collect()
}

// ----- Scopes and disposers -----------------------------------------------------------------

#[test]
fn disposal_runs_in_reverse_order_once_and_closes_the_scope() {
    let registry = ToolRegistry::new();
    let scope = registry.global_scope().child("owner").unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    for label in ["first", "second", "third"] {
        let order = Arc::clone(&order);
        scope
            .on_dispose(move || order.lock().unwrap().push(label))
            .unwrap();
    }
    scope.dispose();
    scope.dispose();
    assert_eq!(*order.lock().unwrap(), vec!["third", "second", "first"]);
    assert!(!scope.is_active());
    let err = scope.register(constant_tool("late", "x")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "inactive scope `owner`: it was disposed and can create no effects"
    );
    assert!(matches!(
        err,
        RegistrationError::Scope(ScopeError::Inactive { .. })
    ));
    assert!(scope.guard(|_| None).is_err());
}

#[test]
fn an_effect_disposer_is_idempotent_and_independent() {
    let registry = ToolRegistry::new();
    let a = registry.register(constant_tool("a", "1")).unwrap();
    registry.register(constant_tool("b", "2")).unwrap();
    a.dispose();
    a.dispose();
    assert!(a.is_disposed());
    assert_eq!(names(&registry, None), vec!["b"]);
    // The name is free again: replacing a tool is dispose + register.
    registry.register(constant_tool("a", "3")).unwrap();
    assert_eq!(names(&registry, None), vec!["a", "b"]);
}

// ----- Plugins and hot reload ---------------------------------------------------------------

struct Greeter {
    version: &'static str,
    guard: bool,
    started: Option<Arc<Mutex<Option<oneshot::Sender<()>>>>>,
    release: Option<Arc<tokio::sync::Notify>>,
}

impl Plugin for Greeter {
    fn name(&self) -> &str {
        "greeter"
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        let version = self.version;
        let started = self.started.clone();
        let release = self.release.clone();
        let greet = ToolDefinition::builder("greet", format!("Greet ({version})."))
            .output(ToolOutput::new(ValueSchema::string(), |_, v| {
                vec![ContentBlock::text(v.as_str().unwrap_or_default())]
            }))
            .execute(move |_, _: ExecContext| {
                let started = started.clone();
                let release = release.clone();
                async move {
                    if let Some(started) = started
                        && let Some(tx) = started.lock().unwrap().take()
                    {
                        let _ = tx.send(());
                    }
                    if let Some(release) = release {
                        release.notified().await;
                    }
                    Ok(json!(version))
                }
            })
            .build()
            .map_err(|e| PluginError::apply("greeter", e))?;
        scope
            .register(greet)
            .map_err(|e| PluginError::apply("greeter", e))?;
        if self.guard {
            scope
                .guard(|exec| (exec.name() == "other").then(|| "v1 guard".to_owned()))
                .map_err(|e| PluginError::apply("greeter", e))?;
        }
        Ok(())
    }
}

fn greeter(version: &'static str, guard: bool) -> Greeter {
    Greeter {
        version,
        guard,
        started: None,
        release: None,
    }
}

#[tokio::test]
async fn hot_reload_swaps_tools_and_hooks_while_running_calls_finish_on_the_old_version() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("other", "o")).unwrap();
    let (started_tx, started_rx) = oneshot::channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let handle = registry
        .global_scope()
        .load(Greeter {
            version: "v1",
            guard: true,
            started: Some(Arc::new(Mutex::new(Some(started_tx)))),
            release: Some(Arc::clone(&release)),
        })
        .unwrap();
    assert_eq!(
        registry.get("greet", None).unwrap().description(),
        "Greet (v1)."
    );
    expect_failure(
        &run(&registry, "other", json!({})).await,
        FailureCode::Denied,
    );

    // A v1 call is in flight when the reload happens.
    let in_flight = tokio::spawn({
        let registry = registry.clone();
        async move { run(&registry, "greet", json!({})).await }
    });
    started_rx.await.unwrap();
    handle.reload(greeter("v2", false)).unwrap();
    release.notify_one();
    assert_eq!(expect_value(&in_flight.await.unwrap()), json!("v1"));

    let schemas = registry.schemas(None);
    let greet = schemas.iter().find(|s| s.name == "greet").unwrap();
    assert_eq!(greet.description, "Greet (v2).");
    assert_eq!(
        registry.get("greet", None).unwrap().description(),
        "Greet (v2)."
    );
    assert_eq!(
        expect_value(&run(&registry, "greet", json!({})).await),
        json!("v2")
    );
    // The v1 guard is gone with its scope.
    assert_eq!(
        expect_value(&run(&registry, "other", json!({})).await),
        json!("o")
    );

    let scope = handle.scope().unwrap();
    handle.dispose();
    handle.dispose();
    assert_eq!(names(&registry, None), vec!["other"]);
    assert!(scope.register(constant_tool("x", "x")).is_err());
}

struct Broken;

impl Plugin for Broken {
    fn name(&self) -> &str {
        "broken"
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        scope
            .register(constant_tool("half", "x"))
            .map_err(|e| PluginError::apply("broken", e))?;
        Err(PluginError::apply("broken", "configuration missing"))
    }
}

struct Exploding;

impl Plugin for Exploding {
    fn name(&self) -> &str {
        "exploding"
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        scope
            .register(constant_tool("half", "x"))
            .map_err(|e| PluginError::apply("exploding", e))?;
        panic!("apply exploded");
    }
}

#[test]
fn a_failing_plugin_leaves_nothing_behind() {
    let registry = ToolRegistry::new();
    let err = registry.global_scope().load(Broken).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `broken` failed to apply: configuration missing"
    );
    assert!(names(&registry, None).is_empty());
    let err = registry.global_scope().load(Exploding).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `exploding` panicked while applying: apply exploded"
    );
    assert!(names(&registry, None).is_empty());
}

// ----- Agent scopes, shadowing and scoped hooks ---------------------------------------------

fn agents() -> (AgentRef, AgentRef) {
    (RecordingAgent::new("s1"), RecordingAgent::new("s2"))
}

#[tokio::test]
async fn scoped_tools_shadow_globals_for_their_agent_only() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("greet", "global")).unwrap();
    let scope = registry.agent_scope("s1").unwrap();
    scope.register(constant_tool("greet", "scoped")).unwrap();
    let (s1, s2) = agents();
    assert_eq!(
        expect_value(&run_as(&registry, &s1, "greet", json!({})).await),
        json!("scoped")
    );
    assert_eq!(
        expect_value(&run_as(&registry, &s2, "greet", json!({})).await),
        json!("global")
    );
    assert_eq!(
        expect_value(&run(&registry, "greet", json!({})).await),
        json!("global")
    );
    assert!(matches!(
        registry.agent_scope("s1").unwrap_err(),
        ScopeError::AgentScopeExists { .. }
    ));
}

#[tokio::test]
async fn scoped_hooks_and_guards_see_only_their_agents_calls() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("t", "v")).unwrap();
    let scope = registry.agent_scope("s1").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_in = Arc::clone(&seen);
    scope
        .on_pre_execute(move |exec, next| {
            seen_in
                .lock()
                .unwrap()
                .push(exec.session_id().map(str::to_owned));
            next.run()
        })
        .unwrap();
    scope.guard(|_| Some("s1 is read-only".into())).unwrap();
    let (s1, s2) = agents();
    assert_eq!(
        expect_failure(
            &run_as(&registry, &s1, "t", json!({})).await,
            FailureCode::Denied
        ),
        "s1 is read-only"
    );
    expect_value(&run_as(&registry, &s2, "t", json!({})).await);
    expect_value(&run(&registry, "t", json!({})).await);
    assert_eq!(*seen.lock().unwrap(), vec![Some("s1".to_owned())]);
}

#[tokio::test]
async fn disposing_an_agent_scope_removes_its_tools_hooks_and_restrictions() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("g", "1")).unwrap();
    let scope = registry.agent_scope("s1").unwrap();
    scope.register(constant_tool("mine", "2")).unwrap();
    scope.restrict(Restriction::deny(["g"])).unwrap();
    scope
        .on_pre_execute(|_, _| async { PreDecision::deny("scoped") })
        .unwrap();
    assert_eq!(names(&registry, Some("s1")), vec!["mine"]);
    scope.dispose();
    assert_eq!(names(&registry, Some("s1")), vec!["g"]);
    let (s1, _) = agents();
    expect_value(&run_as(&registry, &s1, "g", json!({})).await);
    // The session can get a fresh scope afterwards.
    registry.agent_scope("s1").unwrap();
}

// ----- Restrictions -------------------------------------------------------------------------

#[tokio::test]
async fn a_restricted_tool_is_absent_from_schemas_get_and_execute() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("shell", "ran")).unwrap();
    registry.register(constant_tool("read", "read")).unwrap();
    registry
        .agent_scope("s1")
        .unwrap()
        .restrict(Restriction::deny(["shell"]))
        .unwrap();
    let _s2 = registry.agent_scope("s2").unwrap();
    let (s1, s2) = agents();
    assert_eq!(names(&registry, Some("s1")), vec!["read"]);
    assert!(registry.get("shell", Some("s1")).is_none());
    let message = expect_failure(
        &run_as(&registry, &s1, "shell", json!({})).await,
        FailureCode::UnknownTool,
    );
    assert_eq!(message, "unknown tool `shell`; available tools: read");
    assert_eq!(names(&registry, Some("s2")), vec!["read", "shell"]);
    assert!(registry.get("shell", Some("s2")).is_some());
    expect_value(&run_as(&registry, &s2, "shell", json!({})).await);
}

#[test]
fn allow_lists_exclude_later_globals_and_deny_lists_admit_them() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("a", "1")).unwrap();
    registry.register(constant_tool("b", "2")).unwrap();
    let allow = registry.agent_scope("allow").unwrap();
    allow.restrict(Restriction::allow(["a"])).unwrap();
    let deny = registry.agent_scope("deny").unwrap();
    deny.restrict(Restriction::deny(["a"])).unwrap();
    registry.register(constant_tool("later", "3")).unwrap();
    assert_eq!(names(&registry, Some("allow")), vec!["a"]);
    assert_eq!(names(&registry, Some("deny")), vec!["b", "later"]);
}

#[test]
fn a_scopes_own_tools_are_exempt_and_masks_intersect() {
    let registry = ToolRegistry::new();
    for name in ["a", "b", "c"] {
        registry.register(constant_tool(name, name)).unwrap();
    }
    let scope = registry.agent_scope("s1").unwrap();
    scope.register(constant_tool("own", "o")).unwrap();
    scope.restrict(Restriction::allow(["a", "b"])).unwrap();
    let second = scope.restrict(Restriction::allow(["b", "c"])).unwrap();
    assert_eq!(names(&registry, Some("s1")), vec!["b", "own"]);
    second.dispose();
    assert_eq!(names(&registry, Some("s1")), vec!["a", "b", "own"]);
}

#[test]
fn empty_filters_unknown_names_and_global_restrictions_are_errors() {
    let registry = ToolRegistry::new();
    registry.register(constant_tool("a", "1")).unwrap();
    let scope = registry.agent_scope("s1").unwrap();
    assert_eq!(
        scope.restrict(Restriction::default()).unwrap_err(),
        RestrictError::Empty
    );
    assert_eq!(
        scope
            .restrict(Restriction::allow(Vec::<String>::new()))
            .unwrap_err(),
        RestrictError::Empty
    );
    assert_eq!(
        scope
            .restrict(Restriction::deny(["a", "zz", "yy"]))
            .unwrap_err()
            .to_string(),
        "restriction names unknown tools: yy, zz"
    );
    assert!(matches!(
        registry
            .global_scope()
            .restrict(Restriction::deny(["a"]))
            .unwrap_err(),
        RestrictError::Scope(ScopeError::WrongScope { .. })
    ));
}

// ----- tools/change -------------------------------------------------------------------------

#[test]
fn tools_change_fires_on_register_dispose_and_restrict() {
    let registry = ToolRegistry::new();
    let changes = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&changes);
    registry
        .global_scope()
        .on_change(move |change: &ToolsChange| sink.lock().unwrap().push(change.clone()))
        .unwrap();
    let a = registry.register(constant_tool("a", "1")).unwrap();
    let scope = registry.agent_scope("s1").unwrap();
    let restriction = scope.restrict(Restriction::deny(["a"])).unwrap();
    restriction.dispose();
    a.dispose();
    scope.register(constant_tool("mine", "2")).unwrap();
    scope.dispose();
    let kinds: Vec<(Option<String>, ToolsChangeKind)> = changes
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c.session.clone(), c.kind.clone()))
        .collect();
    let s1 = || Some("s1".to_owned());
    assert_eq!(
        kinds,
        vec![
            (None, ToolsChangeKind::Registered { name: "a".into() }),
            (s1(), ToolsChangeKind::Restricted),
            (s1(), ToolsChangeKind::Unrestricted),
            (None, ToolsChangeKind::Unregistered { name: "a".into() }),
            (
                s1(),
                ToolsChangeKind::Registered {
                    name: "mine".into()
                }
            ),
            (
                s1(),
                ToolsChangeKind::Unregistered {
                    name: "mine".into()
                }
            ),
            (s1(), ToolsChangeKind::AgentScopeDisposed),
        ]
    );
}
