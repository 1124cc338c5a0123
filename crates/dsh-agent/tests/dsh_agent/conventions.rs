//! `dsh-agent` as a conventional Unix command: clap's command line, diagnostics on stderr, a
//! stdout that may close or fill up, and background jobs that outlive the session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{bash_step, run, run_with, scratch, stderr, stdout, text_step, write_script};

const SUBCOMMANDS: [&str; 10] = [
    "run", "chat", "resume", "sessions", "replay", "schemas", "sdk", "mcp", "undo", "acp",
];

#[test]
fn every_subcommand_has_help_on_stdout_with_status_zero() {
    for sub in SUBCOMMANDS {
        for flag in ["-h", "--help"] {
            let output = run(&[sub, flag]);
            assert_eq!(output.status.code(), Some(0), "{sub} {flag}");
            assert_eq!(stderr(&output), "", "{sub} {flag}");
            let text = stdout(&output);
            assert!(
                text.contains(&format!("Usage: dsh-agent {sub}")),
                "{sub} {flag}:\n{text}"
            );
        }
        let output = run(&["help", sub]);
        assert_eq!(output.status.code(), Some(0), "help {sub}");
        assert!(stdout(&output).contains(&format!("Usage: dsh-agent {sub}")));
    }
    let top = run(&["--help"]);
    assert_eq!(top.status.code(), Some(0));
    let text = stdout(&top);
    // Every subcommand the help lists is checked above: a new one cannot be left out.
    let listed: Vec<&str> = text
        .lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert_eq!(listed, SUBCOMMANDS, "{text}");
    for expected in SUBCOMMANDS.iter().map(|s| format!("  {s} ")).chain([
        "Exit status:".into(),
        "  4    ".into(),
        "  141  ".into(),
    ]) {
        assert!(text.contains(&expected), "no {expected:?} in:\n{text}");
    }
    // Without a subcommand the same help, as before clap.
    assert_eq!(stdout(&run(&[])), text);
    let run_help = stdout(&run(&["run", "--help"]));
    assert!(run_help.contains("--wait-jobs <DURATION>"), "{run_help}");
    assert!(run_help.contains("[default: 5m]"), "{run_help}");
}

#[test]
fn version_prints_the_package_version() {
    for flag in ["--version", "-V"] {
        let output = run(&[flag]);
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(
            stdout(&output),
            format!("dsh-agent {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn usage_errors_exit_two_naming_the_mistake_and_suggesting_a_fix() {
    for (args, expected) in [
        (
            &["rum"][..],
            "tip: some similar subcommands exist: 'run', 'resume'",
        ),
        (
            &["run", "--jsno"][..],
            "tip: a similar argument exists: '--json'",
        ),
        (&["run", "--fast"][..], "unexpected argument '--fast' found"),
        (&["run", "-x"][..], "to pass '-x' as a value, use '-- -x'"),
        (
            &["run", "--script"][..],
            "a value is required for '--script <FILE|->'",
        ),
        (&["replay"][..], "<LOG>"),
        (&["sdk", "now"][..], "unexpected argument 'now' found"),
        (
            &["run", "--wait-jobs", "soon"][..],
            "for '--wait-jobs <DURATION>'",
        ),
    ] {
        let output = run(args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
        assert!(message.starts_with("error: "), "{args:?}: {message}");
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(
            message.ends_with("For more information, try '--help'.\n"),
            "{args:?}: {message}"
        );
        assert_eq!(stdout(&output), "", "{args:?}");
    }
}

/// A script that runs `true` with the bash tool, then answers.
fn one_command_script(dir: &std::path::Path) -> String {
    let steps = json!([bash_step("c1", "true", "Do nothing"), text_step("Done.")]);
    write_script(dir, steps).to_str().unwrap().to_owned()
}

#[test]
fn options_take_their_value_after_an_equals_sign_and_dashes_end_them() {
    let dir = scratch();
    let script = one_command_script(dir.path());
    let log = dir.path().join("log.jsonl");
    let output = run(&[
        "run",
        &format!("--script={script}"),
        &format!("--log={}", log.display()),
        "--json",
        "--",
        "-n",
        "--not-an-option",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let user: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "user/message")
        .collect();
    assert_eq!(user.len(), 1);
    assert_eq!(user[0]["content"], "-n --not-an-option");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("user/message")
    );
}

#[test]
fn diagnostics_go_to_stderr_filtered_by_rust_log_and_the_flags() {
    let dir = scratch();
    let script = one_command_script(dir.path());
    // `tool call succeeded` is a debug event of `dsh_tools::pipeline`.
    let shows = |flags: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["run", "--json", "--script", &script];
        args.extend_from_slice(flags);
        let output = run_with(&args, env);
        assert!(
            output.status.success(),
            "{flags:?} {env:?}: {}",
            stderr(&output)
        );
        assert!(
            !stdout(&output).contains("tool call succeeded"),
            "diagnostics on stdout"
        );
        stderr(&output).contains("tool call succeeded")
    };
    assert!(!shows(&[], &[]), "debug shown by default");
    assert!(!shows(&["-v"], &[]), "debug shown with -v");
    assert!(shows(&["-vv"], &[]), "debug hidden with -vv");
    assert!(shows(&[], &[("RUST_LOG", "debug")]));
    assert!(shows(&[], &[("RUST_LOG", "dsh_tools=debug")]));
    assert!(!shows(&[], &[("RUST_LOG", "agent_loop=debug")]));
    assert!(!shows(&["-q"], &[("RUST_LOG", "debug")]), "-q did not win");
    let output = run_with(
        &["run", "--json", "--script", &script],
        &[("RUST_LOG", "=nonsense=")],
    );
    assert!(output.status.success());
    assert!(
        stderr(&output).starts_with("dsh-agent: RUST_LOG=\"=nonsense=\" is not a filter"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_demo_piped_into_head_ends_quietly() {
    let output = std::process::Command::new("bash")
        .args([
            "-o",
            "pipefail",
            "-c",
            r#""$0" run --json | head -c 10; echo " status ${PIPESTATUS[0]}" >&2"#,
            env!("CARGO_BIN_EXE_dsh-agent"),
        ])
        .env("DSH_SESSION_DIR", support::SESSION_DIR)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&output).len(), 10);
    assert!(stdout(&output).starts_with('{'), "{}", stdout(&output));
    assert_eq!(stderr(&output), " status 141\n");
}

#[test]
fn a_full_stdout_fails_with_one_line_and_starts_no_command() {
    let dir = scratch();
    let steps = json!([
        bash_step("c1", "touch first", "Touch a file"),
        text_step("Done.")
    ]);
    let script = write_script(dir.path(), steps);
    for args in [
        vec![
            "run",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        vec!["schemas"],
        vec!["--help"],
    ] {
        let output = support::command(&args, &[])
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(
            stderr(&output),
            "dsh-agent: cannot write to stdout: No space left on device (os error 28)\n",
            "{args:?}"
        );
        assert_eq!(output.status.code(), Some(1), "{args:?}");
    }
    assert!(!dir.path().join("first").exists());
}

/// A script whose one step starts `sleep 30` in the background and then answers.
fn background_script(dir: &std::path::Path) -> String {
    let steps = json!([
        { "toolCalls": [ {
            "id": "c1",
            "name": "bash",
            "arguments": {
                "command": "sleep 30",
                "description": "Sleep in the background",
                "run_in_background": true
            }
        } ] },
        text_step("Started."),
    ]);
    write_script(dir, steps).to_str().unwrap().to_owned()
}

const STILL_RUNNING: &str =
    "dsh-agent: 1 background job still running after the session: bash-1 (sleep 30)";

/// What is said at once while the program waits for the job of [`background_script`].
const WAITING: &str = "dsh-agent: waiting for 1 background job: bash-1 (sleep 30)";

#[test]
fn jobs_left_running_are_named_at_once_and_stopped_when_the_wait_runs_out() {
    let dir = scratch();
    let script = background_script(dir.path());
    let started = Instant::now();
    let output = run(&["run", "--script", &script, "--wait-jobs", "0"]);
    assert_eq!(
        stderr(&output),
        format!("{STILL_RUNNING}; stopping it now (--wait-jobs 0)\n")
    );
    assert_eq!(output.status.code(), Some(4));

    let output = run(&["run", "--script", &script, "--wait-jobs=300ms"]);
    assert_eq!(
        stderr(&output),
        format!(
            "{WAITING} (up to 300ms; Ctrl-C stops it now; --wait-jobs sets the wait)\n\
             {STILL_RUNNING}; stopping it now (the wait ran out)\n"
        )
    );
    assert_eq!(output.status.code(), Some(4));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "waited for the job to end by itself"
    );
}

/// A job whose end opens a turn is part of the session: while it runs the program says it
/// waits for it, never that the session has ended.
#[test]
fn a_job_whose_notice_continues_the_session_is_not_said_to_outlive_it() {
    let dir = scratch();
    let steps = json!([
        { "toolCalls": [ { "id": "c1", "name": "bash", "arguments": {
            "command": "while [ ! -e go ]; do sleep 0.01; done",
            "description": "Wait for the go",
            "run_in_background": true
        } } ] },
        text_step("Started."),
        text_step("Seen."),
    ]);
    let script = write_script(dir.path(), steps);
    let mut child = support::command(
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[],
    )
    .spawn()
    .unwrap();
    let mut errors = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    errors.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("dsh-agent: waiting for 1 background job: bash-1 ("),
        "{line}"
    );
    std::fs::write(dir.path().join("go"), "").unwrap();
    errors.read_to_string(&mut line).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{line}");
    assert!(!line.contains("after the session"), "{line}");
    assert!(
        stdout(&output).contains("agent › Seen."),
        "{}",
        stdout(&output)
    );
}

/// Waits with `--wait-jobs wait` for the job [`background_script`] leaves running, checks that
/// the announcement came at once (it starts with `announced`), interrupts the wait with
/// Ctrl-C and checks that the job was stopped.
fn ctrl_c_stops_a_wait_of(wait: &str, announced: &str) {
    let dir = scratch();
    let script = background_script(dir.path());
    let started = Instant::now();
    let mut child = support::command(&["run", "--script", &script, "--wait-jobs", wait], &[])
        .spawn()
        .unwrap();
    let mut errors = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    errors.read_line(&mut line).unwrap();
    // Said while the job still runs, not after the wait.
    assert!(line.starts_with(announced), "{wait}: {line}");
    assert!(
        line.ends_with("; Ctrl-C stops it now; --wait-jobs sets the wait)\n"),
        "{wait}: {line}"
    );
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut rest = String::new();
    errors.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        rest,
        format!("{STILL_RUNNING}; stopping it now (interrupted)\n"),
        "{wait}"
    );
    assert_eq!(status.code(), Some(4), "{wait}");
    assert!(started.elapsed() < Duration::from_secs(25), "{wait}");
}

#[test]
fn ctrl_c_during_the_wait_stops_the_jobs() {
    ctrl_c_stops_a_wait_of("1h", &format!("{WAITING} (up to 1h;"));
}

/// A wait longer than the clock can count (the largest humantime takes) is a wait without
/// an end, not an overflow.
#[test]
fn a_wait_too_long_to_count_waits_until_ctrl_c() {
    ctrl_c_stops_a_wait_of(
        "500000000000years",
        &format!("{WAITING} (up to 500000000000years;"),
    );
}
