//! An in-memory [`AgentHandle`] that records what it is told.

use dsh_tools::{AgentGone, AgentHandle, InjectedContext};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// An [`AgentHandle`] that records injected contexts and can be disposed.
#[derive(Debug)]
pub struct RecordingAgent {
    session_id: String,
    alive: AtomicBool,
    injected: Mutex<Vec<InjectedContext>>,
}

impl RecordingAgent {
    /// A live agent for `session_id`.
    pub fn new(session_id: impl Into<String>) -> Arc<RecordingAgent> {
        Arc::new(RecordingAgent {
            session_id: session_id.into(),
            alive: AtomicBool::new(true),
            injected: Mutex::new(Vec::new()),
        })
    }

    /// Marks the agent disposed: later injections fail with [`AgentGone`].
    pub fn dispose(&self) {
        self.alive.store(false, Ordering::SeqCst);
    }

    /// Everything injected so far.
    pub fn injected(&self) -> Vec<InjectedContext> {
        self.injected
            .lock()
            .map(|list| list.clone())
            .unwrap_or_default()
    }
}

impl AgentHandle for RecordingAgent {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn inject(&self, context: InjectedContext) -> Result<(), AgentGone> {
        if !self.is_alive() {
            return Err(AgentGone {
                session_id: self.session_id.clone(),
            });
        }
        if let Ok(mut list) = self.injected.lock() {
            list.push(context);
        }
        Ok(())
    }

    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}
