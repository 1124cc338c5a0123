//! The tool registry: layers of registrations and hooks, one visibility resolver, and the
//! execution pipeline's entry points.

use crate::call::Services;
use crate::card::{ToolCallView, ToolResultView};
use crate::content::ToolResultRecord;
use crate::definition::{Tool, ToolDefinition, ToolSchema};
use crate::error::{RegistrationError, ScopeError};
use crate::layers::{Layer, LayerKey, RegistryConfig, RegistryInner};
use crate::scope::Scope;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

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
    /// The root scope of every live agent layer: the registry keeps them until they are
    /// disposed, so dropping a handle never strands a layer. Each agent scope removes its own
    /// entry when it is disposed (see [`ToolRegistry::agent_scope`]).
    agent_scopes: Arc<Mutex<HashMap<String, Scope>>>,
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
    agent_scopes: std::sync::Weak<Mutex<HashMap<String, Scope>>>,
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
            agent_scopes: self.agent_scopes.upgrade()?,
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
        let inner = Arc::new(RegistryInner::new(config));
        let global = Scope::root(&inner, LayerKey::Global, "global");
        ToolRegistry {
            inner,
            global,
            agent_scopes: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A handle that does not keep the registry alive, for a tool that dispatches into the
    /// registry it is registered in.
    pub fn downgrade(&self) -> WeakToolRegistry {
        WeakToolRegistry {
            inner: Arc::downgrade(&self.inner),
            global: self.global.clone(),
            agent_scopes: Arc::downgrade(&self.agent_scopes),
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
        // The scope's first effect forgets it here, so it runs after every later effect when the
        // scope is disposed, just before the scope removes its layer.
        let agent_scopes = Arc::downgrade(&self.agent_scopes);
        let forgotten = session.clone();
        scope.on_dispose(move || {
            if let Some(agent_scopes) = agent_scopes.upgrade() {
                agent_scopes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&forgotten);
            }
        })?;
        self.agent_scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session, scope.clone());
        Ok(scope)
    }

    /// The live scope of an agent session, if one was created and not yet disposed.
    pub fn existing_agent_scope(&self, session_id: &str) -> Option<Scope> {
        self.agent_scopes
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
