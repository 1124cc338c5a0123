//! Return types the macro or the compiler refuses.

use dsh_tools::prelude::*;

/// Returns nothing.
#[tool]
async fn nothing(
    /// The text.
    text: String,
) {
    drop(text);
}

/// Returns an opaque type.
#[tool]
async fn opaque() -> impl Serialize {
    1
}

struct NotSerialisable;

/// Returns a value with no schema.
#[tool]
async fn unserialisable() -> NotSerialisable {
    NotSerialisable
}

/// Fails with an error that is not a tool error.
#[tool]
async fn stringly() -> Result<String, String> {
    Err("no".to_owned())
}

fn main() {}
