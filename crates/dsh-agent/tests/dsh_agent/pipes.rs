//! `dsh-agent run`, `replay` and `chat` into a reader that goes away: quietly, with status 141,
//! and no command starts after it. These tests close a child's stdout and expect its next
//! write to fail, which it does not while any other process holds the pipe's read end: a
//! child another test of this binary is starting holds a copy between its fork and its exec.
//! So each runs in a process of its own, and one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::Mutex;
use support::{bash_step, run, scratch, stderr, text_step, write_script};

/// Held by each test for its whole run.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A script that runs `true` with the bash tool, then answers.
fn one_command_script(dir: &std::path::Path) -> String {
    let steps = json!([bash_step("c1", "true", "Do nothing"), text_step("Done.")]);
    write_script(dir, steps).to_str().unwrap().to_owned()
}

/// A script of one step whose text is `bytes` long: more than a pipe holds, so writing it
/// meets a reader that went away.
fn long_answer_script(dir: &std::path::Path, bytes: usize) -> String {
    write_script(dir, json!([text_step(&"x".repeat(bytes))]))
        .to_str()
        .unwrap()
        .to_owned()
}

/// Runs `args`, reads ten bytes of stdout and closes it, as `| head -c 10` does; returns the
/// status and stderr.
fn read_ten_bytes_and_close(args: &[&str], stdin: Option<&str>) -> (Option<i32>, String) {
    let mut command = support::command(args, &[]);
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().unwrap();
    if let Some(text) = stdin {
        let mut input = child.stdin.take().unwrap();
        input.write_all(text.as_bytes()).unwrap();
    }
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let mut errors = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut errors)
        .unwrap();
    (child.wait().unwrap().code(), errors)
}

#[test]
fn replay_and_chat_into_a_reader_that_goes_away_end_quietly() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    crate::own_process::in_own_process(
        module_path!(),
        "replay_and_chat_into_a_reader_that_goes_away_end_quietly",
        replay_and_chat_end_quietly,
    );
}

fn replay_and_chat_end_quietly() {
    let dir = scratch();
    let script = long_answer_script(dir.path(), 256 * 1024);
    let log = dir.path().join("session.jsonl");
    let log = log.to_str().unwrap();
    // A session with a bash card, appended to itself until replaying it fills a pipe.
    let cards = one_command_script(dir.path());
    let logged = run(&["run", "--script", &cards, "--log", log]);
    assert!(logged.status.success(), "{}", stderr(&logged));
    let session = std::fs::read_to_string(log).unwrap();
    std::fs::write(log, session.repeat(2000)).unwrap();
    for (args, stdin) in [
        (vec!["replay", log], None),
        (vec!["replay", "--json", log], None),
        (vec!["chat", "--script", &script, "--", "hi"], None),
        (vec!["chat", "--script", &script], Some("hi\n")),
        (vec!["chat", "--json", "--script", &script, "hi"], None),
    ] {
        assert_eq!(
            read_ten_bytes_and_close(&args, stdin),
            (Some(141), String::new()),
            "{args:?}"
        );
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly_and_starts_no_more_commands() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    crate::own_process::in_own_process(
        module_path!(),
        "a_reader_that_goes_away_ends_the_run_quietly_and_starts_no_more_commands",
        a_closed_reader_starts_no_more_commands,
    );
}

fn a_closed_reader_starts_no_more_commands() {
    let dir = scratch();
    let (ready, gate) = (dir.path().join("ready"), dir.path().join("gate"));
    let made = std::process::Command::new("mkfifo")
        .args([&ready, &gate])
        .status()
        .unwrap();
    assert!(made.success());
    // The first command says it runs, then waits at the gate until this test has closed
    // stdout; the second must never run.
    let steps = json!([
        bash_step("c1", "echo > ready; read line < gate", "Wait at the gate"),
        bash_step("c2", "touch second", "Start a second command"),
        text_step("Done."),
    ]);
    let script = write_script(dir.path(), steps);
    let mut child = support::command(
        &[
            "run",
            "--json",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
        ],
        &[],
    )
    .spawn()
    .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    out.read_exact(&mut first).unwrap();
    assert_eq!(first[0], b'{');
    // Opening `ready` for reading waits for the command to open it for writing: every event
    // up to the command's start is written by then.
    std::fs::read(&ready).unwrap();
    // `head -c 10` has what it wanted and exits: the next write fails.
    drop(out);
    // Opening the gate for writing waits for the command to open it for reading.
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            let mut gate = std::fs::OpenOptions::new().write(true).open(gate)?;
            gate.write_all(b"go\n")
        })
    };
    let mut errors = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut errors)
        .unwrap();
    let status = child.wait().unwrap();
    // Had the command been stopped before it read the gate, the opener would still wait for
    // a reader: a read-write open of a FIFO never blocks and releases it.
    drop(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&gate)
            .unwrap(),
    );
    opener.join().unwrap().unwrap();
    assert_eq!(errors, "", "a closed stdout is not an error to report");
    assert_eq!(status.code(), Some(141));
    assert!(
        !dir.path().join("second").exists(),
        "a command started after stdout closed"
    );
}
