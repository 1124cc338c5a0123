//! `--ask`: every `bash` call, and every call another policy asks about (an MCP tool marked
//! destructive, a request to leave the sandbox), waits for the person at the terminal, who
//! allows it once, allows that tool for the rest of the session, or denies it. A denial is a
//! result the model reads. Without a terminal to ask (stdin or stderr is not one) every call is
//! denied, saying why.
//!
//! The flow (the session's grants, escalations asked every time, one question at a time) is
//! `dsh_tools::approval`'s, shared with `dsh-agent acp`; this module is the terminal's side:
//! the question, and one key read without Enter ([`key`]).

mod key;

use dsh_tools::ToolRegistry;
use dsh_tools::approval::{Answer, ApprovalFlow, AskPerson, Question};
use futures::future::BoxFuture;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What the model reads when no terminal can answer.
pub(crate) const NO_TERMINAL: &str =
    "--ask needs a terminal to ask on (stdin and stderr), and there is none; the call was denied";

/// What the model reads when the person denies a call.
const DENIED: &str = "the user denied it";

/// Asks on the terminal.
struct TerminalAsker {
    /// Whether the prompt shows the call's card: not when the session's cards already go to
    /// the same terminal, which has just shown it.
    show_card: bool,
}

/// Reads an answer: `y`/`yes` once, `a`/`always` for the session; anything else denies.
fn answer(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Once,
        "a" | "always" => Answer::ForSession,
        _ => Answer::Deny {
            reason: DENIED.to_owned(),
        },
    }
}

/// The question put on the terminal after `card`: about a call of `tool`, or, for a request to
/// leave the sandbox, the request itself (asked every time, so no answer for the session).
/// Both quote the model (a tool name, a command, a justification), so both are escaped. It
/// names the keys, each answered without Enter on a terminal.
fn question(card: &str, tool: &str, escalation: Option<&str>) -> String {
    match escalation {
        Some(reason) => format!(
            "{card}{}\nallow it? press [y] once, [n] deny: ",
            presenters::escape_controls(reason)
        ),
        None => format!(
            "{card}allow this {} call? press [y] once, [a] for this session, [n] deny: ",
            presenters::escape_controls(tool)
        ),
    }
}

impl AskPerson for TerminalAsker {
    fn ask(&self, asked: Question) -> BoxFuture<'static, Answer> {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Box::pin(std::future::ready(Answer::Deny {
                reason: NO_TERMINAL.to_owned(),
            }));
        }
        let card = match &asked.card {
            Some(view) if self.show_card => {
                format!("▶ {}\n", presenters::render_call_text(view))
            }
            _ => String::new(),
        };
        let prompt = question(&card, &asked.tool, asked.escalation.as_deref());
        Box::pin(async move {
            // Set when the question is withdrawn: the reader then stops waiting for a key and
            // gives the terminal its mode back.
            let withdrawn = Arc::new(AtomicBool::new(false));
            let _stop = key::StopOnDrop(Arc::clone(&withdrawn));
            let read = tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(prompt.as_bytes());
                let _ = stderr.flush();
                drop(stderr);
                key::read_answer(&withdrawn)
            });
            match read.await {
                Ok(Ok(key::Typed::Text(text))) => answer(&text),
                // Ctrl-C also went out as SIGINT, which cancels the turn or ends `chat`.
                Ok(Ok(key::Typed::Withdrawn | key::Typed::Interrupt)) => Answer::Withdrawn,
                _ => Answer::Deny {
                    reason: String::from("the terminal could not be read"),
                },
            }
        })
    }
}

/// Makes every `bash` call of `registry` ask the terminal first (a call other listeners deny
/// stays denied). `cards_on_terminal`: the session's cards are printed to the terminal, so
/// the prompt need not repeat the call's card.
pub(crate) fn install(registry: &ToolRegistry, cards_on_terminal: bool) -> anyhow::Result<()> {
    ApprovalFlow::new(TerminalAsker {
        show_card: !cards_on_terminal,
    })
    .ask_before("bash", "bash runs commands on this machine")
    .one_question_at_a_time()
    .install(registry)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_leniently_and_anything_unclear_denies() {
        let deny = || Answer::Deny {
            reason: DENIED.to_owned(),
        };
        for (line, expected) in [
            ("y\n", Answer::Once),
            (" YES ", Answer::Once),
            ("a\n", Answer::ForSession),
            ("always", Answer::ForSession),
            ("n\n", deny()),
            ("", deny()),
            ("sure", deny()),
        ] {
            assert_eq!(answer(line), expected, "{line:?}");
        }
    }

    /// A registry kept alive by its own approver keeps its tools too: the shell executor, and
    /// with it the sandbox's temporary directory, which then outlives the run.
    #[test]
    fn the_approver_does_not_keep_its_registry_alive() {
        let registry = ToolRegistry::new();
        let weak = registry.downgrade();
        install(&registry, false).unwrap();
        drop(registry);
        assert!(weak.upgrade().is_none());
    }

    /// The request to leave the sandbox quotes the model's command and justification: a
    /// control sequence in them must not redraw the question the person answers.
    #[test]
    fn questions_name_their_keys_and_show_what_the_model_wrote_escaped() {
        assert_eq!(
            question("", "ev\u{1b}]0;t\u{7}il", None),
            r"allow this ev\x1b]0;t\x07il call? press [y] once, [a] for this session, [n] deny: "
        );
        let reason = format!(
            "{}run `curl x.example` outside the sandbox (workspace-write); justification: \
             tests\r\u{1b}[2Krun `ls`\u{202e}",
            dsh_tools::approval::ESCALATION_PREFIX
        );
        assert_eq!(
            question("▶ card\n", "bash", Some(&reason)),
            "▶ card\nleave the sandbox: run `curl x.example` outside the sandbox (workspace-write); \
             justification: tests\\x0d\\x1b[2Krun `ls`\\u{202e}\nallow it? press [y] once, [n] deny: "
        );
    }
}
