//! Runs ended by a signal: SIGTERM ends the session as interrupted with its log flushed
//! (also while a command stopped its supervisor, or a chat waits for a line), and SIGKILL at
//! random points of fifty runs leaves a session that resumes.

use super::{bash, calls, check_ids, command, events, list, of_type, only_session, run, script};
use crate::support::{scratch, stderr, text_step};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

#[test]
fn sigterm_ends_the_session_as_interrupted_with_its_log_flushed() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let script = script(
        dir.path(),
        "s.json",
        json!([
            calls(&[bash("c1", "sleep 30", true)]),
            { "text": "slow", "delayMs": 60_000 },
        ]),
    );
    let child = command(&store, &["run", "--json", "--script", &script])
        .spawn()
        .unwrap();
    // Once the job started, the turn is waiting for the slow answer.
    terminate_once_printed(child, "job/start");
    let id = only_session(&store);
    let log = events(&store, &id);
    let last = log.last().unwrap();
    assert_eq!(
        (&last["type"], &last["reason"]),
        (&json!("session/end"), &json!("interrupted"))
    );
    let turn_end = of_type(&log, "turn/end");
    assert_eq!(turn_end[0]["reason"], "cancelled");
    check_ids(&log);
    assert_eq!(list(&store)[0]["state"], "interrupted");
}

/// A foreground command that stopped its supervisor (possible with the sandbox off) does not
/// keep SIGTERM from ending the session: the harness kills what it cannot hear from.
#[test]
fn sigterm_ends_a_session_whose_command_stopped_its_supervisor() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let script = script(
        dir.path(),
        "s.json",
        json!([calls(&[bash("c1", "kill -STOP $PPID; sleep 30", false)]), { "text": "done" }]),
    );
    let child = command(
        &store,
        &["run", "--json", "--sandbox", "off", "--script", &script],
    )
    .spawn()
    .unwrap();
    terminate_once_printed(child, "tool/call");
    let id = only_session(&store);
    let log = events(&store, &id);
    assert_eq!(log.last().unwrap()["reason"], json!("interrupted"));
}

#[test]
fn sigterm_ends_a_chat_waiting_for_a_line() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let script = script(dir.path(), "s.json", json!([text_step("hello")]));
    let mut child = command(&store, &["chat", "--json", "--script", &script, "hi"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open and never written: once the first turn ended, the chat waits for a line.
    let _stdin = child.stdin.take().unwrap();
    terminate_once_printed(child, "turn/end");
    let id = only_session(&store);
    let log = events(&store, &id);
    assert_eq!(log.last().unwrap()["reason"], "interrupted");
}

/// Reads `child`'s `--json` events until one of type `kind`, then sends SIGTERM: the run must
/// end promptly with the status of an interrupted session (130).
fn terminate_once_printed(mut child: Child, kind: &str) {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while serde_json::from_str::<Value>(&line).map_or(true, |event| event["type"] != kind) {
        line.clear();
        assert_ne!(out.read_line(&mut line).unwrap(), 0, "no {kind}");
    }
    let sent = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        sent.elapsed() < Duration::from_secs(20),
        "{:?}",
        sent.elapsed()
    );
}

/// A tiny deterministic generator (no dependency needed): the seed is printed on failure.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn fifty_runs_killed_at_random_points_each_resume() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    // Foreground and background commands, a spilled output, and a notice that wakes a turn.
    let busy = script(
        dir.path(),
        "busy.json",
        json!([
            calls(&[
                bash("c1", "echo one", false),
                bash("c2", "sleep 0.1; echo bg", true)
            ]),
            calls(&[bash("c3", "seq 1 20000", false), bash("c4", "true", true)]),
            text_step("waiting"),
            text_step("done"),
        ]),
    );
    let again = script(
        dir.path(),
        "again.json",
        json!([
            calls(&[
                bash("c1", "echo again", false),
                bash("c2", "sleep 30", true)
            ]),
            text_step("resumed"),
        ]),
    );
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut random = Lcg(seed);
    let started = Instant::now();
    let mut crashed = 0;
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // How long a run takes from its first event to its end, here and now: the kills fall in
    // that span, so that most land mid-run however fast this machine is.
    let span = {
        let mut child = command(&store, &["run", "--json", "--script", &busy])
            .env("TMPDIR", &tmp)
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let begun = Instant::now();
        std::io::copy(&mut out, &mut std::io::sink()).unwrap();
        child.wait().unwrap();
        u64::try_from(begun.elapsed().as_millis()).unwrap().max(20)
    };
    for run in 0..50 {
        let mut child = command(&store, &["run", "--json", "--script", &busy])
            .env("TMPDIR", &tmp)
            .spawn()
            .unwrap();
        // The session exists once its first event is out; then a random moment of the run.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let start: Value = serde_json::from_str(&first).unwrap();
        let id = start["sessionId"].as_str().unwrap().to_owned();
        std::thread::sleep(Duration::from_millis(random.below(span)));
        child.kill().unwrap();
        child.wait().unwrap();
        // Read tolerantly: the kill may have torn the last line.
        let text = std::fs::read_to_string(store.join(&id).join("events.jsonl")).unwrap();
        let last = text
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<Value>(line).ok());
        if last.is_none_or(|event| event["type"] != "session/end") {
            crashed += 1;
        }

        let output = run_resume(&store, &id, &again);
        assert_eq!(
            output.status.code(),
            Some(4),
            "run {run} (seed {seed}): {}",
            stderr(&output)
        );
        let log = events(&store, &id);
        check_ids(&log);
        let lost = log
            .iter()
            .filter(|e| {
                e["type"] == "context/inject"
                    && e["content"].as_str().unwrap().contains("lost with it")
            })
            .count();
        assert!(
            lost <= 1,
            "run {run} (seed {seed}): {lost} lost-job notices"
        );
    }
    // The kills fell mid-run, not only after the runs had ended.
    assert!(
        crashed >= 25,
        "only {crashed} of 50 runs were killed mid-run (seed {seed}, span {span} ms)"
    );
    let sessions = list(&store);
    // The fifty, and the one that measured the span.
    assert_eq!(sessions.len(), 51);
    assert!(
        sessions.iter().all(|s| s["state"] == "ended"),
        "{sessions:?}"
    );
    // Nothing was left loose in the temporary directory: every spill is in its session.
    let loose: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(loose, Vec::<PathBuf>::new(), "seed {seed}");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

fn run_resume(store: &Path, id: &str, script: &str) -> Output {
    run(
        store,
        &[
            "resume",
            id,
            "--script",
            script,
            "--wait-jobs",
            "0",
            "go on",
        ],
    )
}
