//! `tool-host` driven over its stdio, in one binary: as an editor drives it over ACP (`acp`)
//! and as an MCP client drives it (`mcp`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acp;
mod mcp;
