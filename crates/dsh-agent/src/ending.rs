//! How a session ends: the exit status its turns decide, and the background jobs still running
//! (named, waited for up to `--wait-jobs`, then stopped).

use crate::{Failure, output};
use agent_loop::{Agent, AgentDirectory, JobWait, SessionEnding, TurnEndReason, WaitCut};
use dsh_tools::jobs::JobSnapshot;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The exit verdict of a single run. A model error in any turn fails the run (a script that
/// ran out must not look like a success), and so does a notice that never reached the model;
/// otherwise the last turn decides. `first` stands in when no `turn/end` was seen.
pub(crate) fn verdict(ending: &SessionEnding, first: TurnEndReason) -> Result<(), Failure> {
    if let Some(message) = ending.model_error() {
        return Err(Failure::new(1, message));
    }
    if let Some(what) = ending.undelivered_summary() {
        return Err(Failure::new(
            1,
            format!("{what} never reached the model (the wake-up limit was spent)"),
        ));
    }
    match ending.last_reason().unwrap_or(first) {
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

/// Waits for the agent's background jobs ([`Agent::settle_jobs`]) for at most `wait` from
/// the moment the session is first found with jobs running, and says so on stderr at once
/// (which jobs, how long, how to stop them). Ctrl-C (caught from then on, before the line
/// offers it) and `stop` end the wait. Returns the jobs still running, named on stderr; the
/// caller stops them (disposing the agent kills them). `wait` zero stops them at once.
pub(crate) async fn settle_background(
    agent: &Agent,
    directory: &AgentDirectory,
    wait: Duration,
    stop: CancellationToken,
) -> Vec<JobSnapshot> {
    let interrupt = CancellationToken::new();
    let mut catching = None;
    let waiting = JobWait::new(wait)
        .interrupted_by(interrupt.clone())
        .stopped_by(stop);
    let settled = agent
        .settle_jobs(directory, waiting, |jobs, left| {
            if catching.is_none() && !wait.is_zero() {
                catching = catch_interrupt(&interrupt);
            }
            output::say(&announcement(jobs, left));
        })
        .await;
    if let Some(task) = catching {
        task.abort();
    }
    let why = match settled.cut_short {
        Some(WaitCut::RanOut) => "the wait ran out",
        Some(WaitCut::Interrupted) => "interrupted",
        Some(WaitCut::Stopped) => "stdout is closed",
        _ => "",
    };
    // With `--wait-jobs 0` the announcement already said they are being stopped.
    if !why.is_empty() && !wait.is_zero() {
        output::say(&outlived(&settled.outlived.iter().collect::<Vec<_>>(), why));
    }
    settled.outlived
}

/// Cancels `interrupt` at the next SIGINT.
fn catch_interrupt(interrupt: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut signal = signal(SignalKind::interrupt()).ok()?;
    let fire = interrupt.clone();
    Some(tokio::spawn(async move {
        if signal.recv().await.is_some() {
            fire.cancel();
        }
    }))
}

/// The line said at once when the session is found with jobs running: while they run the
/// session goes on (their notices may open turns), so it only says what is waited for, how
/// long, and how to stop it. With `--wait-jobs 0` the session has ended: see [`outlived`].
pub(crate) fn announcement(jobs: &[&JobSnapshot], left: Duration) -> String {
    if left.is_zero() {
        return outlived(jobs, "--wait-jobs 0");
    }
    // Whole milliseconds, in the syntax `--wait-jobs` takes.
    let left = Duration::new(left.as_secs(), left.subsec_millis() * 1_000_000);
    format!(
        "dsh-agent: waiting for {}: {} (up to {}; Ctrl-C stops {} now; --wait-jobs sets the wait)",
        count(jobs.len()),
        listed(jobs),
        humantime::format_duration(left),
        them(jobs.len()),
    )
}

/// The line said when the session has really ended with `jobs` still running, and why they
/// are stopped.
fn outlived(jobs: &[&JobSnapshot], why: &str) -> String {
    format!(
        "dsh-agent: {} still running after the session: {}; stopping {} now ({why})",
        count(jobs.len()),
        listed(jobs),
        them(jobs.len()),
    )
}

/// Each job's id and what it runs.
fn listed(jobs: &[&JobSnapshot]) -> String {
    jobs.iter()
        .map(|job| format!("{} ({})", job.id, presenters::escape_controls(&job.label)))
        .collect::<Vec<_>>()
        .join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;
    use agent_loop::SessionEvent;

    #[test]
    fn a_model_error_fails_the_run_else_the_last_turn_decides() {
        let end = |reason| SessionEvent::TurnEnd { reason, steps: 1 };
        let verdict = |events: &[SessionEvent]| {
            let mut ending = SessionEnding::default();
            events.iter().for_each(|event| ending.observe(event));
            verdict(&ending, TurnEndReason::Completed).map_err(|f| (f.status, f.message))
        };
        let error = SessionEvent::Error {
            message: "script exhausted at request 3".into(),
            code: Some("MODEL_ERROR".into()),
        };
        for (events, expected) in [
            (vec![], Ok(())),
            (
                vec![end(TurnEndReason::Completed), end(TurnEndReason::MaxSteps)],
                Err((3, String::from("the turn stopped at the step limit"))),
            ),
            (
                vec![end(TurnEndReason::Concluded), end(TurnEndReason::Cancelled)],
                Err((130, String::from("the turn was cancelled"))),
            ),
            (
                vec![error, end(TurnEndReason::Completed)],
                Err((1, String::from("script exhausted at request 3"))),
            ),
        ] {
            assert_eq!(verdict(&events), expected, "{events:?}");
        }
    }
}
