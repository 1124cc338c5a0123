//! The cookbook pages, included as documentation so that `cargo test` compiles and runs every
//! Rust code block in them. `cargo xtask drift-check` fails when an English page under
//! `docs/cookbook/` is not included here. The Chinese translations (`*.zh.md`) are not: the
//! drift check keeps their code blocks byte-identical to the English page's, so compiling
//! them again would add nothing.

#[doc = include_str!(concat!(env!("DSH_COOKBOOK_DIR"), "/adding-a-tool.md"))]
pub mod adding_a_tool {}

#[doc = include_str!("../../../docs/architecture.md")]
pub mod architecture {}

/// The README's example compiles too.
#[doc = include_str!("../../../README.md")]
pub mod readme {}
