//! The calls a `run_code` program makes, shown as tool calls of their own: the session's events
//! carry only the model's calls, so a nested call (id `<run_code call>:code:<n>`) is announced
//! here with a `tool_call` as it starts, before any permission request names it, and completed
//! with a `tool_call_update` when its result is final.

use super::rpc::Outbox;
use dsh_tools::{ToolRegistry, ToolResultRecord};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// Announces and completes every nested call of `registry`'s tools to the editor of
/// `session_id`.
pub(crate) fn announce(
    registry: &ToolRegistry,
    outbox: Outbox,
    session_id: &str,
) -> Result<(), dsh_tools::ScopeError> {
    let scope = registry.global_scope();
    // The calls announced and not yet completed: only they get a completion.
    let open: Arc<Mutex<HashSet<String>>> = Arc::default();
    {
        let registry = registry.downgrade();
        let outbox = outbox.clone();
        let session_id = session_id.to_owned();
        let open = Arc::clone(&open);
        scope.on_pre_execute(move |execution, next| {
            // Before the rest of the stage, whose verdict may ask the editor about this call.
            if execution.call_id() != execution.root_call_id()
                && let Some(registry) = registry.upgrade()
            {
                let args = execution
                    .args()
                    .map_or(Value::Null, |args| (**args).clone());
                let view = registry.present_call(execution.name(), &args, execution.session_id());
                let mut call = presenters::acp::tool_call(execution.call_id(), &view);
                call["sessionUpdate"] = json!("tool_call");
                open.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(execution.call_id().to_owned());
                outbox.notify(
                    "session/update",
                    json!({"sessionId": session_id, "update": call}),
                );
            }
            async move { next.run().await }
        })?;
    }
    let registry = registry.downgrade();
    let session_id = session_id.to_owned();
    scope.on_result(move |execution, result| {
        let announced = open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(execution.call_id());
        let Some(registry) = registry.upgrade().filter(|_| announced) else {
            return;
        };
        let record = ToolResultRecord {
            content: result.content.clone(),
            is_error: result.is_error,
            error: result.error.clone(),
            meta: result.meta.clone(),
        };
        let args = execution
            .args()
            .map_or(Value::Null, |args| (**args).clone());
        let view =
            registry.present_result(execution.name(), &args, &record, execution.session_id());
        let mut update =
            presenters::acp::tool_call_update(execution.call_id(), &view, result.is_error);
        update["sessionUpdate"] = json!("tool_call_update");
        outbox.notify(
            "session/update",
            json!({"sessionId": session_id, "update": update}),
        );
    })?;
    Ok(())
}
