//! Cards for the `job_output` tool.
//!
//! The call is a generic `read` card titled `Read output of <job_id>`. The result is the
//! generic card with the tool's text (the output delta and the `[status: …]` line): that text
//! is not shell output with exit markers, so a terminal card would misrepresent it.

use crate::args::{Integer, NonBlank, soft};
use dsh_tools::card::{GenericCallView, ToolKind};
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[allow(dead_code)] // `wait` and `timeout_ms` are checked for shape only.
struct JobOutputArgs {
    job_id: NonBlank,
    #[serde(default)]
    wait: Option<bool>,
    #[serde(default)]
    timeout_ms: Option<Integer>,
}

/// The pending card of a `job_output` call, or `None` when the arguments are malformed.
pub fn present_call(args: &Value) -> Option<ToolCallView> {
    let parsed: JobOutputArgs = soft(args)?;
    Some(ToolCallView::Generic(GenericCallView {
        title: format!("Read output of {}", parsed.job_id.0),
        kind: Some(ToolKind::Read),
        raw_input: Some(args.clone()),
        ..GenericCallView::default()
    }))
}

/// The completed card of a `job_output` call, or `None` when the arguments are malformed.
pub fn present_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    let _: JobOutputArgs = soft(args)?;
    Some(ToolResultView::fallback(record))
}
