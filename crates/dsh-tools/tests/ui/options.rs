//! Options of `#[tool(...)]` that are refused.

use dsh_tools::prelude::*;

/// Unknown option.
#[tool(nmae = "x")]
async fn unknown() -> u32 {
    1
}

/// Invalid name.
#[tool(name = "has space")]
async fn spaced() -> u32 {
    1
}

/// Reserved name.
#[tool(name = "run_code")]
async fn reserved() -> u32 {
    1
}

/// Zero timeout.
#[tool(timeout_ms = 0)]
async fn instant() -> u32 {
    1
}

/// Twice.
#[tool(name = "a", name = "b")]
async fn twice() -> u32 {
    1
}

/// Wrong kind of value.
#[tool(timeout_ms = "5s")]
async fn spelled() -> u32 {
    1
}

/// A flag with a value.
#[tool(concurrency_safe = true)]
async fn flagged() -> u32 {
    1
}

/// A name that is not a string.
#[tool(name = lookup)]
async fn bare() -> u32 {
    1
}

/// A render that is not a path.
#[tool(render = "render_it")]
async fn quoted() -> u32 {
    1
}

fn main() {}
