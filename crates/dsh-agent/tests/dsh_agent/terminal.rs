//! What `run` and `replay` send to a terminal: no control character from a tool's output or
//! arguments, and colour only by the conventions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{run, run_with, scratch, stderr, stdout, text_step, write_script};

/// Whether a terminal could act on `c` (newline and tab are text).
fn is_terminal_control(c: char) -> bool {
    let code = u32::from(c);
    (code < 0x20 && c != '\n' && c != '\t')
        || (0x7f..=0x9f).contains(&code)
        || (0x202a..=0x202e).contains(&code)
        || (0x2066..=0x2069).contains(&code)
}

fn controls_in(text: &str) -> Vec<char> {
    text.chars().filter(|c| is_terminal_control(*c)).collect()
}

/// What the hostile command prints, byte for byte: a clipboard write (OSC 52), a title change,
/// a screen clear, a colour, an 8-bit CSI, a right-to-left override, a bell and a carriage
/// return.
const PRINTED: &str = "\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}[31mred\u{1b}[0m\u{9b}2J abc\u{202e}fed\u{7}x\r";
/// The same, as the terminal text must show it.
const SHOWN: &str = r"\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m\u{9b}2J abc\u{202e}fed\x07x\x0d";

/// A session whose bash call prints [`PRINTED`] and whose arguments and answer carry hostile
/// sequences of their own.
fn hostile_session(dir: &std::path::Path) -> (String, String) {
    let command = r"printf '\033]52;c;cm0gLXJmIH4=\007\033]0;owned\007\033[2J\033[31mred\033[0m\302\2332J abc\342\200\256fed\007x\r\n'";
    let steps = json!([
        { "toolCalls": [ {
            "id": "c1",
            "name": "bash",
            "arguments": {
                "command": command,
                "description": "List \u{1b}]0;title\u{7}the \u{2066}files\u{2069}"
            }
        } ] },
        text_step("Done \u{1b}[2J\u{202e}."),
    ]);
    let script = write_script(dir, steps);
    let log = dir.join("session.jsonl");
    (
        script.to_str().unwrap().to_owned(),
        log.to_str().unwrap().to_owned(),
    )
}

#[test]
fn hostile_output_and_arguments_reach_the_terminal_escaped() {
    let dir = scratch();
    let (script, log) = hostile_session(dir.path());
    let output = run(&[
        "run",
        "--script",
        &script,
        "--log",
        &log,
        "--",
        "hi\u{1b}[8m",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let live = stdout(&output);
    assert_eq!(controls_in(&live), Vec::<char>::new(), "{live}");
    for expected in [
        format!("  {SHOWN}"),
        String::from(r"  List \x1b]0;title\x07the \u{2066}files\u{2069}"),
        String::from(r"agent › Done \x1b[2J\u{202e}."),
        String::from(r"you › hi\x1b[8m"),
    ] {
        assert!(
            live.lines().any(|l| l == expected),
            "no line {expected:?} in:\n{live}"
        );
    }
    let replayed = run(&["replay", &log]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let text = stdout(&replayed);
    assert_eq!(controls_in(&text), Vec::<char>::new(), "{text}");
    assert!(
        text.lines().any(|l| l == format!("  {SHOWN}")),
        "replay:\n{text}"
    );
}

/// What the program itself says on stderr quotes text from the model and the tools too: a
/// model's error, a background job's command, a notice no turn took. None of it reaches the
/// terminal raw.
#[test]
fn hostile_text_in_errors_and_job_names_reaches_stderr_escaped() {
    let dir = scratch();
    let steps = json!([
        { "toolCalls": [ {
            "id": "c1",
            "name": "bash",
            "arguments": {
                "command": "sleep 30 # \u{1b}]0;owned\u{7}",
                "description": "Sleep \u{202e}",
                "run_in_background": true
            }
        } ] },
        { "error": "the server said \u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{9b}2J\u{202e}" },
    ]);
    let script = write_script(dir.path(), steps);
    let output = run(&[
        "run",
        "--script",
        script.to_str().unwrap(),
        "--wait-jobs",
        "0",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let errors = stderr(&output);
    assert_eq!(controls_in(&errors), Vec::<char>::new(), "{errors}");
    assert_eq!(
        errors,
        "dsh-agent: 1 background job still running after the session: bash-1 (sleep 30 # \\x1b]0;owned\\x07); stopping it now (--wait-jobs 0)\n\
         dsh-agent: the server said \\x1b]52;c;cm0gLXJmIH4=\\x07\\u{9b}2J\\u{202e}\n"
    );
    assert_eq!(controls_in(&stdout(&output)), Vec::<char>::new());
}

/// Control characters reach the terminal by other roads than a command's output: a tool's
/// name (an unknown tool the model made up), the notice and the end line of a background job
/// whose command carries them, a call id. `run` and `replay` escape them all.
#[test]
fn hostile_tool_names_notices_and_job_lines_reach_the_terminal_escaped() {
    let dir = scratch();
    let steps = json!([
        { "toolCalls": [
            { "id": "c1\u{1b}[2J", "name": "ev\u{1b}]0;t\u{7}il\u{9b}", "arguments": { "x": 1 } },
            { "id": "c2", "name": "bash", "arguments": {
                "command": "while [ ! -e go ]; do sleep 0.01; done # \u{1b}]52;c;AA\u{7}\u{202e}",
                "description": "Quick",
                "run_in_background": true
            } },
        ] },
        text_step("Started."),
        text_step("Seen."),
    ]);
    let script = write_script(dir.path(), steps);
    let log = dir.path().join("session.jsonl");
    let mut child = support::command(
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[],
    )
    .spawn()
    .unwrap();
    // The job ends once the first turn has: its notice then opens a turn of its own, which
    // answers with the script's last step.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut live = String::new();
    while !live.contains("— turn ended") {
        assert_ne!(
            std::io::BufRead::read_line(&mut out, &mut live).unwrap(),
            0,
            "{live}"
        );
    }
    std::fs::write(dir.path().join("go"), "").unwrap();
    std::io::Read::read_to_string(&mut out, &mut live).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(controls_in(&live), Vec::<char>::new(), "{live}");
    assert_eq!(controls_in(&stderr(&output)), Vec::<char>::new());
    for expected in [
        r"▶ ev\x1b]0;t\x07il\u{9b}",
        r"  Error: unknown tool `ev\x1b]0;t\x07il\u{9b}`; available tools: bash, edit, glob, grep, job_kill, job_list, job_output, read, run_code, write",
        r"• job bash-1 ended: completed (exit code: 0)",
        r"• notice from bash: background job bash-1 (bash: while [ ! -e go ]; do sleep 0.01; done # \x1b]52;c;AA\x07\u{202e}) finished [status: completed, exit code: 0]. Read its output with job_output.",
    ] {
        assert!(
            live.lines().any(|l| l == expected),
            "no line {expected:?} in:\n{live}"
        );
    }
    let replayed = run(&["replay", log.to_str().unwrap()]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let text = stdout(&replayed);
    assert_eq!(controls_in(&text), Vec::<char>::new(), "{text}");
    assert!(
        text.lines().any(|l| l == r"▶ ev\x1b]0;t\x07il\u{9b}"),
        "replay:\n{text}"
    );
}

#[test]
fn the_events_keep_what_the_command_printed() {
    let dir = scratch();
    let (script, _) = hostile_session(dir.path());
    let output = run(&["run", "--json", "--script", &script]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results.len(), 1);
    let text = results[0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text, PRINTED, "the model's text changed");
}

/// Every escape sequence in `text` is an SGR (`ESC [ digits/semicolons m`): styling, nothing
/// else.
fn only_sgr(text: &str) -> bool {
    text.split('\u{1b}').skip(1).all(|rest| {
        rest.strip_prefix('[')
            .and_then(|r| r.find('m').map(|end| &r[..end]))
            .is_some_and(|params| params.chars().all(|c| c.is_ascii_digit() || c == ';'))
    })
}

#[test]
fn colour_follows_no_color_clicolor_and_the_terminal() {
    let dir = scratch();
    let (script, _) = hostile_session(dir.path());
    let args = ["run", "--script", script.as_str()];
    // The first line names the session, whose id differs from run to run.
    let stdout = |output| -> String {
        let text = stdout(&output);
        let (_, rest) = text.split_once('\n').unwrap();
        rest.to_owned()
    };
    let plain = stdout(run(&args));
    // `support::command` sets NO_COLOR=1; an empty NO_COLOR does not count.
    let forced = stdout(run_with(
        &args,
        &[("NO_COLOR", ""), ("CLICOLOR_FORCE", "1")],
    ));
    assert!(forced.contains('\u{1b}'), "CLICOLOR_FORCE gave no colour");
    assert!(only_sgr(&forced), "{forced}");
    assert_eq!(anstream::adapter::strip_str(&forced).to_string(), plain);
    for env in [
        [("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")],
        [("NO_COLOR", ""), ("CLICOLOR", "0")],
        // Not a terminal.
        [("NO_COLOR", ""), ("CLICOLOR", "1")],
    ] {
        assert_eq!(stdout(run_with(&args, &env)), plain, "{env:?}");
    }
}
