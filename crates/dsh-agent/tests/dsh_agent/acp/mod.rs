//! `dsh-agent acp` driven by the official ACP TypeScript client (`@agentclientprotocol/sdk`,
//! installed from npm into the target directory on first use) with a scripted model: a turn
//! with a `bash` call whose update is the presenters' ACP projection of its card, a call the
//! editor rejects, a cancel during a long command that leaves no process, and `session/load`
//! replaying an earlier session. Every message on the wire is validated against the ACP JSON
//! schema the SDK ships, and kept in a snapshot that `tests/acp-conformance` reads back
//! through the official ACP schema crate. [`peers`] speaks to the agent by hand: bad input,
//! the limits, cancellation and the turns the editor did not ask for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use crate::npm;

use crate::processes;

mod peers;

use agent_loop::{LogEntry, SessionEvent, SessionLog};
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use processes::{MARK_VAR, wait_gone};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use tool_bash::{BashPlugin, LocalExecutor};

/// The official client: runs one scenario against `dsh-agent acp` and prints what it saw, and
/// every message on the wire, as JSON.
const CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { once } from "node:events";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const plan = JSON.parse(process.argv[2]);
const child = spawn(plan.agent, plan.args, { cwd: plan.cwd, env: process.env, stdio: ["pipe", "pipe", "inherit"] });
let fromAgent = "";
let toAgent = "";
child.stdout.on("data", (chunk) => { fromAgent += chunk.toString(); });
const write = child.stdin.write.bind(child.stdin);
child.stdin.write = (chunk, ...rest) => { toAgent += Buffer.from(chunk).toString(); return write(chunk, ...rest); };
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const permissions = [];
const answers = [...(plan.answers ?? [])];
const app = acp.client({ name: "dsh-test" })
  .onNotification("session/update", ({ params }) => { updates.push(params); })
  .onRequest("session/request_permission", async ({ params }) => {
    permissions.push(params);
    return { outcome: { outcome: "selected", optionId: answers.shift() ?? "reject" } };
  });

const since = (start) => updates.slice(start).map((n) => n.update);
const outcome = await app.connectWith(stream, async (agent) => {
  const init = await agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const seen = { init };
  if (plan.load) {
    const start = updates.length;
    seen.loaded = await agent.request("session/load", { sessionId: plan.load, cwd: plan.cwd, mcpServers: [] });
    seen.replayed = since(start);
    return seen;
  }
  const { sessionId } = await agent.request("session/new", { cwd: plan.cwd, mcpServers: plan.mcpServers ?? [] });
  seen.sessionId = sessionId;
  seen.turns = [];
  for (const text of plan.prompts) {
    const start = updates.length;
    const prompt = agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    if (plan.cancelWhen) {
      // The command has started once the file it makes exists (at most 10 s).
      for (let i = 0; i < 200 && !existsSync(plan.cancelWhen); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await agent.notify("session/cancel", { sessionId });
    }
    const response = await prompt;
    seen.turns.push({ response, updates: since(start) });
  }
  if (plan.waitFor) {
    // Updates that come after the prompts (a background job's notice): wait until one holds
    // the text (at most 10 s).
    const start = updates.length;
    const found = () => since(start).some((u) => JSON.stringify(u).includes(plan.waitFor));
    for (let i = 0; i < 200 && !found(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    seen.later = since(start);
  }
  return seen;
});
child.stdin.end();
if (child.exitCode === null) await once(child, "exit");
const lines = (text) => text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
console.log(JSON.stringify({ ...outcome, permissions, status: child.exitCode, wire: { fromAgent: lines(fromAgent), toAgent: lines(toAgent) } }));
"#;

/// The SDK's install and the client script beside its `node_modules`.
fn client() -> &'static (PathBuf, PathBuf) {
    static CLIENT_SCRIPT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    CLIENT_SCRIPT.get_or_init(|| {
        let package = npm::install(
            "@agentclientprotocol/sdk@2.4.0",
            "acp-sdk",
            "node_modules/@agentclientprotocol/sdk/package.json",
        );
        // Beside the install's packages, where `import` finds the SDK. Written whole and
        // renamed into place: test processes running at once write the same text.
        let modules = package.ancestors().nth(3).unwrap().to_owned();
        let script = modules.join("dsh-acp-client.mjs");
        let staging = modules.join(format!("dsh-acp-client.{}.mjs", std::process::id()));
        std::fs::write(&staging, CLIENT).unwrap();
        std::fs::rename(&staging, &script).unwrap();
        let schema = package
            .with_file_name("schema")
            .join("v1")
            .join("schema.json");
        (script, schema)
    })
}

/// Runs a scenario: `plan` plus the agent's command line, in `cwd`, with the processes it
/// starts marked `mark`. Returns what the client printed, after checking every message on
/// the wire against the schema.
fn scenario(plan: Value, args: &[&str], cwd: &Path, mark: &str) -> Value {
    let (script, schema) = client();
    let mut plan = plan;
    plan["agent"] = json!(env!("CARGO_BIN_EXE_dsh-agent"));
    plan["cwd"] = json!(cwd);
    plan["args"] = json!(args);
    let output = std::process::Command::new("node")
        .arg(script)
        .arg(plan.to_string())
        .current_dir(cwd)
        .env(MARK_VAR, mark)
        .env("DSH_SESSION_DIR", support::SESSION_DIR)
        .env("NO_COLOR", "1")
        .env_remove("DSH_MODEL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("this test needs node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(seen["status"], json!(0), "the agent's exit status");
    validate_wire(schema, &seen["wire"]);
    seen
}

/// Checks each message against the ACP schema: the agent's answers as the responses of the
/// methods asked, its notifications and requests as theirs, and the client's messages too.
fn validate_wire(schema: &Path, wire: &Value) {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema).unwrap()).unwrap();
    let validator = |definition: &str| {
        jsonschema::validator_for(&json!({
            "$schema": schema["$schema"],
            "$ref": format!("#/$defs/{definition}"),
            "$defs": schema["$defs"],
        }))
        .unwrap()
    };
    let check = |definition: &str, value: &Value| {
        let errors: Vec<String> = validator(definition)
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{definition}: {value}\n{errors:#?}");
    };
    // The schema is read and its references resolve: a message that breaks it is caught.
    assert!(
        !validator("PromptResponse").is_valid(&json!({"stopReason": "finished"})),
        "the schema let a made-up stop reason through"
    );
    let mut asked = std::collections::HashMap::new();
    for message in wire["toAgent"].as_array().unwrap() {
        assert_eq!(message["jsonrpc"], json!("2.0"));
        match (message["method"].as_str(), message.get("id")) {
            (Some(method), Some(id)) => {
                asked.insert(id.to_string(), method.to_owned());
                let definition = match method {
                    "initialize" => "InitializeRequest",
                    "session/new" => "NewSessionRequest",
                    "session/load" => "LoadSessionRequest",
                    "session/prompt" => "PromptRequest",
                    other => panic!("the client asked {other}"),
                };
                check(definition, &message["params"]);
            }
            (Some("session/cancel"), None) => check("CancelNotification", &message["params"]),
            (None, Some(_)) => check("RequestPermissionResponse", &message["result"]),
            other => panic!("unexpected message from the client: {other:?}"),
        }
    }
    let mut answered = 0;
    for message in wire["fromAgent"].as_array().unwrap() {
        assert_eq!(message["jsonrpc"], json!("2.0"), "{message}");
        match message["method"].as_str() {
            Some("session/update") => check("SessionNotification", &message["params"]),
            Some("session/request_permission") => {
                check("RequestPermissionRequest", &message["params"]);
            }
            Some(other) => panic!("the agent sent {other}"),
            None => {
                assert!(message.get("error").is_none(), "{message}");
                let method = asked
                    .get(&message["id"].to_string())
                    .unwrap_or_else(|| panic!("an answer to nothing asked: {message}"));
                let definition = match method.as_str() {
                    "initialize" => "InitializeResponse",
                    "session/new" => "NewSessionResponse",
                    "session/load" => "LoadSessionResponse",
                    "session/prompt" => "PromptResponse",
                    other => panic!("{other}"),
                };
                check(definition, &message["result"]);
                answered += 1;
            }
        }
    }
    assert_eq!(answered, asked.len(), "every request was answered");
}

/// The updates of one kind, in order.
fn of_kind<'a>(updates: &'a Value, kind: &str) -> Vec<&'a Value> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == json!(kind))
        .collect()
}

/// The text of the chunks of one kind, joined.
fn chunks(updates: &Value, kind: &str) -> String {
    of_kind(updates, kind)
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

/// The events of a session of the test store.
fn events(session_id: &str) -> Vec<agent_loop::EventRecord> {
    let path = Path::new(support::SESSION_DIR)
        .join(session_id)
        .join(agent_loop::EVENTS_FILE);
    SessionLog::lines(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .filter_map(|entry| match entry.unwrap() {
            LogEntry::Event(record) => Some(record),
            _ => None,
        })
        .collect()
}

/// The registry the agent presents with: the bash tool and its presenters.
fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(LocalExecutor::default())))
        .unwrap();
    registry
}

fn with_tag(kind: &str, mut value: Value) -> Value {
    value["sessionUpdate"] = json!(kind);
    value
}

#[test]
fn a_turn_streams_cards_asks_before_bash_honours_a_rejection_and_loads_again() {
    let dir = support::scratch();
    let cwd = dir.path().canonicalize().unwrap();
    let script = support::write_script(
        &cwd,
        json!([
            {"reasoning": "A greeting is harmless.", "text": "Saying hello.",
             "toolCalls": [{"id": "call-1", "name": "bash",
                            "arguments": {"command": "echo hello-from-acp",
                                          "description": "Say hello"}}]},
            {"text": "It said hello."},
            {"toolCalls": [{"id": "call-2", "name": "bash",
                            "arguments": {"command": "touch rejected-marker",
                                          "description": "Leave a mark"}}]},
            {"text": "You rejected it."}
        ]),
    );
    let mark = format!("acp-turn-{}", std::process::id());
    let args = [
        "acp",
        "--sandbox",
        "off",
        "--script",
        script.to_str().unwrap(),
    ];
    let seen = scenario(
        json!({"prompts": ["Say hello", "Leave a mark"], "answers": ["allow-once", "reject"]}),
        &args,
        &cwd,
        &mark,
    );
    assert_eq!(
        seen["init"]["agentCapabilities"],
        json!({"loadSession": true,
               "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
               "mcpCapabilities": {"http": true, "sse": false},
               "sessionCapabilities": {}, "auth": {}})
    );
    let session_id = seen["sessionId"].as_str().unwrap().to_owned();
    let first = &seen["turns"][0];
    assert_eq!(first["response"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        chunks(&first["updates"], "agent_thought_chunk"),
        "A greeting is harmless."
    );
    assert_eq!(
        chunks(&first["updates"], "agent_message_chunk"),
        "Saying hello.It said hello."
    );

    // The cards, as the presenters project them, from the session's own log.
    let cards = agent_loop::replay_cards(&registry(), &events(&session_id));
    let card = cards.iter().find(|c| c.call_id == "call-1").unwrap();
    let result = card.result.as_ref().unwrap();
    assert_eq!(
        of_kind(&first["updates"], "tool_call"),
        vec![&with_tag(
            "tool_call",
            presenters::acp::tool_call("call-1", &card.call)
        )]
    );
    let update = with_tag(
        "tool_call_update",
        presenters::acp::tool_call_update("call-1", result, false),
    );
    assert_eq!(
        of_kind(&first["updates"], "tool_call_update"),
        vec![&update]
    );
    assert!(
        update["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hello-from-acp"),
        "{update}"
    );

    // Each bash call was asked about, with its card; the second was rejected.
    let asked: Vec<&Value> = seen["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["toolCall"]["toolCallId"])
        .collect();
    assert_eq!(asked, [&json!("call-1"), &json!("call-2")]);
    assert_eq!(
        seen["permissions"][0]["toolCall"],
        presenters::acp::tool_call("call-1", &card.call)
    );
    let second = &seen["turns"][1];
    assert_eq!(second["response"], json!({"stopReason": "end_turn"}));
    let rejected = of_kind(&second["updates"], "tool_call_update");
    assert_eq!(rejected.len(), 1, "{second}");
    assert_eq!(rejected[0]["status"], json!("failed"));
    assert!(!cwd.join("rejected-marker").exists());
    // The model read the rejection: the call's result in the session's history.
    let denial = events(&session_id)
        .into_iter()
        .find_map(|record| match record.event {
            SessionEvent::ToolResult {
                call_id,
                is_error,
                content,
                ..
            } if call_id == "call-2" => Some((is_error, dsh_tools::content_text(&content))),
            _ => None,
        })
        .unwrap();
    assert!(denial.0, "{denial:?}");
    assert!(
        denial.1.contains("the user rejected this call"),
        "{denial:?}"
    );
    wait_gone(&mark);

    // A new connection loads the session: its history comes back as updates, the cards
    // exactly as they were sent live.
    let loaded = scenario(
        json!({"load": session_id, "prompts": []}),
        &args,
        &cwd,
        &mark,
    );
    assert_eq!(loaded["loaded"], json!({}));
    let replayed = &loaded["replayed"];
    assert_eq!(
        chunks(replayed, "user_message_chunk"),
        "Say helloLeave a mark"
    );
    assert_eq!(
        chunks(replayed, "agent_message_chunk"),
        "Saying hello.It said hello.You rejected it."
    );
    let live: Vec<&Value> = [&first["updates"], &second["updates"]]
        .into_iter()
        .flat_map(|u| {
            u.as_array().unwrap().iter().filter(|u| {
                u["sessionUpdate"]
                    .as_str()
                    .unwrap()
                    .starts_with("tool_call")
            })
        })
        .collect();
    let again: Vec<&Value> = replayed
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| {
            u["sessionUpdate"]
                .as_str()
                .unwrap()
                .starts_with("tool_call")
        })
        .collect();
    assert_eq!(again, live);
    wait_gone(&mark);

    // Both connections' messages, with the session id and the working directory as
    // placeholders. tests/acp-conformance reads this snapshot back through the official ACP
    // schema types.
    let wire = json!({"turn": seen["wire"], "load": loaded["wire"]});
    let text = serde_json::to_string_pretty(&wire)
        .unwrap()
        .replace(&session_id, "SESSION-ID")
        .replace(cwd.to_str().unwrap(), "/work/project");
    // Beside the other test files' snapshots, where tests/acp-conformance reads it.
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_snapshot!("wire", text);
    });
}

#[test]
fn cancel_during_a_long_command_kills_it_answers_the_call_and_stops_cancelled() {
    let dir = support::scratch();
    let cwd = dir.path().canonicalize().unwrap();
    let started = cwd.join("started");
    let script = support::write_script(
        &cwd,
        json!([support::bash_step(
            "call-1",
            "touch started; sleep 600",
            "Wait a long time"
        )]),
    );
    let mark = format!("acp-cancel-{}", std::process::id());
    let seen = scenario(
        json!({"prompts": ["Wait"], "cancelWhen": started}),
        &[
            "acp",
            "--no-ask",
            "--sandbox",
            "off",
            "--script",
            script.to_str().unwrap(),
        ],
        &cwd,
        &mark,
    );
    let turn = &seen["turns"][0];
    assert_eq!(turn["response"], json!({"stopReason": "cancelled"}));
    let calls = of_kind(&turn["updates"], "tool_call");
    assert_eq!(calls.len(), 1, "{turn}");
    let results = of_kind(&turn["updates"], "tool_call_update");
    assert_eq!(
        results.len(),
        1,
        "every started call gets its result: {turn}"
    );
    assert_eq!(results[0]["toolCallId"], json!("call-1"));
    assert_eq!(results[0]["status"], json!("failed"));
    wait_gone(&mark);
}

#[test]
fn a_background_jobs_notice_updates_its_call_after_the_prompt() {
    let dir = support::scratch();
    let cwd = dir.path().canonicalize().unwrap();
    let script = support::write_script(
        &cwd,
        json!([
            {"toolCalls": [{"id": "call-1", "name": "bash",
                            "arguments": {"command": "echo job-output", "description": "Later",
                                          "run_in_background": true}}]},
            {"text": "Started."},
            // The turn the job's notice opens.
            {"text": "The job finished."}
        ]),
    );
    let mark = format!("acp-job-{}", std::process::id());
    let seen = scenario(
        json!({"prompts": ["Start a job"], "waitFor": "background job bash-1 "}),
        &[
            "acp",
            "--no-ask",
            "--sandbox",
            "off",
            "--script",
            script.to_str().unwrap(),
        ],
        &cwd,
        &mark,
    );
    let turn = &seen["turns"][0];
    assert_eq!(turn["response"], json!({"stopReason": "end_turn"}));
    let started = of_kind(&turn["updates"], "tool_call_update");
    assert_eq!(started.len(), 1, "{turn}");
    let notices = of_kind(&seen["later"], "tool_call_update");
    assert_eq!(notices.len(), 1, "{seen}");
    let notice = notices[0];
    assert_eq!(notice["toolCallId"], json!("call-1"));
    // The call's content so far, then the notice.
    let content = notice["content"].as_array().unwrap();
    assert_eq!(
        content[..content.len() - 1],
        started[0]["content"].as_array().unwrap()[..]
    );
    let text = content.last().unwrap()["content"]["text"].as_str().unwrap();
    assert!(text.starts_with("background job bash-1 "), "{text}");
    assert!(text.contains("finished"), "{text}");
    wait_gone(&mark);
}

#[test]
fn the_editors_mcp_servers_give_the_session_their_tools() {
    let dir = support::scratch();
    let cwd = dir.path().canonicalize().unwrap();
    // `dsh-agent mcp` is the MCP server the editor passes: its `bash` becomes `mcp__inner__bash`.
    let script = support::write_script(
        &cwd,
        json!([
            {"toolCalls": [{"id": "call-1", "name": "mcp__inner__bash",
                            "arguments": {"command": "echo through-mcp",
                                          "description": "Run through MCP"}}]},
            {"text": "Done."}
        ]),
    );
    let mark = format!("acp-mcp-{}", std::process::id());
    let seen = scenario(
        json!({"prompts": ["Use the server"], "mcpServers": [{
            "name": "inner", "command": env!("CARGO_BIN_EXE_dsh-agent"), "args": ["mcp"],
            "env": [{"name": MARK_VAR, "value": mark}]
        }]}),
        &[
            "acp",
            "--no-ask",
            "--sandbox",
            "off",
            "--script",
            script.to_str().unwrap(),
        ],
        &cwd,
        &mark,
    );
    let turn = &seen["turns"][0];
    assert_eq!(turn["response"], json!({"stopReason": "end_turn"}));
    let results = of_kind(&turn["updates"], "tool_call_update");
    assert_eq!(results.len(), 1, "{turn}");
    assert_eq!(results[0]["status"], json!("completed"), "{turn}");
    assert!(results[0].to_string().contains("through-mcp"), "{turn}");
    // The server was shut down with the session.
    wait_gone(&mark);
}
