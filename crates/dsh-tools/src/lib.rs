//! Define, register, validate and execute model-callable tools for LLM agents.
//!
//! `dsh-tools` is the contract layer of the dsh-rs workspace. It owns:
//!
//! - the **value-schema subset** ([`ValueSchema`]): one small, fully enforced JSON Schema
//!   language for arguments and outputs, authored from Rust types (`schemars`), with a builder
//!   DSL, or as raw JSON Schema, whose refusals list every offending keyword in one pass;
//! - **any JSON Schema** for raw definitions ([`CompiledSchema`]): draft 2020-12 or draft-07,
//!   sent to the model as declared and compiled once into a validator (the subset's own when
//!   the schema is inside it, `jsonschema` otherwise, with the `jsonschema` feature), so the
//!   registry checks every call;
//! - **tool definitions**: typed (the [`#[tool]`](macro@tool) macro on an `async fn`, or the
//!   [`Tool`] trait) or raw ([`ToolDefinition::builder`]), each with a mandatory output
//!   declaration ([`ToolOutput`]: schema + `render` + optional `presentation_meta`), and a
//!   [`prelude`] with what defining and calling a tool needs;
//! - the **registry and execution pipeline** ([`ToolRegistry::execute`]): lossless argument
//!   materialisation, policy hooks ([`hooks`]), panic containment, output validation and the
//!   closed set of [`FailureCode`]s;
//! - **scopes and plugins** ([`Scope`], [`Plugin`]): every registration and hook is an effect
//!   with a disposer, so hot reload and agent disposal leave nothing behind;
//! - **Code Mode** ([`ToolRegistry::call_value`], [`typescript_declarations`]);
//! - the **background-job runtime** ([`jobs::JobRuntime`]): ids, ownership, first-wins
//!   settlement and completion notices that are sent at most once and never lost (a disposed
//!   owner's notice is dropped with it);
//! - the neutral **card vocabulary** ([`card`]) that presenters return;
//! - **runtime checks** ([`runtime`]): a tool that needs Tokio's IO or time driver fails with
//!   an error naming it on a runtime built without it, instead of panicking.
//!
//! It deliberately does not render cards (that is the `presenters` crate), run a model loop
//! (`agent-loop`) or spawn processes (`tool-bash`); the only workspace crate it depends on is
//! its own macro crate, `dsh-tools-macros`.
//!
//! # Modules
//!
//! Public modules are linked; the private ones are named with their files, and what they
//! define is re-exported at the crate root. From the bottom up:
//!
//! - `json/` ([`json`]): lossless JSON values (`mod.rs`), numbers compared by value
//!   (`number.rs`) and typed deserialisation with located failures (`typed.rs`);
//! - `violation.rs`: [`Violation`], a problem at a JSON pointer, shared by `json` and `schema`;
//! - `schema/` ([`schema`]): the value-schema subset (`mod.rs`), its validator (`validate.rs`),
//!   the `schemars` normaliser (`normalize.rs`) and field order (`order.rs`), raw JSON Schema
//!   acceptance (`raw.rs`), the strict projection (`strict.rs`) and compiled schemas of any
//!   JSON Schema (`compiled.rs`);
//! - `content.rs`, `text.rs`, [`card`], [`agent`]: content blocks and durable records, UTF-8
//!   bounds, the card vocabulary, and the agent seam a tool sees;
//! - `error.rs` and `runtime/` ([`runtime`], with the driver type in `driver.rs`): errors and
//!   failure codes, and the Tokio driver checks;
//! - `call.rs`: one call's data ([`ToolCall`], [`ToolExecution`], [`Services`], [`ToolResult`]);
//! - [`hooks`]: the policy hooks and the approval service;
//! - `exec.rs`: the body's [`ExecContext`];
//! - `definition.rs`: the [`Tool`] trait, [`ToolDefinition`] and its builder;
//! - `layers.rs`: the registry's layers (global and per agent), the visibility resolver, the
//!   hook snapshot of a call and `tools/change`, beneath both the registry and its scopes;
//! - `scope.rs`: [`Scope`], [`Disposer`] and [`Plugin`];
//! - `registry.rs`: [`ToolRegistry`]; `pipeline.rs`: its execution pipeline; `code_mode.rs`:
//!   Code Mode;
//! - `jobs/` ([`jobs`]): the background-job runtime: its vocabulary (`types.rs`), errors
//!   (`error.rs`), bookkeeping (`state.rs`), operations and settlement (`runtime.rs`), waits
//!   (`waiter.rs`) and completion notices (`notice.rs`);
//! - [`prelude`]: what defining and calling a tool needs, in one import.
//!
//! # Example
//!
//! An echo tool with the [`#[tool]`](macro@tool) macro: the doc comment is the description, the
//! parameters are the arguments, the return type is the output.
//!
// The macro is the default `macros` feature; without it the example is not compiled.
#![cfg_attr(feature = "macros", doc = "```")]
#![cfg_attr(not(feature = "macros"), doc = "```ignore")]
//! use dsh_tools::prelude::*;
//!
//! /// Repeat the given text back. Use when the user says "echo" or "repeat".
//! #[tool]
//! async fn echo(
//!     /// The text to send back.
//!     text: String,
//! ) -> String {
//!     text
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = ToolRegistry::new();
//! registry.register_tool(Echo)?;
//! let result = registry.execute(ToolCall::new("call-1", "echo", r#"{"text": "hi"}"#)).await;
//! assert_eq!(result.content, vec![ContentBlock::text("hi")]);
//! # Ok::<(), RegistrationError>(())
//! # }).unwrap();
//! ```
//!
//! The same tool by hand, with the [`Tool`] trait (what the macro generates, and what a tool
//! with cards or per-call concurrency writes itself):
//!
//! ```
//! use dsh_tools::{ContentBlock, ExecContext, Tool, ToolCall, ToolError, ToolRegistry};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct EchoArgs {
//!     /// The text to send back.
//!     text: String,
//! }
//!
//! #[derive(Serialize, Deserialize, JsonSchema)]
//! struct Echoed {
//!     text: String,
//! }
//!
//! struct Echo;
//!
//! impl Tool for Echo {
//!     type Args = EchoArgs;
//!     type Output = Echoed;
//!
//!     fn name(&self) -> &str {
//!         "echo"
//!     }
//!
//!     fn description(&self) -> &str {
//!         "Repeat the given text back. Use when the user says \"echo\" or \"repeat\"."
//!     }
//!
//!     async fn execute(&self, args: EchoArgs, _exec: ExecContext) -> Result<Echoed, ToolError> {
//!         Ok(Echoed { text: args.text })
//!     }
//!
//!     fn render(&self, _args: &EchoArgs, value: &Echoed) -> Vec<ContentBlock> {
//!         vec![ContentBlock::text(value.text.clone())]
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = ToolRegistry::new();
//! registry.register_tool(Echo)?;
//! let call = ToolCall::new("call-1", "echo", r#"{"text": "hi"}"#);
//! let result = registry.execute(call).await;
//! assert!(!result.is_error);
//! assert_eq!(result.content, vec![ContentBlock::text("hi")]);
//! # Ok::<(), dsh_tools::RegistrationError>(())
//! # }).unwrap();
//! ```
//!
//! # Features
//!
//! | Feature | Default | What it adds |
//! |---|---|---|
//! | `macros` | yes | the [`#[tool]`](macro@tool) attribute macro |
//! | `jsonschema` | yes | a full JSON Schema validator for raw schemas outside the subset (an MCP server's, an `anyOf`, a `minimum`) |
//!
//! Typed tools, DSL schemas and raw schemas inside the subset never need `jsonschema`, and it
//! is most of this crate's build (63 of its 92 crates): a crate that declares only such tools
//! can depend on `dsh-tools = { version = "0.1", default-features = false, features =
//! ["macros"] }`. Without the feature a raw schema outside the subset is refused when the
//! definition is built, with [`RegistrationError::SchemaCompile`] whose
//! [`SchemaCompileError::outside_subset`] lists why it is outside; nothing panics.
//!
//! This crate turns on no feature of its dependencies that changes a user's own code:
//! `serde_json` is built without `arbitrary_precision` and `preserve_order` (only the additive
//! `raw_value`), `schemars` without `preserve_order`, `jsonschema` without default features
//! (nothing fetched, no big numbers; it adds `serde_json`'s `float_roundtrip`, which only makes
//! float parsing exact).
//! Exact numbers and key order come from [`json::JsonValue`] instead; see [`json`].
//!
//! Unsafe budget: 0 — none.

#![deny(missing_docs)]

/// The README's example, compiled and run by `cargo test --doc` (it needs the `macros`
/// feature).
#[cfg(all(doctest, feature = "macros"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod agent;
pub mod approval;
mod call;
pub mod card;
mod code_mode;
mod content;
mod definition;
mod error;
mod exec;
pub mod hooks;
pub mod jobs;
pub mod json;
mod layers;
mod pipeline;
pub mod prelude;
mod registry;
pub mod runtime;
pub mod schema;
mod scope;
mod text;
mod violation;

pub use agent::{AgentGone, AgentHandle, AgentRef, ContextSource, InjectedContext};
pub use call::{
    Arguments, CallArguments, ExecToken, ParsedArguments, Services, ToolCall, ToolExecution,
    ToolResult,
};
pub use card::{ToolCallView, ToolResultView};
pub use code_mode::{ToolCallError, typescript_declarations, typescript_type};
pub use content::{ContentBlock, ToolResultRecord, content_text};
pub use definition::{
    ArgsValidation, RESERVED_TOOL_NAME, Tool, ToolDefinition, ToolDefinitionBuilder, ToolOutput,
    ToolSchema,
};
pub use error::{
    FailureCode, PluginError, RegistrationError, RestrictError, ScopeError, ToolError, ToolFailure,
};
pub use exec::ExecContext;
pub use hooks::{
    Approval, ApprovalRequest, Approver, ExecuteNext, ExecuteStage, PostDecision, PreDecision,
    PreNext, Restriction,
};
pub use layers::{DEFAULT_MAX_ARGUMENT_BYTES, RegistryConfig, ToolsChange, ToolsChangeKind};
pub use registry::{ToolRegistry, WeakToolRegistry};
pub use schema::{
    CompileOptions, CompiledSchema, SchemaCompileError, SchemaError, ValueSchema, Violation,
    strip_strict_nulls, validate,
};
pub use scope::{Disposer, Plugin, PluginHandle, Scope};

#[cfg(feature = "macros")]
#[doc = include_str!("tool_macro.md")]
pub use dsh_tools_macros::tool;

/// What the code `#[tool]` generates names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;

    use crate::ContentBlock;
    use serde_json::Value;

    /// The default `render` of a `#[tool]` tool: a string value is the text itself, any other
    /// value its compact JSON.
    pub fn render_value(value: &Value) -> Vec<ContentBlock> {
        match value {
            Value::String(text) => vec![ContentBlock::text(text.clone())],
            other => vec![ContentBlock::text(other.to_string())],
        }
    }
}

/// This crate's version: the version vendored copies of the docs are stamped with.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
