//! Cancelling an agent's turns from outside: when a token fires ([`Agent::cancel_turn_on`],
//! [`Agent::run_until_cancelled`]), as a host does at a signal or a closed output.

use super::Agent;
use std::future::Future;
use tokio_util::sync::CancellationToken;

impl Agent {
    /// Cancels the turn running when `token` fires, whichever it is: one the host started or
    /// one a job notice opened. The task ends then, or with the runtime; it holds the agent
    /// until then.
    pub fn cancel_turn_on(&self, token: CancellationToken) -> tokio::task::JoinHandle<()> {
        let agent = self.clone();
        tokio::spawn(async move {
            token.cancelled().await;
            agent.cancel_turn();
        })
    }

    /// Runs `turn` (one of this agent's, such as [`Agent::run`]), cancelling it once `token`
    /// fires, even if that happened before it began.
    pub async fn run_until_cancelled<T>(
        &self,
        token: &CancellationToken,
        turn: impl Future<Output = T>,
    ) -> T {
        tokio::pin!(turn);
        tokio::select! {
            // The turn first: its first poll begins it, so the cancellation below reaches it.
            biased;
            ended = &mut turn => ended,
            () = token.cancelled() => {
                self.cancel_turn();
                turn.await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{ModelAdapter, ModelRequest, ModelStream};
    use crate::{Agent, TurnEndReason};
    use dsh_tools::ToolRegistry;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// A model that never answers.
    struct Mute;

    impl ModelAdapter for Mute {
        fn stream(&self, _request: ModelRequest, _signal: CancellationToken) -> ModelStream {
            Box::pin(futures::stream::pending())
        }
    }

    fn agent() -> Agent {
        Agent::builder(ToolRegistry::new(), Arc::new(Mute))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_token_fired_before_the_turn_still_cancels_it() {
        let agent = agent();
        let fired = CancellationToken::new();
        fired.cancel();
        let ended = tokio::time::timeout(
            Duration::from_secs(10),
            agent.run_until_cancelled(&fired, agent.run("hello")),
        )
        .await
        .expect("the turn was never cancelled");
        assert_eq!(ended.unwrap().reason, TurnEndReason::Cancelled);
        agent.dispose().await;
    }

    #[tokio::test]
    async fn a_watched_token_cancels_the_running_turn() {
        let agent = agent();
        let token = CancellationToken::new();
        let _watch = agent.cancel_turn_on(token.clone());
        let turn = agent.run("hello");
        tokio::pin!(turn);
        let early = tokio::time::timeout(Duration::from_millis(50), &mut turn).await;
        assert!(early.is_err(), "the mute model's turn ended by itself");
        token.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(10), turn)
            .await
            .expect("the turn was never cancelled");
        assert_eq!(ended.unwrap().reason, TurnEndReason::Cancelled);
        agent.dispose().await;
    }
}
