//! Cards for the `bash` tool.
//!
//! - Call: a foreground command is a `terminal` card (title = the command, the description,
//!   cwd = `workdir`); a background start is a `generic` `execute` card whose content is the
//!   description.
//! - Result: a `terminal` card whose output is the model text without its final status marker,
//!   with the exit code or signal beside it. Errors and background acknowledgements have no
//!   exit status and get the generic card.
//!
//! When the record's presentation meta carries `{"exitCode": …, "signal": …}` (the `bash` tool
//! always writes it for a foreground run), those facts decide both the badge and the output:
//! exactly the marker they imply is removed ([`strip_status_marker`]), so a successful command
//! whose own last line looks like a marker keeps that line. Without the meta the status is read
//! back from the text with [`parse_exit_status`].

use crate::args::{Integer, NonBlank, soft};
use crate::markers::{ExitOutcome, no_output, parse_exit_status, strip_status_marker};
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
    if record.is_error || args.run_in_background == Some(true) {
        return Some(ToolResultView::fallback(record));
    }
    let (body, exit_code, signal) = match exit_meta(record.meta.as_ref()) {
        Some(meta) => {
            let outcome = ExitOutcome {
                exit_code: meta.exit_code,
                signal: meta.signal,
            };
            let body = strip_status_marker(&text, &outcome).to_owned();
            (body, outcome.exit_code, outcome.signal)
        }
        None => {
            let parsed = parse_exit_status(&text);
            (parsed.body, parsed.exit_code, parsed.signal)
        }
    };
    let output = (!body.is_empty() && body != no_output()).then_some(body);
    Some(ToolResultView::Terminal(TerminalResultView {
        title: Some(args.command.0),
        output,
        exit_code,
        signal,
    }))
}

/// The persisted exit facts, when the meta names at least one of them and holds well-formed
/// values. Both may be null: an outcome nobody observed, for which the tool wrote no marker.
fn exit_meta(meta: Option<&Value>) -> Option<ExitMeta> {
    let meta = meta?;
    let names_a_fact = meta.get("exitCode").is_some() || meta.get("signal").is_some();
    names_a_fact.then(|| soft(meta)).flatten()
}

fn non_empty(text: String) -> Option<String> {
    (!text.trim().is_empty()).then_some(text)
}
