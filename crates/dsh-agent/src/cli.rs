//! Command-line parsing with `clap`: the subcommands, `--help`/`-h` on each, `--version`,
//! `--opt=value` and `--opt value`, `--` before a prompt that starts with `-`, did-you-mean
//! suggestions, and exit status 2 for a usage error.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Args, Parser, Subcommand};
use std::time::Duration;
use tool_bash::SandboxMode;

/// The exit statuses, shown at the end of `--help` (the README lists the same).
const EXIT_STATUS: &str = "\
Exit status:
  0    the session completed (or the command did its work)
  1    the run failed: a model error, a script that ran out or has steps left over, a failed
       write to stdout, or another runtime error
  2    a usage error: a bad command line, an unreadable or invalid script, a bad --cwd, a bad
       --model spec or a missing key
  3    the turn stopped at the step limit
  4    the session completed, but background jobs still ran when it ended and were stopped
       (the --wait-jobs wait ran out, was 0, or Ctrl-C cut it short)
  130  the turn was cancelled, or SIGTERM (SIGINT while run or resume runs its turn)
       ended the session
  141  stdout was closed by its reader (`dsh-agent run --json | head`); nothing is printed

Logging: diagnostics go to stderr, filtered by RUST_LOG (for example `RUST_LOG=debug` or
`RUST_LOG=dsh_tools=debug`; default: warnings); -v/-q override it.";

/// The heading of the options every subcommand takes, apart from its own.
const GLOBAL: &str = "Global options";

/// The runnable agent of dsh-rs: the bash and job tools driven by a model (DeepSeek, OpenAI or
/// any OpenAI-compatible server) or by a script.
#[derive(Debug, PartialEq, Eq, Parser)]
#[command(name = "dsh-agent", version, after_help = EXIT_STATUS)]
pub(crate) struct Cli {
    /// Log more to stderr: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = ArgAction::Count, global = true, help_heading = GLOBAL)]
    pub(crate) verbose: u8,
    /// Log less to stderr: -q errors only, -qq nothing (each -q cancels a -v).
    #[arg(short, long, action = ArgAction::Count, global = true, help_heading = GLOBAL)]
    pub(crate) quiet: u8,
    /// Where sessions are kept. Default: $XDG_STATE_HOME/dsh/sessions, or
    /// ~/.local/state/dsh/sessions.
    #[arg(long, value_name = "DIR", env = "DSH_SESSION_DIR", global = true, help_heading = GLOBAL)]
    pub(crate) session_dir: Option<String>,
    /// How long a session is kept after its last activity (`14d`, `12h`): `run`, `chat` and
    /// `resume` remove a few older ones at start, and `sessions prune` all of them. `0` turns
    /// the removal at start off.
    #[arg(
        long,
        value_name = "DURATION",
        env = "DSH_SESSION_RETENTION",
        default_value = "14days",
        value_parser = parse_duration,
        global = true,
        help_heading = GLOBAL
    )]
    pub(crate) retention: Duration,
    /// What to do; without one, this help is printed.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// A subcommand.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Command {
    /// Run a session with the bash and job tools against a model (--model or DSH_MODEL) or a
    /// script (the embedded demo when neither is given): cards on a terminal, or JSONL
    /// session events with --json.
    Run(RunOptions),
    /// An interactive session on a terminal: one turn per line you type, streamed text and
    /// reasoning, cards as calls run. Ctrl-C cancels the running turn (not the session),
    /// Ctrl-D ends the session. Each `bash` call is asked about first unless --no-ask.
    Chat(ChatOptions),
    /// Continue a session of the store (see `sessions list`): its history, a prompt if given
    /// (else the notices waiting for the model), and the options of run (without a model or
    /// a script, a prompt is needed). --fork continues a
    /// new session seeded with its history instead.
    Resume(ResumeOptions),
    /// List or prune the sessions of the store.
    Sessions {
        /// What to do.
        #[command(subcommand)]
        action: SessionsCommand,
    },
    /// Show a session log again as `run` showed it: the prompts, text, thinking, cards,
    /// notices and turn ends (--cards: the cards only; --json: one card JSON per line).
    Replay {
        /// The session log (JSONL), as written by `run --log`.
        log: String,
        /// Print only the cards, each call with its result, under a heading per session.
        #[arg(long)]
        cards: bool,
        /// Print one card JSON per line instead of terminal text.
        #[arg(long, conflicts_with = "cards")]
        json: bool,
    },
    /// Print the model-facing tool schemas: those `run` and `chat` offer, `run_code` included.
    Schemas {
        /// Print the strict projection (every property required, for strict function calling).
        #[arg(long)]
        strict: bool,
        /// Leave out Code Mode's `run_code`, as `run --no-code-mode` does.
        #[arg(long)]
        no_code_mode: bool,
        /// Leave out the file tools, as `run --no-fs` does.
        #[arg(long)]
        no_fs: bool,
    },
    /// Print the Code Mode TypeScript declarations: the tools a `run_code` program calls, as
    /// `run_code`'s description carries them.
    Sdk,
    /// Serve the built-in tools over stdio as an MCP server (`tools/list`, `tools/call`,
    /// cancellation), in the current directory, until the client disconnects.
    Mcp(McpServeOptions),
    /// Undo a change the file tools (`write`, `edit`) made in a session: the file gets back
    /// the content it had before it, unless it changed again after it (then the difference is
    /// shown and the file left alone).
    Undo {
        /// The session (see `sessions list`). Default: the session last active.
        #[arg(value_name = "SESSION")]
        session: Option<String>,
        /// List the session's changes instead.
        #[arg(long, conflicts_with = "change")]
        list: bool,
        /// The change to undo. Default: the last one not undone.
        #[arg(long, value_name = "N")]
        change: Option<u64>,
    },
    /// Be the agent of an editor over the Agent Client Protocol on stdio (Zed's
    /// `agent_servers`, for instance): sessions of the store, streamed cards, permission
    /// requests for each `bash` call.
    Acp(AcpOptions),
}

/// The options of `mcp`.
#[derive(Debug, Default, PartialEq, Eq, Args)]
pub(crate) struct McpServeOptions {
    /// Confine the bash tool's commands: `read-only`, `workspace-write` (the current
    /// directory) or `off` (see `run --help`). Default: `workspace-write`, enforced as far as
    /// this system can, with a warning on stderr naming the rest.
    #[arg(long, value_name = "MODE", value_parser = sandbox_mode())]
    pub(crate) sandbox: Option<SandboxMode>,
    /// Leave out the file tools (`read`, `write`, `edit`, `glob`, `grep`).
    #[arg(long)]
    pub(crate) no_fs: bool,
}

/// The options of `acp`: the model and the tools' confinement; the editor gives the working
/// directory, the MCP servers and the prompts.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct AcpOptions {
    /// The script to play (JSON), for tests: its steps answer the model requests of every
    /// session in turn.
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<String>,
    /// The model to talk to, as PROVIDER:MODEL (see `run --help`). Default: DSH_MODEL; without
    /// either, the embedded demo script plays.
    #[arg(long, value_name = "PROVIDER:MODEL", conflicts_with = "script")]
    pub(crate) model: Option<String>,
    /// The model endpoint's base URL (required for `compatible`; replaces a preset's).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// The environment variable that holds the API key, instead of the provider's.
    #[arg(long, value_name = "VAR")]
    pub(crate) api_key_env: Option<String>,
    /// Ask the model for whole responses instead of streams.
    #[arg(long)]
    pub(crate) no_stream: bool,
    /// Replace the default system prompt with this file's text.
    #[arg(long, value_name = "FILE")]
    pub(crate) system: Option<String>,
    /// Confine the bash tool's commands: `read-only`, `workspace-write` or `off` (see
    /// `run --help`).
    #[arg(long, value_name = "MODE", value_parser = sandbox_mode())]
    pub(crate) sandbox: Option<SandboxMode>,
    /// Run without background jobs.
    #[arg(long)]
    pub(crate) no_background: bool,
    /// Leave out Code Mode: no `run_code` tool.
    #[arg(long)]
    pub(crate) no_code_mode: bool,
    /// Leave out the file tools (`read`, `write`, `edit`, `glob`, `grep`).
    #[arg(long)]
    pub(crate) no_fs: bool,
    /// Run `bash` calls without asking the editor first.
    #[arg(long)]
    pub(crate) no_ask: bool,
}

/// The subcommands of `sessions`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum SessionsCommand {
    /// List the sessions: id, started, state, turns, size, last activity, working directory.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Remove the sessions idle for longer than --older-than (default: --retention), never
    /// one in use.
    Prune {
        /// The idle time after which a session goes (`30d`, `12h`, `0` for all).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        older_than: Option<Duration>,
    },
}

/// The options of `resume`.
#[derive(Debug, PartialEq, Eq, Args)]
#[command(after_help = EXIT_STATUS, mut_arg("prompt", |arg| arg.help(
    "The next turn's prompt (words are joined by spaces). Default: none; the notices waiting \
     for the model get their turn. Put `--` before a prompt that starts with `-`"
)))]
pub(crate) struct ResumeOptions {
    /// The session to continue.
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// Start a new session seeded with this one's history; this one is left as it is.
    #[arg(long)]
    pub(crate) fork: bool,
    /// The session's options (--cwd defaults to the session's).
    #[command(flatten)]
    pub(crate) run: RunOptions,
}

/// The options of `run`.
#[derive(Debug, PartialEq, Eq, Args)]
#[command(after_help = EXIT_STATUS)]
pub(crate) struct RunOptions {
    /// The script to play (JSON; `-` reads it from stdin). Default: the embedded demo.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) script: Option<String>,
    /// The model to talk to, as PROVIDER:MODEL: `deepseek:deepseek-chat`,
    /// `deepseek:deepseek-reasoner` (key in DEEPSEEK_API_KEY), `openai:gpt-4o-mini` (key in
    /// OPENAI_API_KEY) or `compatible:NAME` with --base-url. Default: the DSH_MODEL environment
    /// variable; without either, a script plays (the embedded demo, which says so).
    #[arg(long, value_name = "PROVIDER:MODEL", conflicts_with = "script")]
    pub(crate) model: Option<String>,
    /// The model endpoint's base URL (required for `compatible`; replaces a preset's).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// The environment variable that holds the API key, instead of the provider's.
    #[arg(long, value_name = "VAR")]
    pub(crate) api_key_env: Option<String>,
    /// Ask the model for whole responses instead of streams (for servers that do not stream
    /// tool calls).
    #[arg(long)]
    pub(crate) no_stream: bool,
    /// Ask on the terminal before each `bash` call: allow once, allow for the session, or deny
    /// (a denial is a result the model reads). Without a terminal every call is denied.
    #[arg(long)]
    pub(crate) ask: bool,
    /// Replace the default system prompt (which names the tools, the working directory and
    /// the operating system) with this file's text.
    #[arg(long, value_name = "FILE")]
    pub(crate) system: Option<String>,
    /// Also write the session events to this file (JSONL), for `replay`.
    #[arg(long, value_name = "FILE")]
    pub(crate) log: Option<String>,
    /// The working directory of the session. Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<String>,
    /// Print JSONL session events instead of cards.
    #[arg(long)]
    pub(crate) json: bool,
    /// Run without background jobs (the bash tool offers no `run_in_background`).
    #[arg(long)]
    pub(crate) no_background: bool,
    /// Leave out Code Mode: no `run_code` tool (a program that calls the other tools).
    #[arg(long)]
    pub(crate) no_code_mode: bool,
    /// Leave out the file tools (`read`, `write`, `edit`, `glob`, `grep`); files are then
    /// reached through `bash` only.
    #[arg(long)]
    pub(crate) no_fs: bool,
    /// Also load the MCP servers of this file (`{"mcpServers": …}`), after `.mcp.json` in the
    /// working directory; may be repeated.
    #[arg(long, value_name = "FILE")]
    pub(crate) mcp_config: Vec<String>,
    /// Confine the bash tool's commands: `read-only` (they may write only a private temporary
    /// directory), `workspace-write` (also the working directory, but not the session store
    /// beneath it) or `off`. In both confined modes the network is denied (every socket but a
    /// stream or sequenced-packet pair), no capability is held, metadata outside the writable places cannot
    /// change, and no process outside the command can be signalled; this holds as root too.
    /// The stdio MCP servers start in the same sandbox. Default: `workspace-write`, enforced
    /// as far as this system can with a warning naming the rest (or `off` where it can
    /// enforce nothing); a mode given explicitly that cannot be wholly enforced is status 2.
    /// What is enforced, right by right, is recorded in `session/start`.
    #[arg(long, value_name = "MODE", value_parser = sandbox_mode())]
    pub(crate) sandbox: Option<SandboxMode>,
    /// How long to wait, once the last turn has ended, for background jobs still running,
    /// whose notices open turns meanwhile (`90s`, `5m`, `1h 30m`; `0` stops them at once). Jobs
    /// stopped this way make the exit status 4.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub(crate) wait_jobs: Duration,
    /// The user's prompt (words are joined by spaces). Default: the demo's prompt. Put `--`
    /// before a prompt that starts with `-`.
    #[arg(value_name = "PROMPT")]
    pub(crate) prompt: Vec<String>,
}

/// The options of `chat`: those of `run` (a prompt given is the first turn), and --no-ask.
#[derive(Debug, PartialEq, Eq, Args)]
#[command(after_help = EXIT_STATUS, mut_arg("prompt", |arg| arg.help(
    "The first turn's prompt (words are joined by spaces). Default: none; the first line you \
     type is the first turn. Put `--` before a prompt that starts with `-`"
)))]
pub(crate) struct ChatOptions {
    /// The session's options.
    #[command(flatten)]
    pub(crate) run: RunOptions,
    /// Run `bash` calls without asking first.
    #[arg(long, conflicts_with = "ask")]
    pub(crate) no_ask: bool,
}

/// `--sandbox`: one of the three names, read into the executor's own type; clap's message
/// for anything else lists them.
fn sandbox_mode() -> impl TypedValueParser<Value = SandboxMode> {
    PossibleValuesParser::new(["read-only", "workspace-write", "off"])
        .try_map(|name| name.parse::<SandboxMode>())
}

/// A duration in humantime syntax (`250ms`, `90s`, `5m`), or a bare `0`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(text)
        .map_err(|error| format!("{error} (expected a duration such as `90s`, `5m` or `0`)"))
}

/// Parses the whole command line, program name first. Help and version requests come back as
/// errors too (`clap::Error::use_stderr` is false for them), the way clap reports them.
pub(crate) fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Cli::try_parse_from(args)
}

/// The top-level help, for a command line with no subcommand: what `--help` prints.
pub(crate) fn help() -> String {
    use clap::CommandFactory;
    let mut text = Cli::command().render_help().to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use pretty_assertions::assert_eq;

    fn parse_words(line: &str) -> Result<Cli, clap::Error> {
        parse(std::iter::once("dsh-agent").chain(line.split_whitespace()))
    }

    fn command(line: &str) -> Option<Command> {
        parse_words(line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .command
    }

    fn run(options: RunOptions) -> Option<Command> {
        Some(Command::Run(options))
    }

    fn defaults() -> RunOptions {
        RunOptions {
            script: None,
            model: None,
            base_url: None,
            api_key_env: None,
            no_stream: false,
            ask: false,
            system: None,
            log: None,
            cwd: None,
            json: false,
            no_background: false,
            no_code_mode: false,
            no_fs: false,
            mcp_config: Vec::new(),
            sandbox: None,
            wait_jobs: Duration::from_secs(300),
            prompt: Vec::new(),
        }
    }

    #[test]
    fn commands_and_flags_parse() {
        assert_eq!(command(""), None);
        assert_eq!(command("sdk"), Some(Command::Sdk));
        assert_eq!(
            command("mcp"),
            Some(Command::Mcp(McpServeOptions::default()))
        );
        assert_eq!(
            command("mcp --sandbox off"),
            Some(Command::Mcp(McpServeOptions {
                sandbox: Some(SandboxMode::FullAccess),
                no_fs: false,
            }))
        );
        assert_eq!(
            command("acp --script s.json --sandbox off --no-ask"),
            Some(Command::Acp(AcpOptions {
                script: Some("s.json".into()),
                model: None,
                base_url: None,
                api_key_env: None,
                no_stream: false,
                system: None,
                sandbox: Some(SandboxMode::FullAccess),
                no_background: false,
                no_code_mode: false,
                no_fs: false,
                no_ask: true,
            }))
        );
        assert_eq!(
            command("run --mcp-config a.json --mcp-config b.json"),
            run(RunOptions {
                mcp_config: vec!["a.json".into(), "b.json".into()],
                ..defaults()
            })
        );
        assert_eq!(
            command("sessions list --json"),
            Some(Command::Sessions {
                action: SessionsCommand::List { json: true }
            })
        );
        assert_eq!(
            command("sessions prune --older-than 30d"),
            Some(Command::Sessions {
                action: SessionsCommand::Prune {
                    older_than: Some(Duration::from_secs(30 * 86_400))
                }
            })
        );
        assert_eq!(
            command("resume 20261201-000000-000-00000001-000001 --fork --script s.json go on"),
            Some(Command::Resume(ResumeOptions {
                id: "20261201-000000-000-00000001-000001".into(),
                fork: true,
                run: RunOptions {
                    script: Some("s.json".into()),
                    prompt: vec!["go".into(), "on".into()],
                    ..defaults()
                },
            }))
        );
        let cli = parse_words("--session-dir /tmp/s run --retention 2h").unwrap();
        assert_eq!(
            (cli.session_dir.as_deref(), cli.retention),
            (Some("/tmp/s"), Duration::from_secs(7200))
        );
        assert_eq!(
            command("schemas --strict"),
            Some(Command::Schemas {
                strict: true,
                no_code_mode: false,
                no_fs: false,
            })
        );
        assert_eq!(
            command("replay s.jsonl --json"),
            Some(Command::Replay {
                log: "s.jsonl".into(),
                cards: false,
                json: true
            })
        );
        assert_eq!(
            command("run --script - --log l.jsonl --json list the files"),
            run(RunOptions {
                script: Some("-".into()),
                log: Some("l.jsonl".into()),
                json: true,
                prompt: vec!["list".into(), "the".into(), "files".into()],
                ..defaults()
            })
        );
    }

    #[test]
    fn a_model_and_its_endpoint_parse_and_exclude_a_script() {
        assert_eq!(
            command(
                "run --model compatible:llama3 --base-url http://127.0.0.1:8080/v1 --api-key-env MY_KEY --no-stream --system s.txt hi"
            ),
            run(RunOptions {
                model: Some("compatible:llama3".into()),
                base_url: Some("http://127.0.0.1:8080/v1".into()),
                api_key_env: Some("MY_KEY".into()),
                no_stream: true,
                system: Some("s.txt".into()),
                prompt: vec!["hi".into()],
                ..defaults()
            })
        );
        assert_eq!(
            command("chat --no-ask --model deepseek:deepseek-chat"),
            Some(Command::Chat(ChatOptions {
                run: RunOptions {
                    model: Some("deepseek:deepseek-chat".into()),
                    ..defaults()
                },
                no_ask: true,
            }))
        );
        assert_eq!(
            command("run --ask"),
            run(RunOptions {
                ask: true,
                ..defaults()
            })
        );
        let error = parse_words("run --model deepseek:deepseek-chat --script s.json").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ArgumentConflict);
    }

    #[test]
    fn options_take_their_value_either_way_and_dashes_end_them() {
        let expected = run(RunOptions {
            script: Some("s.json".into()),
            cwd: Some("/tmp".into()),
            ..defaults()
        });
        assert_eq!(command("run --script=s.json --cwd=/tmp"), expected);
        assert_eq!(command("run --script s.json --cwd /tmp"), expected);
        assert_eq!(
            command("run --json -- -v --not-a-flag"),
            run(RunOptions {
                json: true,
                prompt: vec!["-v".into(), "--not-a-flag".into()],
                ..defaults()
            })
        );
        let cli = parse_words("-vv run -q").unwrap();
        assert_eq!((cli.verbose, cli.quiet), (2, 1));
        let cli = parse_words("run --no-background -vv").unwrap();
        assert_eq!((cli.verbose, cli.quiet), (2, 0));
        let cli = parse_words("-q schemas").unwrap();
        assert_eq!((cli.verbose, cli.quiet), (0, 1));
    }

    #[test]
    fn the_job_wait_is_a_humantime_duration_or_zero() {
        for (text, expected) in [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("250ms", Duration::from_millis(250)),
            ("90s", Duration::from_secs(90)),
            ("1h 30m", Duration::from_secs(5400)),
        ] {
            let cli = parse(["dsh-agent", "run", "--wait-jobs", text]).unwrap();
            assert_eq!(
                cli.command,
                run(RunOptions {
                    wait_jobs: expected,
                    ..defaults()
                }),
                "{text}"
            );
        }
        // The largest wait humantime counts is accepted; `settle_background` treats a wait the
        // clock cannot add as one without an end.
        let cli = parse(["dsh-agent", "run", "--wait-jobs", "500000000000years"]).unwrap();
        let Some(Command::Run(options)) = cli.command else {
            panic!("{:?}", cli.command);
        };
        assert_eq!(
            options.wait_jobs,
            Duration::from_secs(500_000_000_000 * 31_557_600)
        );
        for text in [
            "soon",
            "",
            " ",
            "-5s",
            "5",
            "00",
            "1e3s",
            "99999999999999years",
        ] {
            let flag = format!("--wait-jobs={text}");
            let error = parse(["dsh-agent", "run", flag.as_str()]).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::ValueValidation, "{text:?}");
            assert!(error.to_string().contains("`90s`"), "{text:?}: {error}");
        }
    }

    /// The offending argument an error names, and the suggestion, if any.
    fn named(error: &clap::Error) -> (Option<String>, Option<String>) {
        let text = |kind| match error.get(kind) {
            Some(ContextValue::String(s)) => Some(s.clone()),
            Some(ContextValue::Strings(s)) => Some(s.join(" ")),
            _ => None,
        };
        (
            text(ContextKind::InvalidArg).or_else(|| text(ContextKind::InvalidSubcommand)),
            text(ContextKind::SuggestedSubcommand).or_else(|| text(ContextKind::SuggestedArg)),
        )
    }

    #[test]
    fn mistakes_are_named_with_a_suggestion_when_one_is_close() {
        for (line, kind, expected) in [
            ("fly", ErrorKind::InvalidSubcommand, (Some("fly"), None)),
            (
                "rum",
                ErrorKind::InvalidSubcommand,
                (Some("rum"), Some("run resume")),
            ),
            (
                "sessions lsit",
                ErrorKind::InvalidSubcommand,
                (Some("lsit"), Some("list")),
            ),
            (
                "run --script",
                ErrorKind::InvalidValue,
                (Some("--script <FILE|->"), None),
            ),
            (
                "run --frobnicate",
                ErrorKind::UnknownArgument,
                (Some("--frobnicate"), None),
            ),
            (
                "run --jsno",
                ErrorKind::UnknownArgument,
                (Some("--jsno"), Some("--json")),
            ),
            (
                "replay",
                ErrorKind::MissingRequiredArgument,
                (Some("<LOG>"), None),
            ),
            ("sdk now", ErrorKind::UnknownArgument, (Some("now"), None)),
        ] {
            let error = parse_words(line).unwrap_err();
            assert_eq!(error.kind(), kind, "{line}: {error}");
            let expected = (expected.0.map(str::to_owned), expected.1.map(str::to_owned));
            assert_eq!(named(&error), expected, "{line}: {error}");
            assert!(error.use_stderr(), "{line}");
        }
    }

    #[test]
    fn help_and_version_are_answers_not_mistakes() {
        for line in [
            "--help",
            "-h",
            "run -h",
            "replay --help",
            "schemas -h",
            "sdk --help",
        ] {
            let error = parse_words(line).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::DisplayHelp, "{line}");
            assert!(!error.use_stderr(), "{line}");
        }
        let error = parse_words("--version").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::DisplayVersion);
        assert!(help().contains("Exit status:"));
    }

    #[test]
    fn the_command_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
