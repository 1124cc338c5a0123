//! `--sandbox`: the bash tool's commands are confined by default, the mode is recorded in
//! `session/start`, and `off` turns it off.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{stdout, text_step, write_script};

/// Runs `dsh-agent run --json` in `workspace` with `flags` and `env`, playing a script that
/// calls `tool` once with each of `commands`, then ends; returns the events it printed.
fn session_events(
    workspace: &std::path::Path,
    tool: &str,
    commands: &[String],
    flags: &[&str],
    env: &[(&str, &str)],
) -> Vec<Value> {
    let mut steps: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(n, command)| {
            json!({"toolCalls": [{"id": format!("c{n}"), "name": tool,
                                  "arguments": {"command": command, "description": "Try"}}]})
        })
        .collect();
    steps.push(text_step("Done."));
    let script = write_script(workspace, Value::Array(steps));
    let mut args = vec![
        "run",
        "--json",
        "--script",
        script.to_str().unwrap(),
        "--cwd",
        workspace.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let output = support::run_with(&args, env);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The event of `kind` in `events`.
fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events.iter().find(|e| e["type"] == kind).unwrap()
}

/// Runs a script in which `tool` (`bash`, or an MCP server's `bash`) writes inside the
/// session's directory and outside it, with `flags`, after `prepare` has set up the session's
/// directory. Returns the `session/start` event, the results' texts, and whether the outside
/// write went through.
fn writes_through(
    tool: &str,
    prepare: impl FnOnce(&std::path::Path),
    flags: &[&str],
) -> (Value, Vec<String>, bool) {
    let workspace = support::scratch();
    let outside = support::scratch();
    let target = outside.path().join("outside");
    prepare(workspace.path());
    let commands = [
        String::from("echo in > inside && cat inside"),
        format!("echo out > '{}'", target.display()),
    ];
    let events = session_events(workspace.path(), tool, &commands, flags, &[]);
    let results = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e.to_string())
        .collect();
    (
        event(&events, "session/start").clone(),
        results,
        target.exists(),
    )
}

/// The session's own `bash` writing, with `flags`.
fn session(flags: &[&str]) -> (Value, Vec<String>, bool) {
    writes_through("bash", |_| {}, flags)
}

#[test]
fn the_default_confines_writes_to_the_working_directory_and_records_it() {
    let (start, results, written) = session(&[]);
    let sandbox = &start["sandbox"];
    assert_eq!(
        (&sandbox["mode"], &sandbox["backend"], &sandbox["network"]),
        (&json!("workspace-write"), &json!("landlock"), &json!(false))
    );
    assert_eq!(sandbox["unenforced"], json!([]));
    assert!(results[0].contains(r#""text":"in""#), "{}", results[0]);
    assert!(
        results[1].contains("Read-only file system"),
        "{}",
        results[1]
    );
    assert!(results[1].contains("`workspace-write` sandbox policy"));
    assert!(
        !written,
        "the write outside the working directory went through"
    );
}

#[test]
fn read_only_and_off_are_recorded_and_enforced() {
    let (start, results, written) = session(&["--sandbox", "read-only"]);
    assert_eq!(start["sandbox"]["mode"], json!("read-only"));
    assert!(
        results[0].contains("Read-only file system"),
        "{}",
        results[0]
    );
    assert!(!written);

    let (start, results, written) = session(&["--sandbox=off"]);
    assert_eq!(start["sandbox"], json!({"mode": "off"}));
    assert!(
        !results[1].contains("Read-only file system"),
        "{}",
        results[1]
    );
    assert!(written, "with the sandbox off the write goes through");
}

/// The `bash` of a stdio MCP server from `.mcp.json` writing, with `flags`. The server is
/// `dsh-agent mcp` itself, with `server_flags`.
fn mcp_server_session(flags: &[&str], server_flags: &[&str]) -> (Vec<String>, bool) {
    let config = json!({"mcpServers": {"inner": {
        "command": env!("CARGO_BIN_EXE_dsh-agent"),
        "args": std::iter::once("mcp").chain(server_flags.iter().copied()).collect::<Vec<_>>()
    }}});
    let prepare = |dir: &std::path::Path| {
        std::fs::write(dir.join(".mcp.json"), config.to_string()).unwrap();
    };
    let (_, results, written) = writes_through("mcp__inner__bash", prepare, flags);
    (results, written)
}

/// The server's own `bash` is not confined (`--sandbox off`): a write outside fails only
/// because the session started the server inside its sandbox.
#[test]
fn stdio_mcp_servers_start_inside_the_sessions_sandbox() {
    let (results, written) = mcp_server_session(&[], &["--sandbox", "off"]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains(r#""text":"in""#), "{}", results[0]);
    assert!(
        results[1].contains("Read-only file system"),
        "{}",
        results[1]
    );
    assert!(!written, "the confined server wrote outside the workspace");

    let (results, written) = mcp_server_session(&["--sandbox", "off"], &["--sandbox", "off"]);
    assert!(
        !results[1].contains("Read-only file system"),
        "{}",
        results[1]
    );
    assert!(
        written,
        "with the sandbox off the server's write goes through"
    );
}

/// `dsh-agent mcp` confines its own `bash` to its working directory by default, as `run`
/// does: here the session around it confines nothing.
#[test]
fn dsh_agent_mcp_confines_its_bash_by_default() {
    let (results, written) = mcp_server_session(&["--sandbox", "off"], &[]);
    assert!(results[0].contains(r#""text":"in""#), "{}", results[0]);
    assert!(
        results[1].contains("Read-only file system"),
        "{}",
        results[1]
    );
    assert!(
        results[1].contains("`workspace-write` sandbox policy"),
        "{}",
        results[1]
    );
    assert!(!written, "the server's bash wrote outside its directory");
}

/// A session store under the working directory (here `--session-dir .sessions`, as the default
/// store is when `dsh-agent` runs in `$HOME`) is read-only to the commands: none of them can
/// append a forged event to its own log or rewrite a spill file, and `session/start` says
/// what holds the metadata and the store.
#[test]
fn a_store_under_the_working_directory_is_out_of_the_commands_reach() {
    let workspace = support::scratch();
    let store = workspace.path().join(".sessions");
    let forge = "for f in $(find .sessions -type f); do \
                 echo '{\"type\":\"forged\"}' >> \"$f\" && echo FORGED; done; \
                 rm -rf .sessions && echo REMOVED; find .sessions -type f | wc -l";
    let events = session_events(
        workspace.path(),
        "bash",
        &[String::from(forge)],
        &["--session-dir", store.to_str().unwrap()],
        &[],
    );
    let text = event(&events, "tool/result").to_string();
    assert!(
        !text.contains("FORGED") && !text.contains("REMOVED"),
        "{text}"
    );
    assert!(text.contains("Read-only file system"), "{text}");
    let mut pending = vec![store.clone()];
    let mut logs = 0;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                logs += 1;
                let content = std::fs::read_to_string(&path).unwrap_or_default();
                // The log records the command, which names the forged line: look for the line.
                assert!(
                    !content.lines().any(|line| line == r#"{"type":"forged"}"#),
                    "{}: {content}",
                    path.display()
                );
            }
        }
    }
    assert!(logs > 0, "the store holds no file");
    let start = events
        .iter()
        .find(|e| e["type"] == "session/start")
        .unwrap();
    let rights = &start["sandbox"]["rights"];
    for right in [
        "metadata",
        "protected-places",
        "signals",
        "capabilities",
        "terminal",
    ] {
        let entry = rights
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["right"] == right)
            .unwrap_or_else(|| panic!("{right} is not recorded: {rights}"));
        assert_eq!(entry["enforced"], json!(true), "{right}: {entry}");
    }
}

/// The harness's secrets stay out of its commands' reach, with the sandbox off too: its
/// environment block and its supervisor's show their names with empty values, and with the
/// sandbox on neither can be read at all.
#[test]
fn the_harness_environment_keeps_no_secret_a_command_can_read() {
    let secret = "sk-harness-secret-9876543210abcdef";
    let read = "h=$(awk '{print $4}' /proc/$PPID/stat); \
                cat /proc/$PPID/environ /proc/$h/environ 2>&1 | tr '\\0' '\\n'; \
                grep -c HARNESS_TEST_API_KEY= /proc/$h/environ";
    for flags in [&["--sandbox", "off"][..], &[][..]] {
        let workspace = support::scratch();
        let events = session_events(
            workspace.path(),
            "bash",
            &[String::from(read)],
            flags,
            &[("HARNESS_TEST_API_KEY", secret)],
        );
        let text = event(&events, "tool/result").to_string();
        assert!(!text.contains(secret), "{flags:?}: {text}");
        if flags.is_empty() {
            assert!(text.contains("Permission denied"), "{flags:?}: {text}");
        } else {
            // Readable with the sandbox off (the same user), but blanked.
            assert!(text.contains("HARNESS_TEST_API_KEY="), "{flags:?}: {text}");
        }
    }
}

#[path = "../../../tool-bash/tests/support/escapees.rs"]
mod escapees;

/// How long the processes of a stopped server may take to be gone.
const GONE_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts `dsh-agent run --json` with `flags` in a fresh workspace whose `.mcp.json` names the
/// escaping server (`support/escaper.py`, run as `python3`), playing a script whose first call
/// waits for the file `release` in the workspace, then calls the server's `ping`. Returns the
/// running session, the workspace, and the server's processes (it and the two that left its
/// group), read while the first call waits.
fn escaper_session(
    flags: &[&str],
) -> (
    std::process::Child,
    tempfile::TempDir,
    Vec<escapees::Process>,
) {
    let workspace = support::scratch();
    let dir = workspace.path();
    let script = escapees::write_escaper(dir);
    let config = json!({"mcpServers": {"escaper": {
        "command": "python3",
        "args": [script, dir]
    }}});
    std::fs::write(dir.join(".mcp.json"), config.to_string()).unwrap();
    let steps = json!([
        support::bash_step("c1", "while [ ! -e release ]; do sleep 0.05; done; echo released", "Wait"),
        {"toolCalls": [{"id": "c2", "name": "mcp__escaper__ping", "arguments": {}}]},
        text_step("Done.")
    ]);
    let script = write_script(dir, steps);
    let mut args = vec![
        "run",
        "--json",
        "--script",
        script.to_str().unwrap(),
        "--cwd",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let session = support::command(&args, &[]).spawn().unwrap();
    let processes = escapees::escaped(dir, std::time::Duration::from_secs(30));
    escapees::assert_escaped(&processes);
    (session, workspace, processes)
}

/// A stdio MCP server that puts processes out of its group (`setsid -f`, a double fork into a
/// group of its own) loses them when the session stops it, with the sandbox on and off: every
/// server runs under the same supervisor as the shell's commands.
#[test]
fn what_a_stdio_mcp_server_starts_is_killed_when_the_session_ends_sandboxed_or_not() {
    for flags in [&[][..], &["--sandbox", "off"][..]] {
        let (session, workspace, processes) = escaper_session(flags);
        std::fs::write(workspace.path().join("release"), "").unwrap();
        let output = session.wait_with_output().unwrap();
        let text = stdout(&output);
        assert!(output.status.success(), "{flags:?}: {output:?}");
        assert!(text.contains("pong"), "{flags:?}: {text}");
        escapees::assert_gone(&processes, GONE_BOUND);
    }
}

/// A host killed outright (`SIGKILL`: no teardown runs) still leaves nothing of a server's
/// running: its supervisor sweeps when the host's end of its control pipe closes.
#[test]
fn what_a_stdio_mcp_server_starts_is_killed_when_the_host_dies_sandboxed_or_not() {
    for flags in [&[][..], &["--sandbox", "off"][..]] {
        let (mut session, _workspace, processes) = escaper_session(flags);
        session.kill().unwrap();
        session.wait().unwrap();
        escapees::assert_gone(&processes, GONE_BOUND);
    }
}

/// A mode that is not one of the three is a usage error naming them, whichever command.
#[test]
fn a_sandbox_mode_that_is_not_one_of_the_three_is_a_usage_error() {
    for command in ["run", "chat", "mcp", "acp"] {
        let output = support::run(&[command, "--sandbox", "full-access"]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert_eq!(
            support::stderr(&output),
            "error: invalid value 'full-access' for '--sandbox <MODE>'\n  [possible values: read-only, workspace-write, off]\n\nFor more information, try '--help'.\n",
            "{command}"
        );
    }
}
