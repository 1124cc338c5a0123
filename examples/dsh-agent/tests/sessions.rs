//! `dsh-agent`'s session store from the outside: where sessions go, spill files that outlive
//! the run, `sessions list` and `prune`, `resume` (ids that continue, a torn last line, the
//! lock, a fork), SIGTERM, and SIGKILL at random points followed by a resume. Every test uses
//! a store of its own in a temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use agent_loop::{FsSessionStore, SessionStore};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};
use support::{scratch, stderr, stdout, text_step};

/// `dsh-agent <args>` over the store in `store`.
fn command(store: &Path, args: &[&str]) -> std::process::Command {
    support::command(args, &[("DSH_SESSION_DIR", store.to_str().unwrap())])
}

fn run(store: &Path, args: &[&str]) -> Output {
    command(store, args).output().unwrap()
}

/// [`run`], which must succeed (its stderr is shown when it does not).
fn run_ok(store: &Path, args: &[&str]) -> Output {
    let output = run(store, args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    output
}

fn script(dir: &Path, name: &str, steps: Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, json!({ "steps": steps }).to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn bash(id: &str, command: &str, background: bool) -> Value {
    json!({ "id": id, "name": "bash", "arguments": {
        "command": command, "description": "a command", "run_in_background": background } })
}

fn calls(calls: &[Value]) -> Value {
    json!({ "toolCalls": calls })
}

/// The sessions `sessions list --json` prints.
fn list(store: &Path) -> Vec<Value> {
    let output = run_ok(store, &["sessions", "list", "--json"]);
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn only_session(store: &Path) -> String {
    let sessions = list(store);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions[0]["id"].as_str().unwrap().to_owned()
}

/// The events of a session's log; every line must parse.
fn events(store: &Path, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(store.join(id).join("events.jsonl")).unwrap();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The promises a log keeps however its runs ended: sequence numbers increase, call ids and
/// job ids are never used twice, and every job that started ended exactly once (a lost one
/// is recorded as such when the session is resumed).
fn check_ids(events: &[Value]) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let mut seen = BTreeSet::new();
    for call in of_type(events, "tool/call") {
        let id = call["callId"].as_str().unwrap();
        assert!(seen.insert(id.to_owned()), "call id {id} used twice");
    }
    let mut jobs: BTreeMap<String, usize> = BTreeMap::new();
    for start in of_type(events, "job/start") {
        let id = start["jobId"].as_str().unwrap();
        assert!(
            jobs.insert(id.to_owned(), 0).is_none(),
            "job id {id} used twice"
        );
    }
    for end in of_type(events, "job/end") {
        let id = end["jobId"].as_str().unwrap();
        *jobs
            .get_mut(id)
            .unwrap_or_else(|| panic!("{id} ended, never started")) += 1;
    }
    for (id, ends) in jobs {
        assert_eq!(ends, 1, "{id} ended {ends} times");
    }
}

#[test]
fn the_store_defaults_to_the_xdg_state_directory_then_home() {
    let dir = scratch();
    let state = dir.path().join("state");
    let home = dir.path().join("home");
    let script = script(dir.path(), "s.json", json!([text_step("hi")]));
    for (env, expected) in [
        (
            vec![("XDG_STATE_HOME", state.to_str().unwrap())],
            state.join("dsh/sessions"),
        ),
        (
            vec![
                ("XDG_STATE_HOME", "relative/is/ignored"),
                ("HOME", home.to_str().unwrap()),
            ],
            home.join(".local/state/dsh/sessions"),
        ),
    ] {
        let mut command = support::command(&["run", "--script", &script], &env);
        command.env_remove("DSH_SESSION_DIR");
        if env.len() == 1 {
            command.env("HOME", dir.path().join("not-here"));
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let sessions: Vec<_> = std::fs::read_dir(&expected).unwrap().collect();
        assert_eq!(sessions.len(), 1, "{}", expected.display());
    }
    assert!(!dir.path().join("not-here").exists());
}

#[test]
fn a_spilled_output_path_stays_valid_after_the_run_in_a_private_session_directory() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let script = script(
        dir.path(),
        "s.json",
        json!([calls(&[bash("c1", "seq 1 100000", false)]), text_step("ok")]),
    );
    let output = run_ok(&store, &["run", "--json", "--script", &script]);
    let id = only_session(&store);
    let session = store.join(&id);
    let log = events(&store, &id);
    let result = of_type(&log, "tool/result")[0].to_string();
    let path = result
        .split("full output: ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no spill path in {result}"));
    let path = PathBuf::from(path);
    assert_eq!(path.parent(), Some(session.join("spill").as_path()));
    let expected: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(mode(&store), 0o700);
    assert_eq!(mode(&session), 0o700);
    assert_eq!(mode(&session.join("spill")), 0o700);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&session.join("events.jsonl")), 0o600);
    // The run's events went to stdout and to the session, the same.
    let printed: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(printed, log);
    assert_eq!(log.last().unwrap()["type"], "session/end");
    assert_eq!(log.last().unwrap()["reason"], "completed");
}

/// A store under `dir` with two sessions of one turn each, ended, and the script they ran.
fn two_ended_sessions(dir: &Path) -> (PathBuf, String) {
    let store = dir.join("sessions");
    let script = script(dir, "s.json", json!([text_step("hi")]));
    for _ in 0..2 {
        run_ok(&store, &["run", "--script", &script, "--cwd", "/"]);
    }
    (store, script)
}

#[test]
fn list_and_prune_never_remove_a_session_in_use() {
    let dir = scratch();
    let (store, script) = two_ended_sessions(dir.path());
    let sessions = list(&store);
    let ids: Vec<String> = sessions
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    for session in &sessions {
        assert_eq!(
            (&session["state"], &session["turns"], &session["cwd"]),
            (&json!("ended"), &json!(1), &json!("/")),
            "{session}"
        );
    }
    let table = stdout(&run(&store, &["sessions", "list"]));
    let header = table.lines().next().unwrap();
    assert_eq!(
        header
            .split("  ")
            .filter(|s| !s.is_empty())
            .map(str::trim)
            .collect::<Vec<_>>(),
        vec![
            "ID",
            "STARTED",
            "STATE",
            "TURNS",
            "SIZE",
            "LAST ACTIVITY",
            "WORKING DIRECTORY"
        ]
    );
    assert_eq!(table.lines().count(), 3, "{table}");

    // A recent session survives the default retention.
    let output = run(&store, &["sessions", "prune"]);
    assert_eq!(stdout(&output), "");
    // The first is in use (this test holds it); pruning everything keeps it.
    let held = FsSessionStore::new(&store).resume(&ids[0]).unwrap();
    let output = run_ok(&store, &["sessions", "prune", "--older-than", "0"]);
    assert_eq!(stdout(&output), format!("removed {}\n", ids[1]));
    assert_eq!(
        stderr(&output),
        format!("dsh-agent: kept {}: it is in use\n", ids[0])
    );
    let sessions = list(&store);
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["state"], "running");
    drop(held);

    // The prune at start removes old sessions too (here: any older than a millisecond).
    std::thread::sleep(Duration::from_millis(10));
    run_ok(&store, &["--retention", "1ms", "run", "--script", &script]);
    let left = list(&store);
    assert_eq!(left.len(), 1);
    assert_ne!(left[0]["id"], json!(ids[0]));
}

#[test]
fn a_session_whose_log_cannot_be_read_is_listed_with_the_reason() {
    let dir = scratch();
    let (store, _) = two_ended_sessions(dir.path());
    let ids: Vec<String> = list(&store)
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    // A line over the reader's limit (32 MiB) makes the second log unreadable.
    let log = store.join(&ids[1]).join("events.jsonl");
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    let mut huge = vec![b'x'; 32 * 1024 * 1024 + 1];
    huge.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(&huge)
        .unwrap();
    let reason = format!(
        "cannot read the log of session {}: line {} is longer than 33554432 bytes",
        ids[1],
        lines + 1
    );

    let sessions = list(&store);
    let seen: Vec<(&Value, &Value, &Value, Option<&Value>)> = sessions
        .iter()
        .map(|s| (&s["id"], &s["state"], &s["turns"], s.get("problem")))
        .collect();
    assert_eq!(
        seen,
        vec![
            (&json!(ids[0]), &json!("ended"), &json!(1), None),
            (
                &json!(ids[1]),
                &json!("unreadable"),
                &json!(1),
                Some(&json!(reason))
            ),
        ]
    );
    let output = run_ok(&store, &["sessions", "list"]);
    let table = stdout(&output);
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(
        table.lines().nth(2).unwrap().contains("unreadable"),
        "{table}"
    );
    assert_eq!(stderr(&output), format!("dsh-agent: {reason}\n"));
}

#[test]
fn resuming_a_session_past_the_retention_keeps_it() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let script = script(dir.path(), "s.json", json!([text_step("hi")]));
    run_ok(&store, &["run", "--script", &script]);
    let id = only_session(&store);
    // Idle for longer than the retention: the prune at start would take it, but the user
    // asked for this very session.
    std::thread::sleep(Duration::from_millis(10));
    let output = run(
        &store,
        &[
            "--retention",
            "1ms",
            "resume",
            &id,
            "--script",
            &script,
            "more",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(only_session(&store), id);
}

#[test]
fn a_resumed_session_continues_its_ids_and_a_held_one_names_its_holder() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let first = script(
        dir.path(),
        "first.json",
        json!([
            // The job ends after the turn, so its notice opens a turn of its own.
            calls(&[bash("c1", "echo one", false), bash("c2", "sleep 0.3", true)]),
            text_step("started"),
            text_step("the job is done"),
        ]),
    );
    run_ok(&store, &["run", "--script", &first]);
    let id = only_session(&store);

    // Held by this test: resuming is refused, naming the PID.
    let held = FsSessionStore::new(&store).resume(&id).unwrap();
    let second = script(
        dir.path(),
        "second.json",
        json!([
            calls(&[bash("c1", "echo two", false), bash("c2", "sleep 30", true)]),
            text_step("again"),
        ]),
    );
    let output = run(&store, &["resume", &id, "--script", &second, "go on"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: session {id} is in use by PID {}\n",
            std::process::id()
        )
    );
    drop(held);

    let output = run(
        &store,
        &[
            "resume",
            &id,
            "--script",
            &second,
            "--wait-jobs",
            "0",
            "go on",
        ],
    );
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let log = events(&store, &id);
    check_ids(&log);
    let started: Vec<&str> = of_type(&log, "job/start")
        .iter()
        .map(|e| e["jobId"].as_str().unwrap())
        .collect();
    assert_eq!(started, vec!["bash-1", "bash-2"]);
    let called: Vec<&str> = of_type(&log, "tool/call")
        .iter()
        .map(|e| e["callId"].as_str().unwrap())
        .collect();
    assert_eq!(called, vec!["c1", "c2", "call-auto-3", "call-auto-4"]);
    // The second run carried on the first one's session instead of starting another.
    assert_eq!(of_type(&log, "session/start").len(), 1);
    assert_eq!(list(&store)[0]["state"], "ended");
    assert_eq!(list(&store)[0]["turns"], 3);

    let output = run(&store, &["resume", "no-such-session", "--script", &second]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("dsh-agent: no session no-such-session in "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_torn_last_line_is_dropped_and_said_and_a_fork_is_a_new_session() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let first = script(dir.path(), "first.json", json!([text_step("hello")]));
    run_ok(&store, &["run", "--script", &first]);
    let id = only_session(&store);
    let log_path = store.join(&id).join("events.jsonl");
    let mut text = std::fs::read_to_string(&log_path).unwrap();
    let lines = text.lines().count();
    const TORN: &str = r#"{"seq":99,"type":"user/mes"#;
    text.push_str(TORN);
    std::fs::write(&log_path, text).unwrap();

    let next = script(dir.path(), "next.json", json!([text_step("again")]));
    let output = run_ok(&store, &["resume", &id, "--script", &next, "more"]);
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: session {id}: dropped the torn last line {} of its log ({} bytes; the process writing it died mid-line)\n",
            lines + 1,
            TORN.len()
        )
    );
    let log = events(&store, &id);
    check_ids(&log);

    run_ok(
        &store,
        &["resume", &id, "--fork", "--script", &next, "fork"],
    );
    let sessions = list(&store);
    assert_eq!(sessions.len(), 2);
    let fork = &sessions[1];
    assert_eq!(fork["forkedFrom"], json!(id));
    let fork_id = fork["id"].as_str().unwrap();
    let forked = events(&store, fork_id);
    // The parent's history, then the fork's own turn; the parent is unchanged.
    let users: Vec<&str> = of_type(&forked, "user/message")
        .iter()
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        vec!["Show me what the dsh-rs tools can do.", "more", "fork"]
    );
    assert_eq!(forked[0]["sessionId"], json!(fork_id));
    assert_eq!(events(&store, &id), log);
}

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

#[test]
fn a_failed_run_ends_its_session_as_failed_and_a_gone_directory_is_named() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // One step for two requests: the script runs out.
    let short = script(
        dir.path(),
        "short.json",
        json!([calls(&[bash("c1", "true", false)])]),
    );
    let output = run(
        &store,
        &["run", "--script", &short, "--cwd", work.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let id = only_session(&store);
    let log = events(&store, &id);
    let last = log.last().unwrap();
    assert_eq!(
        (&last["type"], &last["reason"]),
        (&json!("session/end"), &json!("failed"))
    );
    assert_eq!(list(&store)[0]["state"], "ended");

    std::fs::remove_dir(&work).unwrap();
    let output = run(&store, &["resume", &id, "--script", &short, "again"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: the session's working directory {} is gone (give another with --cwd)\n",
            work.display()
        )
    );
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
