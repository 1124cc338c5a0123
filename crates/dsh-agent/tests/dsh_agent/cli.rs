//! The `dsh-agent` command line, run as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../dsh-tools/tests/support/typescript.rs"]
mod typescript;

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use support::{stderr, stdout};

/// Runs `dsh-agent <args>` to the end (see [`support::command`]), with `stdin` written to it.
fn dsh_agent(args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = support::command(args, &[]);
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_demo_runs_every_stage_and_exits_zero() {
    let output = dsh_agent(&["run"], None);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}\n{}", stderr(&output));
    for expected in [
        "  hello from dsh-rs",
        "  [exit code: 2]",
        "  started background job bash-1",
        "• notice from bash: background job bash-1 (bash: sleep 1; echo \"background work done\") finished [status: completed, exit code: 0]. Read its output with job_output.",
        "  background work done",
        // One run_code program called bash twice and combined the outputs.
        "  Returned:",
        "    \"greeting\": \"hello\",",
        "    \"lines\": 3",
        "  Tool calls (2): bash ×2",
        "agent › The background job finished and printed \"background work done\". That is the tour.",
    ] {
        assert!(
            text.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{text}"
        );
    }
    assert_eq!(text.matches("— turn ended: completed").count(), 2, "{text}");
}

#[test]
fn run_code_is_offered_unless_code_mode_is_left_out() {
    let dir = scratch();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"steps": [{"text": "nothing to do"}]}"#).unwrap();
    let tools_line = |extra: &[&str]| {
        let mut args = vec!["run", "--script", script.to_str().unwrap()];
        args.extend_from_slice(extra);
        let output = dsh_agent(&args, None);
        assert!(output.status.success(), "{}", stderr(&output));
        let text = stdout(&output);
        text.lines()
            .find_map(|l| l.split_once("; tools: ").map(|(_, tools)| tools.to_owned()))
            .unwrap_or_else(|| panic!("no tools line in:\n{text}"))
    };
    assert_eq!(
        tools_line(&[]),
        "bash, edit, glob, grep, job_kill, job_list, job_output, read, run_code, write"
    );
    assert_eq!(
        tools_line(&["--no-code-mode", "--no-fs"]),
        "bash, job_kill, job_list, job_output"
    );
}

const EVENT_TYPES: [&str; 13] = [
    "session/start",
    "user/message",
    "model/request",
    "assistant/message",
    "tool/call",
    "tool/result",
    "context/inject",
    "context/undelivered",
    "job/start",
    "job/end",
    "turn/end",
    "session/end",
    "error",
];

#[test]
fn json_output_is_one_event_per_line_of_the_documented_types() {
    let output = dsh_agent(&["run", "--json"], None);
    assert!(output.status.success(), "{}", stderr(&output));
    let mut seen = BTreeSet::new();
    let mut last_seq = 0;
    for line in stdout(&output).lines() {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let kind = event["type"].as_str().unwrap();
        assert!(EVENT_TYPES.contains(&kind), "unknown type {kind}");
        let seq = event["seq"].as_u64().unwrap();
        assert_eq!(seq, last_seq + 1, "{line}");
        last_seq = seq;
        assert!(event["ts"].is_string());
        seen.insert(kind.to_owned());
    }
    for kind in [
        "session/start",
        "tool/call",
        "tool/result",
        "context/inject",
        "job/start",
        "job/end",
        "turn/end",
        "session/end",
    ] {
        assert!(seen.contains(kind), "no {kind} event");
    }
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn a_logged_session_replays_one_card_per_tool_call_with_cards() {
    let dir = scratch();
    let log = dir.path().join("session.jsonl");
    let output = dsh_agent(&["run", "--log", log.to_str().unwrap()], None);
    assert!(output.status.success(), "{}", stderr(&output));
    let replayed = dsh_agent(&["replay", "--cards", log.to_str().unwrap()], None);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let text = stdout(&replayed);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("▶ ")).count(),
        5,
        "{text}"
    );
    let json = dsh_agent(&["replay", log.to_str().unwrap(), "--json"], None);
    let cards: Vec<serde_json::Value> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = cards
        .iter()
        .map(|c| c["callId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["call-1", "call-2", "call-3", "call-4", "call-5"]);
    assert_eq!(cards[0]["call"]["card"], "terminal");
    assert_eq!(cards[1]["result"]["exitCode"], 2);
}

/// Runs `dsh-agent <args>` twice: the output must be byte-identical, closed objects, and name
/// the tools in order with the required parameters of each.
fn check_schemas(args: &[&str], expected: &[(&str, &[&str])]) {
    let first = dsh_agent(args, None);
    let second = dsh_agent(args, None);
    assert!(first.status.success(), "{args:?}: {}", stderr(&first));
    assert_eq!(first.stdout, second.stdout, "{args:?}");
    let schemas: Vec<serde_json::Value> = serde_json::from_slice(&first.stdout).unwrap();
    let seen: Vec<(&str, Vec<&str>)> = schemas
        .iter()
        .map(|schema| {
            let parameters = &schema["parameters"];
            assert_eq!(parameters["additionalProperties"], false, "{args:?}");
            let required = parameters["required"]
                .as_array()
                .map(|keys| keys.iter().map(|k| k.as_str().unwrap()).collect())
                .unwrap_or_default();
            (schema["name"].as_str().unwrap(), required)
        })
        .collect();
    let expected: Vec<(&str, Vec<&str>)> = expected
        .iter()
        .map(|(name, keys)| (*name, keys.to_vec()))
        .collect();
    assert_eq!(seen, expected, "{args:?}");
}

#[test]
fn schemas_are_byte_identical_across_runs() {
    check_schemas(
        &["schemas"],
        &[
            ("bash", &["command", "description"]),
            ("edit", &["file_path", "old_string", "new_string"]),
            ("glob", &["pattern"]),
            ("grep", &["pattern"]),
            ("job_kill", &["job_id"]),
            ("job_list", &[]),
            ("job_output", &["job_id"]),
            ("read", &["file_path"]),
            ("run_code", &["code"]),
            ("write", &["file_path", "content"]),
        ],
    );
    check_schemas(
        &["schemas", "--strict"],
        &[
            (
                "bash",
                &[
                    "command",
                    "description",
                    "timeout_ms",
                    "workdir",
                    "run_in_background",
                ],
            ),
            (
                "edit",
                &["file_path", "old_string", "new_string", "replace_all"],
            ),
            ("glob", &["pattern", "path"]),
            ("grep", &["pattern", "path", "include"]),
            ("job_kill", &["job_id"]),
            ("job_list", &[]),
            ("job_output", &["job_id", "wait", "timeout_ms"]),
            ("read", &["file_path", "offset", "limit"]),
            // A raw schema: sent as declared, having no strict projection.
            ("run_code", &["code"]),
            ("write", &["file_path", "content"]),
        ],
    );
}

fn write_script(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("script.json");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn unknown_tools_and_bad_arguments_are_results_and_the_run_succeeds() {
    let dir = scratch();
    let script = write_script(
        dir.path(),
        r#"{ "steps": [
            { "toolCalls": [ { "id": "c1", "name": "teleport", "arguments": {} } ] },
            { "toolCalls": [ { "id": "c2", "name": "bash", "argumentsRaw": "{not json" } ] },
            { "text": "Done." }
        ] }"#,
    );
    let log = dir.path().join("log.jsonl");
    let output = dsh_agent(
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let errors: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "tool/result" && e["isError"] == true)
        .collect();
    let codes: Vec<&str> = errors
        .iter()
        .map(|e| e["error"]["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, vec!["UNKNOWN_TOOL", "INVALID_ARGS"]);
}

#[test]
fn a_script_that_runs_out_fails_naming_the_request() {
    let output = dsh_agent(
        &["run", "--script", "-"],
        Some(
            r#"{ "steps": [ { "toolCalls": [ { "id": "c1", "name": "bash", "arguments": { "command": "true", "description": "Do nothing" } } ] } ] }"#,
        ),
    );
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output).trim(),
        "dsh-agent: script exhausted at request 2"
    );
}

#[test]
fn a_script_with_steps_left_over_fails_naming_them() {
    let output = dsh_agent(
        &["run", "--script", "-"],
        Some(r#"{ "steps": [ { "text": "Done." }, { "text": "Never asked for." } ] }"#),
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim(),
        "dsh-agent: the script has 1 unused step(s) after 1 request(s)"
    );
}

#[test]
fn a_malformed_script_fails_naming_the_json_error() {
    let dir = scratch();
    let script = write_script(dir.path(), "{ \"steps\": [ { \"text\": \"hi\" ");
    let output = dsh_agent(&["run", "--script", script.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!(
            "dsh-agent: {}: invalid script: EOF while parsing",
            script.display()
        )),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "{message}");
}

#[test]
fn bad_command_lines_are_refused_with_the_usage() {
    let output = dsh_agent(&["run", "--fast"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("unexpected argument '--fast' found"));
    assert!(stderr(&output).contains("Usage: dsh-agent run"));
}

#[test]
fn the_sdk_type_checks_with_the_typescript_compiler() {
    let output = dsh_agent(&["sdk"], None);
    assert!(output.status.success());
    let dir = scratch();
    std::fs::write(dir.path().join("sdk.d.ts"), &output.stdout).unwrap();
    std::fs::write(
        dir.path().join("program.ts"),
        r#"
async function main(): Promise<void> {
  const run = await tools.bash({ command: "ls", description: "List files" });
  if (run.kind === "foreground") {
    const code: number | null = run.exitCode;
    const spill: string | undefined = run.stdout.spillPath;
    void code; void spill;
  } else {
    const out = await tools.job_output({ job_id: run.jobId, wait: true });
    const status: string = out.job.status;
    void status;
  }
}
void main;
"#,
    )
    .unwrap();
    let (ok, log) =
        typescript::check(&[&dir.path().join("sdk.d.ts"), &dir.path().join("program.ts")]);
    assert!(ok, "{log}");
}

/// What `chat`, `resume` and `run PROMPT` say first on stderr when no model is configured.
const NO_MODEL: &str = "dsh-agent: no model is configured, so the embedded demo script plays instead of answering (set one with --model PROVIDER:MODEL or DSH_MODEL=PROVIDER:MODEL)";

#[test]
fn without_a_model_chat_and_a_prompted_run_say_the_demo_plays_and_how_to_set_one() {
    let chat = dsh_agent(&["chat", "--no-ask"], Some("list my files\n"));
    let errors = stderr(&chat);
    assert_eq!(errors.lines().next(), Some(NO_MODEL), "{errors}");
    let run = dsh_agent(&["run", "list my files"], None);
    assert_eq!(
        stderr(&run).lines().next(),
        Some(NO_MODEL),
        "{}",
        stderr(&run)
    );
    // The tour asked for, and a script asked for, play without a word.
    let tour = dsh_agent(&["run"], None);
    assert!(!stderr(&tour).contains("no model"), "{}", stderr(&tour));
}

#[test]
fn without_a_model_resume_says_the_demo_plays_or_that_there_is_nothing_to_resume() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let in_store = |args: &[&str]| {
        support::command(args, &[("DSH_SESSION_DIR", store.to_str().unwrap())])
            .output()
            .unwrap()
    };
    let script = write_script(dir.path(), r#"{"steps": [{"text": "hi"}]}"#);
    let first = in_store(&["run", "--script", script.to_str().unwrap()]);
    assert!(first.status.success(), "{}", stderr(&first));
    let id = stdout(&first).split_whitespace().nth(1).unwrap().to_owned();
    let output = in_store(&["resume", &id]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: nothing to resume: no model is configured (set one with --model PROVIDER:MODEL or DSH_MODEL=PROVIDER:MODEL) and no prompt was given\n"
        )
    );
    // With a script but no prompt, and no notice waiting: nothing happens, and that is said.
    let empty = write_script(dir.path(), r#"{"steps": []}"#);
    let output = in_store(&["resume", &id, "--script", empty.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: nothing to resume: no notice of session {id} waits for the model; give a prompt to continue it\n"
        )
    );
    let output = in_store(&["resume", &id, "--wait-jobs", "0", "go on"]);
    assert_eq!(
        stderr(&output).lines().next(),
        Some(NO_MODEL),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_help_of_chat_and_resume_says_what_no_prompt_means_there() {
    let help = |command: &str| stdout(&dsh_agent(&[command, "--help"], None));
    let (chat, resume, run) = (help("chat"), help("resume"), help("run"));
    for (text, expected) in [
        (
            &chat,
            "Default: none; the first line you type is the first turn",
        ),
        (
            &resume,
            "Default: none; the notices waiting for the model get their turn",
        ),
        (&run, "Default: the demo's prompt"),
    ] {
        assert!(text.contains(expected), "no {expected:?} in:\n{text}");
    }
    assert!(!chat.contains("the demo's prompt"), "{chat}");
    assert!(!resume.contains("the demo's prompt"), "{resume}");
}

/// Global options (`-v`, `-q`, `--session-dir`, `--retention`) are grouped under a heading of
/// their own on every page, after the subcommand's own options.
#[test]
fn global_options_are_grouped_apart_from_each_subcommands_own() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["chat", "--help"],
        &["resume", "--help"],
        &["replay", "--help"],
        &["schemas", "--help"],
        &["sessions", "list", "--help"],
    ] {
        let page = stdout(&dsh_agent(args, None));
        let (own, global) = page
            .split_once("\nGlobal options:\n")
            .unwrap_or_else(|| panic!("{args:?}: no global options heading in:\n{page}"));
        for option in ["--verbose", "--quiet", "--session-dir", "--retention"] {
            assert!(
                !own.contains(option),
                "{args:?} lists {option} with its own:\n{page}"
            );
            assert!(global.contains(option), "{args:?}: no {option} in:\n{page}");
        }
    }
    // They still work after the subcommand.
    let output = dsh_agent(&["schemas", "-q", "--session-dir", "/nonexistent"], None);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// `schemas` prints what `run` and `chat` offer, `run_code` included unless --no-code-mode;
/// `sdk` prints exactly the declarations `run_code`'s description embeds.
#[test]
fn schemas_include_run_code_and_the_sdk_is_what_it_embeds() {
    let output = dsh_agent(&["schemas"], None);
    let schemas: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    let run_code = schemas
        .iter()
        .find(|s| s["name"] == "run_code")
        .unwrap_or_else(|| panic!("no run_code in {schemas:?}"));
    let sdk = stdout(&dsh_agent(&["sdk"], None));
    assert!(
        run_code["description"].as_str().unwrap().contains(&sdk),
        "the sdk is not what run_code embeds:\n{sdk}"
    );
    let output = dsh_agent(&["schemas", "--no-code-mode"], None);
    let schemas: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        schemas.iter().all(|s| s["name"] != "run_code"),
        "{schemas:?}"
    );
}

/// `replay` shows what `run` showed: the same lines, prompt, text, thinking, notices and turn
/// ends included; `--cards` shows only the cards.
#[test]
fn replay_shows_what_run_showed_and_cards_only_with_cards() {
    let dir = scratch();
    let log = dir.path().join("session.jsonl");
    let output = dsh_agent(&["run", "--log", log.to_str().unwrap()], None);
    assert!(output.status.success(), "{}", stderr(&output));
    let replayed = dsh_agent(&["replay", log.to_str().unwrap()], None);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    pretty_assertions::assert_eq!(stdout(&replayed), stdout(&output));
    let cards = stdout(&dsh_agent(
        &["replay", "--cards", log.to_str().unwrap()],
        None,
    ));
    assert!(cards.starts_with("session "), "{cards}");
    assert!(
        !cards.contains("agent ›") && !cards.contains("— turn ended"),
        "{cards}"
    );
    assert_eq!(
        cards.lines().filter(|l| l.starts_with("▶ ")).count(),
        5,
        "{cards}"
    );
}

/// A foreground `bash` card names its command once: in the call line, not again above the
/// output.
#[test]
fn a_foreground_bash_card_shows_its_command_once() {
    let output = dsh_agent(&["run"], None);
    let text = stdout(&output);
    assert_eq!(
        text.matches("$ echo \"hello from dsh-rs\" && uname -s")
            .count(),
        1,
        "{text}"
    );
}
