//! Cards for the `job_kill` tool: a generic `execute` card titled `Stop <job_id>`, and the
//! generic result card with the tool's status line.

use crate::args::{NonBlank, soft};
use dsh_tools::card::{GenericCallView, ToolKind};
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
struct JobKillArgs {
    job_id: NonBlank,
}

/// The pending card of a `job_kill` call, or `None` when the arguments are malformed.
pub fn present_call(args: &Value) -> Option<ToolCallView> {
    let parsed: JobKillArgs = soft(args)?;
    Some(ToolCallView::Generic(GenericCallView {
        title: format!("Stop {}", parsed.job_id.0),
        kind: Some(ToolKind::Execute),
        raw_input: Some(args.clone()),
        ..GenericCallView::default()
    }))
}

/// The completed card of a `job_kill` call, or `None` when the arguments are malformed.
pub fn present_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    let _: JobKillArgs = soft(args)?;
    Some(ToolResultView::fallback(record))
}
