//! The model-facing tools: `bash`, and the generic job controls `job_output`, `job_list` and
//! `job_kill`, each as a plugin.

use crate::shell::{ManagedEnv, ProcessStatus, ShellExecutor, ShellProcess, ShellRequest, Stream};
use crate::value::{BackgroundStart, BashOutput, ForegroundRun, StreamOutput};
use dsh_tools::jobs::{
    JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart, KillOutcome, PublicJobSnapshot,
};
use dsh_tools::json::JsonValue;
use dsh_tools::runtime::RuntimeDriver;
use dsh_tools::{
    ArgsValidation, ContentBlock, ExecContext, Plugin, PluginError, RegistrationError, Scope,
    ToolDefinition, ToolError, ToolOutput, ValueSchema, validate,
};
use presenters::markers::{self, ExitOutcome, SkippedOutput, Truncation};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The `bash` tool's name.
pub const BASH_TOOL: &str = "bash";
/// The job kind (and notice source) of background commands.
pub const BASH_JOB_KIND: &str = "bash";

/// What the model reads to decide when and how to use `bash`.
pub const BASH_DESCRIPTION: &str = "Run a shell command with bash and get its output. \
Use it whenever the user asks to run, execute or try a command, script, build or test \
(\"run the tests\", \"execute this\", \"运行命令\", \"执行脚本\"). \
Each call starts a fresh, non-interactive shell: state such as `cd` or exported variables does \
not carry over, so pass `workdir` instead of `cd`, and never wait for input (stdin is empty). \
A non-zero exit is not an error of the tool: the output ends with `[exit code: N]` (or \
`[killed by signal: NAME]`), and stderr follows a `[stderr]` line. Long output is cut to its \
head and tail, and the complete output is saved to a file whose path the result names. \
Commands time out after `timeout_ms` (default 120000, at most 600000).";

/// How the question an escalation puts to the approver starts (`sandbox: "escalate"`): an
/// approver that grants ordinary calls wholesale can tell these apart and still ask.
pub const ESCALATION_PREFIX: &str = "leave the sandbox: ";

/// The sentence added when background jobs are enabled.
pub const BASH_BACKGROUND_DESCRIPTION: &str = " For long-running work (servers, watchers, \
long builds) set `run_in_background: true`: the call returns a job id at once; read new output \
with `job_output`, stop it with `job_kill`, and a notice arrives when it finishes, so do not \
poll in a loop.";

/// Configuration of the `bash` tool.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct BashConfig {
    /// The byte cap for each model-facing read and completion notice of a background job.
    pub job_output_limit_bytes: usize,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            job_output_limit_bytes: 30_000,
        }
    }
}

/// Loads the `bash` tool. With a jobs runtime ([`BashPlugin::with_jobs`]) the tool offers
/// `run_in_background`; without one the parameter is absent and refused.
#[derive(Clone, Debug)]
pub struct BashPlugin {
    executor: Arc<dyn ShellExecutor>,
    jobs: Option<JobRuntime>,
    config: BashConfig,
}

impl BashPlugin {
    /// The tool over `executor`, foreground only.
    pub fn new(executor: Arc<dyn ShellExecutor>) -> BashPlugin {
        BashPlugin {
            executor,
            jobs: None,
            config: BashConfig::default(),
        }
    }

    /// Enables background jobs through `jobs`.
    pub fn with_jobs(mut self, jobs: JobRuntime) -> BashPlugin {
        self.jobs = Some(jobs);
        self
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, config: BashConfig) -> BashPlugin {
        self.config = config;
        self
    }

    /// The tool's definition.
    pub fn definition(&self) -> Result<ToolDefinition, RegistrationError> {
        bash_tool(Arc::clone(&self.executor), self.jobs.clone(), self.config)
    }
}

impl Plugin for BashPlugin {
    fn name(&self) -> &str {
        BASH_TOOL
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        let definition = self
            .definition()
            .map_err(|e| PluginError::apply(BASH_TOOL, e))?;
        scope
            .register(definition)
            .map_err(|e| PluginError::apply(BASH_TOOL, e))?;
        Ok(())
    }
}

/// The parameter schema; `run_in_background` only when background jobs are enabled.
pub fn bash_parameters(background: bool) -> ValueSchema {
    let mut schema = ValueSchema::closed_object()
        .required(
            "command",
            ValueSchema::string().description("The command to run with `bash -c`."),
        )
        .required(
            "description",
            ValueSchema::string()
                .description("What the command does, in 5-10 words, shown to the user (e.g. \"Run the unit tests\")."),
        )
        .property(
            "timeout_ms",
            ValueSchema::integer().description("Timeout in milliseconds (default 120000, at most 600000)."),
        )
        .property(
            "workdir",
            ValueSchema::string()
                .description("Directory to run in; a relative path is resolved against the session's directory."),
        );
    if background {
        schema = schema.property(
            "run_in_background",
            ValueSchema::boolean()
                .description("Start the command as a background job and return its id at once."),
        );
    }
    schema
}

/// The canonical value's schema, generated from [`BashOutput`]: a background handle, or a
/// foreground outcome.
pub(crate) fn bash_output_schema() -> Result<ValueSchema, dsh_tools::SchemaError> {
    BashOutput::schema()
}

/// The arguments of a `bash` call as the tool reads them, once they passed every check.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BashArgs {
    /// The command for `bash -c` (never blank).
    pub command: String,
    /// What the command does, for the user (never blank).
    pub description: String,
    /// The timeout in milliseconds (positive), when given.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The working directory, when given.
    #[serde(default)]
    pub workdir: Option<String>,
    /// The background switch, when given (only where background jobs are enabled).
    #[serde(default)]
    pub run_in_background: Option<bool>,
    /// `"escalate"`, when the call asks to leave the sandbox.
    #[serde(default)]
    pub sandbox: Option<String>,
    /// Why the call must leave the sandbox (with `sandbox` only).
    #[serde(default)]
    pub justification: Option<String>,
}

/// Reads a `bash` call's argument text exactly as the tool does: the same schema (with
/// `run_in_background` when `background`, and `sandbox`/`justification` when `sandboxed`) and
/// the same rules it cannot express, with the same messages.
pub fn parse_bash_arguments(
    text: &str,
    background: bool,
    sandboxed: bool,
) -> Result<BashArgs, ToolError> {
    let exact = JsonValue::parse(text).map_err(|e| ToolError::invalid_args(e.to_string()))?;
    let mut schema = bash_parameters(background);
    if sandboxed {
        schema = with_escalation(schema);
    }
    check_bash_args(
        &exact,
        || dsh_tools::json::from_str_located(text),
        &schema,
        background,
    )
}

/// Checks the arguments: the background switch, the schema, then the rules it cannot express.
/// `typed` reads them into [`BashArgs`] (from the text when there is one, for exact integers).
fn check_bash_args(
    args: &JsonValue,
    typed: impl FnOnce() -> Result<BashArgs, dsh_tools::Violation>,
    schema: &ValueSchema,
    background: bool,
) -> Result<BashArgs, ToolError> {
    if !background && args.get("run_in_background").is_some() {
        return Err(ToolError::invalid_args(
            "/run_in_background: background jobs are not enabled here; remove `run_in_background` and run the command in the foreground",
        ));
    }
    if let Err(violations) = validate(schema, args) {
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return Err(ToolError::invalid_args(listed.join("; ")));
    }
    // The schema admits any integer; the located read names the field when one does not fit
    // (`-1`, `1e300`, `2^64` for `timeout_ms`).
    let args: BashArgs = typed().map_err(|e| ToolError::invalid_args(e.to_string()))?;
    if args.command.trim().is_empty() {
        return Err(ToolError::invalid_args("/command: must not be empty"));
    }
    if args.description.trim().is_empty() {
        return Err(ToolError::invalid_args(
            "/description: must not be empty (say in 5-10 words what the command does)",
        ));
    }
    match (args.sandbox.as_deref(), args.justification.as_deref()) {
        (Some(_), None) => {
            return Err(ToolError::invalid_args(
                "/justification: required with `sandbox: \"escalate\"`; say why the command must run outside the sandbox (the user reads it)",
            ));
        }
        (Some(_), Some(why)) if why.trim().is_empty() => {
            return Err(ToolError::invalid_args("/justification: must not be empty"));
        }
        (None, Some(_)) => {
            return Err(ToolError::invalid_args(
                "/justification: only with `sandbox: \"escalate\"`",
            ));
        }
        _ => {}
    }
    if args.timeout_ms == Some(0) {
        return Err(ToolError::invalid_args(
            "/timeout_ms: must be a positive number of milliseconds",
        ));
    }
    Ok(args)
}

fn truncation(stream: &StreamOutput) -> Option<Truncation> {
    if !stream.truncated {
        return None;
    }
    // Where the complete stream is, or, said in so many words, why it is not.
    let why = stream.spill_error.as_deref();
    let path = match (stream.spill_path.as_deref(), why) {
        (Some(path), _) => Some(match (stream.spill_limit_bytes, why) {
            (Some(limit), Some(why)) => {
                format!("{path} (only its first {limit} bytes were kept: {why})")
            }
            (Some(limit), None) => format!("{path} (only its first {limit} bytes were kept)"),
            (None, _) => path.to_owned(),
        }),
        (None, Some(why)) => Some(format!("(unavailable: {why})")),
        (None, None) => None,
    };
    Some(Truncation {
        shown_bytes: stream.shown_bytes,
        total_bytes: stream.total_bytes,
        spill_path: path,
    })
}

/// The model-facing text of a `bash` value (the marker contract of `presenters::markers`).
pub fn render_bash_output(value: &BashOutput) -> String {
    let run = match value {
        BashOutput::Background(start) => return markers::background_started(&start.job_id),
        BashOutput::Foreground(run) => run,
    };
    let truncations: Vec<Truncation> = [&run.stdout, &run.stderr]
        .into_iter()
        .filter_map(truncation)
        .collect();
    let outcome = match &run.signal {
        Some(signal) => ExitOutcome::killed(signal.clone()),
        None => ExitOutcome {
            exit_code: run.exit_code,
            signal: None,
        },
    };
    let mut text = markers::render_shell_output(
        &run.stdout.text,
        &run.stderr.text,
        &truncations,
        run.timed_out.then_some(run.timeout_ms),
        &outcome,
    );
    // The executor's notes (a sandbox naming the policy that may have denied something) come
    // last, each in its own bracketed line.
    for note in &run.notes {
        text.push('\n');
        text.push_str(&markers::executor_note(note));
    }
    text
}

/// The model-facing text of a `bash` value given as JSON (a value read back from a log, or
/// rewritten by a hook): [`render_bash_output`] when it is a [`BashOutput`], and otherwise the
/// value's compact JSON, so nothing the value holds is hidden from the model.
pub fn render_bash(value: &Value) -> String {
    match dsh_tools::json::from_value::<BashOutput>(value) {
        Ok(output) => render_bash_output(&output),
        Err(_) => value.to_string(),
    }
}

/// The canonical value as JSON, for the builder body.
fn value(output: impl serde::Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(output)
        .map_err(|e| ToolError::failed(format!("output could not be serialised: {e}")))
}

/// Room kept in each background read for the notes about skipped bytes.
const NOTE_ROOM: usize = 512;

/// Job hooks over a background process: cancel kills the group, `done` reports the exit, and
/// the reader returns new output of both streams, bounded to `limit` bytes each.
fn process_hooks(process: Arc<dyn ShellProcess>, limit: usize) -> JobHooks {
    let killer = Arc::clone(&process);
    let reader = Arc::clone(&process);
    let cursors = Mutex::new((0u64, 0u64));
    let done = async move {
        process.done().await;
        let outcome = match (process.status(), process.exit_code(), process.signal()) {
            (ProcessStatus::Exited, Some(code), _) => {
                JobOutcome::new(JobEnd::Completed).with_detail(format!("exit code: {code}"))
            }
            (_, _, Some(signal)) => {
                JobOutcome::new(JobEnd::Killed).with_detail(format!("signal: {signal}"))
            }
            (ProcessStatus::Killed, Some(code), None) => {
                JobOutcome::new(JobEnd::Killed).with_detail(format!("exit code: {code}"))
            }
            _ => JobOutcome::new(JobEnd::Failed).with_detail("the command could not start"),
        };
        Ok(outcome)
    };
    JobHooks::new(
        move |_reason| {
            killer.kill();
        },
        done,
    )
    .with_reader(move |asked| {
        let mut cursors = cursors.lock().unwrap_or_else(|e| e.into_inner());
        // The runtime hands over the caller's byte budget and bounds the read to it keeping
        // the end, so the streams are read only up to it (nothing more is materialised) and
        // the notes about skipped bytes come last, where the bound keeps them. Reads are
        // offset-based, so sizing them first consumes nothing.
        let budget = limit.min(asked).saturating_sub(NOTE_ROOM).max(64);
        let err_share = budget / 3;
        let err_probe = reader.read_from(Stream::Stderr, cursors.1, err_share);
        let out = reader.read_from(
            Stream::Stdout,
            cursors.0,
            budget - err_probe.text.len().min(err_share),
        );
        let err = reader.read_from(
            Stream::Stderr,
            cursors.1,
            budget.saturating_sub(out.text.len()).max(err_share),
        );
        *cursors = (out.next_offset, err.next_offset);
        let skipped = [(&out, "stdout"), (&err, "stderr")]
            .into_iter()
            .filter(|(read, _)| read.skipped_bytes > 0)
            .map(|(read, stream)| {
                let full_copy = match (&read.spill_path, read.lossy) {
                    (Some(path), false) => Some(path.display().to_string()),
                    _ => None,
                };
                SkippedOutput {
                    stream,
                    skipped_bytes: read.skipped_bytes,
                    lost_because: full_copy
                        .is_none()
                        .then(|| read.spill_error.clone())
                        .flatten(),
                    full_copy,
                }
            })
            .collect::<Vec<_>>();
        markers::render_background_read(&out.text, &err.text, &skipped)
    })
}

/// The `bash` tool's definition.
fn bash_tool(
    executor: Arc<dyn ShellExecutor>,
    jobs: Option<JobRuntime>,
    config: BashConfig,
) -> Result<ToolDefinition, RegistrationError> {
    let background = jobs.is_some();
    let sandbox = executor.sandbox_policy();
    let mut schema = bash_parameters(background);
    let mut description = if background {
        format!("{BASH_DESCRIPTION}{BASH_BACKGROUND_DESCRIPTION}")
    } else {
        BASH_DESCRIPTION.to_owned()
    };
    if let Some(policy) = &sandbox {
        schema = with_escalation(schema);
        description.push_str(&format!(
            " Commands run in a sandbox ({policy}). When a command must run outside it, set \
             `sandbox: \"escalate\"` with a `justification`; the user is asked to approve."
        ));
    }
    let checked = Arc::new(schema.clone());
    let output_schema = bash_output_schema().map_err(|source| RegistrationError::Schema {
        name: BASH_TOOL.to_owned(),
        which: "output",
        source,
    })?;
    ToolDefinition::builder(BASH_TOOL, description)
        // The body checks the arguments itself, so the disabled background switch gets its own
        // clear message rather than a generic "unknown property".
        .raw_parameters_exact(schema.to_json())
        .args_validation(ArgsValidation::Unvalidated)
        .output(
            ToolOutput::new(output_schema, |_, value| {
                vec![ContentBlock::text(render_bash(value))]
            })
            .with_presentation_meta(|_, value| {
                let output: BashOutput = dsh_tools::json::from_value(value).ok()?;
                output.exit_meta().map(|meta| meta.to_value())
            }),
        )
        .present_call(presenters::bash::present_call)
        .present_result(presenters::bash::present_result)
        .execute(move |_, exec: ExecContext| {
            let executor = Arc::clone(&executor);
            let jobs = jobs.clone();
            let schema = Arc::clone(&checked);
            async move {
                let args =
                    check_bash_args(exec.exact_args(), || exec.typed_args(), &schema, background)?;
                dsh_tools::runtime::require(executor.required_drivers())?;
                let request = ShellRequest {
                    command: args.command,
                    workdir: args.workdir.map(PathBuf::from),
                    timeout: args.timeout_ms.map(Duration::from_millis),
                    managed: ManagedEnv {
                        session_id: exec.agent().map(|a| a.session_id().to_owned()),
                        call_id: Some(exec.call_id().to_owned()),
                    },
                    ..ShellRequest::default()
                };
                let cwd = exec.agent().and_then(|a| a.cwd().map(PathBuf::from));
                let executor = match args.justification {
                    Some(justification) => {
                        escalate(&executor, &exec, &request, &justification).await?
                    }
                    None => executor,
                };
                match (args.run_in_background.unwrap_or(false), jobs) {
                    (true, Some(jobs)) => {
                        start_background(&executor, &jobs, request, cwd, &exec, &config)
                    }
                    _ => {
                        let request = ShellRequest {
                            signal: Some(exec.signal().clone()),
                            ..request
                        };
                        let spec = executor
                            .resolve(request, cwd.as_deref())
                            .map_err(ToolError::from_error)?;
                        let result = executor.run(spec).await.map_err(ToolError::from_error)?;
                        value(BashOutput::Foreground(ForegroundRun::from(&result)))
                    }
                }
            }
        })
        .build()
}

/// The `sandbox` and `justification` parameters, offered when the executor has a sandbox.
fn with_escalation(schema: ValueSchema) -> ValueSchema {
    schema
        .property(
            "sandbox",
            ValueSchema::string().constant("escalate").description(
                "Ask to run this command outside the sandbox; the user must approve. Only when the sandbox blocks work the user asked for.",
            ),
        )
        .property(
            "justification",
            ValueSchema::string().description(
                "With `sandbox: \"escalate\"`: why the command must run outside the sandbox, shown to the user who approves.",
            ),
        )
}

/// The executor for a call that asked to leave the sandbox: the unconfined one, only when the
/// registry's approver grants it, with the command and the justification in the question.
/// Without a sandbox there is nothing to leave, and the call runs as it is.
async fn escalate(
    executor: &Arc<dyn ShellExecutor>,
    exec: &ExecContext,
    request: &ShellRequest,
    justification: &str,
) -> Result<Arc<dyn ShellExecutor>, ToolError> {
    let (Some(policy), Some(unconfined)) = (executor.sandbox_policy(), executor.escalated()) else {
        return Ok(Arc::clone(executor));
    };
    let question = format!(
        "{ESCALATION_PREFIX}run `{}` outside the sandbox ({policy}); justification: \
         {justification}",
        request.command
    );
    match exec.request_approval(question).await {
        Ok(()) => {
            tracing::info!(
                call = exec.call_id(),
                "an approved call runs outside the sandbox"
            );
            Ok(unconfined)
        }
        Err(denied) => Err(ToolError::failed(format!(
            "the request to run outside the sandbox was denied ({denied}); the command did not run. Run it inside the sandbox ({policy}), or ask the user"
        ))),
    }
}

fn start_background(
    executor: &Arc<dyn ShellExecutor>,
    jobs: &JobRuntime,
    request: ShellRequest,
    cwd: Option<PathBuf>,
    exec: &ExecContext,
    config: &BashConfig,
) -> Result<Value, ToolError> {
    // No job exists whose id could answer a call that was already cancelled.
    if exec.signal().is_cancelled() {
        return Err(ToolError::failed(
            "the call was cancelled before the job started; no job was created",
        ));
    }
    let label = request.command.clone();
    // Once the id is published the job has its own lifetime: no caller signal reaches it.
    let spec = executor
        .resolve(request, cwd.as_deref())
        .map_err(ToolError::from_error)?;
    let executor = Arc::clone(executor);
    let limit = config.job_output_limit_bytes;
    let mut start = JobStart::new(BASH_JOB_KIND, label, move || {
        let process = executor.start(spec);
        Ok(process_hooks(process, limit))
    })
    .output_limit_bytes(limit);
    if let Some(agent) = exec.agent() {
        start = start.owner(Arc::clone(agent));
    }
    let id = jobs.start(start).map_err(ToolError::from_error)?;
    value(BashOutput::Background(BackgroundStart::new(id.to_string())))
}

// ----- The job-control tools ----------------------------------------------------------------

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
    ToolDefinition::builder(
        "job_output",
        "Read the new output of a background job started with `run_in_background`, and its status. \
Use it when the user asks what a background command printed, how it is doing or whether it is \
done (\"check the server log\", \"is the build finished?\", \"查看后台输出\", \"任务跑完了吗\"). \
Each read returns only what was printed since the previous read. Set `wait: true` to block until \
the job finishes (up to `timeout_ms`, default 30000, at most 600000); a timed-out wait returns \
`[status: running]` and leaves the job alive.",
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
                ValueSchema::integer().description(
                    "How long to wait, in milliseconds (default 30000, at most 600000).",
                ),
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
