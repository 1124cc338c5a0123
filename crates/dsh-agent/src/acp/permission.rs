//! Approvals as ACP permission requests: each `bash` call (and each call another policy asks
//! about) becomes a `session/request_permission` with the call's card, answered by the person
//! in the editor: allow once, allow the tool for the rest of the session, or reject. A
//! rejection is a result the model reads.

use super::rpc::Outbox;
use dsh_tools::{Approval, ApprovalRequest, Approver, PreDecision, ToolRegistry, WeakToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// The tool whose calls are asked about.
const ASKED_TOOL: &str = "bash";

pub(crate) const ALLOW_ONCE: &str = "allow-once";
pub(crate) const ALLOW_ALWAYS: &str = "allow-always";
pub(crate) const REJECT: &str = "reject";

/// What the model reads when the person rejects a call.
pub(crate) const REJECTED: &str = "the user rejected this call";

struct EditorApprover {
    outbox: Outbox,
    session_id: String,
    /// Weak: the approver lives in the registry it presents calls with.
    registry: WeakToolRegistry,
    /// The tools allowed for the rest of the session: an answer about one tool never grants
    /// another.
    allowed_for_session: Arc<Mutex<HashSet<String>>>,
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

/// Reads the client's answer.
fn decide(answer: &Value, escalation: bool) -> Answer {
    match (
        answer["outcome"]["outcome"].as_str(),
        answer["outcome"]["optionId"].as_str(),
    ) {
        (Some("selected"), Some(ALLOW_ONCE)) => Answer::Once,
        (Some("selected"), Some(ALLOW_ALWAYS)) if !escalation => Answer::Session,
        (Some("cancelled"), _) => Answer::Cancelled,
        _ => Answer::Reject,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Once,
    Session,
    Reject,
    Cancelled,
}

impl Approver for EditorApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval> {
        let tool = request.execution.name().to_owned();
        let escalation = request
            .reason
            .as_deref()
            .filter(|reason| reason.starts_with(tool_bash::tool::ESCALATION_PREFIX))
            .map(str::to_owned);
        if escalation.is_none()
            && self
                .allowed_for_session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&tool)
        {
            return Box::pin(std::future::ready(Approval::Grant));
        }
        let execution = &request.execution;
        let call_id = execution.call_id().to_owned();
        let mut tool_call = match (execution.args(), self.registry.upgrade()) {
            (Some(args), Some(registry)) => {
                let view = registry.present_call(execution.name(), args, execution.session_id());
                presenters::acp::tool_call(&call_id, &view)
            }
            _ => json!({"toolCallId": call_id, "title": tool}),
        };
        if let Some(reason) = &escalation {
            tool_call["content"] = json!([{"type": "content",
                "content": {"type": "text", "text": reason}}]);
        }
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": options(escalation.is_some()),
        });
        let outbox = self.outbox.clone();
        let allowed = Arc::clone(&self.allowed_for_session);
        Box::pin(async move {
            let asked = outbox.request("session/request_permission", params);
            let answer = tokio::select! {
                answer = asked => answer,
                () = request.signal.cancelled() => return Approval::Cancel,
            };
            let answer = match answer {
                Ok(answer) => decide(&answer, escalation.is_some()),
                Err(error) => {
                    tracing::warn!(?error, "the permission request failed");
                    return Approval::Refuse {
                        reason: Some(format!("the editor could not be asked: {}", error.message)),
                    };
                }
            };
            match answer {
                Answer::Once => Approval::Grant,
                Answer::Session => {
                    allowed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(tool);
                    Approval::Grant
                }
                Answer::Reject => Approval::Refuse {
                    reason: Some(REJECTED.to_owned()),
                },
                Answer::Cancelled => Approval::Cancel,
            }
        })
    }
}

/// Makes every `bash` call of `registry` ask the editor first (a call other listeners deny
/// stays denied), and answers the questions other policies raise the same way.
pub(crate) fn install(
    registry: &ToolRegistry,
    outbox: Outbox,
    session_id: &str,
) -> Result<(), dsh_tools::ScopeError> {
    let scope = registry.global_scope();
    scope.on_pre_execute(|execution, next| async move {
        let verdict = next.run().await;
        if execution.name() == ASKED_TOOL && verdict == PreDecision::Allow {
            PreDecision::ask("bash runs commands on this machine")
        } else {
            verdict
        }
    })?;
    scope.set_approver(Arc::new(EditorApprover {
        outbox,
        session_id: session_id.to_owned(),
        registry: registry.downgrade(),
        allowed_for_session: Arc::default(),
    }))?;
    Ok(())
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
        let (outbox, _writer) = Outbox::stdout();
        install(&registry, outbox, "s").unwrap();
        drop(registry);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn answers_read_as_the_option_chosen_and_anything_else_rejects() {
        assert_eq!(decide(&selected(ALLOW_ONCE), false), Answer::Once);
        assert_eq!(decide(&selected(ALLOW_ALWAYS), false), Answer::Session);
        assert_eq!(decide(&selected(REJECT), false), Answer::Reject);
        assert_eq!(decide(&selected("made-up"), false), Answer::Reject);
        assert_eq!(decide(&json!({}), false), Answer::Reject);
        assert_eq!(
            decide(&json!({"outcome": {"outcome": "cancelled"}}), false),
            Answer::Cancelled
        );
        // A request to leave the sandbox offered no "always"; choosing it anyway rejects.
        assert_eq!(decide(&selected(ALLOW_ALWAYS), true), Answer::Reject);
        assert_eq!(
            options(true)
                .as_array()
                .map(|o| o.iter().map(|o| o["kind"].clone()).collect::<Vec<_>>()),
            Some(vec![json!("allow_once"), json!("reject_once")])
        );
    }
}
