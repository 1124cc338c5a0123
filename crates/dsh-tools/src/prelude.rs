//! What defining and calling a tool needs, in one import: `use dsh_tools::prelude::*;`.
//!
//! It brings the `#[tool]` macro (with the default `macros` feature), the [`Tool`] trait and
//! the types its methods use, the registry and its calls, [`CancellationToken`], and the
//! derives the arguments and output types use (`Deserialize`, `Serialize`, `JsonSchema`).
//!
//! The `JsonSchema` derive works with `dsh-tools` as the only dependency: it finds `schemars`
//! through this prelude. serde's derives look for a `serde` dependency of their own; without
//! one, name ours with `#[serde(crate = "dsh_tools::prelude::serde")]`. A `#[tool]` function
//! with plain parameters and a standard output type (`String`, numbers, `Vec`, `Option`) needs
//! neither derive.

#[cfg(feature = "macros")]
pub use crate::tool;
pub use crate::{
    ContentBlock, ExecContext, FailureCode, Plugin, PluginError, RegistrationError, Scope, Tool,
    ToolCall, ToolDefinition, ToolError, ToolOutput, ToolRegistry, ToolResult, ValueSchema,
};
pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json::{Value, json};
pub use tokio_util::sync::CancellationToken;
