//! The agent seam: what a tool may know about the agent it runs for, without depending on the
//! agent loop.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Where an injected context comes from (`{"kind": "plugin", "plugin": "bash"}` on the wire).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ContextSource {
    /// A plugin (a tool, a job producer) speaking to the model.
    Plugin {
        /// The plugin's name.
        plugin: String,
    },
    /// The embedding application.
    Host,
}

impl ContextSource {
    /// A plugin source.
    pub fn plugin(name: impl Into<String>) -> ContextSource {
        ContextSource::Plugin {
            plugin: name.into(),
        }
    }
}

/// Durable context for the model: it rides the next model request as a user-context message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InjectedContext {
    /// Who produced it.
    pub source: ContextSource,
    /// What the model reads.
    pub content: String,
}

impl InjectedContext {
    /// Context from a plugin.
    pub fn from_plugin(plugin: impl Into<String>, content: impl Into<String>) -> InjectedContext {
        InjectedContext {
            source: ContextSource::plugin(plugin),
            content: content.into(),
        }
    }
}

/// The agent has been disposed: nobody is listening any more.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("agent for session `{session_id}` is gone")]
pub struct AgentGone {
    /// The agent's session.
    pub session_id: String,
}

/// What a tool sees of the agent it runs for (`exec.agent()`).
///
/// Implementations hold the agent weakly: [`AgentHandle::inject`] fails with [`AgentGone`] once
/// the agent is disposed, and tools treat that as "nobody is listening", never as a crash.
pub trait AgentHandle: Send + Sync + fmt::Debug {
    /// The agent's session id (the ownership key for jobs and the visibility key for tools).
    fn session_id(&self) -> &str;

    /// Appends durable context that the agent's **next** model request carries. This is not a
    /// wake-up: an idle agent stays idle.
    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone>;

    /// Whether the agent is still alive (not disposed).
    fn is_alive(&self) -> bool;

    /// The session's working directory, against which tools resolve relative paths.
    fn cwd(&self) -> Option<&Path> {
        None
    }
}

/// A shared agent handle, as carried by executions and jobs.
pub type AgentRef = Arc<dyn AgentHandle>;
