//! `dsh-agent` keeps the loop's promises: every job notice reaches the model or fails the run,
//! a session log that cannot be written fails the run, and `replay` reads any log safely.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{run as dsh_agent, stderr, stdout};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A script step of background `bash` calls, one per command.
fn background(commands: &[String]) -> Value {
    let calls: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, command)| {
            json!({ "id": format!("c{i}"), "name": "bash", "arguments": {
                "command": command, "description": format!("job {i}"), "run_in_background": true } })
        })
        .collect();
    json!({ "toolCalls": calls })
}

/// The events of a `--json` run.
fn events(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn ten_jobs_finishing_together_reach_the_model_in_one_request() {
    let dir = tempfile::tempdir().unwrap();
    // Nine jobs wait for a file the tenth creates, so all ten end within a few milliseconds
    // of each other, after the turn that started them has ended.
    let mut commands: Vec<String> = (0..9)
        .map(|i| format!("while [ ! -e go ]; do sleep 0.01; done; echo job {i}"))
        .collect();
    commands.push(String::from("sleep 1; touch go; echo job 9"));
    let script = json!({ "steps": [
        background(&commands),
        { "text": "Started ten jobs." },
        { "text": "All ten finished." },
    ] });
    let script = write(dir.path(), "script.json", &script.to_string());
    let output = dsh_agent(&[
        "run",
        "--json",
        "--cwd",
        dir.path().to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "go",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let events = events(&output);
    let injected: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "context/inject")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(injected.len(), 10);
    let requests: Vec<Vec<&str>> = events
        .iter()
        .filter(|e| e["type"] == "model/request")
        .map(|e| {
            e["injected"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["content"].as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(requests, vec![vec![], vec![], injected]);
}

#[test]
fn a_notice_the_wake_up_limit_left_behind_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // Four jobs ending far apart: three woken turns are allowed, the fourth notice waits.
    let commands: Vec<String> = (1..=4)
        .map(|i| format!("sleep {}", f64::from(i) * 0.7))
        .collect();
    let script = json!({ "steps": [
        background(&commands),
        { "text": "Started." }, { "text": "One." }, { "text": "Two." }, { "text": "Three." },
    ] });
    let script = write(dir.path(), "script.json", &script.to_string());
    let output = dsh_agent(&["run", "--script", script.to_str().unwrap(), "go"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    // The run first names the jobs still running at the end (and waits for them); the notice
    // that never reached the model is reported last.
    let stderr = stderr(&output);
    assert!(
        stderr.ends_with(
            "dsh-agent: this notice never reached the model: background job bash-4 (bash: sleep 2.8) \
             finished [status: completed, exit code: 0]. Read its output with job_output.\n\
             dsh-agent: 1 job notice(s) never reached the model (the wake-up limit was spent)\n"
        ),
        "{stderr}"
    );
}

#[test]
fn a_log_that_cannot_be_written_fails_the_run() {
    let output = dsh_agent(&["run", "--log", "/dev/full"]);
    assert_eq!(output.status.code(), Some(1));
    // The library's own warning (a tracing line) may come first; the CLI's line is the verdict.
    let verdict: String = stderr(&output)
        .lines()
        .filter(|line| line.starts_with("dsh-agent: "))
        .collect();
    assert!(
        verdict.starts_with(
            "dsh-agent: cannot start the agent: cannot write the session log /dev/full: No space left on device"
        ),
        "{}",
        stderr(&output)
    );
}

/// The log is a FIFO whose reader takes the first line and goes away; the command the
/// session runs ends only then, so its result is written to a pipe nobody reads.
#[test]
fn a_log_that_fails_mid_session_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    let made = Command::new("mkfifo").arg(&log).status().unwrap();
    assert!(made.success());
    // Another process, so no copy of the read end stays in this one.
    let mut reader = Command::new("sh")
        .args(["-c", "head -n 1 session.jsonl > first && touch go"])
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    let script = json!({ "steps": [
        { "toolCalls": [ { "id": "c1", "name": "bash", "arguments": {
            "command": "while [ ! -e go ]; do sleep 0.01; done",
            "description": "Wait for the log's reader to go" } } ] },
        { "text": "Done." },
    ] });
    let script = write(dir.path(), "script.json", &script.to_string());
    let output = dsh_agent(&[
        "run",
        "--cwd",
        dir.path().to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(reader.wait().unwrap().success());
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let first = std::fs::read_to_string(dir.path().join("first")).unwrap();
    assert!(first.contains(r#""type":"session/start""#), "{first}");
    assert!(
        stderr(&output).ends_with(&format!(
            "dsh-agent: cannot write the session log {}: Broken pipe (os error 32)\n",
            log.display()
        )),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_delay_out_of_range_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "script.json",
        r#"{ "steps": [ { "text": "hi", "delayMs": 86400000 } ] }"#,
    );
    let output = dsh_agent(&["run", "--script", script.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "invalid script: /steps/0/delayMs: must be a whole number of milliseconds from 0 to 600000, not 86400000"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn replay_refuses_an_endless_line_and_a_log_without_events() {
    let output = dsh_agent(&["replay", "/dev/zero"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "dsh-agent: cannot read the log /dev/zero: line 1 is longer than 33554432 bytes\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let garbage = write(dir.path(), "garbage.jsonl", "not json\n{\"seq\": 1}\n");
    let output = dsh_agent(&["replay", garbage.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let path = garbage.display();
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: skipped 2 malformed line(s) of {path}: 1, 2\ndsh-agent: {path} holds no session event\n"
        )
    );
}

/// Runs one foreground `bash` command in a logged session; returns the log.
fn logged_command(dir: &Path, name: &str, command: &str) -> PathBuf {
    let log = dir.join("session.jsonl");
    let script = json!({ "steps": [
        { "toolCalls": [ { "id": "c1", "name": "bash",
                           "arguments": { "command": command, "description": name } } ] },
        { "text": "Done." },
    ] });
    let script = write(dir, &format!("{name}.json"), &script.to_string());
    let output = dsh_agent(&[
        "run",
        "--log",
        log.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    log
}

fn replay_json(log: &Path) -> Vec<Value> {
    let output = dsh_agent(&["replay", log.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn two_sessions_appended_to_one_log_replay_as_two_sessions() {
    let dir = tempfile::tempdir().unwrap();
    logged_command(dir.path(), "first", "echo first");
    let log = logged_command(dir.path(), "second", "echo second");
    let output = dsh_agent(&["replay", log.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let headings: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("session "))
        .collect();
    assert_eq!(headings.len(), 2, "{}", stdout(&output));
    assert_ne!(headings[0], headings[1]);
    let cards = replay_json(&log);
    let summary: Vec<(&str, &str, &str)> = cards
        .iter()
        .map(|card| {
            (
                card["sessionId"].as_str().unwrap(),
                card["callId"].as_str().unwrap(),
                card["result"]["output"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary.len(), 2);
    assert_ne!(summary[0].0, summary[1].0);
    assert_eq!(
        [summary[0].1, summary[0].2, summary[1].1, summary[1].2],
        ["c1", "first", "c1", "second"]
    );
}

/// Rewrites every line of `log` with `edit`.
fn edit_log(log: &Path, edit: impl Fn(&mut Value)) {
    let text: String = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            edit(&mut value);
            format!("{value}\n")
        })
        .collect();
    std::fs::write(log, text).unwrap();
}

#[test]
fn replay_uses_the_presentation_meta_and_falls_back_without_it() {
    let dir = tempfile::tempdir().unwrap();
    // A successful command whose own last line looks like an exit marker: only the meta the
    // `bash` tool logs tells the card that it exited 0 and that the line is output.
    let log = logged_command(
        dir.path(),
        "marker",
        "printf 'checking\\n[exit code: 7]\\n'",
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let result: Value = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["type"] == "tool/result")
        .unwrap();
    assert_eq!(result["meta"], json!({ "exitCode": 0, "signal": null }));
    let card = &replay_json(&log)[0]["result"];
    assert_eq!(card["exitCode"], 0);
    assert_eq!(card["output"], "checking\n[exit code: 7]");

    edit_log(&log, |event| {
        event.as_object_mut().unwrap().remove("meta");
    });
    let card = &replay_json(&log)[0]["result"];
    assert_eq!(card["exitCode"], 7);
    assert_eq!(card["output"], "checking");
}

#[test]
fn replay_keeps_a_result_with_a_failure_code_it_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let log = logged_command(dir.path(), "plain", "echo hi");
    edit_log(&log, |event| {
        if event["type"] == "tool/result" {
            event["isError"] = json!(true);
            event["content"] = json!([{ "type": "text", "text": "Error: the quota ran out" }]);
            event["error"] = json!({ "message": "the quota ran out", "code": "QUOTA_EXCEEDED" });
        }
    });
    let output = dsh_agent(&["replay", log.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Error: the quota ran out"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains(
            // The edit wrote the field through a `serde_json::Value`, which sorts its keys; the
            // message quotes the field exactly as the log holds it.
            r#"kept without /error (not understood: {"code":"QUOTA_EXCEEDED","message":"the quota ran out"})"#
        ),
        "{}",
        stderr(&output)
    );
}
