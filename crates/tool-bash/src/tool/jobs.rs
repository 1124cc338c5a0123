//! The job-control tools `job_output`, `job_list` and `job_kill`: generic over every producer
//! of a jobs runtime (the `bash` tool is one), with values typed over
//! [`PublicJobSnapshot`].

use super::value;
use dsh_tools::jobs::{JobRuntime, KillOutcome, PublicJobSnapshot};
use dsh_tools::runtime::RuntimeDriver;
use dsh_tools::{
    ContentBlock, ExecContext, Plugin, PluginError, RegistrationError, Scope, ToolDefinition,
    ToolError, ToolOutput, ValueSchema,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
/// Configuration of the job-control tools.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct JobToolsConfig {
    /// The wait of `job_output` with `wait: true` and no `timeout_ms` (30 s).
    pub default_wait: Duration,
    /// The longest wait `timeout_ms` may ask for (10 min).
    pub max_wait: Duration,
    /// How long `job_kill` waits for the job to settle before reporting (the executor's kill
    /// grace plus a margin; 5 s).
    pub kill_wait: Duration,
}

impl Default for JobToolsConfig {
    fn default() -> Self {
        JobToolsConfig {
            default_wait: Duration::from_secs(30),
            max_wait: Duration::from_secs(600),
            kill_wait: Duration::from_secs(5),
        }
    }
}

/// Loads `job_output`, `job_list` and `job_kill` over a jobs runtime and attaches them as its
/// controller (producers can start jobs only while a controller is attached).
#[derive(Clone, Debug)]
pub struct JobToolsPlugin {
    jobs: JobRuntime,
    config: JobToolsConfig,
}

impl JobToolsPlugin {
    /// The tools over `jobs`.
    pub fn new(jobs: JobRuntime) -> JobToolsPlugin {
        JobToolsPlugin {
            jobs,
            config: JobToolsConfig::default(),
        }
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, config: JobToolsConfig) -> JobToolsPlugin {
        self.config = config;
        self
    }

    /// The three definitions.
    pub fn definitions(&self) -> Result<Vec<ToolDefinition>, RegistrationError> {
        Ok(vec![
            job_output_tool(self.jobs.clone(), self.config)?,
            job_list_tool(self.jobs.clone())?,
            job_kill_tool(self.jobs.clone(), self.config)?,
        ])
    }
}

impl Plugin for JobToolsPlugin {
    fn name(&self) -> &str {
        "job-tools"
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        for definition in self
            .definitions()
            .map_err(|e| PluginError::apply("job-tools", e))?
        {
            scope
                .register(definition)
                .map_err(|e| PluginError::apply("job-tools", e))?;
        }
        let controller = self.jobs.attach_controller();
        scope
            .on_dispose(move || controller.dispose())
            .map_err(|e| PluginError::apply("job-tools", e))?;
        Ok(())
    }
}

/// The value of a `job_output` call: the new output, and the job's state after the read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::value::without_descriptions)]
#[non_exhaustive]
pub struct JobOutputValue {
    /// What the job printed since the previous read (bounded; notes name skipped bytes).
    pub text: String,
    /// The job's state at read time.
    pub job: PublicJobSnapshot,
}

/// The value of a `job_list` call: the caller's jobs, running and finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::value::without_descriptions)]
#[non_exhaustive]
pub struct JobListValue {
    /// The jobs, oldest first.
    pub jobs: Vec<PublicJobSnapshot>,
}

/// The value of a `job_kill` call: the job's state, and what the kill did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::value::without_descriptions)]
#[non_exhaustive]
pub struct JobKillValue {
    /// The job's state when the tool reported.
    pub job: PublicJobSnapshot,
    /// What the kill did.
    #[schemars(schema_with = "kill_outcome_schema")]
    pub outcome: JobKillOutcome,
}

/// The schema of a [`JobKillOutcome`]: a string of its serde spellings, without the
/// per-variant prose the doc comments would add.
fn kill_outcome_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<Value> = JobKillOutcome::ALL
        .iter()
        .filter_map(|outcome| serde_json::to_value(outcome).ok())
        .collect();
    schemars::json_schema!({"type": "string", "enum": names})
}

/// What a `job_kill` call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum JobKillOutcome {
    /// The job was stopped, and has settled.
    Stopped,
    /// The job had settled before the call.
    AlreadyFinished,
    /// The job was asked to stop, and has not settled within the tool's wait.
    Stopping,
}

impl JobKillOutcome {
    /// Every outcome.
    pub const ALL: [JobKillOutcome; 3] = [
        JobKillOutcome::Stopped,
        JobKillOutcome::AlreadyFinished,
        JobKillOutcome::Stopping,
    ];
}

/// The output declaration of a job tool: the schema generated from `T`, and a renderer that
/// reads the value back as `T`. A value that does not read (a hook rewrote it) is shown as its
/// JSON, so the model still sees everything it holds.
fn typed_output<T>(
    render: impl Fn(&T) -> String + Send + Sync + 'static,
) -> Result<ToolOutput, dsh_tools::SchemaError>
where
    T: JsonSchema + serde::de::DeserializeOwned,
{
    let schema = ValueSchema::for_type_in_field_order::<T>()?;
    Ok(ToolOutput::new(schema, move |_, value| {
        let text = match dsh_tools::json::from_value::<T>(value) {
            Ok(typed) => render(&typed),
            Err(_) => value.to_string(),
        };
        vec![ContentBlock::text(text)]
    }))
}

fn output_schema_error(name: &str) -> impl Fn(dsh_tools::SchemaError) -> RegistrationError + '_ {
    move |source| RegistrationError::Schema {
        name: name.to_owned(),
        which: "output",
        source,
    }
}

fn caller(exec: &ExecContext) -> Option<String> {
    exec.agent().map(|a| a.session_id().to_owned())
}

fn job_id(args: &Value) -> Result<String, ToolError> {
    let id = args["job_id"].as_str().unwrap_or_default();
    if id.trim().is_empty() {
        return Err(ToolError::invalid_args("/job_id: must not be empty"));
    }
    Ok(id.to_owned())
}

/// The options of a `job_output` call (the schema has already checked the shape; this reads
/// the numbers without guessing, so `-5` is refused rather than read as "no timeout").
#[derive(Deserialize)]
struct JobOutputOptions {
    #[serde(default)]
    wait: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

fn job_output_tool(
    jobs: JobRuntime,
    config: JobToolsConfig,
) -> Result<ToolDefinition, RegistrationError> {
    // The waits are stated as this runtime's configuration sets them.
    let waits = format!(
        "default {}, at most {}",
        config.default_wait.as_millis(),
        config.max_wait.as_millis()
    );
    ToolDefinition::builder(
        "job_output",
        format!("Read the new output of a background job started with `run_in_background`, and its status. \
Use it when the user asks what a background command printed, how it is doing or whether it is \
done (\"check the server log\", \"is the build finished?\", \"查看后台输出\", \"任务跑完了吗\"). \
Each read returns only what was printed since the previous read. Set `wait: true` to block until \
the job finishes (up to `timeout_ms`, {waits}); a timed-out wait returns \
`[status: running]` and leaves the job alive."),
    )
    .parameters(
        ValueSchema::closed_object()
            .required(
                "job_id",
                ValueSchema::string().description("The job id, e.g. \"bash-1\"."),
            )
            .property(
                "wait",
                ValueSchema::boolean().description("Wait for the job to finish first."),
            )
            .property(
                "timeout_ms",
                ValueSchema::integer()
                    .description(format!("How long to wait, in milliseconds ({waits}).")),
            ),
    )
    .output(
        typed_output(|value: &JobOutputValue| {
            let body = if value.text.is_empty() {
                "(no new output)"
            } else {
                value.text.strip_suffix('\n').unwrap_or(&value.text)
            };
            format!("{body}\n{}", value.job.status_line())
        })
        .map_err(output_schema_error("job_output"))?,
    )
    .present_call(presenters::job_output::present_call)
    .present_result(presenters::job_output::present_result)
    .execute(move |args, exec: ExecContext| {
        let jobs = jobs.clone();
        async move {
            let id = job_id(&args)?;
            let caller = caller(&exec);
            let options: JobOutputOptions = exec
                .typed_args()
                .map_err(|e| ToolError::invalid_args(e.to_string()))?;
            if options.wait {
                // Waiting is bounded by a timer.
                dsh_tools::runtime::require(&[RuntimeDriver::Time])?;
                let asked = match options.timeout_ms {
                    Some(0) => {
                        return Err(ToolError::invalid_args(
                            "/timeout_ms: must be a positive number of milliseconds",
                        ));
                    }
                    Some(ms) => Duration::from_millis(ms),
                    None => config.default_wait,
                };
                jobs.wait(
                    &id,
                    asked.min(config.max_wait),
                    caller.as_deref(),
                    exec.signal(),
                )
                .await
                .map_err(ToolError::from_error)?;
            }
            let read = jobs
                .read(&id, caller.as_deref())
                .map_err(ToolError::from_error)?;
            value(JobOutputValue {
                text: read.text,
                job: PublicJobSnapshot::from(&read.snapshot),
            })
        }
    })
    .build()
}

fn job_list_tool(jobs: JobRuntime) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder(
        "job_list",
        "List your background jobs, running and finished, with their ids, labels and statuses. \
Use it when the user asks what is running in the background, or when you need a job's id \
(\"what's still running?\", \"show my background jobs\", \"查看后台任务\", \"有哪些任务在运行\").",
    )
    .parameters(ValueSchema::closed_object())
    .output(
        typed_output(|value: &JobListValue| {
            if value.jobs.is_empty() {
                return String::from("no background jobs");
            }
            value
                .jobs
                .iter()
                .map(|job| format!("{} {} {}", job.id, job.status_line(), job.label))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .map_err(output_schema_error("job_list"))?,
    )
    .concurrency_safe(|_| true)
    .present_call(presenters::job_list::present_call)
    .present_result(presenters::job_list::present_result)
    .execute(move |_, exec: ExecContext| {
        let jobs = jobs.clone();
        async move {
            let jobs = jobs
                .list(caller(&exec).as_deref())
                .iter()
                .map(PublicJobSnapshot::from)
                .collect();
            value(JobListValue { jobs })
        }
    })
    .build()
}

fn job_kill_tool(
    jobs: JobRuntime,
    config: JobToolsConfig,
) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder(
        "job_kill",
        "Stop a background job and every process it started, also those that left its process \
group, and report its final status. Use it when the user asks to stop, kill or cancel a background command \
(\"stop the server\", \"kill that job\", \"停止任务\", \"结束后台进程\"). Stopping a job that \
already finished just reports its status.",
    )
    .parameters(ValueSchema::closed_object().required(
        "job_id",
        ValueSchema::string().description("The job id, e.g. \"bash-1\"."),
    ))
    .output(
        typed_output(|value: &JobKillValue| {
            let id = &value.job.id;
            let line = value.job.status_line();
            match value.outcome {
                JobKillOutcome::AlreadyFinished => format!("job {id} had already finished {line}"),
                JobKillOutcome::Stopping => format!("job {id} is stopping {line}"),
                JobKillOutcome::Stopped => format!("job {id} stopped {line}"),
            }
        })
        .map_err(output_schema_error("job_kill"))?,
    )
    .present_call(presenters::job_kill::present_call)
    .present_result(presenters::job_kill::present_result)
    .execute(move |args, exec: ExecContext| {
        let jobs = jobs.clone();
        async move {
            let id = job_id(&args)?;
            let caller = caller(&exec);
            // The kill waits for the group to go, bounded by a timer.
            dsh_tools::runtime::require(&[RuntimeDriver::Time])?;
            let outcome = jobs
                .kill(&id, caller.as_deref(), "stopped with job_kill")
                .map_err(ToolError::from_error)?;
            let snapshot = match outcome {
                KillOutcome::AlreadyFinished => jobs
                    .get(&id, caller.as_deref())
                    .map_err(ToolError::from_error)?,
                // Report only once the group is gone (or the wait ran out).
                KillOutcome::Requested => jobs
                    .wait(&id, config.kill_wait, caller.as_deref(), exec.signal())
                    .await
                    .map_err(ToolError::from_error)?,
            };
            let outcome = match (outcome, snapshot.status.is_terminal()) {
                (KillOutcome::AlreadyFinished, _) => JobKillOutcome::AlreadyFinished,
                (KillOutcome::Requested, true) => JobKillOutcome::Stopped,
                (KillOutcome::Requested, false) => JobKillOutcome::Stopping,
            };
            value(JobKillValue {
                job: PublicJobSnapshot::from(&snapshot),
                outcome,
            })
        }
    })
    .build()
}
