//! The messages `dsh-agent acp` exchanged with the official TypeScript client in
//! `crates/dsh-agent/tests/dsh_agent/acp/mod.rs` (kept as an insta snapshot in `tests/snapshots`),
//! read back through the official ACP schema types: every message of the agent reads as the
//! type of its method and writes back as it was sent.
//!
//! The schema types forgive a lot on purpose (an unknown field is dropped, an invalid value
//! falls back to its default), so "it deserialises" proves little; the round trip is what
//! shows nothing was dropped or replaced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_client_protocol_schema::v1 as schema;
use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;

/// The snapshot's JSON, after insta's header.
fn wire() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/dsh-agent/tests/dsh_agent/snapshots/dsh_agent__acp__wire.snap"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let body = text
        .splitn(3, "---\n")
        .nth(2)
        .unwrap_or_else(|| panic!("{path} has no insta header"));
    serde_json::from_str(body).unwrap()
}

/// What the schema types leave out when they write a value back because it is the default,
/// though dsh-agent says it: a field of that name with that value may be missing from the
/// round trip, and nothing else may.
const DEFAULTS_LEFT_OUT: &[(&str, &str)] = &[("status", "\"pending\"")];

/// `value` read as `T` and written back: every field written back is the one sent, and every
/// field sent is written back unless it is a default the types leave out. An unknown field
/// dropped, or an invalid value replaced by a default, fails.
fn round_trip<T: DeserializeOwned + Serialize>(what: &str, value: &Value) {
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| {
        panic!(
            "{what} does not read as {}: {e}\n{value}",
            std::any::type_name::<T>()
        )
    });
    let back = serde_json::to_value(&typed).unwrap();
    let mut differences = Vec::new();
    compare("", value, &back, &mut differences);
    assert_eq!(
        differences,
        Vec::<String>::new(),
        "{what}\nwritten back: {back}"
    );
}

/// The differences between `sent` and `back`, as JSON pointers.
fn compare(pointer: &str, sent: &Value, back: &Value, differences: &mut Vec<String>) {
    match (sent, back) {
        (Value::Object(sent), Value::Object(back)) => {
            for (key, value) in sent {
                let at = format!("{pointer}/{key}");
                match back.get(key) {
                    Some(written) => compare(&at, value, written, differences),
                    None if DEFAULTS_LEFT_OUT
                        .iter()
                        .any(|(name, default)| key == name && value.to_string() == *default) => {}
                    None => differences.push(format!("{at}: {value} was dropped")),
                }
            }
            for key in back.keys().filter(|key| !sent.contains_key(*key)) {
                differences.push(format!("{pointer}/{key}: added by the types"));
            }
        }
        (Value::Array(sent), Value::Array(back)) if sent.len() == back.len() => {
            for (i, (sent, back)) in sent.iter().zip(back).enumerate() {
                compare(&format!("{pointer}/{i}"), sent, back, differences);
            }
        }
        _ if sent == back => {}
        _ => differences.push(format!("{pointer}: {sent} came back as {back}")),
    }
}

/// Checks one connection; returns how many messages of each kind it had.
fn connection(name: &str, messages: &Value) -> HashMap<String, usize> {
    let mut asked = HashMap::new();
    for message in messages["toAgent"].as_array().unwrap() {
        if let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) {
            asked.insert(id.to_string(), method.to_owned());
        }
    }
    let mut seen = HashMap::new();
    for message in messages["fromAgent"].as_array().unwrap() {
        let what = format!("{name}: {message}");
        let kind = match message["method"].as_str() {
            Some("session/update") => {
                round_trip::<schema::SessionNotification>(&what, &message["params"]);
                message["params"]["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            }
            Some("session/request_permission") => {
                round_trip::<schema::RequestPermissionRequest>(&what, &message["params"]);
                "session/request_permission".to_owned()
            }
            Some(other) => panic!("{name}: the agent sent {other}"),
            None => {
                let method = asked
                    .get(&message["id"].to_string())
                    .unwrap_or_else(|| panic!("{what}: an answer to nothing asked"));
                let result = &message["result"];
                match method.as_str() {
                    "initialize" => round_trip::<schema::InitializeResponse>(&what, result),
                    "session/new" => round_trip::<schema::NewSessionResponse>(&what, result),
                    "session/load" => round_trip::<schema::LoadSessionResponse>(&what, result),
                    "session/prompt" => round_trip::<schema::PromptResponse>(&what, result),
                    other => panic!("{what}: an answer to {other}"),
                }
                format!("{method} answer")
            }
        };
        *seen.entry(kind).or_default() += 1;
    }
    seen
}

#[test]
fn every_message_dsh_agent_sent_reads_back_through_the_acp_types_unchanged() {
    let wire = wire();
    let turn = connection("turn", &wire["turn"]);
    // The snapshot holds what the test promises: the turn's kinds of message, each at least once.
    for kind in [
        "initialize answer",
        "session/new answer",
        "session/prompt answer",
        "session/request_permission",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
    ] {
        assert!(turn.contains_key(kind), "no {kind} in the turn: {turn:?}");
    }
    let load = connection("load", &wire["load"]);
    for kind in [
        "session/load answer",
        "user_message_chunk",
        "tool_call_update",
    ] {
        assert!(load.contains_key(kind), "no {kind} in the load: {load:?}");
    }
}
