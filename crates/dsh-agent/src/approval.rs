//! `--ask`: every `bash` call, and every call another policy asks about (an MCP tool marked
//! destructive, a request to leave the sandbox), waits for the person at the terminal, who
//! allows it once, allows that tool for the rest of the session, or denies it. A denial is a
//! result the model reads. Without a terminal to ask (stdin or stderr is not one) every call is
//! denied, saying why.

use dsh_tools::{Approval, ApprovalRequest, Approver, PreDecision, ToolRegistry, WeakToolRegistry};
use futures::future::BoxFuture;
use std::collections::HashSet;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};

/// The tool whose calls need approval.
const ASKED_TOOL: &str = "bash";

/// What the model reads when no terminal can answer.
pub(crate) const NO_TERMINAL: &str =
    "--ask needs a terminal to ask on (stdin and stderr), and there is none; the call was denied";

/// Asks before each `bash` call on the terminal.
struct TerminalApprover {
    state: Arc<State>,
}

struct State {
    /// Weak: the registry holds this approver, so a strong handle would keep both, and the
    /// tools in the registry (the shell executor with its sandbox's temporary directory),
    /// alive after the run.
    registry: WeakToolRegistry,
    /// Whether the prompt shows the call's card: not when the session's cards already go to
    /// the same terminal, which has just shown it.
    show_card: bool,
    /// The tools the person allowed for the rest of the session: an answer about one tool
    /// never grants another.
    allowed_for_session: Mutex<HashSet<String>>,
    /// One question at a time: parallel calls would otherwise interleave their prompts.
    asking: tokio::sync::Mutex<()>,
}

/// The person's answer.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Once,
    Session,
    Deny,
}

/// Reads an answer: `y`/`yes` once, `a`/`always` for the session; anything else denies.
fn answer(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Once,
        "a" | "always" => Answer::Session,
        _ => Answer::Deny,
    }
}

impl State {
    /// Whether a call of `tool` is granted without asking: the person allowed the tool for the
    /// rest of the session, and the call is not a request to leave the sandbox, which is asked
    /// every time.
    fn granted_without_asking(&self, tool: &str, escalation: Option<&str>) -> bool {
        escalation.is_none()
            && self
                .allowed_for_session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(tool)
    }

    fn allow_for_session(&self, tool: String) {
        self.allowed_for_session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool);
    }
}

/// The question put on the terminal after `card`: about a call of `tool`, or, for a request to
/// leave the sandbox, the request itself (asked every time, so no answer for the session).
/// Both quote the model (a tool name, a command, a justification), so both are escaped.
fn question(card: &str, tool: &str, escalation: Option<&str>) -> String {
    match escalation {
        Some(reason) => format!(
            "{card}{}\nallow it? [y] once, [n] deny: ",
            presenters::escape_controls(reason)
        ),
        None => format!(
            "{card}allow this {} call? [y] once, [a] for this session, [n] deny: ",
            presenters::escape_controls(tool)
        ),
    }
}

impl Approver for TerminalApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval> {
        let this = Arc::clone(&self.state);
        Box::pin(async move {
            // A request to leave the sandbox is asked every time, with its justification.
            let escalation = request
                .reason
                .as_deref()
                .filter(|reason| reason.starts_with(tool_bash::tool::ESCALATION_PREFIX));
            let tool = request.execution.name().to_owned();
            if this.granted_without_asking(&tool, escalation) {
                return Approval::Grant;
            }
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                return Approval::Refuse {
                    reason: Some(NO_TERMINAL.to_owned()),
                };
            }
            let _turn = this.asking.lock().await;
            if this.granted_without_asking(&tool, escalation) {
                return Approval::Grant;
            }
            let execution = &request.execution;
            let registry = this.registry.upgrade();
            let card = match (execution.args(), registry) {
                (Some(args), Some(registry)) if this.show_card => {
                    let view =
                        registry.present_call(execution.name(), args, execution.session_id());
                    format!("▶ {}\n", presenters::render_call_text(&view))
                }
                _ => String::new(),
            };
            let prompt = question(&card, &tool, escalation);
            let read = tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(prompt.as_bytes());
                let _ = stderr.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            });
            let line = tokio::select! {
                read = read => read,
                () = request.signal.cancelled() => return Approval::Cancel,
            };
            match line.map(|l| l.map(|l| answer(&l))) {
                Ok(Ok(Answer::Once)) => Approval::Grant,
                Ok(Ok(Answer::Session)) if escalation.is_some() => Approval::Grant,
                Ok(Ok(Answer::Session)) => {
                    this.allow_for_session(tool);
                    Approval::Grant
                }
                Ok(Ok(Answer::Deny)) => Approval::Refuse {
                    reason: Some(String::from("the user denied it")),
                },
                _ => Approval::Refuse {
                    reason: Some(String::from("the terminal could not be read")),
                },
            }
        })
    }
}

/// Makes every `bash` call of `registry` ask the terminal first (a call other listeners deny
/// stays denied). `cards_on_terminal`: the session's cards are printed to the terminal, so
/// the prompt need not repeat the call's card.
pub(crate) fn install(registry: &ToolRegistry, cards_on_terminal: bool) -> anyhow::Result<()> {
    let scope = registry.global_scope();
    scope.on_pre_execute(|execution, next| async move {
        let verdict = next.run().await;
        if execution.name() == ASKED_TOOL && verdict == PreDecision::Allow {
            PreDecision::ask("bash runs commands on this machine")
        } else {
            verdict
        }
    })?;
    let approver = TerminalApprover {
        state: Arc::new(State {
            registry: registry.downgrade(),
            show_card: !cards_on_terminal,
            allowed_for_session: Mutex::default(),
            asking: tokio::sync::Mutex::new(()),
        }),
    };
    scope.set_approver(Arc::new(approver))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_leniently_and_anything_unclear_denies() {
        for (line, expected) in [
            ("y\n", Answer::Once),
            (" YES ", Answer::Once),
            ("a\n", Answer::Session),
            ("always", Answer::Session),
            ("n\n", Answer::Deny),
            ("", Answer::Deny),
            ("sure", Answer::Deny),
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

    #[test]
    fn allowing_a_tool_for_the_session_allows_no_other() {
        let state = State {
            registry: ToolRegistry::new().downgrade(),
            show_card: false,
            allowed_for_session: Mutex::default(),
            asking: tokio::sync::Mutex::new(()),
        };
        assert!(!state.granted_without_asking("bash", None));
        state.allow_for_session(String::from("bash"));
        assert!(state.granted_without_asking("bash", None));
        assert!(!state.granted_without_asking("mcp__files__write_file", None));
        // A request to leave the sandbox is asked even for a tool allowed for the session.
        let escalation = format!("{}run `ls`", tool_bash::tool::ESCALATION_PREFIX);
        assert!(!state.granted_without_asking("bash", Some(&escalation)));
    }

    /// The request to leave the sandbox quotes the model's command and justification: a
    /// control sequence in them must not redraw the question the person answers.
    #[test]
    fn questions_show_what_the_model_wrote_escaped() {
        assert_eq!(
            question("", "ev\u{1b}]0;t\u{7}il", None),
            r"allow this ev\x1b]0;t\x07il call? [y] once, [a] for this session, [n] deny: "
        );
        let reason = format!(
            "{}run `curl x.example` outside the sandbox (workspace-write); justification: \
             tests\r\u{1b}[2Krun `ls`\u{202e}",
            tool_bash::tool::ESCALATION_PREFIX
        );
        assert_eq!(
            question("▶ card\n", "bash", Some(&reason)),
            "▶ card\nleave the sandbox: run `curl x.example` outside the sandbox (workspace-write); \
             justification: tests\\x0d\\x1b[2Krun `ls`\\u{202e}\nallow it? [y] once, [n] deny: "
        );
    }
}
