//! The layers of a registry, beneath both the registry and its scopes: the global layer and
//! one per agent, each holding its registrations and hooks, the one visibility resolver over
//! them, the hook snapshot a call takes, and the `tools/change` notifications.
//!
//! [`ToolRegistry`](crate::ToolRegistry) and [`Scope`](crate::Scope) both build on this module
//! and it on neither, so the registry can hold scopes and scopes can reach the registry's
//! state without the two modules importing each other.

use crate::call::Services;
use crate::definition::ToolDefinition;
use crate::hooks::{
    Approver, ExecuteWrapperFn, GuardFn, PostExecuteFn, PreExecuteFn, Restriction, ResultObserverFn,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

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

/// The limits of a [`ToolRegistry`](crate::ToolRegistry).
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
    next_effect: AtomicU64,
}

impl RegistryInner {
    pub(crate) fn new(config: RegistryConfig) -> RegistryInner {
        RegistryInner {
            config,
            state: RwLock::new(State::default()),
            change_listeners: RwLock::new(Vec::new()),
            services: Services::default(),
            next_effect: AtomicU64::new(1),
        }
    }

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
