//! The `bash` tool: its parameters and argument checks, the foreground run and the background
//! start, the rendering of its value, and the job hooks over a background process.
//!
//! Its contract has one home: the arguments are [`BashArgs`] (in `presenters`, whose cards read
//! them too), the parameter schema is derived from that type ([`bash_parameters_for`]), the
//! limits are the executor's ([`ShellExecutor::limits`]) and [`COMMAND_MAX_BYTES`], and the
//! description and the error texts that name a limit are written from those values.

use super::value;
use crate::shell::{
    ManagedEnv, ProcessStatus, ShellExecutor, ShellLimits, ShellProcess, ShellRequest, Stream,
};
use crate::value::{BackgroundStart, BashOutput, ForegroundRun, StreamOutput};
use dsh_tools::jobs::{JobEnd, JobHooks, JobOutcome, JobRuntime, JobStart};
use dsh_tools::json::JsonValue;
use dsh_tools::{
    ContentBlock, ExecContext, Plugin, PluginError, RegistrationError, SchemaError, Scope,
    ToolDefinition, ToolError, ToolOutput, ValueSchema, validate,
};
pub use presenters::bash::{BashArgs, BashSandbox};
use presenters::markers::{self, ExitOutcome, SkippedOutput, Truncation};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest command the tool runs, in bytes: the registry's default limit of a call's
/// argument text ([`dsh_tools::DEFAULT_MAX_ARGUMENT_BYTES`]), so that a command an in-process
/// caller hands over as a value is bounded like one a model writes. Longer than one argument
/// of `execve` may be (128 KiB): the local executor hands such a command to bash on a
/// descriptor.
pub const COMMAND_MAX_BYTES: usize = dsh_tools::DEFAULT_MAX_ARGUMENT_BYTES;
/// The `bash` tool's name.
pub const BASH_TOOL: &str = "bash";
/// The job kind (and notice source) of background commands.
pub const BASH_JOB_KIND: &str = "bash";

/// What the model reads to decide when and how to use `bash`, before the sentence on its
/// timeouts, which [`bash_description`] writes from the executor's limits.
pub const BASH_DESCRIPTION: &str = "Run a shell command with bash and get its output. \
Use it whenever the user asks to run, execute or try a command, script, build or test \
(\"run the tests\", \"execute this\", \"运行命令\", \"执行脚本\"). \
Each call starts a fresh, non-interactive shell: state such as `cd` or exported variables does \
not carry over, so pass `workdir` instead of `cd`, and never wait for input (stdin is empty). \
A non-zero exit is not an error of the tool: the output ends with `[exit code: N]` (or \
`[killed by signal: NAME]`), and stderr follows a `[stderr]` line. Long output is cut to its \
head and tail, and the complete output is saved to a file whose path the result names.";

/// How the question an escalation puts to the approver starts (`sandbox: "escalate"`): an
/// approver that grants ordinary calls wholesale can tell these apart and still ask. The one
/// approval flow (`dsh_tools::approval`) reads it.
pub const ESCALATION_PREFIX: &str = dsh_tools::approval::ESCALATION_PREFIX;

/// Why `run_in_background` is refused where background jobs are not enabled: the model reads
/// it instead of "unknown property".
const BACKGROUND_OFF: &str = "background jobs are not enabled here; remove `run_in_background` \
and run the command in the foreground";

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

/// The parameter schema with the default limits ([`ShellLimits::default`]) and no sandbox;
/// `run_in_background` only when `background`.
pub fn bash_parameters(background: bool) -> Result<ValueSchema, SchemaError> {
    bash_parameters_for(background, false, &ShellLimits::default())
}

/// The parameter schema, derived from [`BashArgs`]: its fields in their order with their doc
/// comments as descriptions, `run_in_background` only when `background` (refused with its own
/// reason otherwise), `sandbox` and `justification` only when `sandboxed`, and `timeout_ms`
/// described with `limits`.
pub fn bash_parameters_for(
    background: bool,
    sandboxed: bool,
    limits: &ShellLimits,
) -> Result<ValueSchema, SchemaError> {
    let derived = ValueSchema::for_type_in_field_order::<BashArgs>()?;
    let mut schema = ValueSchema::closed_object();
    for (name, property) in derived.as_object().into_iter().flat_map(|o| o.properties()) {
        let offered = match name {
            "run_in_background" => background,
            "sandbox" | "justification" => sandboxed,
            _ => true,
        };
        if !offered {
            continue;
        }
        let mut property = property.clone();
        if name == "timeout_ms" {
            let stem = property
                .annotations()
                .description
                .clone()
                .unwrap_or_default();
            property = property.description(timeout_description(&stem, limits));
        }
        let required = derived.as_object().is_some_and(|o| o.is_required(name));
        schema = if required {
            schema.required(name, property)
        } else {
            schema.property(name, property)
        };
    }
    if !background {
        schema = schema.withhold("run_in_background", BACKGROUND_OFF);
    }
    Ok(schema)
}

/// `timeout_ms`'s description: its doc comment with the limits in brackets before the stop.
fn timeout_description(stem: &str, limits: &ShellLimits) -> String {
    format!(
        "{} ({}).",
        stem.trim_end_matches('.'),
        timeout_limits(limits)
    )
}

/// `default N, at most M`, in milliseconds.
fn timeout_limits(limits: &ShellLimits) -> String {
    format!(
        "default {}, at most {}",
        limits.default_timeout.as_millis(),
        limits.max_timeout.as_millis()
    )
}

/// The description the model reads: [`BASH_DESCRIPTION`], the timeouts as `limits` set them,
/// then the background sentence when `background`, and the sandbox's when `sandbox` names one.
pub fn bash_description(limits: &ShellLimits, background: bool, sandbox: Option<&str>) -> String {
    let mut description = format!(
        "{BASH_DESCRIPTION} Commands time out after `timeout_ms` ({}).",
        timeout_limits(limits)
    );
    if background {
        description.push_str(BASH_BACKGROUND_DESCRIPTION);
    }
    if let Some(policy) = sandbox {
        description.push_str(&format!(
            " Commands run in a sandbox ({policy}). When a command must run outside it, set \
             `sandbox: \"escalate\"` with a `justification`; the user is asked to approve."
        ));
    }
    description
}

/// Reads a `bash` call's argument text exactly as the registry and the tool do: the same
/// schema (with `run_in_background` when `background`, and `sandbox`/`justification` when
/// `sandboxed`), the same typed read and the same rules it cannot express, with the same
/// messages.
pub fn parse_bash_arguments(
    text: &str,
    background: bool,
    sandboxed: bool,
) -> Result<BashArgs, ToolError> {
    let exact = JsonValue::parse(text).map_err(|e| ToolError::invalid_args(e.to_string()))?;
    let schema = bash_parameters_for(background, sandboxed, &ShellLimits::default())
        .map_err(ToolError::from_error)?;
    if let Err(violations) = validate(&schema, &exact) {
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return Err(ToolError::invalid_args(listed.join("; ")));
    }
    read_bash_args(|| dsh_tools::json::from_str_located(text))
}

/// Reads arguments the schema accepted into [`BashArgs`] (`typed` reads from the text when
/// there is one, for exact integers), then checks the rules the schema cannot express.
fn read_bash_args(
    typed: impl FnOnce() -> Result<BashArgs, dsh_tools::Violation>,
) -> Result<BashArgs, ToolError> {
    // The schema admits any integer; the located read names the field when one does not fit
    // (`-1`, `1e300`, `2^64` for `timeout_ms`).
    let args: BashArgs = typed().map_err(|e| ToolError::invalid_args(e.to_string()))?;
    if args.command.trim().is_empty() {
        return Err(ToolError::invalid_args("/command: must not be empty"));
    }
    if args.command.len() > COMMAND_MAX_BYTES {
        return Err(ToolError::invalid_args(format!(
            "/command: {} bytes, over the limit of {COMMAND_MAX_BYTES} bytes; write a long \
             script to a file and run the file",
            args.command.len()
        )));
    }
    if args.description.trim().is_empty() {
        return Err(ToolError::invalid_args(
            "/description: must not be empty (say in 5-10 words what the command does)",
        ));
    }
    match (args.sandbox, args.justification.as_deref()) {
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
            .map(|(read, stream)| SkippedOutput {
                stream,
                skipped_bytes: read.skipped_bytes,
                spill_path: read.spill_path.as_ref().map(|p| p.display().to_string()),
                spill_limit_bytes: read.spill_limit_bytes,
                lost: read.lost.clone(),
                lost_because: read.lost.as_ref().and_then(|_| read.spill_error.clone()),
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
    // What this definition offers is decided once, from its executor and jobs runtime; the
    // schema and the description are both written from it.
    let background = jobs.is_some();
    let sandbox = executor.sandbox_policy();
    let limits = executor.limits();
    let schema_error = |which| {
        move |source| RegistrationError::Schema {
            name: BASH_TOOL.to_owned(),
            which,
            source,
        }
    };
    let schema = bash_parameters_for(background, sandbox.is_some(), &limits)
        .map_err(schema_error("parameters"))?;
    let description = bash_description(&limits, background, sandbox.as_deref());
    let output_schema = BashOutput::schema().map_err(schema_error("output"))?;
    ToolDefinition::builder(BASH_TOOL, description)
        // The registry validates every call against it, as for any tool.
        .parameters(schema)
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
            async move {
                let args = read_bash_args(|| exec.typed_args())?;
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
                        value(BashOutput::Foreground(Box::new(ForegroundRun::from(
                            &result,
                        ))))
                    }
                }
            }
        })
        .build()
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
