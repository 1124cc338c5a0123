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
//! dsh-agent [-v|-q] replay LOG [--cards|--json]
//! dsh-agent [-v|-q] schemas [--strict] [--no-code-mode]
//! dsh-agent [-v|-q] sdk
//! dsh-agent [-v|-q] mcp
//! dsh-agent [-v|-q] acp [--model PROVIDER:MODEL … | --script FILE] [--sandbox MODE] [--no-ask]
//! ```
//!
//! `run` wires the real crates (registry, jobs runtime, the `bash` tool, the job tools,
//! presenters) to a model: `--model PROVIDER:MODEL` (or `DSH_MODEL`) talks to DeepSeek, OpenAI
//! or any OpenAI-compatible server through `openai-adapter`; `--script` plays a scripted model;
//! with neither it plays an embedded demo that needs no network and no key (and says so
//! when it plays in place of an answer to what the user typed). `chat` runs a turn
//! per line typed, streaming the model's text, until the end of input. Sessions live in a
//! store (`--session-dir`, `DSH_SESSION_DIR`, else the XDG state directory; see `sessions`):
//! `resume` continues one, `sessions list` and `sessions prune` manage them. `--help` on any
//! subcommand lists the options and the exit statuses.
//!
//! This file parses the command line and dispatches each subcommand; the modules hold the rest:
//! `cli` (the command line), `tools` (the tool set and its shell executor), `model` (the model
//! and the system prompt), `run` (`run` and `chat`), `ending` (the exit status and the jobs
//! left running), `sessions` (the session store and `sessions`), `replay`, `mcp` (MCP servers
//! and `dsh-agent mcp`), `acp` (`dsh-agent acp`, the agent of an editor), `approval` (asking the user), `render` and `output` (what reaches the
//! terminal), and `logging` (diagnostics on stderr).
//!
//! Unsafe budget: 0 — none.

mod acp;
mod approval;
mod cli;
mod ending;
mod logging;
mod mcp;
mod model;
mod output;
mod render;
mod replay;
mod run;
mod secrets;
mod sessions;
mod tools;
mod undo;

use crate::run::Mode;
use crate::tools::registry;
use anyhow::{Context, Result};
use cli::{ChatOptions, Command, ResumeOptions, SessionsCommand};
use dsh_tools::{ToolRegistry, ToolSchema};
use std::process::ExitCode;
use std::time::Duration;

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
    // Before any thread: the secrets leave the environment block the kernel shows.
    secrets::withdraw();
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
                agent_loop::SessionStart::Fork(id)
            } else {
                agent_loop::SessionStart::Resume(id)
            };
            block_on(Box::pin(run::run(run, Mode::Once, store, start)))
        }
        Command::Schemas {
            strict,
            no_code_mode,
            no_fs,
        } => {
            let (registry, _jobs) = registry(true);
            described_file_tools(&registry, !no_fs)?;
            let _code_mode = tools::code_mode(&registry, !no_code_mode)?;
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
            described_file_tools(&registry, true)?;
            Ok(output::text(&registry.code_mode_sdk(None))?)
        }
        Command::Undo {
            session,
            list,
            change,
        } => undo::undo(&store.open()?, session.as_deref(), list, change),
        Command::Replay { log, cards, json } => {
            replay::replay(&log, replay::Shown::of(cards, json))
        }
        Command::Mcp(options) => {
            let cwd = std::env::current_dir()
                .map_err(|e| Failure::new(2, format!("no working directory: {e}")))?;
            let (executor, sandbox, _) = tools::shell_executor(options.sandbox, &cwd, None, None)?;
            let (registry, jobs) = tools::registry_with(true, executor);
            // No session, so no history: an MCP client keeps its own.
            tools::file_tools(
                &registry,
                !options.no_fs,
                options.sandbox,
                &sandbox,
                &cwd,
                None,
                None,
            )?;
            block_on(Box::pin(async move {
                mcp::serve(registry, jobs).await.map_err(Failure::from)
            }))
        }
        Command::Acp(options) => {
            let sessions = store.open()?;
            block_on(Box::pin(acp::serve(options.into(), sessions)))
        }
        Command::Run(options) => block_on(Box::pin(run::run(
            options,
            Mode::Once,
            store,
            agent_loop::SessionStart::New,
        ))),
        Command::Chat(ChatOptions { mut run, no_ask }) => {
            run.ask = !no_ask;
            block_on(Box::pin(run::run(
                run,
                Mode::Chat,
                store,
                agent_loop::SessionStart::New,
            )))
        }
    }
}

/// The file tools as `schemas` and `sdk` describe them: their definitions do not depend on
/// where they may write.
fn described_file_tools(registry: &ToolRegistry, enabled: bool) -> Result<(), Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::new(2, format!("no working directory: {e}")))?;
    let read_only = Some(tool_bash::SandboxMode::ReadOnly);
    tools::file_tools(
        registry,
        enabled,
        read_only,
        &serde_json::Value::Null,
        &cwd,
        None,
        None,
    )?;
    Ok(())
}
