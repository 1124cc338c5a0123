//! The generators behind the docs' `BEGIN GENERATED` regions: each renders one region's
//! content from the code, so the docs cannot drift from it.

use dsh_tools::jobs::JobRuntime;
use dsh_tools::{FailureCode, ToolRegistry};
use std::sync::Arc;
use tool_bash::{BashPlugin, JobToolsPlugin, LocalExecutor};

/// A region generator: its name and a function producing the region's content.
pub(crate) struct Generator {
    pub(crate) name: &'static str,
    pub(crate) render: fn() -> String,
}

/// Every generator, by region name.
pub(crate) const GENERATORS: &[Generator] = &[
    Generator {
        name: "failure-codes",
        render: failure_codes,
    },
    Generator {
        name: "code-mode-sdk",
        render: code_mode_sdk,
    },
];

/// The registry of the tools this workspace ships, as a model sees them: `bash` with
/// background jobs enabled, and the job-control tools.
pub(crate) fn builtin_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    let jobs = JobRuntime::default();
    let bash = BashPlugin::new(Arc::new(LocalExecutor::default())).with_jobs(jobs.clone());
    // Loading these plugins only registers definitions; a failure here is a bug in a built-in
    // tool, which the drift check must report loudly rather than render an empty catalog.
    if let Err(error) = registry.global_scope().load(bash) {
        panic!("the bash plugin failed to load: {error}");
    }
    if let Err(error) = registry.global_scope().load(JobToolsPlugin::new(jobs)) {
        panic!("the job tools failed to load: {error}");
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
