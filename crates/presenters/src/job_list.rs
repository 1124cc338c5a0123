//! Cards for the `job_list` tool: a generic `read` card titled `List background jobs`, and the
//! generic result card with the tool's one-line-per-job text.

use dsh_tools::card::{GenericCallView, ToolKind};
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView};
use serde_json::Value;

/// The pending card of a `job_list` call, or `None` when the arguments are not an object.
pub fn present_call(args: &Value) -> Option<ToolCallView> {
    args.is_object().then(|| {
        ToolCallView::Generic(GenericCallView {
            title: "List background jobs".to_owned(),
            kind: Some(ToolKind::Read),
            raw_input: Some(args.clone()),
            ..GenericCallView::default()
        })
    })
}

/// The completed card of a `job_list` call, or `None` when the arguments are not an object.
pub fn present_result(args: &Value, record: &ToolResultRecord) -> Option<ToolResultView> {
    args.is_object().then(|| ToolResultView::fallback(record))
}
