//! The generators behind the docs' `BEGIN GENERATED` regions: each renders one region's
//! content from the code (types through schemars, tool schemas through the real registry), so
//! the docs cannot drift from it.

use agent_loop::SessionEvent;
use dsh_tools::jobs::JobRuntime;
use dsh_tools::{
    FailureCode, ToolCallView, ToolRegistry, ToolResultView, ValueSchema, typescript_type,
};
use std::sync::Arc;
use tool_bash::{BuiltinTools, LocalExecutor};

/// A region generator: the region's name, the document every checkout must carry it in, and
/// the function producing its content.
pub(crate) struct Generator {
    pub(crate) name: &'static str,
    /// The document (relative to the workspace root) the region belongs in; translations of
    /// that document carry it too, which the bilingual parity check enforces.
    pub(crate) home: &'static str,
    pub(crate) render: fn() -> String,
}

/// Every generator, by region name.
pub(crate) const GENERATORS: &[Generator] = &[
    Generator {
        name: "failure-codes",
        home: "docs/subsystems/tools.md",
        render: failure_codes,
    },
    Generator {
        name: "code-mode-sdk",
        home: "docs/subsystems/tools.md",
        render: code_mode_sdk,
    },
    Generator {
        name: "tool-catalog",
        home: "docs/subsystems/shell.md",
        render: tool_catalog,
    },
    Generator {
        name: "card-vocabulary",
        home: "docs/subsystems/presenters.md",
        render: card_vocabulary,
    },
    Generator {
        name: "session-events",
        home: "docs/subsystems/agent-loop.md",
        render: session_events,
    },
    Generator {
        name: "env-policy-defaults",
        home: "docs/subsystems/shell.md",
        render: env_policy_defaults,
    },
];

/// The registry of the tools this workspace ships, as a model sees them: `bash` with
/// background jobs enabled, and the job-control tools.
fn builtin_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    let jobs = JobRuntime::default();
    let builtin = BuiltinTools::new(Arc::new(LocalExecutor::default()), jobs);
    // Loading these plugins only registers definitions; a failure here is a bug in a built-in
    // tool, which the drift check must report loudly rather than render an empty catalog.
    if let Err(error) = registry.global_scope().load(builtin) {
        panic!("the built-in tools failed to load: {error}");
    }
    registry
}

/// The closed set of failure codes, one line each.
fn failure_codes() -> String {
    let mut out = String::from("| code | produced when |\n|---|---|\n");
    for code in FailureCode::ALL {
        out.push_str(&format!("| `{}` | {} |\n", code.as_str(), code.meaning()));
    }
    out
}

/// The Code Mode TypeScript declarations of the built-in tools.
fn code_mode_sdk() -> String {
    format!("```ts\n{}```\n", builtin_registry().code_mode_sdk(None))
}

/// The model-facing schemas of the built-in tools, exactly as a model request carries them.
fn tool_catalog() -> String {
    let schemas = builtin_registry().schemas(None);
    let json = serde_json::to_string_pretty(&schemas)
        .unwrap_or_else(|error| panic!("tool schemas did not serialise: {error}"));
    format!("```json\n{json}\n```\n")
}

/// The default environment policy's pattern lists, exactly as the local executor applies them.
fn env_policy_defaults() -> String {
    let list = |patterns: &[&str]| patterns.join(" ");
    format!(
        "```text\ninherit = core keeps:     {}\ndefault excludes:         {}\nstart-up (every layer):   {}\nnon-interactive defaults: {}\n```\n",
        list(tool_bash::env::CORE_VARS),
        list(tool_bash::env::DEFAULT_EXCLUDES),
        list(tool_bash::env::START_UP_VARS),
        tool_bash::env::NON_INTERACTIVE
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// A type's schema (through schemars and the subset normaliser) as TypeScript, with fields in
/// the declared order where serde reveals it (docs/design/lossless-json.md).
fn type_of<T: schemars::JsonSchema + serde::de::DeserializeOwned>() -> String {
    match ValueSchema::for_type_in_field_order::<T>() {
        Ok(schema) => typescript_type(&schema, 0),
        Err(error) => panic!(
            "{} is outside the schema subset: {error}",
            std::any::type_name::<T>()
        ),
    }
}

/// The card kinds and their fields, derived from the card types.
fn card_vocabulary() -> String {
    format!(
        "```ts\n/** The pending card of a call (`present_call`). */\ntype ToolCallView = {};\n\n/** The completed card of a call (`present_result`); it replaces the pending one. */\ntype ToolResultView = {};\n```\n",
        type_of::<ToolCallView>(),
        type_of::<ToolResultView>()
    )
}

/// The session event types and their fields, derived from the event type.
fn session_events() -> String {
    format!(
        "```ts\n/** One line of the JSONL session log. */\ntype SessionLogLine = {{ seq: number; ts: string }} & SessionEvent;\n\ntype SessionEvent = {};\n```\n",
        type_of::<SessionEvent>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generator_renders_deterministically() {
        for generator in GENERATORS {
            let first = (generator.render)();
            assert!(!first.is_empty(), "{}", generator.name);
            assert_eq!(
                first,
                (generator.render)(),
                "{} is not deterministic",
                generator.name
            );
        }
    }

    #[test]
    fn the_catalog_lists_the_built_in_tools() {
        let catalog = tool_catalog();
        let json = catalog
            .strip_prefix("```json\n")
            .and_then(|c| c.strip_suffix("\n```\n"))
            .unwrap();
        let schemas: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
        let names: Vec<&str> = schemas
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["bash", "job_kill", "job_list", "job_output"]);
    }
}
