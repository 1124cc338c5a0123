//! `--sandbox`: the bash tool's commands are confined by default, the mode is recorded in
//! `session/start`, and `off` turns it off.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{run, stdout, text_step, write_script};

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
    let call = |id: &str, command: String| {
        json!({"toolCalls": [{"id": id, "name": tool,
                              "arguments": {"command": command, "description": "Write"}}]})
    };
    let steps = json!([
        call("c1", String::from("echo in > inside && cat inside")),
        call("c2", format!("echo out > '{}'", target.display())),
        text_step("Done."),
    ]);
    let script = write_script(workspace.path(), steps);
    let mut args = vec![
        "run",
        "--json",
        "--script",
        script.to_str().unwrap(),
        "--cwd",
        workspace.path().to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let output = run(&args);
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "session/start")
        .unwrap()
        .clone();
    let results = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e.to_string())
        .collect();
    (start, results, target.exists())
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
    assert!(results[1].contains("Permission denied"), "{}", results[1]);
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
    assert!(results[0].contains("Permission denied"), "{}", results[0]);
    assert!(!written);

    let (start, results, written) = session(&["--sandbox=off"]);
    assert_eq!(start["sandbox"], json!({"mode": "off"}));
    assert!(!results[1].contains("Permission denied"), "{}", results[1]);
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
    assert!(results[1].contains("Permission denied"), "{}", results[1]);
    assert!(!written, "the confined server wrote outside the workspace");

    let (results, written) = mcp_server_session(&["--sandbox", "off"], &["--sandbox", "off"]);
    assert!(!results[1].contains("Permission denied"), "{}", results[1]);
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
    assert!(results[1].contains("Permission denied"), "{}", results[1]);
    assert!(
        results[1].contains("`workspace-write` sandbox policy"),
        "{}",
        results[1]
    );
    assert!(!written, "the server's bash wrote outside its directory");
}
