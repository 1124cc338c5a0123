//! Functions the macro cannot turn into a tool.

use dsh_tools::prelude::*;

/// Not async.
#[tool]
fn not_async(text: String) -> String {
    text
}

#[tool]
async fn undocumented(text: String) -> String {
    text
}

/// Generic.
#[tool]
async fn generic<T: Default>(text: String) -> String {
    text
}

struct Holder;

impl Holder {
    /// A method.
    #[tool]
    async fn method(&self, text: String) -> String {
        text
    }
}

/// Unsafe and const.
#[tool]
const unsafe fn odd() -> String {
    String::new()
}

fn main() {}
