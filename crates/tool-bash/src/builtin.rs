//! The built-in tool set: `bash` and the job-control tools, loaded together.
//!
//! The CLI, the drift check's catalog and the benchmarks all offer the same set; this one
//! constructor is what they load, so the three cannot drift apart.

use crate::shell::ShellExecutor;
use crate::tool::{BashConfig, BashPlugin, JobToolsConfig, JobToolsPlugin};
use dsh_tools::jobs::JobRuntime;
use dsh_tools::{Plugin, PluginError, Scope};
use std::sync::Arc;

/// The plugin name of [`BuiltinTools`].
pub const BUILTIN_TOOLS: &str = "builtin-tools";

/// Loads the built-in tools over one jobs runtime: `bash` (with `run_in_background` unless
/// [`foreground_only`](Self::foreground_only)) and `job_output`, `job_list` and `job_kill`.
///
/// The job-control tools are loaded either way: other producers (an MCP bridge, a download
/// manager) may start jobs on the same runtime.
#[derive(Clone, Debug)]
pub struct BuiltinTools {
    bash: BashPlugin,
    job_tools: JobToolsPlugin,
    background: bool,
    jobs: JobRuntime,
}

impl BuiltinTools {
    /// `bash` over `executor` with background jobs on `jobs`, and the job-control tools.
    pub fn new(executor: Arc<dyn ShellExecutor>, jobs: JobRuntime) -> BuiltinTools {
        BuiltinTools {
            bash: BashPlugin::new(executor),
            job_tools: JobToolsPlugin::new(jobs.clone()),
            background: true,
            jobs,
        }
    }

    /// `bash` without `run_in_background` (the job-control tools stay).
    pub fn foreground_only(mut self) -> BuiltinTools {
        self.background = false;
        self
    }

    /// Replaces `bash`'s configuration.
    pub fn with_bash_config(mut self, config: BashConfig) -> BuiltinTools {
        self.bash = self.bash.with_config(config);
        self
    }

    /// Replaces the job-control tools' configuration.
    pub fn with_job_tools_config(mut self, config: JobToolsConfig) -> BuiltinTools {
        self.job_tools = self.job_tools.with_config(config);
        self
    }

    /// The `bash` plugin as this set loads it.
    pub fn bash(&self) -> BashPlugin {
        if self.background {
            self.bash.clone().with_jobs(self.jobs.clone())
        } else {
            self.bash.clone()
        }
    }

    /// The job-control plugin as this set loads it.
    pub fn job_tools(&self) -> &JobToolsPlugin {
        &self.job_tools
    }
}

impl Plugin for BuiltinTools {
    fn name(&self) -> &str {
        BUILTIN_TOOLS
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        self.bash().apply(scope)?;
        self.job_tools.apply(scope)
    }
}
