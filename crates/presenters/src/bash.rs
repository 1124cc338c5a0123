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
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The arguments of a `bash` call as a card reads them: the presenters' lenient reader.
///
/// It reads logs, not live calls, so it is deliberately more forgiving than the tool: it
/// accepts arguments from old and partial logs (unknown keys such as a later version's
/// `sandbox` are ignored, `timeout_ms` may be any JSON integer spelling), and it checks only
/// what a card shows (a non-blank `command`, a `description` string). For every argument
/// value the tool accepts it reads the same command, description, working directory and
/// background switch as the tool does (a property test in `tool-bash` proves it); anything it
/// cannot read gives `None`, the generic card.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LenientBashArgs {
    /// The command (never blank).
    pub command: String,
    /// What the command does, as the model described it (may be blank in an old log).
    pub description: String,
    /// The working directory, when given.
    pub workdir: Option<String>,
    /// Whether the call started a background job.
    pub run_in_background: bool,
}

impl LenientBashArgs {
    /// Reads a call's logged arguments, or `None` when they do not fit (not an object, no
    /// non-blank `command`, a field of the wrong type).
    pub fn read(args: &Value) -> Option<LenientBashArgs> {
        let raw: RawBashArgs = soft(args)?;
        Some(LenientBashArgs {
            command: raw.command.0,
            description: raw.description,
            workdir: raw.workdir,
            run_in_background: raw.run_in_background == Some(true),
        })
    }
}

/// The shape [`LenientBashArgs::read`] checks.
#[derive(Debug, Deserialize)]
struct RawBashArgs {
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

/// The exit facts of a foreground run, persisted as the `bash` result's presentation meta
/// (`{"exitCode": …, "signal": …}`, both always written, `null` when unknown).
///
/// The `bash` tool writes it from its typed value; [`present_result`] reads it back and trusts
/// it over the text. Parsing the status marker out of the text remains only for logs written
/// before the meta existed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BashExitMeta {
    /// The exit code, when the shell exited by itself.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// The terminating signal's name (`SIGKILL`), when a signal ended the command.
    #[serde(default)]
    pub signal: Option<String>,
}

impl BashExitMeta {
    /// The facts of a run that ended with `exit_code` or was ended by `signal`.
    pub fn new(exit_code: Option<i64>, signal: Option<String>) -> BashExitMeta {
        BashExitMeta { exit_code, signal }
    }

    /// The meta's JSON form, as persisted on `tool/result`.
    pub fn to_value(&self) -> Value {
        // Two optional scalars always serialise; `Null` is never reached.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Reads a persisted meta, when it names at least one of the facts and holds well-formed
    /// values. Both may be null: an outcome nobody observed, for which no marker was written.
    pub fn read(meta: &Value) -> Option<BashExitMeta> {
        let names_a_fact = meta.get("exitCode").is_some() || meta.get("signal").is_some();
        names_a_fact.then(|| soft(meta)).flatten()
    }
}

/// The pending card of a `bash` call, or `None` when the arguments are malformed.
pub fn present_call(args: &Value) -> Option<ToolCallView> {
    let parsed = LenientBashArgs::read(args)?;
    let description = non_empty(parsed.description);
    if parsed.run_in_background {
        return Some(ToolCallView::Generic(GenericCallView {
            title: parsed.command,
            kind: Some(ToolKind::Execute),
            raw_input: Some(args.clone()),
            content: description,
            locations: None,
        }));
    }
    Some(ToolCallView::Terminal(TerminalCallView {
        title: parsed.command,
        description,
        cwd: parsed.workdir,
    }))
}

/// The completed card of a `bash` call, or `None` when the arguments are malformed.
pub fn present_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    let args = LenientBashArgs::read(args)?;
    let text = content_text(&record.content);
    if record.is_error || args.run_in_background {
        return Some(ToolResultView::fallback(record));
    }
    let (body, exit_code, signal) = match record.meta.as_ref().and_then(BashExitMeta::read) {
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
        title: Some(args.command),
        output,
        exit_code,
        signal,
    }))
}

fn non_empty(text: String) -> Option<String> {
    (!text.trim().is_empty()).then_some(text)
}
