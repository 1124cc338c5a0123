//! [`AgentDirectory`]: the live agents of a host, which opens a woken turn on an idle one when a
//! job notice arrives.

use super::state::{AgentInner, WokenTurnGuard, lock};
use super::{Agent, DEFAULT_NOTICE_GATHER, GATHER_WINDOW_MAX};
use dsh_tools::AgentRef;
use dsh_tools::jobs::TurnOpener;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The host side of `wakeup` delivery: a directory of live agents that opens a turn on an idle
/// one when a job notice arrives. Install it with
/// [`JobRuntime::set_turn_opener`](dsh_tools::jobs::JobRuntime::set_turn_opener).
///
/// The wake-up budget of the jobs runtime limits *turns*, never notices: the directory opens a
/// turn by making the agent busy at once, so every notice arriving while that turn gathers or
/// runs joins it (no wake is spent on it), and the turn waits for a quiet period
/// ([`AgentDirectory::gather_window`], default [`DEFAULT_NOTICE_GATHER`]) before its first
/// request, so notices of jobs settling together reach the model in one request, in settlement
/// order. Notices that still find the budget spent wait in the inbox for the next turn, and
/// [`Agent::dispose`] reports those no turn took (`context/undelivered`).
#[derive(Clone)]
pub struct AgentDirectory {
    agents: Arc<Mutex<HashMap<String, Weak<AgentInner>>>>,
    woken: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    gather: Duration,
}

impl Default for AgentDirectory {
    fn default() -> AgentDirectory {
        AgentDirectory {
            agents: Arc::default(),
            woken: Arc::default(),
            gather: DEFAULT_NOTICE_GATHER,
        }
    }
}

impl fmt::Debug for AgentDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentDirectory")
            .field("agents", &lock(&self.agents).len())
            .field("gather", &self.gather)
            .finish()
    }
}

impl AgentDirectory {
    /// An empty directory.
    pub fn new() -> AgentDirectory {
        AgentDirectory::default()
    }

    /// How long a woken turn waits without a new notice before its first request (default
    /// [`DEFAULT_NOTICE_GATHER`]; it gathers for at most ten such periods). `Duration::ZERO`
    /// asks at once, with whatever is in the inbox then. Longer than a minute counts as a
    /// minute.
    #[must_use]
    pub fn gather_window(mut self, quiet: Duration) -> AgentDirectory {
        self.gather = quiet.min(GATHER_WINDOW_MAX);
        self
    }

    /// Adds an agent (held weakly). Agents dropped since the last insert are forgotten.
    pub fn insert(&self, agent: &Agent) {
        let mut agents = lock(&self.agents);
        agents.retain(|_, inner| inner.strong_count() > 0);
        agents.insert(agent.session_id().to_owned(), Arc::downgrade(&agent.inner));
    }

    /// Waits for every turn this directory opened so far to finish.
    pub async fn wait_woken(&self) {
        loop {
            let pending: Vec<_> = std::mem::take(&mut *lock(&self.woken));
            if pending.is_empty() {
                return;
            }
            for handle in pending {
                let _ = handle.await;
            }
        }
    }
}

impl TurnOpener for AgentDirectory {
    fn open_turn(&self, owner: &AgentRef) -> bool {
        let Some(inner) = lock(&self.agents)
            .get(owner.session_id())
            .and_then(Weak::upgrade)
        else {
            return false;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let agent = Agent { inner };
        // The turn begins here, not in the task: from now on the agent is busy, so the notices
        // that follow join this turn instead of spending a wake each on turns that would find
        // nothing left to do. A busy or disposed agent opens nothing (the running turn takes
        // the notice: it checks the inbox under the same lock before it ends).
        let Ok(ticket) = agent.begin_turn() else {
            return false;
        };
        let guard = WokenTurnGuard {
            agent,
            id: ticket.id,
        };
        let gather = self.gather;
        let handle = runtime.spawn(Agent::woken_turn(guard, ticket, gather));
        let mut woken = lock(&self.woken);
        // Finished turns need no waiting for; only the running ones are kept.
        woken.retain(|handle| !handle.is_finished());
        woken.push(handle);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelAdapter, ModelRequest, ModelStream};
    use dsh_tools::ToolRegistry;
    use tokio_util::sync::CancellationToken;

    /// A model that answers every request with an empty text.
    struct Silent;

    impl ModelAdapter for Silent {
        fn stream(&self, _request: ModelRequest, _signal: CancellationToken) -> ModelStream {
            Box::pin(futures::stream::empty())
        }
    }

    fn agent(registry: &ToolRegistry, session: &str) -> Agent {
        Agent::builder(registry.clone(), Arc::new(Silent))
            .session_id(session)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn the_directory_forgets_dropped_agents_and_finished_turns() {
        let registry = ToolRegistry::new();
        let directory = AgentDirectory::new();
        directory.insert(&agent(&registry, "gone"));
        let live = agent(&registry, "live");
        directory.insert(&live);
        assert_eq!(
            lock(&directory.agents).keys().collect::<Vec<_>>(),
            vec!["live"]
        );

        // Two woken turns, one after the other: only the running one is kept.
        assert!(directory.open_turn(&live.handle()));
        while !lock(&directory.woken).iter().all(|h| h.is_finished()) {
            tokio::task::yield_now().await;
        }
        assert!(directory.open_turn(&live.handle()));
        assert_eq!(lock(&directory.woken).len(), 1);
        directory.wait_woken().await;
    }

    #[test]
    fn a_woken_turn_whose_task_never_runs_leaves_the_agent_idle() {
        let registry = ToolRegistry::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let live = agent(&registry, "live");
        let directory = AgentDirectory::new();
        directory.insert(&live);
        {
            let _entered = runtime.enter();
            assert!(directory.open_turn(&live.handle()));
        }
        assert!(live.is_busy());
        // Shutting the runtime down drops the task before it ever ran.
        drop(runtime);
        assert!(!live.is_busy());
    }
}
