//! Running a session: `run` (one turn) and `chat` (a turn per line typed), with Ctrl-C and a
//! closed stdout cancelling the turn.

use crate::cli::RunOptions;
use crate::ending::{SessionEnding, settle_background};
use crate::model::{Echo, Model, select_model, system_prompt};
use crate::render::Style;
use crate::tools::{registry_with, shell_executor};
use crate::{
    DEMO_PROMPT, Failure, JOBS_STOPPED_STATUS, Store, approval, mcp, output, render, sessions,
};
use agent_loop::{
    Agent, AgentDirectory, CardTracker, EventRecord, SessionEndReason, SessionEvent, TurnEndReason,
};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// One turn (`run`) or a turn per line typed (`chat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Once,
    Chat,
}

/// Reads one line from stdin; `None` at the end of input (Ctrl-D).
pub(crate) async fn read_line() -> Option<String> {
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
pub(crate) async fn converse(
    agent: &Agent,
    first: Option<String>,
    style: Style,
) -> Result<(), Failure> {
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

pub(crate) async fn run(
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
    let mut lease = opened.lease;
    // Until the agent has started, a failure (a bad `--mcp-config`, a sandbox that cannot be
    // had, a working directory gone) discards a session this run made (new or forked), so
    // failed starts leave no sessions behind; a resumed one is only released.
    lease.set_discard_on_drop(true);
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
    let (executor, sandbox, launcher) = shell_executor(
        options.sandbox.as_deref(),
        &cwd,
        Some(lease.spill_dir()),
        Some(store_dir.root()),
    )?;
    let (registry, jobs) = registry_with(!options.no_background, executor);
    if options.ask {
        let cards_on_terminal =
            !options.json && std::io::IsTerminal::is_terminal(&std::io::stdout());
        approval::install(&registry, cards_on_terminal)
            .context("installing the --ask approvals")?;
    }
    let mcp_servers =
        mcp::load_servers(&registry, &cwd, &options.mcp_config, launcher, options.ask)
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
        .session_log(&lease);
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
    lease.set_discard_on_drop(false);
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
pub(crate) async fn until_interrupted<T>(
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
pub(crate) fn cancel_when_interrupted(
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

/// Cancels the agent's turn once stdout fails; the stdout guard of
/// [`registry_with`] refuses every command after that, also in
/// turns a job notice opens. The task ends with the runtime.
pub(crate) fn cancel_when_stdout_closes(agent: &Agent) -> tokio::task::JoinHandle<()> {
    let agent = agent.clone();
    tokio::spawn(async move {
        output::closed().cancelled().await;
        agent.cancel_turn();
    })
}
