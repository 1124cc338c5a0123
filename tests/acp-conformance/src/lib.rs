//! No code of its own: `tests/acp.rs` checks the presenters' ACP projection against the
//! official Agent Client Protocol types, in a workspace of its own (see `Cargo.toml`).
