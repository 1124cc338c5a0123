//! A parameter without a doc comment would reach the model with no description.

use dsh_tools::prelude::*;

/// Repeat the text, `times` times.
#[tool]
async fn repeat(
    /// The text to repeat.
    text: String,
    times: u32,
    ///
    separator: Option<String>,
    #[schemars(description = "Whether to shout.")] loud: bool,
) -> String {
    let one = if loud { text.to_uppercase() } else { text };
    vec![one; times as usize].join(&separator.unwrap_or_default())
}

fn main() {}
