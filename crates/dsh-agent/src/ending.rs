//! How a session ends: the exit status its turns decide, and the background jobs still running
//! (named, waited for up to `--wait-jobs`, then stopped).

use crate::{Failure, output};
use agent_loop::{Agent, AgentDirectory, LOG_WRITE_FAILED, SessionEvent, TurnEndReason};
use dsh_tools::ContextSource;
use dsh_tools::jobs::{JobRuntime, JobSnapshot};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How the session ended, as its events tell: the last turn's reason (woken turns included),
/// the last model error and the notices no turn took.
#[derive(Debug, Default)]
pub(crate) struct SessionEnding {
    pub(crate) last_reason: Option<TurnEndReason>,
    pub(crate) model_error: Option<String>,
    pub(crate) undelivered: Vec<String>,
    /// What each notice of `undelivered` is, by its source: `job notice(s)`, `notice(s) from
    /// the MCP server `fs``.
    undelivered_kinds: Vec<String>,
}

impl SessionEnding {
    pub(crate) fn observe(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::TurnEnd { reason, .. } => self.last_reason = Some(*reason),
            // A log failure is reported from `Agent::log_error`, naming the log.
            SessionEvent::Error { code, .. } if code.as_deref() == Some(LOG_WRITE_FAILED) => {}
            SessionEvent::Error { message, .. } => self.model_error = Some(message.clone()),
            SessionEvent::ContextUndelivered { contexts } => {
                self.undelivered
                    .extend(contexts.iter().map(|c| c.content.clone()));
                self.undelivered_kinds
                    .extend(contexts.iter().map(|c| notice_kind(&c.source)));
            }
            _ => {}
        }
    }

    /// The exit verdict. A model error in any turn fails the run (a script that ran out must
    /// not look like a success), and so does a notice that never reached the model; otherwise
    /// the last turn decides. `first` stands in when no `turn/end` was seen.
    pub(crate) fn verdict(self, first: TurnEndReason) -> Result<(), Failure> {
        if let Some(message) = self.model_error {
            return Err(Failure::new(1, message));
        }
        if !self.undelivered.is_empty() {
            // Counted by kind, in the order each kind first came.
            let mut kinds: Vec<(&str, usize)> = Vec::new();
            for kind in &self.undelivered_kinds {
                match kinds.iter_mut().find(|(seen, _)| seen == kind) {
                    Some((_, count)) => *count += 1,
                    None => kinds.push((kind, 1)),
                }
            }
            let mut counted: Vec<String> = kinds
                .iter()
                .map(|(kind, count)| format!("{count} {kind}"))
                .collect();
            let last = counted.pop().unwrap_or_default();
            let what = match counted.is_empty() {
                true => last,
                false => format!("{} and {last}", counted.join(", ")),
            };
            return Err(Failure::new(
                1,
                format!("{what} never reached the model (the wake-up limit was spent)"),
            ));
        }
        match self.last_reason.unwrap_or(first) {
            TurnEndReason::Completed | TurnEndReason::Concluded => Ok(()),
            TurnEndReason::MaxSteps => Err(Failure::new(3, "the turn stopped at the step limit")),
            TurnEndReason::Cancelled => Err(Failure::new(130, "the turn was cancelled")),
            TurnEndReason::Error => Err(Failure::new(1, "the model failed")),
            other => Err(Failure::new(
                1,
                format!("the turn ended: {}", other.as_str()),
            )),
        }
    }
}

/// What a notice is, by who sent it: an MCP server's plugin is `mcp:<server>`, a job's is
/// its kind.
fn notice_kind(source: &ContextSource) -> String {
    match source {
        ContextSource::Plugin { plugin } => match plugin.strip_prefix("mcp:") {
            Some(server) => format!("notice(s) from the MCP server `{server}`"),
            None => String::from("job notice(s)"),
        },
        _ => String::from("notice(s) from the host"),
    }
}

/// Waits until the agent is idle, every turn a job notice opened has finished, and none of the
/// agent's jobs still runs, for at most `wait` from the moment the session is first found with
/// jobs running, and says so on stderr at once (which jobs, how long, how to stop them).
/// Returns the jobs still running when the wait ran out, Ctrl-C was pressed or `stop` fired;
/// the caller stops them (disposing the agent kills them). `wait` zero stops them at once.
pub(crate) async fn settle_background(
    agent: &Agent,
    directory: &AgentDirectory,
    jobs: &JobRuntime,
    wait: Duration,
    stop: CancellationToken,
) -> Vec<JobSnapshot> {
    let running = || -> Vec<JobSnapshot> {
        jobs.list(Some(agent.session_id()))
            .into_iter()
            .filter(|job| !job.status.is_terminal())
            .collect()
    };
    let mut deadline = None;
    let mut announced = std::collections::BTreeSet::new();
    // Registered before the announcement that offers Ctrl-C, so the offer holds from the start.
    let mut interrupt = None;
    loop {
        agent.wait_idle().await;
        directory.wait_woken().await;
        let still = running();
        if still.is_empty() {
            return still;
        }
        if stop.is_cancelled() {
            return still;
        }
        let first = deadline.is_none();
        // A wait too long for the clock to count (`--wait-jobs 500000000000y`) has no end.
        let deadline =
            *deadline.get_or_insert_with(|| tokio::time::Instant::now().checked_add(wait));
        if interrupt.is_none() && !wait.is_zero() {
            interrupt =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        }
        let new: Vec<&JobSnapshot> = still
            .iter()
            .filter(|job| announced.insert(job.id.to_string()))
            .collect();
        if !new.is_empty() {
            let left = match deadline {
                Some(deadline) if !first => {
                    deadline.saturating_duration_since(tokio::time::Instant::now())
                }
                _ => wait,
            };
            output::say(&announcement(&new, left, wait));
        }
        for job in &still {
            // `settled`, not `wait`: the host waiting must not take the notice from the model.
            // It returns once the notice went out and its wake-up, if any, was registered with
            // the directory, so the next `wait_woken` sees that turn.
            let settled = jobs.settled(job.id.as_str(), Some(agent.session_id()));
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            let ran_out = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            let why = tokio::select! {
                _ = settled => continue,
                () = ran_out => "the wait ran out",
                _ = interrupted => "interrupted",
                () = stop.cancelled() => "stdout is closed",
            };
            let left = running();
            // With `--wait-jobs 0` the announcement already said they are being stopped.
            if !left.is_empty() && !wait.is_zero() {
                output::say(&format!(
                    "dsh-agent: stopping {} ({why}): {}",
                    count(left.len()),
                    job_ids(&left.iter().collect::<Vec<_>>()),
                ));
            }
            return left;
        }
    }
}

/// The line that says, as soon as the session has ended, which jobs still run, how long the
/// program waits for them and how to stop them.
pub(crate) fn announcement(jobs: &[&JobSnapshot], left: Duration, wait: Duration) -> String {
    let listed = jobs
        .iter()
        .map(|job| format!("{} ({})", job.id, presenters::escape_controls(&job.label)))
        .collect::<Vec<_>>()
        .join(", ");
    let still = format!(
        "dsh-agent: {} still running after the session: {listed}",
        count(jobs.len())
    );
    if left.is_zero() {
        let why = if wait.is_zero() {
            "--wait-jobs 0"
        } else {
            "the wait ran out"
        };
        return format!("{still}; stopping {} now ({why})", them(jobs.len()));
    }
    // Whole milliseconds, in the syntax `--wait-jobs` takes.
    let left = Duration::new(left.as_secs(), left.subsec_millis() * 1_000_000);
    format!(
        "{still}; waiting up to {} for {} (Ctrl-C stops {} now; --wait-jobs sets the wait)",
        humantime::format_duration(left),
        them(jobs.len()),
        them(jobs.len()),
    )
}

pub(crate) fn count(n: usize) -> String {
    match n {
        1 => String::from("1 background job"),
        n => format!("{n} background jobs"),
    }
}

pub(crate) fn them(n: usize) -> &'static str {
    if n == 1 { "it" } else { "them" }
}

pub(crate) fn job_ids(jobs: &[&JobSnapshot]) -> String {
    jobs.iter()
        .map(|job| job.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::registry;
    use dsh_tools::InjectedContext;
    use dsh_tools::jobs::{JobEnd, JobHooks, JobOutcome, JobStart, JobStatus};
    use mock_adapter::MockAdapter;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_job_outliving_the_wait_is_named_and_stopped() {
        let (registry, jobs) = registry(true);
        let _controller = jobs.attach_controller();
        let agent = Agent::builder(
            registry,
            Arc::new(MockAdapter::new(Vec::<mock_adapter::Step>::new())),
        )
        .jobs(jobs.clone())
        .build()
        .unwrap();
        let directory = AgentDirectory::new();
        directory.insert(&agent);
        let stop = Arc::new(tokio::sync::Notify::new());
        let on_cancel = Arc::clone(&stop);
        let id = jobs
            .start(
                JobStart::new("task", "never ends", move || {
                    Ok(JobHooks::new(move |_| on_cancel.notify_one(), async move {
                        stop.notified().await;
                        Ok(JobOutcome::new(JobEnd::Killed))
                    }))
                })
                .owner(agent.handle()),
            )
            .unwrap();
        let outlived = tokio::time::timeout(
            Duration::from_secs(10),
            settle_background(
                &agent,
                &directory,
                &jobs,
                Duration::from_millis(50),
                CancellationToken::new(),
            ),
        )
        .await
        .expect("the wait for background jobs never gave up");
        let ids: Vec<String> = outlived.iter().map(|job| job.id.to_string()).collect();
        assert_eq!(ids, vec![id.to_string()]);
        agent.dispose().await;
        assert_eq!(
            jobs.get(id.as_str(), Some(agent.session_id()))
                .unwrap()
                .status,
            JobStatus::Killed
        );
    }

    #[test]
    fn notices_that_never_reached_the_model_are_named_for_what_they_are() {
        let mut ending = SessionEnding::default();
        ending.observe(&SessionEvent::ContextUndelivered {
            contexts: vec![
                InjectedContext::from_plugin("mcp:fs", "The MCP server `fs` exited."),
                InjectedContext::from_plugin("bash", "background job bash-1 ended"),
                InjectedContext::from_plugin("mcp:fs", "The MCP server `fs` was restarted."),
                InjectedContext::from_plugin("mcp:docs", "The MCP server `docs` exited."),
            ],
        });
        let failure = ending.verdict(TurnEndReason::Completed).unwrap_err();
        assert_eq!(
            (failure.status, failure.message),
            (
                1,
                String::from(
                    "2 notice(s) from the MCP server `fs`, 1 job notice(s) and 1 notice(s) from \
                     the MCP server `docs` never reached the model (the wake-up limit was spent)"
                )
            )
        );
    }

    #[test]
    fn the_last_turn_decides_unless_a_model_error_came_first() {
        let end = |reason| SessionEvent::TurnEnd { reason, steps: 1 };
        let verdict = |events: &[SessionEvent]| {
            let mut ending = SessionEnding::default();
            for event in events {
                ending.observe(event);
            }
            ending
                .verdict(TurnEndReason::Completed)
                .map_err(|f| (f.status, f.message))
        };
        let error = SessionEvent::Error {
            message: "script exhausted at request 3".into(),
            code: Some("MODEL_ERROR".into()),
        };
        for (events, expected) in [
            (vec![], Ok(())),
            (vec![end(TurnEndReason::Completed)], Ok(())),
            (
                vec![end(TurnEndReason::Completed), end(TurnEndReason::MaxSteps)],
                Err((3, String::from("the turn stopped at the step limit"))),
            ),
            (
                vec![end(TurnEndReason::Cancelled), end(TurnEndReason::Concluded)],
                Ok(()),
            ),
            (
                vec![
                    error.clone(),
                    end(TurnEndReason::Error),
                    end(TurnEndReason::Completed),
                ],
                Err((1, String::from("script exhausted at request 3"))),
            ),
        ] {
            assert_eq!(verdict(&events), expected, "{events:?}");
        }
    }
}
