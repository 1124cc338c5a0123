//! `replay`: a session log shown again as `run` showed it, event by event through the same
//! renderer; with `--cards` only its cards, and with `--json` its cards as JSON lines.

use crate::render::Style;
use crate::tools::registry;
use crate::{Failure, output, render};
use agent_loop::{CardTracker, LogEntry, SessionEvent, SessionLog};
use anyhow::Context;
use dsh_tools::ToolRegistry;

/// What `replay` shows of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Every event `run` shows, as it showed it.
    Events,
    /// The cards, each call with its result, under a heading per session.
    Cards,
    /// The cards as JSON, one per line.
    Json,
}

impl Shown {
    pub(crate) fn of(cards: bool, json: bool) -> Shown {
        match (cards, json) {
            (_, true) => Shown::Json,
            (true, false) => Shown::Cards,
            (false, false) => Shown::Events,
        }
    }
}

pub(crate) fn replay(path: &str, shown: Shown) -> Result<(), Failure> {
    let unreadable =
        |e: &dyn std::fmt::Display| Failure::new(2, format!("cannot read the log {path}: {e}"));
    let lines = SessionLog::lines(path).map_err(|e| unreadable(&e))?;
    let (registry, _) = registry(true);
    let style = Style::detect();
    // One session at a time, read a line at a time: memory holds one line and the cards of
    // the current session, whatever the size of the log. A `session/start` after other events
    // begins a new session (logs appended to), with a tracker of its own.
    let mut session: Option<ReplaySession> = None;
    let mut events = 0usize;
    let mut skipped = Vec::new();
    for entry in lines {
        let record = match entry.map_err(|e| unreadable(&e))? {
            LogEntry::Event(record) => record,
            LogEntry::Repaired(record, repaired) => {
                output::say(&format!(
                    "dsh-agent: line {} of {path}: kept without {} (not understood: {})",
                    repaired.line,
                    repaired.pointer,
                    presenters::escape_controls(&repaired.text)
                ));
                record
            }
            LogEntry::Skipped(line) => {
                skipped.push(line.line.to_string());
                continue;
            }
            _ => continue,
        };
        events += 1;
        if let SessionEvent::SessionStart { session_id, .. } = &record.event {
            if let Some(done) = session.take() {
                done.print(shown, style)?;
            }
            session = Some(ReplaySession::new(&registry, Some(session_id.clone())));
        }
        let current = session.get_or_insert_with(|| ReplaySession::new(&registry, None));
        current.tracker.observe(&record.event);
        if shown == Shown::Events
            && let Some(text) = render::event(&record.event, current.tracker.cards(), style)
        {
            output::line(&text)?;
        }
    }
    if let Some(done) = session {
        done.print(shown, style)?;
    }
    if !skipped.is_empty() {
        output::say(&format!(
            "dsh-agent: skipped {} malformed line(s) of {path}: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    if events == 0 {
        return Err(Failure::new(1, format!("{path} holds no session event")));
    }
    Ok(())
}

/// One session of a replayed log and its cards so far.
pub(crate) struct ReplaySession {
    id: Option<String>,
    tracker: CardTracker,
}

impl ReplaySession {
    fn new(registry: &ToolRegistry, id: Option<String>) -> ReplaySession {
        ReplaySession {
            id,
            tracker: CardTracker::new(registry.clone(), None),
        }
    }

    /// Prints the session's cards: a heading and the cards, or in JSON one card per line,
    /// each naming its session (`sessionId`). Its events were printed as they came.
    fn print(self, shown: Shown, style: Style) -> Result<(), Failure> {
        let json = match shown {
            Shown::Events => return Ok(()),
            Shown::Cards => false,
            Shown::Json => true,
        };
        if !json {
            let name = self.id.as_deref().unwrap_or("(no session/start)");
            output::line(&format!("session {}", presenters::escape_controls(name)))?;
        }
        for card in self.tracker.into_cards() {
            if json {
                let mut value = serde_json::to_value(&card).context("serialising a card")?;
                if let (Some(id), Some(object)) = (&self.id, value.as_object_mut()) {
                    object.insert(String::from("sessionId"), id.clone().into());
                }
                output::line(&value.to_string())?;
            } else {
                output::line(&render::cards(&card, style))?;
            }
        }
        Ok(())
    }
}
