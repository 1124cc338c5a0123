//! Scopes, effects, disposers and plugins: the ownership model of registrations and hooks.
//!
//! Loading a [`Plugin`] creates a [`Scope`] that owns every effect the plugin creates (tool
//! registrations, hooks, guards, restrictions, services, child plugins). Each effect returns an
//! idempotent [`Disposer`]; disposing a scope disposes its effects in reverse order; a disposed
//! scope refuses new effects (`inactive scope`). Replacing a plugin ([`PluginHandle::reload`])
//! disposes the old scope and applies the new plugin, so the tool set and hooks are exactly the
//! new plugin's; calls already running keep the definition they started with.

use crate::call::{ToolExecution, ToolResult};
use crate::definition::{Tool, ToolDefinition};
use crate::error::{PluginError, RegistrationError, RestrictError, ScopeError, panic_message};
use crate::hooks::{
    Approver, ExecuteNext, ExecuteStage, PostDecision, PreDecision, PreNext, Restriction,
};
use crate::layers::{
    ChangeFn, EffectId, Layer, LayerKey, RegistryInner, ToolsChange, ToolsChangeKind,
};
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, Weak};

type DisposeAction = Box<dyn FnOnce() + Send>;

/// Undoes one effect. Idempotent: the second and later calls do nothing.
#[derive(Clone)]
pub struct Disposer {
    action: Arc<Mutex<Option<DisposeAction>>>,
}

impl fmt::Debug for Disposer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Disposer")
            .field("disposed", &self.is_disposed())
            .finish()
    }
}

impl Disposer {
    /// A disposer that runs `action` the first time it is disposed.
    pub fn new(action: impl FnOnce() + Send + 'static) -> Disposer {
        Disposer {
            action: Arc::new(Mutex::new(Some(Box::new(action)))),
        }
    }

    /// Undoes the effect (once).
    pub fn dispose(&self) {
        let action = self.action.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(action) = action
            && let Err(payload) = catch_unwind(AssertUnwindSafe(action))
        {
            tracing::warn!(
                "a disposer panicked: {}; continuing",
                panic_message(payload.as_ref())
            );
        }
    }

    /// Whether the effect was already undone.
    pub fn is_disposed(&self) -> bool {
        self.action
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

struct ScopeState {
    active: bool,
    effects: Vec<Disposer>,
}

struct ScopeInner {
    registry: Weak<RegistryInner>,
    layer: LayerKey,
    name: String,
    /// The root scope of an agent layer removes the layer when disposed.
    owns_layer: bool,
    state: Mutex<ScopeState>,
}

/// An owner of effects (see the module docs). Cheap to clone; clones are the same scope.
#[derive(Clone)]
pub struct Scope {
    inner: Arc<ScopeInner>,
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("name", &self.inner.name)
            .field("active", &self.is_active())
            .finish()
    }
}

impl Scope {
    pub(crate) fn root(registry: &Arc<RegistryInner>, layer: LayerKey, name: &str) -> Scope {
        let owns_layer = matches!(layer, LayerKey::Agent(_));
        Scope {
            inner: Arc::new(ScopeInner {
                registry: Arc::downgrade(registry),
                layer,
                name: name.to_owned(),
                owns_layer,
                state: Mutex::new(ScopeState {
                    active: true,
                    effects: Vec::new(),
                }),
            }),
        }
    }

    /// The scope's name (the plugin's, `global`, or `agent:<session>`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The agent session this scope belongs to, or `None` for the global layer.
    pub fn session(&self) -> Option<&str> {
        self.inner.layer.session()
    }

    /// Whether the scope can still create effects.
    pub fn is_active(&self) -> bool {
        self.lock().active && self.inner.registry.strong_count() > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScopeState> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn inactive(&self) -> ScopeError {
        ScopeError::Inactive {
            scope: self.inner.name.clone(),
        }
    }

    /// Creates one effect: `install` runs under the registry lock while the scope is known to
    /// be active; the returned disposer runs `uninstall` under the registry lock. Change
    /// notifications are sent after every lock is released.
    fn add_effect<E: From<ScopeError>>(
        &self,
        install: impl FnOnce(&mut Layer, EffectId) -> Result<Option<ToolsChangeKind>, E>,
        uninstall: impl FnOnce(&mut Layer, EffectId) -> Option<ToolsChangeKind> + Send + 'static,
    ) -> Result<crate::Disposer, E> {
        let registry = self
            .inner
            .registry
            .upgrade()
            .ok_or_else(|| self.inactive())?;
        let (disposer, change) = {
            let mut scope = self.lock();
            if !scope.active {
                return Err(self.inactive().into());
            }
            let id = registry.next_effect();
            let change = {
                let mut state = registry.write();
                let layer = state
                    .layer_mut(&self.inner.layer)
                    .ok_or_else(|| self.inactive())?;
                install(layer, id)?
            };
            let weak = Arc::downgrade(&registry);
            let key = self.inner.layer.clone();
            let disposer = Disposer::new(move || {
                let Some(registry) = weak.upgrade() else {
                    return;
                };
                let change = {
                    let mut state = registry.write();
                    state.layer_mut(&key).and_then(|layer| uninstall(layer, id))
                };
                if let Some(kind) = change {
                    registry.notify(&ToolsChange {
                        session: key.session().map(str::to_owned),
                        kind,
                    });
                }
            });
            scope.effects.retain(|d| !d.is_disposed());
            scope.effects.push(disposer.clone());
            (disposer, change)
        };
        if let Some(kind) = change {
            registry.notify(&ToolsChange {
                session: self.session().map(str::to_owned),
                kind,
            });
        }
        Ok(disposer)
    }

    /// Registers a definition in this scope's layer. A duplicate name in the same layer is an
    /// error; to replace a tool, dispose its registration and register the replacement.
    pub fn register(
        &self,
        definition: ToolDefinition,
    ) -> Result<crate::Disposer, RegistrationError> {
        definition.check()?;
        let definition = Arc::new(definition);
        let name = definition.name.clone();
        let uninstall_name = name.clone();
        self.add_effect(
            move |layer, id| {
                if layer.tools.contains_key(&name) {
                    return Err(RegistrationError::Duplicate { name });
                }
                layer.tools.insert(name.clone(), (id, definition));
                Ok(Some(ToolsChangeKind::Registered { name }))
            },
            move |layer, id| {
                let ours = layer
                    .tools
                    .get(&uninstall_name)
                    .is_some_and(|(owner, _)| *owner == id);
                ours.then(|| {
                    layer.tools.remove(&uninstall_name);
                    ToolsChangeKind::Unregistered {
                        name: uninstall_name,
                    }
                })
            },
        )
    }

    /// Registers a typed tool in this scope's layer.
    pub fn register_tool<T: Tool>(&self, tool: T) -> Result<crate::Disposer, RegistrationError> {
        self.register(ToolDefinition::from_tool(tool)?)
    }

    /// Adds a `tools/pre-execute` listener: `(execution, next) -> PreDecision`. Listeners run
    /// in registration order (global ones before an agent's); `next.run()` yields the verdict
    /// of the rest (`Allow` when none). Arguments cannot be rewritten.
    pub fn on_pre_execute<F, Fut>(&self, listener: F) -> Result<crate::Disposer, ScopeError>
    where
        F: Fn(Arc<ToolExecution>, PreNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PreDecision> + Send + 'static,
    {
        let listener: crate::hooks::PreExecuteFn =
            Arc::new(move |exec, next| Box::pin(listener(exec, next)));
        self.add_effect(
            move |layer, id| {
                layer.pre_execute.push((id, listener));
                Ok(None)
            },
            |layer, id| {
                layer.pre_execute.retain(|(owner, _)| *owner != id);
                None
            },
        )
    }

    /// Adds a guard: a monotonic final denial. Guards run only for allowed calls (global ones
    /// first, then the agent's); the first reason denies, and no listener can undo it.
    pub fn guard(
        &self,
        guard: impl Fn(&ToolExecution) -> Option<String> + Send + Sync + 'static,
    ) -> Result<crate::Disposer, ScopeError> {
        let guard: crate::hooks::GuardFn = Arc::new(guard);
        self.add_effect(
            move |layer, id| {
                layer.guards.push((id, guard));
                Ok(None)
            },
            |layer, id| {
                layer.guards.retain(|(owner, _)| *owner != id);
                None
            },
        )
    }

    /// Adds a `tools/execute` wrapper around the dispatch (timeout, retry, metrics). Wrappers
    /// nest in registration order (the first is outermost). Only this stage may replace the
    /// signal, and the caller's signal is always fused back in.
    pub fn wrap_execute<F, Fut>(&self, wrapper: F) -> Result<crate::Disposer, ScopeError>
    where
        F: Fn(ExecuteStage, ExecuteNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let wrapper: crate::hooks::ExecuteWrapperFn =
            Arc::new(move |stage, next| Box::pin(wrapper(stage, next)));
        self.add_effect(
            move |layer, id| {
                layer.wrappers.push((id, wrapper));
                Ok(None)
            },
            |layer, id| {
                layer.wrappers.retain(|(owner, _)| *owner != id);
                None
            },
        )
    }

    /// Adds a `tools/post-execute` listener. Listeners run in order, each seeing the result as
    /// the previous ones left it; a `Block` ends the chain. Denied and failed results pass
    /// through here too.
    pub fn on_post_execute<F, Fut>(&self, listener: F) -> Result<crate::Disposer, ScopeError>
    where
        F: Fn(Arc<ToolExecution>, ToolResult) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PostDecision> + Send + 'static,
    {
        let listener: crate::hooks::PostExecuteFn =
            Arc::new(move |exec, result| Box::pin(listener(exec, result)));
        self.add_effect(
            move |layer, id| {
                layer.post_execute.push((id, listener));
                Ok(None)
            },
            |layer, id| {
                layer.post_execute.retain(|(owner, _)| *owner != id);
                None
            },
        )
    }

    /// Adds a `tools/result` observer of the frozen execution and final result. Observers
    /// cannot change anything; a panicking one is logged and ignored.
    pub fn on_result(
        &self,
        observer: impl Fn(&ToolExecution, &ToolResult) + Send + Sync + 'static,
    ) -> Result<crate::Disposer, ScopeError> {
        let observer: crate::hooks::ResultObserverFn = Arc::new(observer);
        self.add_effect(
            move |layer, id| {
                layer.observers.push((id, observer));
                Ok(None)
            },
            |layer, id| {
                layer.observers.retain(|(owner, _)| *owner != id);
                None
            },
        )
    }

    /// Installs the approval service that answers `Ask` verdicts for calls this layer governs
    /// (an agent layer's approver takes precedence over the global one; the latest wins).
    pub fn set_approver(&self, approver: Arc<dyn Approver>) -> Result<crate::Disposer, ScopeError> {
        self.add_effect(
            move |layer, id| {
                layer.approvers.push((id, approver));
                Ok(None)
            },
            |layer, id| {
                layer.approvers.retain(|(owner, _)| *owner != id);
                None
            },
        )
    }

    /// Masks inherited global tools for this agent (agent scopes only). Masks intersect; an
    /// allow-list hides globals registered later, a deny-list lets them through; the scope's
    /// own registrations are exempt. Empty filters and names of tools the scope does not
    /// inherit are errors. A restriction is a visibility mask, not a security boundary: deny
    /// policy belongs in guards.
    pub fn restrict(&self, restriction: Restriction) -> Result<crate::Disposer, RestrictError> {
        if self.session().is_none() {
            return Err(ScopeError::WrongScope {
                operation: "restrict",
                expected: "an agent scope",
            }
            .into());
        }
        let lists = [&restriction.allow, &restriction.deny];
        let given: Vec<&Vec<String>> = lists.iter().filter_map(|l| l.as_ref()).collect();
        if given.is_empty() || given.iter().any(|l| l.is_empty()) {
            return Err(RestrictError::Empty);
        }
        let registry = self
            .inner
            .registry
            .upgrade()
            .ok_or_else(|| self.inactive())?;
        {
            let state = registry.read();
            let mut unknown: Vec<String> = given
                .iter()
                .flat_map(|l| l.iter())
                .filter(|name| !state.global.tools.contains_key(*name))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                unknown.sort();
                unknown.dedup();
                return Err(RestrictError::UnknownNames { names: unknown });
            }
        }
        self.add_effect(
            move |layer, id| {
                layer.restrictions.push((id, restriction));
                Ok::<_, RestrictError>(Some(ToolsChangeKind::Restricted))
            },
            |layer, id| {
                let before = layer.restrictions.len();
                layer.restrictions.retain(|(owner, _)| *owner != id);
                (layer.restrictions.len() != before).then_some(ToolsChangeKind::Unrestricted)
            },
        )
    }

    /// Provides a shared service (such as the jobs runtime) that bodies reach through
    /// `exec.service::<T>()`. Disposing the effect withdraws it.
    pub fn provide<T: Any + Send + Sync>(
        &self,
        service: Arc<T>,
    ) -> Result<crate::Disposer, ScopeError> {
        let registry = self
            .inner
            .registry
            .upgrade()
            .ok_or_else(|| self.inactive())?;
        let services = registry.services.clone();
        let removable = Arc::clone(&service);
        let removal_services = services.clone();
        self.add_effect(
            move |_, _| {
                services.insert(service);
                Ok(None)
            },
            move |_, _| {
                removal_services.remove(&removable);
                None
            },
        )
    }

    /// Listens to `tools/change`: every change of the visible tool set, in any layer.
    pub fn on_change(
        &self,
        listener: impl Fn(&ToolsChange) + Send + Sync + 'static,
    ) -> Result<crate::Disposer, ScopeError> {
        let registry = self
            .inner
            .registry
            .upgrade()
            .ok_or_else(|| self.inactive())?;
        let listener: ChangeFn = Arc::new(listener);
        let weak = Arc::downgrade(&registry);
        self.add_effect(
            move |_, id| {
                registry
                    .change_listeners
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((id, listener));
                Ok(None)
            },
            move |_, id| {
                if let Some(registry) = weak.upgrade() {
                    registry
                        .change_listeners
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .retain(|(owner, _)| *owner != id);
                }
                None
            },
        )
    }

    /// Runs `cleanup` when the scope is disposed (or the returned disposer is called).
    pub fn on_dispose(
        &self,
        cleanup: impl FnOnce() + Send + 'static,
    ) -> Result<crate::Disposer, ScopeError> {
        let mut scope = self.lock();
        if !scope.active {
            return Err(self.inactive());
        }
        let disposer = Disposer::new(cleanup);
        scope.effects.retain(|d| !d.is_disposed());
        scope.effects.push(disposer.clone());
        Ok(disposer)
    }

    /// Creates a child scope in the same layer, disposed with this one.
    pub fn child(&self, name: impl Into<String>) -> Result<Scope, ScopeError> {
        let child = Scope {
            inner: Arc::new(ScopeInner {
                registry: self.inner.registry.clone(),
                layer: self.inner.layer.clone(),
                name: name.into(),
                owns_layer: false,
                state: Mutex::new(ScopeState {
                    active: true,
                    effects: Vec::new(),
                }),
            }),
        };
        let weak_child = Arc::downgrade(&child.inner);
        self.on_dispose(move || {
            if let Some(inner) = weak_child.upgrade() {
                Scope { inner }.dispose();
            }
        })?;
        Ok(child)
    }

    /// Loads a plugin into a new child scope. If `apply` fails or panics, everything it
    /// created is disposed and the error returned.
    pub fn load(&self, plugin: impl Plugin + 'static) -> Result<PluginHandle, PluginError> {
        let plugin: Arc<dyn Plugin> = Arc::new(plugin);
        let scope = apply_plugin(self, &plugin)?;
        Ok(PluginHandle {
            parent: self.clone(),
            current: Arc::new(Mutex::new(Some((plugin, scope)))),
        })
    }

    /// Disposes every effect in reverse creation order. Idempotent. Disposing an agent scope
    /// also removes its layer (so its restrictions and shadowing end with it).
    pub fn dispose(&self) {
        let effects = {
            let mut scope = self.lock();
            if !scope.active {
                return;
            }
            scope.active = false;
            std::mem::take(&mut scope.effects)
        };
        for effect in effects.iter().rev() {
            effect.dispose();
        }
        if self.inner.owns_layer
            && let Some(registry) = self.inner.registry.upgrade()
        {
            let session = self.session().unwrap_or_default();
            let removed = registry.write().agents.remove(session);
            if removed.is_some() {
                registry.notify(&ToolsChange {
                    session: self.session().map(str::to_owned),
                    kind: ToolsChangeKind::AgentScopeDisposed,
                });
            }
        }
    }
}

/// A plugin: a name and an `apply` that creates its effects in the scope it is given.
pub trait Plugin: Send + Sync {
    /// The plugin's name (the scope's name, and the source of its notices).
    fn name(&self) -> &str;

    /// Creates the plugin's effects (registrations, hooks, services) in `scope`.
    fn apply(&self, scope: &Scope) -> Result<(), PluginError>;
}

fn apply_plugin(parent: &Scope, plugin: &Arc<dyn Plugin>) -> Result<Scope, PluginError> {
    let scope = parent.child(plugin.name())?;
    let outcome = catch_unwind(AssertUnwindSafe(|| plugin.apply(&scope)));
    match outcome {
        Ok(Ok(())) => Ok(scope),
        Ok(Err(error)) => {
            scope.dispose();
            Err(error)
        }
        Err(payload) => {
            scope.dispose();
            Err(PluginError::Panicked {
                plugin: plugin.name().to_owned(),
                message: panic_message(payload.as_ref()),
            })
        }
    }
}

/// The loaded version of a plugin and the scope it applied into.
type LoadedPlugin = (Arc<dyn Plugin>, Scope);

/// A loaded plugin: dispose it, or replace it with a new version (hot reload).
#[derive(Clone)]
pub struct PluginHandle {
    parent: Scope,
    current: Arc<Mutex<Option<LoadedPlugin>>>,
}

impl fmt::Debug for PluginHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("PluginHandle")
            .field(
                "plugin",
                &current.as_ref().map(|(p, _)| p.name().to_owned()),
            )
            .finish()
    }
}

impl PluginHandle {
    /// The scope of the currently loaded version, if any.
    pub fn scope(&self) -> Option<Scope> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(_, s)| s.clone())
    }

    /// Hot reload: disposes the current version's scope, then applies `plugin` in a fresh one.
    /// Afterwards the tools and hooks are exactly the new version's; calls already running
    /// finish on the old definitions. If the new version fails to apply, nothing of either
    /// version remains and the error is returned.
    pub fn reload(&self, plugin: impl Plugin + 'static) -> Result<(), PluginError> {
        let plugin: Arc<dyn Plugin> = Arc::new(plugin);
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, old)) = current.take() {
            old.dispose();
        }
        let scope = apply_plugin(&self.parent, &plugin)?;
        *current = Some((plugin, scope));
        Ok(())
    }

    /// Disposes the loaded version. Idempotent.
    pub fn dispose(&self) {
        let taken = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((_, scope)) = taken {
            scope.dispose();
        }
    }
}
