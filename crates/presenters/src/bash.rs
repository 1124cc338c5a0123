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

use crate::args::soft;
use crate::markers::{ExitOutcome, no_output, parse_exit_status, strip_status_marker};
use dsh_tools::card::{GenericCallView, TerminalCallView, TerminalResultView, ToolKind};
use dsh_tools::prelude::JsonSchema;
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView, content_text};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The arguments of a `bash` call: the one type the tool's parameter schema is derived from
/// (each field's doc comment is what the model reads about it), the tool reads a call into,
/// and the cards read a logged call with.
///
/// The tool (`tool_bash::tool`) validates a call against the schema derived from this type,
/// with `run_in_background` only where background jobs are enabled and `sandbox` and
/// `justification` only where the executor has a sandbox, then reads it into this type and
/// checks what the schema cannot express: `command` and `description` are not blank,
/// `command` fits its limit, `timeout_ms` is positive, `justification` comes with `sandbox`.
///
/// [`BashArgs::read`] is the lenient reading of a logged call for cards.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[schemars(crate = "dsh_tools::prelude::schemars")]
#[non_exhaustive]
pub struct BashArgs {
    /// The command to run with `bash -c`.
    pub command: String,
    /// What the command does, in 5-10 words, shown to the user (e.g. "Run the unit tests").
    pub description: String,
    /// Timeout in milliseconds.
    // Optional, never null: the schema offers the bare type, as the model has always seen it,
    // with no `default` (`skip_serializing_if` keeps schemars from writing `"default": null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub timeout_ms: Option<u64>,
    /// Directory to run in; a relative path is resolved against the session's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub workdir: Option<String>,
    /// Start the command as a background job and return its id at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub run_in_background: Option<bool>,
    /// Ask to run this command outside the sandbox; the user must approve. Only when the sandbox blocks work the user asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BashSandbox")]
    pub sandbox: Option<BashSandbox>,
    /// With `sandbox: "escalate"`: why the command must run outside the sandbox, shown to the user who approves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub justification: Option<String>,
}

/// What a `bash` call may ask of the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[schemars(crate = "dsh_tools::prelude::schemars")]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum BashSandbox {
    /// Run this one command outside the sandbox, once the user approves.
    Escalate,
}

impl BashArgs {
    /// Reads a call's logged arguments leniently, or `None` when they do not fit (not an
    /// object, no non-blank `command`, a field of the wrong type).
    ///
    /// It reads logs, not live calls, so it is deliberately more forgiving than the tool:
    /// unknown keys (a later version's) are ignored, `description` may be blank (an old log),
    /// `timeout_ms` may be any spelling of a whole number (`3e4`), and none of the tool's
    /// other rules apply. For every argument value the tool accepts it reads exactly what the
    /// tool reads (a property test in `tool-bash` proves it); anything it cannot read gives
    /// `None`, the generic card.
    pub fn read(args: &Value) -> Option<BashArgs> {
        // serde would also read a struct from an array of its fields; arguments are objects.
        if !args.is_object() {
            return None;
        }
        // As the tool reads a value: a whole number held as a float (`3e4`) is an integer.
        let args: BashArgs = dsh_tools::json::from_value_located(args).ok()?;
        (!args.command.trim().is_empty()).then_some(args)
    }

    /// Whether the call starts a background job.
    pub fn in_background(&self) -> bool {
        self.run_in_background == Some(true)
    }
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
    let parsed = BashArgs::read(args)?;
    let background = parsed.in_background();
    let description = non_empty(parsed.description);
    if background {
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
    let args = BashArgs::read(args)?;
    let text = content_text(&record.content);
    if record.is_error || args.in_background() {
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
