//! `dsh-agent`: the runnable agent of dsh-rs.
//!
//! ```text
//! dsh-agent run [--script FILE|-] [--log FILE] [--cwd DIR] [--json] [--no-background] [PROMPT…]
//! dsh-agent replay LOG [--json]
//! dsh-agent schemas [--strict]
//! dsh-agent sdk
//! ```
//!
//! `run` wires the real crates (registry, jobs runtime, the `bash` tool, the job tools,
//! presenters) to a scripted model; without `--script` it plays an embedded demo. A real model
//! adapter plugs in at the same `ModelAdapter` seam.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod render;

use agent_loop::{
    Agent, AgentDirectory, CardTracker, EventRecord, LOG_WRITE_FAILED, LogEntry, SessionEvent,
    SessionLog, TurnEndReason,
};
use anyhow::{Context, Result};
use cli::{Command, RunOptions, USAGE};
use dsh_tools::jobs::{JobRuntime, JobsConfig, NoticeDelivery};
use dsh_tools::{ToolRegistry, ToolSchema};
use mock_adapter::MockAdapter;
use render::Style;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tool_bash::{BashPlugin, JobToolsPlugin, LocalExecutor};

/// The embedded demo script: a foreground command, a failing command, a background job, its
/// completion notice and `job_output`.
const DEMO: &str = include_str!("demo.json");
const DEMO_PROMPT: &str = "Show me what the dsh-rs tools can do.";

/// How long `run` waits for background jobs still running after the turn.
const JOB_WAIT: Duration = Duration::from_secs(300);

/// A failure that ends the program with a one-line reason and a status.
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

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        // One line: the chain joined, the way a shell user reads it.
        Failure::new(1, format!("{error:#}"))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match cli::parse(&args) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            Ok(())
        }
        Ok(command) => execute(command),
        Err(message) => Err(Failure::new(2, format!("{message}\n\n{USAGE}"))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("dsh-agent: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

fn execute(command: Command) -> Result<(), Failure> {
    match command {
        Command::Help => Ok(()),
        Command::Schemas { strict } => {
            let (registry, _) = registry(true);
            let schemas: Vec<ToolSchema> = if strict {
                registry
                    .visible(None)
                    .iter()
                    .map(|tool| ToolSchema {
                        parameters: tool.parameters().to_strict_json(),
                        ..tool.schema()
                    })
                    .collect()
            } else {
                registry.schemas(None)
            };
            let text = serde_json::to_string_pretty(&schemas).context("serialising the schemas")?;
            println!("{text}");
            Ok(())
        }
        Command::Sdk => {
            let (registry, _) = registry(true);
            print!("{}", registry.code_mode_sdk(None));
            Ok(())
        }
        Command::Replay { log, json } => replay(&log, json),
        Command::Run(options) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            runtime.block_on(run(options))
        }
    }
}

/// The registry of the built-in tools, and the jobs runtime behind them.
fn registry(background: bool) -> (ToolRegistry, JobRuntime) {
    let registry = ToolRegistry::new();
    let jobs = JobRuntime::new(JobsConfig {
        delivery: NoticeDelivery::Wakeup {
            max_consecutive_wakes: 3,
        },
        ..JobsConfig::default()
    });
    let mut bash = BashPlugin::new(Arc::new(LocalExecutor::default()));
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

async fn run(options: RunOptions) -> Result<(), Failure> {
    let model = load_script(&options)?;
    let (registry, jobs) = registry(!options.no_background);
    let cwd = match &options.cwd {
        Some(dir) => PathBuf::from(dir),
        None => std::env::current_dir()
            .map_err(|e| Failure::new(1, format!("no working directory: {e}")))?,
    };
    if !cwd.is_dir() {
        return Err(Failure::new(
            2,
            format!("--cwd {}: not a directory", cwd.display()),
        ));
    }
    let style = Style::detect();
    let ending: Arc<Mutex<SessionEnding>> = Arc::default();
    let printer = {
        let registry = registry.clone();
        let json = options.json;
        let ending = Arc::clone(&ending);
        let tracker = Mutex::new(CardTracker::new(registry, None));
        move |record: &EventRecord| {
            ending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .observe(&record.event);
            if json {
                println!("{}", record.to_json_line());
                return;
            }
            let mut tracker = tracker.lock().unwrap_or_else(|e| e.into_inner());
            tracker.observe(&record.event);
            if let Some(text) = render::event(&record.event, tracker.cards(), style) {
                println!("{text}");
            }
        }
    };
    let mut builder = Agent::builder(registry, Arc::new(model.clone()))
        .cwd(cwd)
        .jobs(jobs.clone())
        .subscriber(printer);
    if let Some(log) = &options.log {
        builder = builder.log(log);
    }
    let agent = builder
        .build()
        .map_err(|e| Failure::new(1, format!("cannot start the agent: {e}")))?;
    let directory = AgentDirectory::new();
    directory.insert(&agent);
    jobs.set_turn_opener(Arc::new(directory.clone()));

    let prompt = if options.prompt.is_empty() {
        DEMO_PROMPT.to_owned()
    } else {
        options.prompt.join(" ")
    };
    let first = agent
        .run(prompt)
        .await
        .map_err(|e| Failure::new(1, e.to_string()))?;
    // Background work may still be running; its notices open turns of their own.
    if let Some(id) = settle_background(&agent, &directory, &jobs, JOB_WAIT).await {
        eprintln!(
            "dsh-agent: job {id} still runs after {}s; stopping it",
            JOB_WAIT.as_secs()
        );
    }
    directory.wait_woken().await;
    agent.wait_idle().await;
    // Disposing the agent kills the jobs it still owns, and records the notices no turn took.
    agent.dispose().await;
    jobs.teardown().await;
    if let Some(failure) = agent.log_error() {
        return Err(Failure::new(1, failure.to_string()));
    }
    let ending = std::mem::take(&mut *ending.lock().unwrap_or_else(|e| e.into_inner()));
    for notice in &ending.undelivered {
        eprintln!("dsh-agent: this notice never reached the model: {notice}");
    }
    ending.verdict(first.reason)?;
    // A script with steps left over did not play out as written.
    model
        .check_exhausted()
        .map_err(|e| Failure::new(1, e.to_string()))
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
/// agent's jobs still runs. Returns the first job still running after `limit`, which the
/// caller stops (disposing the agent kills it) instead of waiting on.
async fn settle_background(
    agent: &Agent,
    directory: &AgentDirectory,
    jobs: &JobRuntime,
    limit: Duration,
) -> Option<String> {
    loop {
        agent.wait_idle().await;
        directory.wait_woken().await;
        let running: Vec<String> = jobs
            .list(Some(agent.session_id()))
            .into_iter()
            .filter(|job| !job.status.is_terminal())
            .map(|job| job.id.to_string())
            .collect();
        if running.is_empty() {
            return None;
        }
        for id in running {
            // `settled`, not `wait`: the host waiting must not take the notice from the model.
            // It returns once the notice went out and its wake-up, if any, was registered with
            // the directory, so the next `wait_woken` sees that turn.
            let settled = jobs.settled(&id, Some(agent.session_id()));
            if tokio::time::timeout(limit, settled).await.is_err() {
                return Some(id);
            }
        }
    }
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
                eprintln!(
                    "dsh-agent: line {} of {path}: kept without {} (not understood: {})",
                    repaired.line, repaired.pointer, repaired.text
                );
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
        eprintln!(
            "dsh-agent: skipped {} malformed line(s) of {path}: {}",
            skipped.len(),
            skipped.join(", ")
        );
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
            println!("session {name}");
        }
        for card in self.tracker.into_cards() {
            if json {
                let mut value = serde_json::to_value(&card).context("serialising a card")?;
                if let (Some(id), Some(object)) = (&self.id, value.as_object_mut()) {
                    object.insert(String::from("sessionId"), id.clone().into());
                }
                println!("{value}");
            } else {
                println!("{}", render::cards(&card, style));
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
            settle_background(&agent, &directory, &jobs, Duration::from_millis(50)),
        )
        .await
        .expect("the wait for background jobs never gave up");
        assert_eq!(outlived, Some(id.to_string()));
        agent.dispose().await;
        assert_eq!(
            jobs.get(id.as_str(), Some(agent.session_id()))
                .unwrap()
                .status,
            JobStatus::Killed
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
