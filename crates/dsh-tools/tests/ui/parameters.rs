//! Parameters the macro cannot turn into arguments.

use dsh_tools::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct Args {
    text: String,
}

/// Borrowed.
#[tool]
async fn borrowed(
    /// The text.
    text: &str,
) -> String {
    text.to_owned()
}

/// Destructured.
#[tool]
async fn destructured(
    /// The pair.
    (a, b): (u32, u32),
) -> u32 {
    a + b
}

/// Mixed.
#[tool]
async fn mixed(
    #[args] args: Args,
    /// One more.
    extra: u32,
) -> String {
    format!("{}{extra}", args.text)
}

/// Two contexts.
#[tool]
async fn two_contexts(first: ExecContext, second: &ExecContext) -> String {
    format!("{}{}", first.call_id(), second.call_id())
}

fn main() {}
