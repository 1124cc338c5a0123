//! Approvals as ACP permission requests: the editor's side of the one approval flow
//! ([`dsh_tools::approval`]). Each call of an asked tool (and each call another policy asks
//! about) becomes a `session/request_permission` with the call's card, answered by the person
//! in the editor: allow once, allow the tool for the rest of the session, or reject. A
//! rejection is a result the model reads.

use crate::rpc::Outbox;
use dsh_tools::ToolRegistry;
use dsh_tools::approval::{Answer, ApprovalFlow, AskPerson, Question};
use futures::future::BoxFuture;
use serde_json::{Value, json};

pub(crate) const ALLOW_ONCE: &str = "allow-once";
pub(crate) const ALLOW_ALWAYS: &str = "allow-always";
pub(crate) const REJECT: &str = "reject";

/// What the model reads when the person rejects a call.
pub(crate) const REJECTED: &str = "the user rejected this call";

/// Asks the person in the editor, with the call's card.
struct EditorAsker {
    outbox: Outbox,
    session_id: String,
}

/// The options offered: a request to leave the sandbox is asked every time, so it has no
/// "always".
pub(crate) fn options(escalation: bool) -> Value {
    let mut options =
        vec![json!({"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"})];
    if !escalation {
        options.push(
            json!({"optionId": ALLOW_ALWAYS, "name": "Allow for this session",
                            "kind": "allow_always"}),
        );
    }
    options.push(json!({"optionId": REJECT, "name": "Reject", "kind": "reject_once"}));
    Value::Array(options)
}

/// Reads the client's answer: an option not offered rejects.
fn decide(answer: &Value, escalation: bool) -> Answer {
    match (
        answer["outcome"]["outcome"].as_str(),
        answer["outcome"]["optionId"].as_str(),
    ) {
        (Some("selected"), Some(ALLOW_ONCE)) => Answer::Once,
        (Some("selected"), Some(ALLOW_ALWAYS)) if !escalation => Answer::ForSession,
        (Some("cancelled"), _) => Answer::Withdrawn,
        _ => Answer::Deny {
            reason: REJECTED.to_owned(),
        },
    }
}

impl AskPerson for EditorAsker {
    fn ask(&self, question: Question) -> BoxFuture<'static, Answer> {
        let call_id = &question.call_id;
        let mut tool_call = match &question.card {
            Some(view) => presenters::acp::tool_call(call_id, view),
            None => json!({"toolCallId": call_id, "title": question.tool}),
        };
        if let Some(reason) = &question.escalation {
            tool_call["content"] = json!([{"type": "content",
                "content": {"type": "text", "text": reason}}]);
        }
        let escalation = question.escalation.is_some();
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": options(escalation),
        });
        let outbox = self.outbox.clone();
        Box::pin(async move {
            match outbox.request("session/request_permission", params).await {
                Ok(answer) => decide(&answer, escalation),
                Err(error) => {
                    tracing::warn!(?error, "the permission request failed");
                    Answer::Deny {
                        reason: format!("the editor could not be asked: {}", error.message),
                    }
                }
            }
        })
    }
}

/// Makes every call of the `asked` tools of `registry` ask the editor first (a call other
/// listeners deny stays denied), and answers the questions other policies raise the same way.
pub(crate) fn install(
    registry: &ToolRegistry,
    asked: &[(String, String)],
    outbox: Outbox,
    session_id: &str,
) -> Result<(), dsh_tools::ScopeError> {
    let mut flow = ApprovalFlow::new(EditorAsker {
        outbox,
        session_id: session_id.to_owned(),
    });
    for (tool, reason) in asked {
        flow = flow.ask_before(tool, reason);
    }
    flow.install(registry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn selected(option: &str) -> Value {
        json!({"outcome": {"outcome": "selected", "optionId": option}})
    }

    #[tokio::test]
    async fn the_approver_does_not_keep_its_registry_alive() {
        let registry = ToolRegistry::new();
        let weak = registry.downgrade();
        let (outbox, _writer) = Outbox::writer(tokio::io::sink());
        install(&registry, &[], outbox, "s").unwrap();
        drop(registry);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn answers_read_as_the_option_chosen_and_anything_else_rejects() {
        assert_eq!(decide(&selected(ALLOW_ONCE), false), Answer::Once);
        assert_eq!(decide(&selected(ALLOW_ALWAYS), false), Answer::ForSession);
        let reject = || Answer::Deny {
            reason: REJECTED.to_owned(),
        };
        assert_eq!(decide(&selected(REJECT), false), reject());
        assert_eq!(decide(&selected("made-up"), false), reject());
        assert_eq!(decide(&json!({}), false), reject());
        assert_eq!(
            decide(&json!({"outcome": {"outcome": "cancelled"}}), false),
            Answer::Withdrawn
        );
        // A request to leave the sandbox offered no "always"; choosing it anyway rejects.
        assert_eq!(decide(&selected(ALLOW_ALWAYS), true), reject());
        assert_eq!(
            options(true)
                .as_array()
                .map(|o| o.iter().map(|o| o["kind"].clone()).collect::<Vec<_>>()),
            Some(vec![json!("allow_once"), json!("reject_once")])
        );
    }
}
