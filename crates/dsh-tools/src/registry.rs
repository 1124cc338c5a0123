//! The tool registry: layers of registrations and hooks, one visibility resolver, and the
//! execution pipeline's entry points.

use crate::card::{ToolCallView, ToolResultView};
use crate::content::ToolResultRecord;
use crate::definition::{Tool, ToolDefinition, ToolSchema};
use crate::error::{RegistrationError, ScopeError};
use crate::exec::Services;
use crate::hooks::{
    Approver, ExecuteWrapperFn, GuardFn, PostExecuteFn, PreExecuteFn, Restriction, ResultObserverFn,
};
use crate::scope::Scope;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) type EffectId = u64;
pub(crate) type ChangeFn = Arc<dyn Fn(&ToolsChange) + Send + Sync>;

/// Which layer a scope's effects live in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LayerKey {
    Global,
    Agent(String),
}

impl LayerKey {
    pub(crate) fn session(&self) -> Option<&str> {
        match self {
            LayerKey::Global => None,
            LayerKey::Agent(session) => Some(session),
        }
    }
}

/// The registrations and hooks of one layer (the global one, or one agent's).
#[derive(Default)]
pub(crate) struct Layer {
    pub(crate) tools: BTreeMap<String, (EffectId, Arc<ToolDefinition>)>,
    pub(crate) pre_execute: Vec<(EffectId, PreExecuteFn)>,
    pub(crate) guards: Vec<(EffectId, GuardFn)>,
    pub(crate) wrappers: Vec<(EffectId, ExecuteWrapperFn)>,
    pub(crate) post_execute: Vec<(EffectId, PostExecuteFn)>,
    pub(crate) observers: Vec<(EffectId, ResultObserverFn)>,
    pub(crate) restrictions: Vec<(EffectId, Restriction)>,
    pub(crate) approvers: Vec<(EffectId, Arc<dyn Approver>)>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) global: Layer,
    pub(crate) agents: HashMap<String, Layer>,
}

impl State {
    pub(crate) fn layer_mut(&mut self, key: &LayerKey) -> Option<&mut Layer> {
        match key {
            LayerKey::Global => Some(&mut self.global),
            LayerKey::Agent(session) => self.agents.get_mut(session),
        }
    }

    fn agent_layer(&self, session: Option<&str>) -> Option<&Layer> {
        session.and_then(|s| self.agents.get(s))
    }

    /// The one visibility resolver behind `schemas()`, `get()` and `execute()`: inherited
    /// global tools filtered by every restriction of the agent's layer (masks intersect), then
    /// the agent's own tools, which are exempt and shadow globals of the same name.
    pub(crate) fn resolve(&self, session: Option<&str>, name: &str) -> Option<Arc<ToolDefinition>> {
        let layer = self.agent_layer(session);
        if let Some((_, own)) = layer.and_then(|l| l.tools.get(name)) {
            return Some(Arc::clone(own));
        }
        let (_, global) = self.global.tools.get(name)?;
        let admitted = layer.is_none_or(|l| l.restrictions.iter().all(|(_, r)| r.admits(name)));
        admitted.then(|| Arc::clone(global))
    }

    pub(crate) fn visible(&self, session: Option<&str>) -> BTreeMap<String, Arc<ToolDefinition>> {
        let layer = self.agent_layer(session);
        let mut out: BTreeMap<String, Arc<ToolDefinition>> = self
            .global
            .tools
            .iter()
            .filter(|(name, _)| {
                layer.is_none_or(|l| l.restrictions.iter().all(|(_, r)| r.admits(name)))
            })
            .map(|(name, (_, def))| (name.clone(), Arc::clone(def)))
            .collect();
        if let Some(layer) = layer {
            for (name, (_, def)) in &layer.tools {
                out.insert(name.clone(), Arc::clone(def));
            }
        }
        out
    }

    /// The hooks that apply to a call of `session`: global ones first, then the agent's.
    pub(crate) fn hooks(&self, session: Option<&str>) -> CallHooks {
        // An array, not a vector: a call without an agent allocates nothing for its hooks.
        let global = &self.global;
        let both;
        let layers: &[&Layer] = match self.agent_layer(session) {
            Some(agent) => {
                both = [global, agent];
                &both
            }
            None => std::slice::from_ref(&global),
        };
        fn collect<T: Clone>(
            layers: &[&Layer],
            pick: impl Fn(&Layer) -> &Vec<(EffectId, T)>,
        ) -> Vec<T> {
            layers
                .iter()
                .flat_map(|l| pick(l).iter().map(|(_, f)| f.clone()))
                .collect()
        }
        // The chains are shared by every link of the call's waterfall; most calls have none,
        // and then nothing is allocated for them.
        fn chain<T: Clone>(
            layers: &[&Layer],
            pick: impl Fn(&Layer) -> &Vec<(EffectId, T)>,
        ) -> Option<Arc<[T]>> {
            let list = collect(layers, pick);
            (!list.is_empty()).then(|| Arc::from(list))
        }
        CallHooks {
            pre_execute: chain(layers, |l| &l.pre_execute),
            guards: collect(layers, |l| &l.guards),
            wrappers: chain(layers, |l| &l.wrappers),
            post_execute: collect(layers, |l| &l.post_execute),
            observers: collect(layers, |l| &l.observers),
            approver: layers
                .iter()
                .rev()
                .find_map(|l| l.approvers.last().map(|(_, a)| Arc::clone(a))),
        }
    }
}

/// A snapshot of the hooks that apply to one call, taken when it starts.
pub(crate) struct CallHooks {
    /// `None` when no listener applies.
    pub(crate) pre_execute: Option<Arc<[PreExecuteFn]>>,
    pub(crate) guards: Vec<GuardFn>,
    /// `None` when no wrapper applies.
    pub(crate) wrappers: Option<Arc<[ExecuteWrapperFn]>>,
    pub(crate) post_execute: Vec<PostExecuteFn>,
    pub(crate) observers: Vec<ResultObserverFn>,
    pub(crate) approver: Option<Arc<dyn Approver>>,
}

/// A change of the visible tool set (`tools/change`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolsChange {
    /// The agent session whose layer changed; `None` for the global layer (every agent).
    pub session: Option<String>,
    /// What changed.
    pub kind: ToolsChangeKind,
}

/// What changed in a `tools/change` notification.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolsChangeKind {
    /// A tool was registered.
    Registered {
        /// Its name.
        name: String,
    },
    /// A tool registration was disposed.
    Unregistered {
        /// Its name.
        name: String,
    },
    /// A restriction was added.
    Restricted,
    /// A restriction was disposed.
    Unrestricted,
    /// An agent scope was disposed with everything in it.
    AgentScopeDisposed,
}

/// The default of [`RegistryConfig::max_argument_bytes`]: 1 MiB.
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// The limits of a [`ToolRegistry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// The longest argument text a call may carry, in bytes (default
    /// [`DEFAULT_MAX_ARGUMENT_BYTES`], 1 MiB). Longer text is refused with `INVALID_ARGS`
    /// before it is parsed, with a message naming its size and the limit. Arguments given as
    /// an already-built `Value` (in-process callers, Code Mode) are not measured.
    pub max_argument_bytes: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
        }
    }
}

pub(crate) struct RegistryInner {
    pub(crate) config: RegistryConfig,
    pub(crate) state: RwLock<State>,
    pub(crate) change_listeners: RwLock<Vec<(EffectId, ChangeFn)>>,
    pub(crate) services: Services,
    /// The root scope of every live agent layer: the registry keeps them until they are
    /// disposed, so dropping a handle never strands a layer.
    pub(crate) agent_scopes: Mutex<HashMap<String, Scope>>,
    next_effect: AtomicU64,
}

impl RegistryInner {
    pub(crate) fn next_effect(&self) -> EffectId {
        self.next_effect.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        // A panic while holding the lock cannot leave `State` half-updated (every mutation is a
        // single insert or remove), so a poisoned lock is still safe to use.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn notify(&self, change: &ToolsChange) {
        let listeners: Vec<ChangeFn> = self
            .change_listeners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, f)| Arc::clone(f))
            .collect();
        for listener in listeners {
            if crate::definition::contain("tools/change listener", || listener(change)).is_err() {
                tracing::warn!(?change, "a tools/change listener panicked; ignored");
            }
        }
    }
}

/// The registry of tools and hooks, shared by every agent of a process (cheap to clone).
///
/// ```
/// use dsh_tools::{ToolRegistry, ToolDefinition, ToolOutput, ValueSchema, ContentBlock};
/// use serde_json::json;
///
/// let registry = ToolRegistry::new();
/// let echo = ToolDefinition::builder("echo", "Echo text back.")
///     .parameters(ValueSchema::closed_object().required("text", ValueSchema::string()))
///     .output(ToolOutput::new(ValueSchema::string(), |_args, value| {
///         vec![ContentBlock::text(value.as_str().unwrap_or_default())]
///     }))
///     .execute(|args, _exec| async move { Ok(args["text"].clone()) })
///     .build()?;
/// registry.register(echo)?;
/// assert_eq!(registry.schemas(None)[0].name, "echo");
/// # Ok::<(), dsh_tools::RegistrationError>(())
/// ```
#[derive(Clone)]
pub struct ToolRegistry {
    pub(crate) inner: Arc<RegistryInner>,
    global: Scope,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.read();
        f.debug_struct("ToolRegistry")
            .field(
                "global_tools",
                &state.global.tools.keys().collect::<Vec<_>>(),
            )
            .field("agent_scopes", &state.agents.len())
            .finish()
    }
}

/// A handle on a registry that does not keep it alive ([`ToolRegistry::downgrade`]).
///
/// A tool that dispatches into the registry it is registered in (Code Mode's `run_code`)
/// holds one of these: a strong handle would make a cycle through the tool's definition, and
/// the registry, with every tool and the resources they own, would never be dropped.
#[derive(Clone)]
pub struct WeakToolRegistry {
    inner: std::sync::Weak<RegistryInner>,
    global: Scope,
}

impl fmt::Debug for WeakToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakToolRegistry")
            .field("alive", &(self.inner.strong_count() > 0))
            .finish()
    }
}

impl WeakToolRegistry {
    /// The registry, if it still exists.
    pub fn upgrade(&self) -> Option<ToolRegistry> {
        Some(ToolRegistry {
            inner: self.inner.upgrade()?,
            global: self.global.clone(),
        })
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        ToolRegistry::new()
    }
}

impl ToolRegistry {
    /// An empty registry with the default limits.
    pub fn new() -> ToolRegistry {
        ToolRegistry::with_config(RegistryConfig::default())
    }

    /// An empty registry with the given limits.
    pub fn with_config(config: RegistryConfig) -> ToolRegistry {
        let inner = Arc::new(RegistryInner {
            config,
            state: RwLock::new(State::default()),
            change_listeners: RwLock::new(Vec::new()),
            services: Services::default(),
            agent_scopes: Mutex::new(HashMap::new()),
            next_effect: AtomicU64::new(1),
        });
        let global = Scope::root(&inner, LayerKey::Global, "global");
        ToolRegistry { inner, global }
    }

    /// A handle that does not keep the registry alive, for a tool that dispatches into the
    /// registry it is registered in.
    pub fn downgrade(&self) -> WeakToolRegistry {
        WeakToolRegistry {
            inner: Arc::downgrade(&self.inner),
            global: self.global.clone(),
        }
    }

    /// The registry's limits.
    pub fn config(&self) -> RegistryConfig {
        self.inner.config
    }

    /// The global scope: effects here apply to every agent.
    pub fn global_scope(&self) -> &Scope {
        &self.global
    }

    /// Creates the scope of one agent session, chained under the global one. Tools registered
    /// there shadow globals for that agent only; hooks and guards there see only its calls.
    /// The registry keeps the scope until it is disposed; disposing it removes everything it
    /// holds (the agent loop does that when the agent is disposed).
    pub fn agent_scope(&self, session_id: impl Into<String>) -> Result<Scope, ScopeError> {
        let session = session_id.into();
        {
            let mut state = self.inner.write();
            if state.agents.contains_key(&session) {
                return Err(ScopeError::AgentScopeExists { session });
            }
            state.agents.insert(session.clone(), Layer::default());
        }
        let scope = Scope::root(
            &self.inner,
            LayerKey::Agent(session.clone()),
            &format!("agent:{session}"),
        );
        self.inner
            .agent_scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session, scope.clone());
        Ok(scope)
    }

    /// The live scope of an agent session, if one was created and not yet disposed.
    pub fn existing_agent_scope(&self, session_id: &str) -> Option<Scope> {
        self.inner
            .agent_scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .cloned()
    }

    /// Registers a definition in the global scope.
    pub fn register(
        &self,
        definition: ToolDefinition,
    ) -> Result<crate::Disposer, RegistrationError> {
        self.global.register(definition)
    }

    /// Registers a typed tool in the global scope.
    pub fn register_tool<T: Tool>(&self, tool: T) -> Result<crate::Disposer, RegistrationError> {
        self.global.register_tool(tool)
    }

    /// The tool `name` as the agent of `session` sees it (`None` for calls without an agent).
    pub fn get(&self, name: &str, session: Option<&str>) -> Option<Arc<ToolDefinition>> {
        self.inner.read().resolve(session, name)
    }

    /// Every tool the agent of `session` sees, sorted by name.
    pub fn visible(&self, session: Option<&str>) -> Vec<Arc<ToolDefinition>> {
        self.inner.read().visible(session).into_values().collect()
    }

    /// The model-facing schemas the agent of `session` sees: only name, description and
    /// parameters, deep-copied, sorted by name. Byte-identical for the same tool set whatever
    /// the registration order, so prompt caches stay warm.
    pub fn schemas(&self, session: Option<&str>) -> Vec<ToolSchema> {
        self.inner
            .read()
            .visible(session)
            .values()
            .map(|def| def.schema())
            .collect()
    }

    /// Whether a call may overlap its siblings (only an exact `true` from the tool counts; an
    /// unknown tool is exclusive).
    pub fn is_concurrency_safe(&self, name: &str, args: &Value, session: Option<&str>) -> bool {
        self.get(name, session)
            .is_some_and(|def| def.is_concurrency_safe(args))
    }

    /// The pending card of a call, falling back to the generic card.
    pub fn present_call(&self, name: &str, args: &Value, session: Option<&str>) -> ToolCallView {
        self.get(name, session)
            .and_then(|def| def.present_call(args))
            .unwrap_or_else(|| ToolCallView::fallback(name, args))
    }

    /// The completed card of a call, falling back to the generic card.
    pub fn present_result(
        &self,
        name: &str,
        args: &Value,
        record: &ToolResultRecord,
        session: Option<&str>,
    ) -> ToolResultView {
        self.get(name, session)
            .and_then(|def| def.present_result(args, record))
            .unwrap_or_else(|| ToolResultView::fallback(record))
    }

    /// The shared services (such as the jobs runtime) that bodies reach through
    /// `exec.service::<T>()`.
    pub fn services(&self) -> &Services {
        &self.inner.services
    }
}
