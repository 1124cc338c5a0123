//! Cards for the `bash` tool.
//!
//! - Call: a foreground command is a `terminal` card (title = the command, the description,
//!   cwd = `workdir`); a background start is a `generic` `execute` card whose content is the
//!   description.
//! - Result: a `terminal` card whose output is the model text without its final status marker,
//!   with the exit code or signal beside it. Errors and background acknowledgements have no
//!   exit status and get the generic card.
//!
//! The exit status is read from the text with [`parse_exit_status`]. When the record's
//! presentation meta carries `{"exitCode": …, "signal": …}` those facts win, because the text
//! cannot tell a successful run apart from one whose own last output line looks like a marker.

use crate::args::{Integer, NonBlank, soft};
use crate::markers::{is_background_started, no_output, parse_exit_status};
use dsh_tools::card::{GenericCallView, TerminalCallView, TerminalResultView, ToolKind};
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView, content_text};
use serde::Deserialize;
use serde_json::Value;

/// The arguments as far as a card needs them.
#[derive(Debug, Deserialize)]
struct BashArgs {
    command: NonBlank,
    description: String,
    #[serde(default)]
    #[allow(dead_code)] // Checked for shape only: no card shows the timeout.
    timeout_ms: Option<Integer>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    run_in_background: Option<bool>,
}

/// The exit facts the tool may persist as presentation meta.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExitMeta {
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    signal: Option<String>,
}

/// The pending card of a `bash` call, or `None` when the arguments are malformed.
pub fn present_call(args: &Value) -> Option<ToolCallView> {
    let parsed: BashArgs = soft(args)?;
    let description = non_empty(parsed.description);
    if parsed.run_in_background == Some(true) {
        return Some(ToolCallView::Generic(GenericCallView {
            title: parsed.command.0,
            kind: Some(ToolKind::Execute),
            raw_input: Some(args.clone()),
            content: description,
            locations: None,
        }));
    }
    Some(ToolCallView::Terminal(TerminalCallView {
        title: parsed.command.0,
        description,
        cwd: parsed.workdir,
    }))
}

/// The completed card of a `bash` call, or `None` when the arguments are malformed.
pub fn present_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    let args: BashArgs = soft(args)?;
    let text = content_text(&record.content);
    if record.is_error || is_background_started(&text) {
        return Some(ToolResultView::fallback(record));
    }
    let parsed = parse_exit_status(&text);
    let (exit_code, signal) = match exit_meta(record.meta.as_ref()) {
        Some(meta) => (meta.exit_code, meta.signal),
        None => (parsed.exit_code, parsed.signal),
    };
    let output = (!parsed.body.is_empty() && parsed.body != no_output()).then_some(parsed.body);
    Some(ToolResultView::Terminal(TerminalResultView {
        title: Some(args.command.0),
        output,
        exit_code,
        signal,
    }))
}

/// The persisted exit facts, when the meta holds well-formed ones.
fn exit_meta(meta: Option<&Value>) -> Option<ExitMeta> {
    let meta: ExitMeta = soft(meta?)?;
    (meta.exit_code.is_some() || meta.signal.is_some()).then_some(meta)
}

fn non_empty(text: String) -> Option<String> {
    (!text.trim().is_empty()).then_some(text)
}
