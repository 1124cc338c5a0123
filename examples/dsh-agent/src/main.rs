//! `dsh-agent`: the runnable agent of dsh-rs.
//!
//! ```text
//! dsh-agent [-v|-q] run [--model PROVIDER:MODEL [--base-url URL] [--api-key-env VAR]
//!                        [--no-stream] | --script FILE|-] [--system FILE] [--ask] [--log FILE]
//!                       [--cwd DIR] [--json] [--no-background] [--wait-jobs DURATION]
//!                       [--sandbox read-only|workspace-write|off] [--mcp-config FILE]… [--] [PROMPT…]
//! dsh-agent [-v|-q] chat [--no-ask] [the options of run] [--] [PROMPT…]
//! dsh-agent [-v|-q] resume ID [--fork] [the options of run] [--] [PROMPT…]
//! dsh-agent [-v|-q] sessions list [--json] | sessions prune [--older-than DURATION]
//! dsh-agent [-v|-q] replay LOG [--json]
//! dsh-agent [-v|-q] schemas [--strict]
//! dsh-agent [-v|-q] sdk
//! dsh-agent [-v|-q] mcp
//! ```
//!
//! `run` wires the real crates (registry, jobs runtime, the `bash` tool, the job tools,
//! presenters) to a model: `--model PROVIDER:MODEL` (or `DSH_MODEL`) talks to DeepSeek, OpenAI
//! or any OpenAI-compatible server through `openai-adapter`; `--script` plays a scripted model;
//! with neither it plays an embedded demo that needs no network and no key. `chat` runs a turn
//! per line typed, streaming the model's text, until the end of input. Sessions live in a
//! store (`--session-dir`, `DSH_SESSION_DIR`, else the XDG state directory; see `sessions`):
//! `resume` continues one, `sessions list` and `sessions prune` manage them. `--help` on any
//! subcommand lists the options and the exit statuses.

mod approval;
mod cli;
mod logging;
mod mcp;
mod output;
mod render;
mod sessions;

use agent_loop::{
    Agent, AgentDirectory, CardTracker, EventRecord, LOG_WRITE_FAILED, LogEntry, ModelAdapter,
    SessionEndReason, SessionEvent, SessionLog, TurnEndReason,
};
use anyhow::{Context, Result};
use cli::{ChatOptions, Command, ResumeOptions, RunOptions, SessionsCommand};
use dsh_tools::jobs::{JobRuntime, JobSnapshot, JobsConfig, NoticeDelivery};
use dsh_tools::{ToolRegistry, ToolSchema};
use mock_adapter::MockAdapter;
use openai_adapter::{AdapterConfig, OpenAiAdapter};
use render::Style;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tool_bash::{BashPlugin, JobToolsPlugin, LocalConfig, LocalExecutor, ShellExecutor};

/// The embedded demo script: a foreground command, a failing command, a background job, its
/// completion notice and `job_output`.
const DEMO: &str = include_str!("demo.json");
const DEMO_PROMPT: &str = "Show me what the dsh-rs tools can do.";

/// The environment variable that names the model when `--model` is not given.
const MODEL_VARIABLE: &str = "DSH_MODEL";

/// The exit status of a session that ended with background jobs still running, which had to
/// be stopped.
const JOBS_STOPPED_STATUS: u8 = 4;

/// A failure that ends the program with a one-line reason (none when it was already said) and
/// a status.
struct Failure {
    status: u8,
    message: String,
}

impl Failure {
    fn new(status: u8, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl From<output::StdoutFailed> for Failure {
    fn from(_: output::StdoutFailed) -> Failure {
        // `finish` reports the failure itself, which decides the status.
        Failure::new(1, "")
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        // One line: the chain joined, the way a shell user reads it.
        Failure::new(1, format!("{error:#}"))
    }
}

fn main() -> ExitCode {
    let cli = match cli::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(error) if error.use_stderr() => {
            // A usage error: clap's message names the mistake, suggests a fix when one is
            // close, and shows the usage line.
            let _ = error.print();
            return ExitCode::from(2);
        }
        // `--help`, `-h` or `--version`: the answer goes to stdout.
        Err(answer) => {
            let text = answer.render().to_string();
            return finish(output::line(text.trim_end_matches('\n')).map_err(Failure::from));
        }
    };
    logging::install(cli.verbose, cli.quiet);
    let store = Store {
        dir: cli.session_dir,
        retention: cli.retention,
    };
    let outcome = match cli.command {
        None => output::text(&cli::help()).map_err(Failure::from),
        Some(command) => execute(command, &store),
    };
    finish(outcome)
}

/// The exit status, and the one line on stderr that says why when it is not 0. A failed stdout
/// decides: whatever else went wrong followed from it. A reader that went away (`EPIPE`, as
/// with `| head`) ends the program quietly, the way a Unix tool killed by `SIGPIPE` does.
fn finish(outcome: Result<(), Failure>) -> ExitCode {
    if let Some(error) = output::failure() {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            return ExitCode::from(output::BROKEN_PIPE_STATUS);
        }
        output::say(&format!("dsh-agent: cannot write to stdout: {error}"));
        return ExitCode::from(1);
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // The reason may quote the model or a tool (a provider's error text): escaped like
            // everything else that reaches the terminal.
            if !failure.message.is_empty() {
                output::say(&format!(
                    "dsh-agent: {}",
                    presenters::escape_controls(&failure.message)
                ));
            }
            ExitCode::from(failure.status)
        }
    }
}

/// The session store options, global to every subcommand.
struct Store {
    dir: Option<String>,
    retention: Duration,
}

impl Store {
    fn open(&self) -> Result<agent_loop::FsSessionStore, Failure> {
        sessions::store(self.dir.as_deref())
    }
}

fn execute(command: Command, store: &Store) -> Result<(), Failure> {
    let block_on = |session: std::pin::Pin<Box<dyn std::future::Future<Output = _>>>| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let ended = runtime.block_on(session);
        // A chat ended by SIGTERM leaves a thread blocked reading stdin; the program must not
        // wait for a line nobody will type.
        runtime.shutdown_timeout(Duration::from_millis(200));
        ended
    };
    match command {
        Command::Sessions { action } => {
            let sessions = store.open()?;
            match action {
                SessionsCommand::List { json } => sessions::list(&sessions, json),
                SessionsCommand::Prune { older_than } => {
                    sessions::prune(&sessions, older_than.unwrap_or(store.retention))
                }
            }
        }
        Command::Resume(ResumeOptions { id, fork, run }) => {
            let start = if fork {
                sessions::Start::Fork(id)
            } else {
                sessions::Start::Resume(id)
            };
            block_on(Box::pin(self::run(run, Mode::Once, store, start)))
        }
        Command::Schemas { strict } => {
            let (registry, _) = registry(true);
            let schemas: Vec<ToolSchema> = if strict {
                registry
                    .visible(None)
                    .iter()
                    // A raw schema outside the subset has no strict projection; it is sent as
                    // declared.
                    .map(|tool| ToolSchema {
                        parameters: tool
                            .parameters()
                            .to_strict_json()
                            .unwrap_or_else(|| tool.parameters().json().clone()),
                        ..tool.schema()
                    })
                    .collect()
            } else {
                registry.schemas(None)
            };
            let text = serde_json::to_string_pretty(&schemas).context("serialising the schemas")?;
            Ok(output::line(&text)?)
        }
        Command::Sdk => {
            let (registry, _) = registry(true);
            Ok(output::text(&registry.code_mode_sdk(None))?)
        }
        Command::Replay { log, json } => replay(&log, json),
        Command::Mcp => {
            let (registry, jobs) = registry(true);
            block_on(Box::pin(async move {
                mcp::serve(registry, jobs).await.map_err(Failure::from)
            }))
        }
        Command::Run(options) => block_on(Box::pin(run(
            options,
            Mode::Once,
            store,
            sessions::Start::New,
        ))),
        Command::Chat(ChatOptions { mut run, no_ask }) => {
            run.ask = !no_ask;
            block_on(Box::pin(self::run(
                run,
                Mode::Chat,
                store,
                sessions::Start::New,
            )))
        }
    }
}

/// The registry of the built-in tools over an unconfined shell, and the jobs runtime behind
/// them.
fn registry(background: bool) -> (ToolRegistry, JobRuntime) {
    registry_with(background, Arc::new(LocalExecutor::default()))
}

/// The bash tool's executor for `--sandbox`, and what `session/start` records of it. An
/// explicit mode the system cannot enforce is a usage error; the default falls back to `off`
/// with a warning line on stderr. The shell's spill files go to `spill_dir` (the session's).
fn shell_executor(
    choice: Option<&str>,
    cwd: &Path,
    spill_dir: &Path,
) -> Result<(Arc<dyn ShellExecutor>, serde_json::Value), Failure> {
    let mut config = LocalConfig::default();
    config.spill_dir = Some(spill_dir.to_path_buf());
    let off = |why: Option<String>| {
        let mut report = serde_json::json!({"mode": "off"});
        if let Some(why) = why {
            report["reason"] = why.into();
        }
        (
            Arc::new(LocalExecutor::new(config.clone())) as Arc<dyn ShellExecutor>,
            report,
        )
    };
    let mode = match choice {
        Some("off") => return Ok(off(None)),
        Some("read-only") => "read-only",
        _ => "workspace-write",
    };
    match sandboxed(mode, cwd, config.clone()) {
        Ok(confined) => Ok(confined),
        Err(why) if choice.is_none() => {
            output::say(&format!(
                "dsh-agent: warning: the shell sandbox is off: {why}"
            ));
            Ok(off(Some(why)))
        }
        Err(why) => Err(Failure::new(2, format!("--sandbox {mode}: {why}"))),
    }
}

/// A Landlock-sandboxed executor in `mode` with `cwd` as its workspace root.
#[cfg(target_os = "linux")]
fn sandboxed(
    mode: &str,
    cwd: &Path,
    config: LocalConfig,
) -> Result<(Arc<dyn ShellExecutor>, serde_json::Value), String> {
    use tool_bash::sandbox::{SandboxBackend, SandboxMode, SandboxPolicy, SandboxedExecutor};
    let mode = if mode == "read-only" {
        SandboxMode::ReadOnly
    } else {
        SandboxMode::WorkspaceWrite
    };
    let policy = SandboxPolicy::new(mode).with_workspace_root(cwd);
    let executor = SandboxedExecutor::new(policy, SandboxBackend::Landlock, config)
        .map_err(|e| e.to_string())?;
    let report = serde_json::to_value(executor.report()).map_err(|e| e.to_string())?;
    Ok((Arc::new(executor), report))
}

#[cfg(not(target_os = "linux"))]
fn sandboxed(
    _mode: &str,
    _cwd: &Path,
    _config: LocalConfig,
) -> Result<(Arc<dyn ShellExecutor>, serde_json::Value), String> {
    Err(String::from("the shell sandbox needs Linux (Landlock)"))
}

/// The registry of the built-in tools with `executor` under `bash`, and the jobs runtime
/// behind them.
fn registry_with(background: bool, executor: Arc<dyn ShellExecutor>) -> (ToolRegistry, JobRuntime) {
    let registry = ToolRegistry::new();
    let jobs = JobRuntime::new(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let mut bash = BashPlugin::new(executor);
    if background {
        bash = bash.with_jobs(jobs.clone());
    }
    // Loading the built-in plugins only registers definitions; failing here is a bug in this
    // program, which must not run with half its tools.
    if let Err(error) = registry.global_scope().load(bash) {
        panic!("the bash plugin failed to load: {error}");
    }
    if let Err(error) = registry
        .global_scope()
        .load(JobToolsPlugin::new(jobs.clone()))
    {
        panic!("the job tools failed to load: {error}");
    }
    // Once nobody reads stdout (`| head` has closed it, or it is full), the session's work
    // would go unseen: no further command starts.
    if let Err(error) = registry.global_scope().guard(|_| {
        output::closed()
            .is_cancelled()
            .then(|| String::from("stdout is closed; no more commands are started"))
    }) {
        panic!("the stdout guard failed to install: {error}");
    }
    (registry, jobs)
}

fn load_script(options: &RunOptions) -> Result<MockAdapter, Failure> {
    let text = match options.script.as_deref() {
        None => DEMO.to_owned(),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Failure::new(2, format!("cannot read the script from stdin: {e}")))?;
            text
        }
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Failure::new(2, format!("cannot read the script {path}: {e}")))?,
    };
    let source = options.script.as_deref().unwrap_or("the demo script");
    MockAdapter::from_json(&text).map_err(|e| Failure::new(2, format!("{source}: {e}")))
}

/// The model a run talks to.
enum Model {
    /// A script (the demo without `--script`), checked for steps left over at the end.
    Scripted(MockAdapter),
    /// A provider through the OpenAI-compatible adapter.
    Remote(OpenAiAdapter),
}

impl Model {
    fn adapter(&self) -> Arc<dyn ModelAdapter> {
        match self {
            Model::Scripted(script) => Arc::new(script.clone()),
            Model::Remote(adapter) => Arc::new(adapter.clone()),
        }
    }
}

/// `--model`, else `DSH_MODEL` unless a script was asked for; a model's endpoint options
/// without a model are a mistake worth saying.
fn select_model(options: &RunOptions) -> Result<Model, Failure> {
    let from_env = std::env::var(MODEL_VARIABLE)
        .ok()
        .filter(|spec| !spec.trim().is_empty() && options.script.is_none());
    let Some(spec) = options.model.clone().or(from_env) else {
        for (given, flag) in [
            (options.base_url.is_some(), "--base-url"),
            (options.api_key_env.is_some(), "--api-key-env"),
            (options.no_stream, "--no-stream"),
        ] {
            if given {
                return Err(Failure::new(
                    2,
                    format!("{flag} needs a model (--model PROVIDER:MODEL or {MODEL_VARIABLE})"),
                ));
            }
        }
        return load_script(options).map(Model::Scripted);
    };
    let config = AdapterConfig::from_spec(
        spec.trim(),
        options.base_url.as_deref(),
        options.api_key_env.as_deref(),
    )
    .map_err(|e| Failure::new(2, e.to_string()))?
    .streaming(!options.no_stream);
    OpenAiAdapter::new(config)
        .map(Model::Remote)
        .map_err(|e| Failure::new(1, e.to_string()))
}

/// The system prompt of a model run: `--system FILE`, or one that names the tools, the working
/// directory and the operating system. A script ignores it.
fn system_prompt(
    options: &RunOptions,
    registry: &ToolRegistry,
    cwd: &Path,
) -> Result<String, Failure> {
    if let Some(path) = &options.system {
        return std::fs::read_to_string(path)
            .map_err(|e| Failure::new(2, format!("cannot read the system prompt {path}: {e}")));
    }
    let tools = registry
        .schemas(None)
        .into_iter()
        .map(|tool| tool.name)
        .collect::<Vec<_>>()
        .join(", ");
    Ok(default_system_prompt(&tools, cwd))
}

fn default_system_prompt(tools: &str, cwd: &Path) -> String {
    format!(
        "You are dsh-agent, an agent that works on the user's machine through tools.\n\
         Tools: {tools}. Run shell commands with bash; long-running commands can run in the \
         background, and the job tools list, read and stop them.\n\
         Working directory: {cwd}\n\
         Operating system: {os} ({arch})\n\
         Prefer reading before changing; say plainly what you did and what you found.",
        cwd = cwd.display(),
        os = std::env::consts::OS,
        arch = std::env::consts::ARCH,
    )
}

/// One turn (`run`) or a turn per line typed (`chat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Once,
    Chat,
}

/// A model adapter that also writes text and reasoning to stdout as they stream, for `chat`,
/// where the assistant's message is then not printed again.
struct Echo {
    inner: Arc<dyn ModelAdapter>,
    style: Style,
}

impl ModelAdapter for Echo {
    fn stream(
        &self,
        request: agent_loop::ModelRequest,
        signal: CancellationToken,
    ) -> agent_loop::ModelStream {
        use futures::StreamExt;
        let style = self.style;
        // What was last written: the label goes out once per run of the same kind.
        let mut last: Option<bool> = None;
        Box::pin(self.inner.stream(request, signal).map(move |item| {
            let (reasoning, delta) = match &item {
                Ok(agent_loop::ModelEvent::ReasoningDelta(d)) => (true, d.as_str()),
                Ok(agent_loop::ModelEvent::TextDelta(d)) => (false, d.as_str()),
                Ok(agent_loop::ModelEvent::Finish { .. }) | Err(_) if last.is_some() => {
                    last = None;
                    let _ = output::text("\n");
                    return item;
                }
                _ => return item,
            };
            if last != Some(reasoning) {
                let label = if reasoning {
                    render::thinking_label(style)
                } else {
                    render::agent_label(style)
                };
                let gap = if last.is_some() { "\n" } else { "" };
                let _ = output::text(&format!("{gap}{label} "));
                last = Some(reasoning);
            }
            let _ = output::text(&presenters::escape_controls(delta));
            item
        }))
    }
}

/// Reads one line from stdin; `None` at the end of input (Ctrl-D).
async fn read_line() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    })
    .await
    .ok()
    .flatten()
}

/// The turns of `chat`: the prompt given on the command line, then one per line read, until
/// the end of input. Ctrl-C while a turn runs cancels that turn only.
async fn converse(agent: &Agent, first: Option<String>, style: Style) -> Result<(), Failure> {
    let mut interrupt =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let mut next = first;
    loop {
        let input = match next.take() {
            Some(input) => input,
            None => {
                output::text(&format!("{} ", style.bold_text("you ›")))?;
                match read_line().await {
                    Some(line) => line,
                    None => {
                        output::line("")?;
                        return Ok(());
                    }
                }
            }
        };
        let input = input.trim().to_owned();
        if input.is_empty() {
            continue;
        }
        // A Ctrl-C pressed at the prompt must not cancel the turn about to start.
        if let Some(signal) = interrupt.as_mut() {
            while futures::FutureExt::now_or_never(signal.recv()).is_some() {}
        }
        let turn = agent.run(input);
        tokio::pin!(turn);
        loop {
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ended = &mut turn => {
                    ended.map_err(|e| Failure::new(1, e.to_string()))?;
                    break;
                }
                _ = interrupted => agent.cancel_turn(),
            }
        }
    }
}

async fn run(
    options: RunOptions,
    mode: Mode,
    store: &Store,
    start: sessions::Start,
) -> Result<(), Failure> {
    // First, so a signal from now on ends the session the recorded way.
    let mut interrupts = sessions::Interrupts::catch(mode == Mode::Chat);
    let interrupted = interrupts.token.clone();
    let model = select_model(&options)?;
    let store_dir = store.open()?;
    let given_cwd = match &options.cwd {
        Some(dir) => Some(PathBuf::from(dir)),
        None if matches!(start, sessions::Start::New) => Some(
            std::env::current_dir()
                .map_err(|e| Failure::new(1, format!("no working directory: {e}")))?,
        ),
        None => None,
    };
    if let Some(cwd) = &given_cwd
        && !cwd.is_dir()
    {
        return Err(Failure::new(
            2,
            format!("--cwd {}: not a directory", cwd.display()),
        ));
    }
    let opened = sessions::open(
        &store_dir,
        &start,
        given_cwd.as_deref().unwrap_or(Path::new(".")),
    )?;
    // After opening: the session this run holds is in use, so the prune keeps it however
    // long it was idle (`resume` of a session past the retention).
    sessions::prune_at_start(&store_dir, store.retention);
    let resumed_log = opened.log;
    let lease = opened.lease;
    let cwd = match given_cwd {
        Some(cwd) => cwd,
        None => resumed_log
            .as_ref()
            .and_then(sessions::recorded_cwd)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    if !cwd.is_dir() {
        return Err(Failure::new(
            2,
            format!(
                "the session's working directory {} is gone (give another with --cwd)",
                cwd.display()
            ),
        ));
    }
    let (executor, sandbox) = shell_executor(options.sandbox.as_deref(), &cwd, lease.spill_dir())?;
    let (registry, jobs) = registry_with(!options.no_background, executor);
    if options.ask {
        let cards_on_terminal =
            !options.json && std::io::IsTerminal::is_terminal(&std::io::stdout());
        approval::install(&registry, cards_on_terminal)
            .context("installing the --ask approvals")?;
    }
    let mcp_servers = mcp::load_servers(&registry, &cwd, &options.mcp_config)
        .await
        .map_err(|e| Failure::new(2, format!("{e:#}")))?;
    // Registered last, so that its description declares every other tool, MCP ones included.
    let _code_mode = if options.no_code_mode {
        None
    } else {
        Some(
            tool_code::register_run_code(&registry, tool_code::CodeModeLimits::default())
                .context("registering run_code")?,
        )
    };
    let style = Style::detect();
    let ending: Arc<Mutex<SessionEnding>> = Arc::default();
    let printer = {
        let registry = registry.clone();
        let json = options.json;
        let chat = mode == Mode::Chat;
        let ending = Arc::clone(&ending);
        let tracker = Mutex::new(CardTracker::new(registry, None));
        move |record: &EventRecord| {
            ending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .observe(&record.event);
            // A failed write is remembered by `output` and ends the session (see `finish`).
            if json {
                let _ = output::line(&record.to_json_line());
                return;
            }
            let mut tracker = tracker.lock().unwrap_or_else(|e| e.into_inner());
            tracker.observe(&record.event);
            // In a chat the text and reasoning were written as they streamed, and the user's
            // line is on the screen already.
            if chat
                && matches!(
                    record.event,
                    SessionEvent::AssistantMessage { .. } | SessionEvent::UserMessage { .. }
                )
            {
                return;
            }
            if let Some(text) = render::event(&record.event, tracker.cards(), style) {
                let _ = output::line(&text);
            }
        }
    };
    let adapter = match mode {
        Mode::Chat if !options.json => Arc::new(Echo {
            inner: model.adapter(),
            style,
        }),
        _ => model.adapter(),
    };
    let mut builder = Agent::builder(registry.clone(), adapter);
    if let Model::Remote(_) = &model {
        builder = builder.system_prompt(system_prompt(&options, &registry, &cwd)?);
    }
    let mut builder = builder
        .cwd(cwd)
        .jobs(jobs.clone())
        .sandbox(sandbox)
        .subscriber(printer)
        .session_id(lease.id())
        .log(lease.log_path());
    // A resumed run without a prompt gives the notices waiting (a lost job's) their turn.
    let resuming = resumed_log.is_some();
    if let Some(log) = resumed_log {
        builder = builder.resume(log);
    }
    if let Some(log) = &options.log {
        builder = builder.log(log);
    }
    let agent = builder
        .build()
        .map_err(|e| Failure::new(1, format!("cannot start the agent: {e}")))?;
    let directory = AgentDirectory::new();
    directory.insert(&agent);
    jobs.set_turn_opener(Arc::new(directory.clone()));
    let _stop_watch = cancel_when_stdout_closes(&agent);
    let _interrupt_watch = cancel_when_interrupted(&agent, &interrupted);
    tracing::info!(session = %lease.id(), dir = %store_dir.root().display(), "session");

    let first = match mode {
        Mode::Once if resuming && options.prompt.is_empty() => {
            // Nothing new from the user: the notices waiting (a lost job's) get their turn.
            let pending = until_interrupted(&agent, &interrupted, agent.run_pending())
                .await
                .map_err(|e| Failure::new(1, e.to_string()))?;
            interrupts.release_sigint();
            Some(pending.map_or(TurnEndReason::Completed, |outcome| outcome.reason))
        }
        Mode::Once => {
            let prompt = if options.prompt.is_empty() {
                DEMO_PROMPT.to_owned()
            } else {
                options.prompt.join(" ")
            };
            let outcome = until_interrupted(&agent, &interrupted, agent.run(prompt))
                .await
                .map_err(|e| Failure::new(1, e.to_string()))?;
            interrupts.release_sigint();
            Some(outcome.reason)
        }
        Mode::Chat => {
            let prompt = (!options.prompt.is_empty()).then(|| options.prompt.join(" "));
            let conversation = converse(&agent, prompt, style);
            tokio::pin!(conversation);
            tokio::select! {
                ended = &mut conversation => ended?,
                // The watch cancelled the running turn; once it has closed, the session ends.
                () = async { interrupted.cancelled().await; agent.wait_idle().await } => {}
            }
            None
        }
    };
    // Background work may still be running; its notices open turns of their own. A signal
    // stops the wait as a closed stdout does.
    let stop = CancellationToken::new();
    let _stop_wait = {
        let stop = stop.clone();
        let interrupted = interrupted.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = output::closed().cancelled() => {}
                () = interrupted.cancelled() => {}
            }
            stop.cancel();
        })
    };
    let stopped = settle_background(&agent, &directory, &jobs, options.wait_jobs, stop).await;
    directory.wait_woken().await;
    agent.wait_idle().await;
    // Disposing the agent kills the jobs it still owns, and records the notices no turn took.
    agent.dispose().await;
    jobs.teardown().await;
    // The session's last line, written whole before the lease (the lock) goes.
    if interrupted.is_cancelled() {
        agent.end_session(SessionEndReason::Interrupted);
        drop(lease);
        return Err(Failure::new(
            130,
            "interrupted: the session was ended (continue it with `dsh-agent resume ID`, ID from `dsh-agent sessions list`)",
        ));
    }
    let failed = {
        let ending = ending.lock().unwrap_or_else(|e| e.into_inner());
        ending.model_error.is_some() || ending.last_reason == Some(TurnEndReason::Error)
    };
    agent.end_session(if failed {
        SessionEndReason::Failed
    } else {
        SessionEndReason::Completed
    });
    drop(lease);
    if let Some(servers) = mcp_servers {
        servers.shutdown().await;
    }
    if let Some(failure) = agent.log_error() {
        return Err(Failure::new(1, failure.to_string()));
    }
    let ending = std::mem::take(&mut *ending.lock().unwrap_or_else(|e| e.into_inner()));
    for notice in &ending.undelivered {
        output::say(&format!(
            "dsh-agent: this notice never reached the model: {}",
            presenters::escape_controls(notice)
        ));
    }
    // A chat's turns are judged as they happen (a cancelled or failed turn is shown and the
    // session goes on); a single run is judged by how it ended.
    if let Some(first) = first {
        ending.verdict(first)?;
    }
    // A script with steps left over did not play out as written.
    if let Model::Scripted(script) = &model {
        script
            .check_exhausted()
            .map_err(|e| Failure::new(1, e.to_string()))?;
    }
    // `settle_background` already named the jobs it stopped.
    if stopped.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(JOBS_STOPPED_STATUS, ""))
    }
}

/// Runs `turn`, cancelling it once `interrupted` fires, even if that happened before it began.
async fn until_interrupted<T>(
    agent: &Agent,
    interrupted: &CancellationToken,
    turn: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(turn);
    tokio::select! {
        // The turn first: its first poll begins it, so the cancellation below reaches it.
        biased;
        ended = &mut turn => ended,
        () = interrupted.cancelled() => {
            agent.cancel_turn();
            turn.await
        }
    }
}

/// Cancels the agent's turn at a caught signal (see [`sessions::Interrupts`]), whichever turn
/// runs then. The task ends with the runtime.
fn cancel_when_interrupted(
    agent: &Agent,
    interrupted: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let agent = agent.clone();
    let interrupted = interrupted.clone();
    tokio::spawn(async move {
        interrupted.cancelled().await;
        agent.cancel_turn();
    })
}

/// Cancels the agent's turn once stdout fails; the stdout guard in [`registry`] refuses every
/// command after that, also in turns a job notice opens. The task ends with the runtime.
fn cancel_when_stdout_closes(agent: &Agent) -> tokio::task::JoinHandle<()> {
    let agent = agent.clone();
    tokio::spawn(async move {
        output::closed().cancelled().await;
        agent.cancel_turn();
    })
}

/// How the session ended, as its events tell: the last turn's reason (woken turns included),
/// the last model error and the notices no turn took.
#[derive(Debug, Default)]
struct SessionEnding {
    last_reason: Option<TurnEndReason>,
    model_error: Option<String>,
    undelivered: Vec<String>,
}

impl SessionEnding {
    fn observe(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::TurnEnd { reason, .. } => self.last_reason = Some(*reason),
            // A log failure is reported from `Agent::log_error`, naming the log.
            SessionEvent::Error { code, .. } if code.as_deref() == Some(LOG_WRITE_FAILED) => {}
            SessionEvent::Error { message, .. } => self.model_error = Some(message.clone()),
            SessionEvent::ContextUndelivered { contexts } => self
                .undelivered
                .extend(contexts.iter().map(|c| c.content.clone())),
            _ => {}
        }
    }

    /// The exit verdict. A model error in any turn fails the run (a script that ran out must
    /// not look like a success), and so does a notice that never reached the model; otherwise
    /// the last turn decides. `first` stands in when no `turn/end` was seen.
    fn verdict(self, first: TurnEndReason) -> Result<(), Failure> {
        if let Some(message) = self.model_error {
            return Err(Failure::new(1, message));
        }
        if !self.undelivered.is_empty() {
            return Err(Failure::new(
                1,
                format!(
                    "{} job notice(s) never reached the model (the wake-up limit was spent)",
                    self.undelivered.len()
                ),
            ));
        }
        match self.last_reason.unwrap_or(first) {
            TurnEndReason::Completed | TurnEndReason::Concluded => Ok(()),
            TurnEndReason::MaxSteps => Err(Failure::new(3, "the turn stopped at the step limit")),
            TurnEndReason::Cancelled => Err(Failure::new(130, "the turn was cancelled")),
            TurnEndReason::Error => Err(Failure::new(1, "the model failed")),
            other => Err(Failure::new(
                1,
                format!("the turn ended: {}", other.as_str()),
            )),
        }
    }
}

/// Waits until the agent is idle, every turn a job notice opened has finished, and none of the
/// agent's jobs still runs, for at most `wait` from the moment the session is first found with
/// jobs running, and says so on stderr at once (which jobs, how long, how to stop them).
/// Returns the jobs still running when the wait ran out, Ctrl-C was pressed or `stop` fired;
/// the caller stops them (disposing the agent kills them). `wait` zero stops them at once.
async fn settle_background(
    agent: &Agent,
    directory: &AgentDirectory,
    jobs: &JobRuntime,
    wait: Duration,
    stop: CancellationToken,
) -> Vec<JobSnapshot> {
    let running = || -> Vec<JobSnapshot> {
        jobs.list(Some(agent.session_id()))
            .into_iter()
            .filter(|job| !job.status.is_terminal())
            .collect()
    };
    let mut deadline = None;
    let mut announced = std::collections::BTreeSet::new();
    // Registered before the announcement that offers Ctrl-C, so the offer holds from the start.
    let mut interrupt = None;
    loop {
        agent.wait_idle().await;
        directory.wait_woken().await;
        let still = running();
        if still.is_empty() {
            return still;
        }
        if stop.is_cancelled() {
            return still;
        }
        let first = deadline.is_none();
        // A wait too long for the clock to count (`--wait-jobs 500000000000y`) has no end.
        let deadline =
            *deadline.get_or_insert_with(|| tokio::time::Instant::now().checked_add(wait));
        if interrupt.is_none() && !wait.is_zero() {
            interrupt =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        }
        let new: Vec<&JobSnapshot> = still
            .iter()
            .filter(|job| announced.insert(job.id.to_string()))
            .collect();
        if !new.is_empty() {
            let left = match deadline {
                Some(deadline) if !first => {
                    deadline.saturating_duration_since(tokio::time::Instant::now())
                }
                _ => wait,
            };
            output::say(&announcement(&new, left, wait));
        }
        for job in &still {
            // `settled`, not `wait`: the host waiting must not take the notice from the model.
            // It returns once the notice went out and its wake-up, if any, was registered with
            // the directory, so the next `wait_woken` sees that turn.
            let settled = jobs.settled(job.id.as_str(), Some(agent.session_id()));
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            let ran_out = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            let why = tokio::select! {
                _ = settled => continue,
                () = ran_out => "the wait ran out",
                _ = interrupted => "interrupted",
                () = stop.cancelled() => "stdout is closed",
            };
            let left = running();
            // With `--wait-jobs 0` the announcement already said they are being stopped.
            if !left.is_empty() && !wait.is_zero() {
                output::say(&format!(
                    "dsh-agent: stopping {} ({why}): {}",
                    count(left.len()),
                    job_ids(&left.iter().collect::<Vec<_>>()),
                ));
            }
            return left;
        }
    }
}

/// The line that says, as soon as the session has ended, which jobs still run, how long the
/// program waits for them and how to stop them.
fn announcement(jobs: &[&JobSnapshot], left: Duration, wait: Duration) -> String {
    let listed = jobs
        .iter()
        .map(|job| format!("{} ({})", job.id, presenters::escape_controls(&job.label)))
        .collect::<Vec<_>>()
        .join(", ");
    let still = format!(
        "dsh-agent: {} still running after the session: {listed}",
        count(jobs.len())
    );
    if left.is_zero() {
        let why = if wait.is_zero() {
            "--wait-jobs 0"
        } else {
            "the wait ran out"
        };
        return format!("{still}; stopping {} now ({why})", them(jobs.len()));
    }
    // Whole milliseconds, in the syntax `--wait-jobs` takes.
    let left = Duration::new(left.as_secs(), left.subsec_millis() * 1_000_000);
    format!(
        "{still}; waiting up to {} for {} (Ctrl-C stops {} now; --wait-jobs sets the wait)",
        humantime::format_duration(left),
        them(jobs.len()),
        them(jobs.len()),
    )
}

fn count(n: usize) -> String {
    match n {
        1 => String::from("1 background job"),
        n => format!("{n} background jobs"),
    }
}

fn them(n: usize) -> &'static str {
    if n == 1 { "it" } else { "them" }
}

fn job_ids(jobs: &[&JobSnapshot]) -> String {
    jobs.iter()
        .map(|job| job.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn replay(path: &str, json: bool) -> Result<(), Failure> {
    let unreadable =
        |e: &dyn std::fmt::Display| Failure::new(2, format!("cannot read the log {path}: {e}"));
    let lines = SessionLog::lines(path).map_err(|e| unreadable(&e))?;
    let (registry, _) = registry(true);
    let style = Style::detect();
    // One session at a time, read a line at a time: memory holds one line and the cards of
    // the current session, whatever the size of the log. A `session/start` after other events
    // begins a new session (logs appended to), with a tracker of its own.
    let mut session: Option<ReplaySession> = None;
    let mut events = 0usize;
    let mut skipped = Vec::new();
    for entry in lines {
        let record = match entry.map_err(|e| unreadable(&e))? {
            LogEntry::Event(record) => record,
            LogEntry::Repaired(record, repaired) => {
                output::say(&format!(
                    "dsh-agent: line {} of {path}: kept without {} (not understood: {})",
                    repaired.line,
                    repaired.pointer,
                    presenters::escape_controls(&repaired.text)
                ));
                record
            }
            LogEntry::Skipped(line) => {
                skipped.push(line.line.to_string());
                continue;
            }
            _ => continue,
        };
        events += 1;
        if let SessionEvent::SessionStart { session_id, .. } = &record.event {
            if let Some(done) = session.take() {
                done.print(json, style)?;
            }
            session = Some(ReplaySession::new(&registry, Some(session_id.clone())));
        }
        session
            .get_or_insert_with(|| ReplaySession::new(&registry, None))
            .tracker
            .observe(&record.event);
    }
    if let Some(done) = session {
        done.print(json, style)?;
    }
    if !skipped.is_empty() {
        output::say(&format!(
            "dsh-agent: skipped {} malformed line(s) of {path}: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    if events == 0 {
        return Err(Failure::new(1, format!("{path} holds no session event")));
    }
    Ok(())
}

/// One session of a replayed log and its cards so far.
struct ReplaySession {
    id: Option<String>,
    tracker: CardTracker,
}

impl ReplaySession {
    fn new(registry: &ToolRegistry, id: Option<String>) -> ReplaySession {
        ReplaySession {
            id,
            tracker: CardTracker::new(registry.clone(), None),
        }
    }

    /// Prints the session: a heading and its cards, or in JSON one card per line, each naming
    /// its session (`sessionId`).
    fn print(self, json: bool, style: Style) -> Result<(), Failure> {
        if !json {
            let name = self.id.as_deref().unwrap_or("(no session/start)");
            output::line(&format!("session {}", presenters::escape_controls(name)))?;
        }
        for card in self.tracker.into_cards() {
            if json {
                let mut value = serde_json::to_value(&card).context("serialising a card")?;
                if let (Some(id), Some(object)) = (&self.id, value.as_object_mut()) {
                    object.insert(String::from("sessionId"), id.clone().into());
                }
                output::line(&value.to_string())?;
            } else {
                output::line(&render::cards(&card, style))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::jobs::{JobEnd, JobHooks, JobOutcome, JobStart, JobStatus};

    #[tokio::test]
    async fn a_job_outliving_the_wait_is_named_and_stopped() {
        let (registry, jobs) = registry(true);
        let _controller = jobs.attach_controller();
        let agent = Agent::builder(
            registry,
            Arc::new(MockAdapter::new(Vec::<mock_adapter::Step>::new())),
        )
        .jobs(jobs.clone())
        .build()
        .unwrap();
        let directory = AgentDirectory::new();
        directory.insert(&agent);
        let stop = Arc::new(tokio::sync::Notify::new());
        let on_cancel = Arc::clone(&stop);
        let id = jobs
            .start(
                JobStart::new("task", "never ends", move || {
                    Ok(JobHooks::new(move |_| on_cancel.notify_one(), async move {
                        stop.notified().await;
                        Ok(JobOutcome::new(JobEnd::Killed))
                    }))
                })
                .owner(agent.handle()),
            )
            .unwrap();
        let outlived = tokio::time::timeout(
            Duration::from_secs(10),
            settle_background(
                &agent,
                &directory,
                &jobs,
                Duration::from_millis(50),
                CancellationToken::new(),
            ),
        )
        .await
        .expect("the wait for background jobs never gave up");
        let ids: Vec<String> = outlived.iter().map(|job| job.id.to_string()).collect();
        assert_eq!(ids, vec![id.to_string()]);
        agent.dispose().await;
        assert_eq!(
            jobs.get(id.as_str(), Some(agent.session_id()))
                .unwrap()
                .status,
            JobStatus::Killed
        );
    }

    #[test]
    fn the_default_system_prompt_names_the_tools_the_directory_and_the_system() {
        let (registry, _) = registry(true);
        let tools = registry
            .schemas(None)
            .into_iter()
            .map(|tool| tool.name)
            .collect::<Vec<_>>();
        assert_eq!(tools, ["bash", "job_kill", "job_list", "job_output"]);
        assert_eq!(
            default_system_prompt(&tools.join(", "), Path::new("/work/project")),
            format!(
                "You are dsh-agent, an agent that works on the user's machine through tools.\n\
                 Tools: bash, job_kill, job_list, job_output. Run shell commands with \
                 bash; long-running commands can run in the background, and the job tools list, \
                 read and stop them.\n\
                 Working directory: /work/project\n\
                 Operating system: {} ({})\n\
                 Prefer reading before changing; say plainly what you did and what you found.",
                std::env::consts::OS,
                std::env::consts::ARCH
            )
        );
    }

    #[test]
    fn the_last_turn_decides_unless_a_model_error_came_first() {
        let end = |reason| SessionEvent::TurnEnd { reason, steps: 1 };
        let verdict = |events: &[SessionEvent]| {
            let mut ending = SessionEnding::default();
            for event in events {
                ending.observe(event);
            }
            ending
                .verdict(TurnEndReason::Completed)
                .map_err(|f| (f.status, f.message))
        };
        let error = SessionEvent::Error {
            message: "script exhausted at request 3".into(),
            code: Some("MODEL_ERROR".into()),
        };
        for (events, expected) in [
            (vec![], Ok(())),
            (vec![end(TurnEndReason::Completed)], Ok(())),
            (
                vec![end(TurnEndReason::Completed), end(TurnEndReason::MaxSteps)],
                Err((3, String::from("the turn stopped at the step limit"))),
            ),
            (
                vec![end(TurnEndReason::Cancelled), end(TurnEndReason::Concluded)],
                Ok(()),
            ),
            (
                vec![
                    error.clone(),
                    end(TurnEndReason::Error),
                    end(TurnEndReason::Completed),
                ],
                Err((1, String::from("script exhausted at request 3"))),
            ),
        ] {
            assert_eq!(verdict(&events), expected, "{events:?}");
        }
    }
}
