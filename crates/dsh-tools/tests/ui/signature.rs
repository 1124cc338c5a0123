//! Functions the macro cannot turn into a tool.

use dsh_tools::prelude::*;

/// Not async.
#[tool]
fn not_async(
    /// The text.
    text: String,
) -> String {
    text
}

#[tool]
async fn undocumented(
    /// The text.
    text: String,
) -> String {
    text
}

/// Generic.
#[tool]
async fn generic<T: Default>(
    /// The text.
    text: String,
) -> String {
    text
}

struct Holder;

impl Holder {
    /// A method.
    #[tool]
    async fn method(
        &self,
        /// The text.
        text: String,
    ) -> String {
        text
    }
}

/// Unsafe and const.
#[tool]
const unsafe fn odd() -> String {
    String::new()
}

fn main() {}
