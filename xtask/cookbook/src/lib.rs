//! The cookbook pages, included as documentation so that `cargo test` compiles and runs every
//! Rust code block in them. `cargo xtask drift-check` fails when a page under `docs/cookbook/`
//! is not included here.

#![allow(missing_docs)]

#[doc = include_str!(concat!(env!("DSH_COOKBOOK_DIR"), "/adding-a-tool.md"))]
pub mod adding_a_tool {}

#[doc = include_str!(concat!(env!("DSH_COOKBOOK_DIR"), "/adding-a-tool.zh.md"))]
pub mod adding_a_tool_zh {}

#[doc = include_str!("../../../docs/architecture.md")]
pub mod architecture {}
