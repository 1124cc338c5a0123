//! Model-visible content blocks and the durable projection of a result.

use crate::error::ToolFailure;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One block of model-visible content (`{"type": "text", "text": …}`; room for images later).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }

    /// The block's text, when it is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text } => Some(text),
        }
    }
}

/// The text of all text blocks, joined by newlines.
pub fn content_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The durable projection of a result: what a session log keeps and what presenters read.
/// The canonical value is never part of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultRecord {
    /// The model-visible content.
    pub content: Vec<ContentBlock>,
    /// Whether the call failed.
    pub is_error: bool,
    /// The failure, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolFailure>,
    /// Replayable presentation facts (`presentation_meta`), for top-level successes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}
