//! Human-readable output: session events and cards as terminal text.
//!
//! Everything shown comes from the model or from tools, so every piece of event text goes
//! through [`escape_controls`] (the cards' own renderers already do): no escape sequence,
//! other control character or bidi override from a tool's output or arguments reaches the
//! terminal. Colour follows the conventions `anstream` implements (`NO_COLOR`, `CLICOLOR=0`,
//! `CLICOLOR_FORCE`, no colour when stdout is not a terminal), and `anstyle` spells the styles.

use agent_loop::{CallCards, SessionEvent};
use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Effects};
use dsh_tools::{ContextSource, ToolCallView, ToolResultView};
use presenters::escape_controls;

/// Whether to colour output.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    color: bool,
}

impl Style {
    /// Colour when stdout takes it, by the environment's conventions.
    pub(crate) fn detect() -> Style {
        Style {
            color: AutoStream::choice(&std::io::stdout()) != ColorChoice::Never,
        }
    }

    fn paint(self, style: anstyle::Style, text: &str) -> String {
        if self.color {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }

    fn bold(self, text: &str) -> String {
        self.paint(anstyle::Style::new().effects(Effects::BOLD), text)
    }

    /// `text` in bold, for labels the CLI writes itself.
    pub(crate) fn bold_text(self, text: &str) -> String {
        self.bold(text)
    }

    fn dim(self, text: &str) -> String {
        self.paint(anstyle::Style::new().effects(Effects::DIMMED), text)
    }

    fn red(self, text: &str) -> String {
        self.paint(AnsiColor::Red.on_default(), text)
    }

    fn green(self, text: &str) -> String {
        self.paint(AnsiColor::Green.on_default(), text)
    }

    fn yellow(self, text: &str) -> String {
        self.paint(AnsiColor::Yellow.on_default(), text)
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
            ..
        } => style.dim(&escape_controls(&format!(
            "session {session_id} in {cwd}; tools: {}",
            tools.join(", ")
        ))),
        SessionEvent::UserMessage { content } => {
            format!("{} {}", style.bold("you ›"), escape_controls(content))
        }
        SessionEvent::AssistantMessage {
            text, reasoning, ..
        } => {
            let mut lines = Vec::new();
            if let Some(reasoning) = reasoning {
                lines.push(style.dim(&escape_controls(&format!("(thinking: {reasoning})"))));
            }
            if !text.is_empty() {
                lines.push(format!(
                    "{} {}",
                    style.bold("agent ›"),
                    escape_controls(text)
                ));
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
            let text = indent(&result_text(card)?);
            if *is_error { style.red(&text) } else { text }
        }
        SessionEvent::ContextInject { source, content } => {
            let from = match source {
                ContextSource::Plugin { plugin } => plugin.clone(),
                _ => String::from("host"),
            };
            style.yellow(&escape_controls(&format!(
                "• notice from {from}: {content}"
            )))
        }
        SessionEvent::JobEnd {
            job_id,
            status,
            detail,
        } => style.dim(&escape_controls(&format!(
            "• job {job_id} ended: {status}{}",
            detail
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ))),
        SessionEvent::TurnEnd { reason, steps } => {
            let line = format!("— turn ended: {} after {steps} step(s)", reason.as_str());
            match reason {
                agent_loop::TurnEndReason::Completed | agent_loop::TurnEndReason::Concluded => {
                    style.green(&line)
                }
                _ => style.red(&line),
            }
        }
        SessionEvent::Error { message, .. } => {
            style.red(&escape_controls(&format!("error: {message}")))
        }
        _ => return None,
    })
}

/// The label of streamed reasoning in a chat.
pub(crate) fn thinking_label(style: Style) -> String {
    style.dim("(thinking)")
}

/// The label of streamed text in a chat.
pub(crate) fn agent_label(style: Style) -> String {
    style.bold("agent ›")
}

/// The cards of one call, for `replay --cards`.
pub(crate) fn cards(cards: &CallCards, style: Style) -> String {
    let mut out = style.bold(&format!("▶ {}", presenters::render_call_text(&cards.call)));
    if let Some(result) = result_text(cards) {
        out.push('\n');
        out.push_str(&indent(&result));
    }
    out
}

/// A call's result card as text, under its call card: a command's console block leaves out
/// the `$ command` line the call card has just shown (unless the result retitled it), and an
/// empty block (a silent command that exited 0) is no line at all.
fn result_text(cards: &CallCards) -> Option<String> {
    let result = cards.result.as_ref()?;
    if let (ToolCallView::Terminal(call), ToolResultView::Terminal(done)) = (&cards.call, result)
        && done.title.as_ref().is_none_or(|title| *title == call.title)
    {
        let mut block = done.clone();
        block.title = None;
        let text = presenters::text::console_block(&block);
        return (!text.is_empty()).then_some(text);
    }
    Some(presenters::render_result_text(result))
}
