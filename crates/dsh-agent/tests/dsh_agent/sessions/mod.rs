//! `dsh-agent`'s session store from the outside: where sessions go, spill files that outlive
//! the run, `sessions list` and `prune`, `resume` (ids that continue, a torn last line, the
//! lock, a fork); [`signals`] has SIGTERM, and SIGKILL at random points followed by a resume.
//! Every test uses a store of its own in a temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod signals;
use crate::support;

use agent_loop::{FsSessionStore, SessionStore};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;
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

#[cfg(target_os = "linux")]
#[test]
fn a_run_whose_calls_were_denied_removes_its_temporary_directory_and_forks() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let denying = script(
        dir.path(),
        "s.json",
        json!([calls(&[bash("c1", "echo hi", false)]), text_step("denied")]),
    );
    // `--ask` without a terminal denies every call.
    run_ok(
        &store,
        &[
            "run",
            "--ask",
            "--script",
            &denying,
            "--cwd",
            work.to_str().unwrap(),
        ],
    );
    let id = only_session(&store);
    let log = events(&store, &id);
    let denied = of_type(&log, "tool/result")[0].to_string();
    assert!(denied.contains("the call was denied"), "{denied}");
    let temp = PathBuf::from(log[0]["sandbox"]["tempDir"].as_str().unwrap());
    assert_eq!(temp.parent(), Some(store.join(&id).join("spill").as_path()));
    assert!(!temp.exists(), "{} outlived its run", temp.display());

    // A leftover one (as a run killed by SIGKILL leaves) is no spill file: a fork leaves it.
    let leftover = store.join(&id).join("spill").join("dsh-sandbox-tmp-left");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("scratch"), "temporary").unwrap();
    let again = script(dir.path(), "again.json", json!([text_step("forked")]));
    run_ok(
        &store,
        &["resume", &id, "--fork", "--script", &again, "fork"],
    );
    let sessions = list(&store);
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let fork = sessions[1]["id"].as_str().unwrap();
    assert_eq!(
        std::fs::read_dir(store.join(fork).join("spill"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_tampered_store_is_refused_with_the_reason_and_left_as_it_is() {
    let dir = scratch();
    let (store, script) = two_ended_sessions(dir.path());
    let ids: Vec<String> = list(&store)
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    let resume = |id: &str| run(&store, &["resume", id, "--script", &script, "more"]);

    // The first log linked to a file outside the store, its last line unended.
    let outside = dir.path().join("outside.jsonl");
    std::fs::write(&outside, "{\"seq\":1}\n{\"unended").unwrap();
    let log = store.join(&ids[0]).join("events.jsonl");
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&outside, &log).unwrap();
    let output = resume(&ids[0]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: {}: is a symbolic link, and the session store follows none\n",
            log.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "{\"seq\":1}\n{\"unended"
    );

    // The second log ends in more than a line's worth of bytes without a newline (sparse).
    let log = store.join(&ids[1]).join("events.jsonl");
    let size = std::fs::metadata(&log).unwrap().len() + (1 << 30);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(size)
        .unwrap();
    let output = resume(&ids[1]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: cannot resume session {}: {} ends in more than 33554432 bytes without a \
             newline, more than any log line holds, so it is not a line torn by a crash; the \
             log is left as it is\n",
            ids[1],
            log.display()
        )
    );
    assert_eq!(std::fs::metadata(&log).unwrap().len(), size);

    // A store any user may write.
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = run(&store, &["run", "--script", &script]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "dsh-agent: {0}: is writable by other users (mode 777): make it private with `chmod go-w {0}`\n",
            store.display()
        )
    );
    assert_eq!(mode(&store), 0o777);
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 2);
}

#[test]
fn a_run_that_fails_before_its_first_turn_leaves_no_new_session() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let first = script(dir.path(), "first.json", json!([text_step("hello")]));
    run_ok(&store, &["run", "--script", &first, "hi"]);
    let id = only_session(&store);
    let parent = std::fs::read_to_string(store.join(&id).join("events.jsonl")).unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let bad = bad.to_str().unwrap();
    let next = script(dir.path(), "next.json", json!([text_step("again")]));
    let attempts: [&[&str]; 3] = [
        &[
            "resume",
            &id,
            "--fork",
            "--mcp-config",
            bad,
            "--script",
            &next,
            "more",
        ],
        &["run", "--mcp-config", bad, "--script", &next, "more"],
        &[
            "resume",
            &id,
            "--mcp-config",
            bad,
            "--script",
            &next,
            "more",
        ],
    ];
    for args in attempts {
        for _ in 0..2 {
            let output = run(&store, args);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{args:?}: {}",
                stderr(&output)
            );
        }
    }
    // A fork or new session that never started is gone; the resumed one is kept as it was.
    let ids: Vec<String> = list(&store)
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, vec![id.clone()]);
    assert_eq!(
        std::fs::read_to_string(store.join(&id).join("events.jsonl")).unwrap(),
        parent
    );
}

#[test]
fn the_log_goes_to_the_file_the_store_checked_though_its_name_is_replaced_at_start() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "").unwrap();
    // An MCP server that, as it starts, moves the session's log aside and puts a link to a
    // file outside the store in its place, then serves as a real one.
    let swap = format!(
        "set -e; d=$(ls -d '{}'/*/ | head -n 1); mv \"$d/events.jsonl\" \"$d/kept\"; ln -s '{}' \"$d/events.jsonl\"; exec '{}' mcp --sandbox off",
        store.display(),
        victim.display(),
        env!("CARGO_BIN_EXE_dsh-agent")
    );
    let config = dir.path().join("mcp.json");
    let servers = json!({"mcpServers": {"swapper": {"command": "sh", "args": ["-c", swap]}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let first = script(dir.path(), "first.json", json!([text_step("hello")]));
    let config = config.to_str().unwrap();
    let args = [
        "run",
        "--sandbox",
        "off",
        "--mcp-config",
        config,
        "--script",
        &first,
        "hi",
    ];
    run_ok(&store, &args);

    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "");
    let sessions: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let kept = std::fs::read_to_string(sessions[0].join("kept")).unwrap();
    let types: Vec<String> = kept
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["type"].to_string())
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("\"session/start\""));
    assert_eq!(types.last().map(String::as_str), Some("\"session/end\""));
}

#[test]
fn a_session_file_hard_linked_to_one_of_the_user_is_refused_and_that_file_left_as_it_is() {
    let dir = scratch();
    let store = dir.path().join("sessions");
    let first = script(dir.path(), "first.json", json!([text_step("hello")]));
    run_ok(&store, &["run", "--script", &first, "hi"]);
    let id = only_session(&store);
    let session = store.join(&id);
    // Two files of the user's own, beside the store (so on its file system), the log's with a
    // last line without its newline.
    let victims = [
        ("lock", dir.path().join("victim_lock"), "12345 678\n"),
        (
            "events.jsonl",
            dir.path().join("victim_log"),
            "mine\n{\"unended",
        ),
    ];
    for (name, victim, text) in &victims {
        std::fs::write(victim, text).unwrap();
        std::fs::set_permissions(victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::remove_file(session.join(name)).unwrap();
        std::fs::hard_link(victim, session.join(name)).unwrap();
    }
    let untouched = |what: &str| {
        for (_, victim, text) in &victims {
            assert_eq!(std::fs::read_to_string(victim).unwrap(), *text, "{what}");
            assert_eq!(mode(victim), 0o644, "{what}");
        }
    };

    let listed = list(&store);
    untouched("list");
    assert_eq!(listed[0]["state"], json!("unreadable"), "{listed:?}");
    let next = script(dir.path(), "next.json", json!([text_step("again")]));
    let output = run(&store, &["resume", &id, "--script", &next, "more"]);
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains("hard links; the session store uses files of its own only"),
        "{}",
        stderr(&output)
    );
    untouched("resume");
    run_ok(&store, &["sessions", "prune", "--older-than", "0"]);
    untouched("prune");
}
