//! Running a session: `run` (one turn) and `chat` (a turn per line typed), with Ctrl-C and a
//! closed stdout cancelling the turn.

use crate::cli::RunOptions;
use crate::ending::{settle_background, verdict};
use crate::model::{Echo, Model, SET_A_MODEL, plays_demo, select_model, system_prompt};
use crate::render::Style;
use crate::tools::{code_mode, registry_with, shell_executor};
use crate::{
    DEMO_PROMPT, Failure, JOBS_STOPPED_STATUS, Store, approval, mcp, output, render, sessions,
};
use agent_loop::{
    Agent, AgentDirectory, CardTracker, EventRecord, SessionEndReason, SessionEnding, SessionEvent,
    SessionStart, TurnEndReason,
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

/// `chat`'s prompt while it waits for a line: a turn a job's notice opens then starts on a
/// line of its own, and a fresh prompt follows its end.
#[derive(Debug, Default)]
pub(crate) struct Prompt {
    /// Waiting for a line, and whether a woken turn has written since the prompt was shown.
    state: Mutex<Option<bool>>,
}

impl Prompt {
    fn show(&self, style: Style) -> Result<(), Failure> {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(false);
        Ok(output::text(&format!("{} ", style.bold_text("you ›")))?)
    }

    fn answered(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Before a line of a turn the user did not start: off the prompt's line.
    fn interrupt(&self) {
        if let Some(written @ false) = &mut *self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            *written = true;
            let _ = output::line("");
        }
    }

    /// After a turn's end: the prompt again, if a woken turn took its place.
    fn resume(&self, style: Style) {
        if let Some(written @ true) = &mut *self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            *written = false;
            let _ = output::text(&format!("{} ", style.bold_text("you ›")));
        }
    }
}

/// The turns of `chat`: the prompt given on the command line, then one per line read, until
/// the end of input. Ctrl-C while a turn runs cancels that turn only.
pub(crate) async fn converse(
    agent: &Agent,
    first: Option<String>,
    style: Style,
    prompt: &Prompt,
) -> Result<(), Failure> {
    let mut interrupt =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let mut next = first;
    loop {
        let input = match next.take() {
            Some(input) => input,
            None => {
                prompt.show(style)?;
                let line = read_line().await;
                prompt.answered();
                match line {
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
    start: SessionStart,
) -> Result<(), Failure> {
    let resuming = !matches!(start, SessionStart::New);
    if plays_demo(&options) {
        if resuming && options.prompt.is_empty() {
            return Err(Failure::new(
                2,
                format!(
                    "nothing to resume: no model is configured ({SET_A_MODEL}) and no prompt was given"
                ),
            ));
        }
        // The tour asked for (`run` alone) needs no word; anything typed does, since the demo
        // will not answer it.
        if mode == Mode::Chat || resuming || !options.prompt.is_empty() {
            output::say(&format!(
                "dsh-agent: no model is configured, so the embedded demo script plays instead of answering ({SET_A_MODEL})"
            ));
        }
    }
    // First, so a signal from now on ends the session the recorded way.
    let mut interrupts = sessions::Interrupts::catch(mode == Mode::Chat);
    let interrupted = interrupts.token.clone();
    let model = select_model(&options)?;
    let store_dir = store.open()?;
    let given_cwd = match &options.cwd {
        Some(dir) => Some(PathBuf::from(dir)),
        None if matches!(start, SessionStart::New) => Some(
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
    store_dir.prune_at_start(store.retention);
    let cwd = match given_cwd {
        Some(cwd) => cwd,
        None => opened
            .recorded_cwd()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let resumed_log = opened.log;
    let mut lease = opened.lease;
    // Until the agent has started, a failure (a bad `--mcp-config`, a sandbox that cannot be
    // had, a working directory gone) discards a session this run made (new or forked), so
    // failed starts leave no sessions behind; a resumed one is only released.
    lease.set_discard_on_drop(true);
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
        options.sandbox,
        &cwd,
        Some(lease.spill_dir()),
        Some(store_dir.root()),
    )?;
    let (registry, jobs) = registry_with(!options.no_background, executor);
    crate::tools::file_tools(
        &registry,
        !options.no_fs,
        options.sandbox,
        &sandbox,
        &cwd,
        Some(lease.spill_dir()),
        lease
            .spill_dir()
            .parent()
            .map(|session| session.join(crate::undo::CHANGES_DIR)),
    )?;
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
    let _code_mode = code_mode(&registry, !options.no_code_mode)?;
    let style = Style::detect();
    let ending: Arc<Mutex<SessionEnding>> = Arc::default();
    let prompt = Arc::new(Prompt::default());
    let printer = {
        let registry = registry.clone();
        let json = options.json;
        let chat = mode == Mode::Chat;
        let ending = Arc::clone(&ending);
        let prompt = Arc::clone(&prompt);
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
                prompt.interrupt();
                let _ = output::line(&text);
                if let SessionEvent::TurnEnd { .. } = record.event {
                    prompt.resume(style);
                }
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
    // Once stdout fails, the stdout guard of `registry_with` refuses every command, also in
    // turns a job notice opens; a caught signal ends the session (see `sessions::Interrupts`).
    let _stop_watch = agent.cancel_turn_on(output::closed().clone());
    let _interrupt_watch = agent.cancel_turn_on(interrupted.clone());
    tracing::info!(session = %lease.id(), dir = %store_dir.root().display(), "session");

    let first = match mode {
        Mode::Once if resuming && options.prompt.is_empty() => {
            // Nothing new from the user: the notices waiting (a lost job's) get their turn.
            let pending = agent
                .run_until_cancelled(&interrupted, agent.run_pending())
                .await
                .map_err(|e| Failure::new(1, e.to_string()))?;
            interrupts.release_sigint();
            if pending.is_none() {
                output::say(&format!(
                    "dsh-agent: nothing to resume: no notice of session {} waits for the model; give a prompt to continue it",
                    lease.id()
                ));
            }
            Some(pending.map_or(TurnEndReason::Completed, |outcome| outcome.reason))
        }
        Mode::Once => {
            let prompt = if options.prompt.is_empty() {
                DEMO_PROMPT.to_owned()
            } else {
                options.prompt.join(" ")
            };
            let outcome = agent
                .run_until_cancelled(&interrupted, agent.run(prompt))
                .await
                .map_err(|e| Failure::new(1, e.to_string()))?;
            interrupts.release_sigint();
            Some(outcome.reason)
        }
        Mode::Chat => {
            let first = (!options.prompt.is_empty()).then(|| options.prompt.join(" "));
            let conversation = converse(&agent, first, style, &prompt);
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
    let stopped = settle_background(&agent, &directory, options.wait_jobs, stop).await;
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
    // The lock is let go first: `session/end` reaches the printer, which takes it.
    let reason = ending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .end_reason();
    agent.end_session(reason);
    drop(lease);
    if let Some(servers) = mcp_servers {
        servers.shutdown().await;
    }
    if let Some(failure) = agent.log_error() {
        return Err(Failure::new(1, failure.to_string()));
    }
    let ending = std::mem::take(&mut *ending.lock().unwrap_or_else(|e| e.into_inner()));
    for notice in ending.undelivered() {
        output::say(&format!(
            "dsh-agent: this notice never reached the model: {}",
            presenters::escape_controls(&notice.content)
        ));
    }
    // A chat's turns are judged as they happen (a cancelled or failed turn is shown and the
    // session goes on); a single run is judged by how it ended.
    if let Some(first) = first {
        verdict(&ending, first)?;
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
