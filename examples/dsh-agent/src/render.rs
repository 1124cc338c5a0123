//! Human-readable output: session events and cards as terminal text, coloured only on a
//! terminal without `NO_COLOR`.

use agent_loop::{CallCards, SessionEvent};
use dsh_tools::ContextSource;
use std::io::IsTerminal;

/// Whether to colour output.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    color: bool,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    pub(crate) fn detect() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: std::io::stdout().is_terminal() && !no_color,
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One event as terminal text (`None` for events a reader does not need to see).
pub(crate) fn event(event: &SessionEvent, cards: &[CallCards], style: Style) -> Option<String> {
    Some(match event {
        SessionEvent::SessionStart {
            session_id,
            cwd,
            tools,
        } => style.dim(&format!(
            "session {session_id} in {cwd}; tools: {}",
            tools.join(", ")
        )),
        SessionEvent::UserMessage { content } => format!("{} {content}", style.bold("you ›")),
        SessionEvent::AssistantMessage {
            text, reasoning, ..
        } => {
            let mut lines = Vec::new();
            if let Some(reasoning) = reasoning {
                lines.push(style.dim(&format!("(thinking: {reasoning})")));
            }
            if !text.is_empty() {
                lines.push(format!("{} {text}", style.bold("agent ›")));
            }
            if lines.is_empty() {
                return None;
            }
            lines.join("\n")
        }
        SessionEvent::ToolCall { call_id, .. } => {
            let card = cards.iter().rev().find(|c| &c.call_id == call_id)?;
            style.bold(&format!("▶ {}", presenters::render_call_text(&card.call)))
        }
        SessionEvent::ToolResult {
            call_id, is_error, ..
        } => {
            let card = cards.iter().rev().find(|c| &c.call_id == call_id)?;
            let text = indent(&presenters::render_result_text(card.result.as_ref()?));
            if *is_error { style.red(&text) } else { text }
        }
        SessionEvent::ContextInject { source, content } => {
            let from = match source {
                ContextSource::Plugin { plugin } => plugin.clone(),
                _ => String::from("host"),
            };
            style.yellow(&format!("• notice from {from}: {content}"))
        }
        SessionEvent::JobEnd {
            job_id,
            status,
            detail,
        } => style.dim(&format!(
            "• job {job_id} ended: {status}{}",
            detail
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )),
        SessionEvent::TurnEnd { reason, steps } => {
            let line = format!("— turn ended: {} after {steps} step(s)", reason.as_str());
            match reason {
                agent_loop::TurnEndReason::Completed | agent_loop::TurnEndReason::Concluded => {
                    style.green(&line)
                }
                _ => style.red(&line),
            }
        }
        SessionEvent::Error { message, .. } => style.red(&format!("error: {message}")),
        _ => return None,
    })
}

/// The cards of one call, for `replay`.
pub(crate) fn cards(cards: &CallCards, style: Style) -> String {
    let mut out = style.bold(&format!("▶ {}", presenters::render_call_text(&cards.call)));
    if let Some(result) = &cards.result {
        out.push('\n');
        out.push_str(&indent(&presenters::render_result_text(result)));
    }
    out
}
