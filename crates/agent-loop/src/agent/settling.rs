//! The end of a session's turns: waiting for the agent's background jobs
//! ([`Agent::settle_jobs`]), whose notices may still open turns of their own.

use super::{Agent, AgentDirectory};
use dsh_tools::jobs::JobSnapshot;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long [`Agent::settle_jobs`] waits, and what ends the wait early.
#[derive(Clone, Debug)]
pub struct JobWait {
    wait: Duration,
    interrupt: CancellationToken,
    stop: CancellationToken,
}

impl JobWait {
    /// At most `wait` from the moment jobs are first found running; zero stops them at once.
    /// A wait too long for the clock to count has no end.
    pub fn new(wait: Duration) -> JobWait {
        JobWait {
            wait,
            interrupt: CancellationToken::new(),
            stop: CancellationToken::new(),
        }
    }

    /// Ends the wait when `token` fires: the person running the host asked
    /// ([`WaitCut::Interrupted`]).
    pub fn interrupted_by(mut self, token: CancellationToken) -> JobWait {
        self.interrupt = token;
        self
    }

    /// Ends the wait when `token` fires: the host can no longer show the session
    /// ([`WaitCut::Stopped`]); fired before jobs are found running, there is no wait at all.
    pub fn stopped_by(mut self, token: CancellationToken) -> JobWait {
        self.stop = token;
        self
    }
}

/// Why a wait for jobs ended with jobs still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitCut {
    /// The wait ran out (at once for a zero wait).
    RanOut,
    /// The interrupt token fired.
    Interrupted,
    /// The stop token fired during the wait.
    Stopped,
    /// The stop token had fired before jobs were found running: nothing was waited for.
    StoppedBefore,
}

/// What [`Agent::settle_jobs`] ended with.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct JobsSettled {
    /// The agent's jobs still running when the wait ended; disposing the agent kills them.
    pub outlived: Vec<JobSnapshot>,
    /// Why the wait ended before every job did; `None` when none was left to wait for.
    pub cut_short: Option<WaitCut>,
}

impl Agent {
    /// Waits until the agent is idle, every turn a job notice opened (through `directory`)
    /// has finished, and none of the agent's jobs still runs, for at most the wait of `wait`
    /// from the moment jobs are first found running. `on_waiting` hears of the jobs found
    /// running that it was not told of before, and how much of the wait is left (zero for a
    /// zero wait), unless the wait has run out. Without a jobs runtime there is nothing to
    /// wait for.
    ///
    /// The wait takes no job notice from the model: it waits for each job to settle (its
    /// notice sent and its woken turn registered), so the next round sees that turn.
    pub async fn settle_jobs(
        &self,
        directory: &AgentDirectory,
        wait: JobWait,
        mut on_waiting: impl FnMut(&[&JobSnapshot], Duration),
    ) -> JobsSettled {
        let JobWait {
            wait,
            interrupt,
            stop,
        } = wait;
        let done = |outlived: Vec<JobSnapshot>, cut_short: Option<WaitCut>| JobsSettled {
            cut_short: cut_short.filter(|_| !outlived.is_empty()),
            outlived,
        };
        let Some(jobs) = self.inner.jobs.clone() else {
            return done(Vec::new(), None);
        };
        let running = || -> Vec<JobSnapshot> {
            jobs.list(Some(self.session_id()))
                .into_iter()
                .filter(|job| !job.status.is_terminal())
                .collect()
        };
        let mut deadline = None;
        let mut announced = BTreeSet::new();
        loop {
            self.wait_idle().await;
            directory.wait_woken().await;
            let still = running();
            if still.is_empty() {
                return done(still, None);
            }
            if stop.is_cancelled() {
                return done(still, Some(WaitCut::StoppedBefore));
            }
            let first = deadline.is_none();
            let deadline =
                *deadline.get_or_insert_with(|| tokio::time::Instant::now().checked_add(wait));
            let new: Vec<&JobSnapshot> = still
                .iter()
                .filter(|job| announced.insert(job.id.to_string()))
                .collect();
            let left = match deadline {
                Some(deadline) if !first => {
                    deadline.saturating_duration_since(tokio::time::Instant::now())
                }
                _ => wait,
            };
            // A wait that has run out is told by the outcome, once.
            if !new.is_empty() && (wait.is_zero() || !left.is_zero()) {
                on_waiting(&new, left);
            }
            for job in &still {
                let settled = jobs.settled(job.id.as_str(), Some(self.session_id()));
                let ran_out = async {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                };
                let why = tokio::select! {
                    _ = settled => continue,
                    () = ran_out => WaitCut::RanOut,
                    () = interrupt.cancelled() => WaitCut::Interrupted,
                    () = stop.cancelled() => WaitCut::Stopped,
                };
                return done(running(), Some(why));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelAdapter, ModelRequest, ModelStream};
    use dsh_tools::ToolRegistry;
    use dsh_tools::jobs::{JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart, JobStatus};
    use pretty_assertions::assert_eq;
    use std::sync::{Arc, Mutex};

    /// A model that answers every request with nothing.
    struct Silent;

    impl ModelAdapter for Silent {
        fn stream(&self, _request: ModelRequest, _signal: CancellationToken) -> ModelStream {
            Box::pin(futures::stream::empty())
        }
    }

    /// An agent with its jobs runtime (and its controller) and directory, and a job of it that
    /// ends after `after`, or only when killed.
    async fn agent_with_job(
        after: Option<Duration>,
    ) -> (
        Agent,
        AgentDirectory,
        (JobRuntime, dsh_tools::Disposer),
        String,
    ) {
        let jobs = JobRuntime::new(dsh_tools::jobs::JobsConfig::default());
        let controller = jobs.attach_controller();
        let agent = Agent::builder(ToolRegistry::new(), Arc::new(Silent))
            .jobs(jobs.clone())
            .build()
            .unwrap();
        let directory = AgentDirectory::new();
        directory.insert(&agent);
        let stop = Arc::new(tokio::sync::Notify::new());
        let on_cancel = Arc::clone(&stop);
        let id = jobs
            .start(
                JobStart::new("task", "sleep on", move || {
                    Ok(JobHooks::new(move |_| on_cancel.notify_one(), async move {
                        match after {
                            Some(after) => {
                                tokio::time::sleep(after).await;
                                Ok(JobOutcome::new(JobEnd::Completed))
                            }
                            None => {
                                stop.notified().await;
                                Ok(JobOutcome::new(JobEnd::Killed))
                            }
                        }
                    }))
                })
                .owner(agent.handle()),
            )
            .unwrap();
        (agent, directory, (jobs, controller), id.to_string())
    }

    /// The outcome's jobs by id and why, and what `on_waiting` heard (ids, time left).
    async fn settle(
        agent: &Agent,
        directory: &AgentDirectory,
        wait: JobWait,
    ) -> ((Vec<String>, Option<WaitCut>), Vec<(Vec<String>, Duration)>) {
        let heard = Mutex::new(Vec::new());
        let settled = tokio::time::timeout(
            Duration::from_secs(10),
            agent.settle_jobs(directory, wait, |jobs, left| {
                let ids = jobs.iter().map(|job| job.id.to_string()).collect();
                heard.lock().unwrap().push((ids, left));
            }),
        )
        .await
        .expect("the wait for background jobs never gave up");
        let ids = settled.outlived.iter().map(|j| j.id.to_string()).collect();
        ((ids, settled.cut_short), heard.into_inner().unwrap())
    }

    #[tokio::test]
    async fn a_job_outliving_the_wait_is_named_and_left_to_dispose() {
        let (agent, directory, (jobs, _controller), id) = agent_with_job(None).await;
        let wait = Duration::from_millis(50);
        let (outcome, heard) = settle(&agent, &directory, JobWait::new(wait)).await;
        assert_eq!(outcome, (vec![id.clone()], Some(WaitCut::RanOut)));
        assert_eq!(heard, vec![(vec![id.clone()], wait)]);
        agent.dispose().await;
        let status = jobs.get(&id, Some(agent.session_id())).unwrap().status;
        assert_eq!(status, JobStatus::Killed);
    }

    #[tokio::test]
    async fn a_job_that_ends_within_the_wait_leaves_nothing() {
        let (agent, directory, _jobs, id) = agent_with_job(Some(Duration::from_millis(20))).await;
        let wait = Duration::from_secs(60);
        let (outcome, heard) = settle(&agent, &directory, JobWait::new(wait)).await;
        assert_eq!(outcome, (vec![], None));
        assert_eq!(heard, vec![(vec![id], wait)]);
        agent.dispose().await;
    }

    #[tokio::test]
    async fn the_tokens_end_the_wait_and_say_which() {
        let (agent, directory, _jobs, id) = agent_with_job(None).await;
        let fired = CancellationToken::new();
        fired.cancel();
        let forever = Duration::from_secs(3600);
        let interrupted = JobWait::new(forever).interrupted_by(fired.clone());
        let (outcome, _) = settle(&agent, &directory, interrupted).await;
        assert_eq!(outcome, (vec![id.clone()], Some(WaitCut::Interrupted)));
        let stopped = JobWait::new(forever).stopped_by(fired);
        let (outcome, heard) = settle(&agent, &directory, stopped).await;
        assert_eq!(outcome, (vec![id], Some(WaitCut::StoppedBefore)));
        assert_eq!(heard, vec![], "a stopped host is told of nothing");
        agent.dispose().await;
    }
}
