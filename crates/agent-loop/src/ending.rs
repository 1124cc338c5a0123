//! How a session ended, as its events tell ([`SessionEnding`]): what a host needs to record
//! the session's end and to judge the run.

use crate::agent::LOG_WRITE_FAILED;
use crate::event::{SessionEndReason, SessionEvent, TurnEndReason};
use dsh_tools::{ContextSource, InjectedContext};

/// What a session's events said of its end: the last turn's reason (woken turns included),
/// the last model error, and the notices no turn took. Feed it every event
/// ([`SessionEnding::observe`], from a subscriber).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionEnding {
    last_reason: Option<TurnEndReason>,
    model_error: Option<String>,
    undelivered: Vec<InjectedContext>,
}

impl SessionEnding {
    /// Takes in one event. A failed log write is not a model error: the host hears of it from
    /// [`Agent::log_error`](crate::Agent::log_error), which names the log.
    pub fn observe(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::TurnEnd { reason, .. } => self.last_reason = Some(*reason),
            SessionEvent::Error { code, .. } if code.as_deref() == Some(LOG_WRITE_FAILED) => {}
            SessionEvent::Error { message, .. } => self.model_error = Some(message.clone()),
            SessionEvent::ContextUndelivered { contexts } => {
                self.undelivered.extend(contexts.iter().cloned());
            }
            _ => {}
        }
    }

    /// How the last turn ended, if one did.
    pub fn last_reason(&self) -> Option<TurnEndReason> {
        self.last_reason
    }

    /// The last model error of any turn.
    pub fn model_error(&self) -> Option<&str> {
        self.model_error.as_deref()
    }

    /// The notices that never reached the model, in the order they were recorded.
    pub fn undelivered(&self) -> &[InjectedContext] {
        &self.undelivered
    }

    /// The `session/end` reason of a session not interrupted: failed after a model error or a
    /// last turn that ended in one, else completed.
    pub fn end_reason(&self) -> SessionEndReason {
        if self.model_error.is_some() || self.last_reason == Some(TurnEndReason::Error) {
            SessionEndReason::Failed
        } else {
            SessionEndReason::Completed
        }
    }

    /// The notices no turn took, counted by who sent them, in the order each sender first
    /// came (`2 notice(s) from the MCP server `fs` and 1 job notice(s)`); `None` when every
    /// notice reached the model.
    pub fn undelivered_summary(&self) -> Option<String> {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for kind in self.undelivered.iter().map(|c| notice_kind(&c.source)) {
            match kinds.iter_mut().find(|(seen, _)| *seen == kind) {
                Some((_, count)) => *count += 1,
                None => kinds.push((kind, 1)),
            }
        }
        let mut counted: Vec<String> = kinds
            .iter()
            .map(|(kind, count)| format!("{count} {kind}"))
            .collect();
        let last = counted.pop()?;
        Some(match counted.is_empty() {
            true => last,
            false => format!("{} and {last}", counted.join(", ")),
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn ending(events: &[SessionEvent]) -> SessionEnding {
        let mut ending = SessionEnding::default();
        for event in events {
            ending.observe(event);
        }
        ending
    }

    #[test]
    fn notices_that_never_reached_the_model_are_counted_by_sender() {
        let notice = InjectedContext::from_plugin;
        let undelivered = |contexts| SessionEvent::ContextUndelivered { contexts };
        let summary =
            |contexts: Vec<InjectedContext>| ending(&[undelivered(contexts)]).undelivered_summary();
        assert_eq!(summary(vec![]), None);
        assert_eq!(
            summary(vec![notice("bash", "background job bash-1 ended")]),
            Some(String::from("1 job notice(s)"))
        );
        assert_eq!(
            summary(vec![
                notice("mcp:fs", "The MCP server `fs` exited."),
                notice("bash", "background job bash-1 ended"),
                notice("mcp:fs", "The MCP server `fs` was restarted."),
                notice("mcp:docs", "The MCP server `docs` exited."),
            ]),
            Some(String::from(
                "2 notice(s) from the MCP server `fs`, 1 job notice(s) and 1 notice(s) from \
                 the MCP server `docs`"
            ))
        );
    }

    #[test]
    fn the_last_turn_and_any_model_error_decide_the_end() {
        let end = |reason| SessionEvent::TurnEnd { reason, steps: 1 };
        let error = |code: &str| SessionEvent::Error {
            message: format!("{code} happened"),
            code: Some(code.into()),
        };
        let seen = |events: &[SessionEvent]| {
            let ending = ending(events);
            (
                ending.last_reason(),
                ending.model_error().map(str::to_owned),
                ending.end_reason(),
            )
        };
        use SessionEndReason::{Completed, Failed};
        use TurnEndReason as T;
        for (events, expected) in [
            (vec![], (None, None, Completed)),
            (
                vec![end(T::Completed), end(T::MaxSteps)],
                (Some(T::MaxSteps), None, Completed),
            ),
            (vec![end(T::Error)], (Some(T::Error), None, Failed)),
            (
                vec![error("MODEL_ERROR"), end(T::Error), end(T::Completed)],
                (
                    Some(T::Completed),
                    Some("MODEL_ERROR happened".into()),
                    Failed,
                ),
            ),
            (
                vec![error(LOG_WRITE_FAILED), end(T::Completed)],
                (Some(T::Completed), None, Completed),
            ),
        ] {
            assert_eq!(seen(&events), expected, "{events:?}");
        }
    }
}
