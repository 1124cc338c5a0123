//! The model-facing tools, each as a plugin: `bash` (in `tool/bash.rs`), and the generic job
//! controls `job_output`, `job_list` and `job_kill` (in `tool/jobs.rs`).

mod bash;
mod jobs;

pub use bash::{
    BASH_BACKGROUND_DESCRIPTION, BASH_DESCRIPTION, BASH_JOB_KIND, BASH_TOOL, BashArgs, BashConfig,
    BashPlugin, BashSandbox, COMMAND_MAX_BYTES, ESCALATION_PREFIX, bash_description,
    bash_parameters, bash_parameters_for, parse_bash_arguments, render_bash, render_bash_output,
};
pub use jobs::{
    JobKillOutcome, JobKillValue, JobListValue, JobOutputValue, JobToolsConfig, JobToolsPlugin,
};

use dsh_tools::ToolError;
use serde_json::Value;

/// The canonical value as JSON, for the builder body.
pub(crate) fn value(output: impl serde::Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(output)
        .map_err(|e| ToolError::failed(format!("output could not be serialised: {e}")))
}
