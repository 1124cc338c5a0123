//! Completion notices: reporting a settled job to its owner at most once, waking an idle
//! agent, and the notice's text.

use super::state::{Inner, lock};
use super::types::{JobId, JobSnapshot, NoticeDelivery};
use crate::agent::{AgentRef, InjectedContext};
use crate::definition::contain;
use crate::text::head_bytes;

impl Inner {
    /// Delivers the completion notice unless the end was already reported. Claiming the
    /// `reported` flag under the lock makes delivery at most once per job.
    pub(super) fn report(&self, id: &JobId, owner: &AgentRef) {
        let snapshot = {
            let mut state = lock(&self.state);
            let Some(record) = state.record_mut(id.as_str()) else {
                return;
            };
            if record.snapshot.reported {
                return;
            }
            record.mark_reported();
            record.snapshot.clone()
        };
        let notice =
            InjectedContext::from_plugin(snapshot.kind.clone(), completion_notice(&snapshot));
        if let Err(gone) = owner.inject(notice) {
            tracing::debug!(job = %id, "completion notice dropped: {gone}");
            return;
        }
        if let NoticeDelivery::Wakeup {
            max_consecutive_wakes,
        } = self.config.delivery
        {
            self.wake(owner, max_consecutive_wakes);
        }
    }

    /// Asks the host to open a turn on `owner`, within its budget of consecutive wakes.
    pub(super) fn wake(&self, owner: &AgentRef, budget: u32) {
        let Some(opener) = lock(&self.opener).clone() else {
            return;
        };
        let session = owner.session_id();
        {
            // The wake is spent before the opener runs, so two notices cannot both take the
            // last one, and the opener runs without the lock (it may call back into the
            // runtime).
            let mut wakes = lock(&self.wakes);
            let spent = wakes.entry(session.to_owned()).or_insert(0);
            if *spent >= budget {
                return;
            }
            *spent += 1;
        }
        let opened =
            contain("the turn opener", || opener.open_turn(owner)).unwrap_or_else(|message| {
                tracing::warn!("{message}");
                false
            });
        if !opened {
            // No turn was opened: give the wake back. (If user input reset the budget in the
            // meantime there is nothing to give back; at worst a concurrent wake goes
            // uncounted, which only makes the budget one more generous.)
            if let Some(spent) = lock(&self.wakes).get_mut(session) {
                *spent = spent.saturating_sub(1);
            }
        }
    }
}

/// The completion notice: `background job bash-1 (bash: npm test) finished [status:
/// completed, exit code: 1]. Read its output with job_output.`, bounded by the job's
/// `output_limit_bytes` (the label goes first, then the text is cut on a character boundary).
pub fn completion_notice(snapshot: &JobSnapshot) -> String {
    let full = format!(
        "background job {} ({}: {}) finished {}. Read its output with job_output.",
        snapshot.id,
        snapshot.kind,
        snapshot.label,
        snapshot.status_line()
    );
    let Some(limit) = snapshot.output_limit_bytes else {
        return full;
    };
    if full.len() <= limit {
        return full;
    }
    let short = format!(
        "background job {} finished {}. Read its output with job_output.",
        snapshot.id,
        snapshot.status_line()
    );
    if short.len() <= limit {
        return short;
    }
    head_bytes(&short, limit).to_owned()
}
