//! The API key never shows: not in `Debug` output, errors, events or logs, even when the
//! provider quotes it back.

use crate::support::{Part, Reply, Server};
use agent_loop::{FinishReason, Message, ModelAdapter, ModelEvent, ModelRequest};
use futures::StreamExt;
use openai_adapter::{AdapterConfig, AdapterError, ApiKey, OpenAiAdapter, RetryPolicy};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-fake-secret-4c0ffee-must-not-show";

/// Everything the tracing subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn debug_output_hides_the_key() {
    let config = AdapterConfig::openai("gpt-4o-mini").api_key(ApiKey::new(KEY));
    let adapter = OpenAiAdapter::new(config.clone()).unwrap();
    for text in [
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{adapter:?}"),
        format!("{:?}", ApiKey::new(KEY)),
    ] {
        assert!(!text.contains(KEY), "{text}");
        assert!(
            text.contains("<redacted>") || text.contains("ApiKey"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn errors_events_and_logs_never_carry_the_key_even_when_the_provider_quotes_it() {
    let quoted = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
    );
    let stream_error = format!(r#"{{"error":{{"message":"key {KEY} was revoked"}}}}"#);
    let server = Server::start(vec![
        Reply::error(503, &quoted),
        Reply::error(401, &quoted),
        Reply::events(&[
            r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
            &stream_error,
        ]),
    ])
    .await;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let adapter = OpenAiAdapter::new(
        AdapterConfig::openai("gpt-4o-mini")
            .base_url(&server.base_url())
            .api_key(ApiKey::new(KEY))
            .retry(RetryPolicy::new(
                1,
                Duration::from_millis(1),
                Duration::from_secs(1),
            )),
    )
    .unwrap();
    let request = ModelRequest::new("", vec![Message::user("hello")], vec![]);
    let first: Vec<_> = adapter
        .events(&request, CancellationToken::new())
        .collect()
        .await;
    assert_eq!(
        first,
        vec![Err(AdapterError::Http {
            provider: "openai".into(),
            status: 401,
            message: "Incorrect API key provided: <redacted> (invalid_request_error)".into(),
            attempts: 2,
        })]
    );
    // Through the loop's seam, as a session would record it.
    let second: Vec<String> = adapter
        .stream(request, CancellationToken::new())
        .map(|item| match item {
            Ok(event) => format!("{event:?}"),
            Err(error) => error.to_string(),
        })
        .collect()
        .await;
    assert_eq!(
        second,
        vec![
            String::from("TextDelta(\"hi\")"),
            String::from("openai failed mid-stream: key <redacted> was revoked"),
        ]
    );
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("retryable answer"),
        "the logs were not captured: {logs}"
    );
    assert!(!logs.contains(KEY), "{logs}");
}

#[test]
fn a_missing_key_names_its_variable_and_a_spec_reads_it() {
    let error = AdapterConfig::from_spec(
        "deepseek:deepseek-chat",
        None,
        Some("DSH_TEST_KEY_THAT_IS_NEVER_SET"),
    )
    .unwrap_err();
    assert_eq!(
        error,
        AdapterError::MissingKey {
            variable: "DSH_TEST_KEY_THAT_IS_NEVER_SET".into()
        }
    );
    assert_eq!(
        error.to_string(),
        "no API key: set the environment variable DSH_TEST_KEY_THAT_IS_NEVER_SET"
    );
    let local =
        AdapterConfig::from_spec("compatible:llama3", Some("http://127.0.0.1:8080/v1/"), None)
            .unwrap();
    assert_eq!(
        (local.endpoint(), local.model.as_str(), local.api_key),
        (
            String::from("http://127.0.0.1:8080/v1/chat/completions"),
            "llama3",
            None
        )
    );
    for (spec, message) in [
        (
            "gpt-4o",
            "invalid model configuration: model `gpt-4o` is not PROVIDER:MODEL (for example deepseek:deepseek-chat)",
        ),
        (
            "acme:m1",
            "invalid model configuration: unknown provider `acme` (known: deepseek, openai, compatible)",
        ),
        (
            "compatible:m1",
            "invalid model configuration: provider `compatible` needs a base URL",
        ),
        (
            "openai:",
            "invalid model configuration: model `openai:` names no model",
        ),
    ] {
        assert_eq!(
            AdapterConfig::from_spec(spec, None, None)
                .unwrap_err()
                .to_string(),
            message,
            "{spec}"
        );
    }
}

/// The runs of eight characters of the key that `text` holds: a leak of a prefix, a suffix or
/// any longer run of the key shows as one of them.
fn key_runs(text: &str) -> Vec<&'static str> {
    (0..=KEY.len() - 8)
        .map(|at| &KEY[at..at + 8])
        .filter(|run| text.contains(run))
        .collect()
}

/// The adapter's items for the server's one reply, as a session would record them.
async fn items(reply: Reply) -> Vec<Result<ModelEvent, AdapterError>> {
    let server = Server::start(vec![reply]).await;
    let adapter = OpenAiAdapter::new(
        AdapterConfig::openai("gpt-4o-mini")
            .base_url(&server.base_url())
            .api_key(ApiKey::new(KEY))
            .retry(RetryPolicy::new(0, Duration::ZERO, Duration::ZERO)),
    )
    .unwrap();
    let request = ModelRequest::new("", vec![Message::user("hello")], vec![]);
    let items: Vec<_> = adapter
        .events(&request, CancellationToken::new())
        .collect()
        .await;
    let shown: String = items
        .iter()
        .map(|item| match item {
            Ok(event) => format!("{event:?}\n"),
            Err(error) => format!("{error}\n{error:?}\n"),
        })
        .collect();
    assert_eq!(key_runs(&shown), Vec::<&str>::new(), "{shown}");
    items
}

fn data(payload: String) -> Part {
    Part::Text(format!("data: {payload}\n\n"))
}

fn text_chunk(text: &str) -> Part {
    data(json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string())
}

#[tokio::test]
async fn a_key_quoted_across_the_clipping_points_is_redacted_before_the_clip() {
    // The key straddles the 500th character of an error body that is not JSON.
    let pad = "x".repeat(480);
    assert_eq!(
        items(Reply::error(401, &format!("{pad}{KEY} is not a valid key"))).await,
        vec![Err(AdapterError::Http {
            provider: "openai".into(),
            status: 401,
            message: format!("{pad}<redacted> is not a …"),
            attempts: 1,
        })]
    );
    // A JSON error message quoting the key cut short by the server.
    let body = json!({"error": {"message": format!("Incorrect API key provided: {}...", &KEY[..30]), "type": "invalid_request_error"}});
    assert_eq!(
        items(Reply::error(403, &body.to_string())).await,
        vec![Err(AdapterError::Http {
            provider: "openai".into(),
            status: 403,
            message: "Incorrect API key provided: <redacted>... (invalid_request_error)".into(),
            attempts: 1,
        })]
    );
    // The key straddles the 200th character of a malformed data line.
    let line = format!("{{\"choices\":[{}{KEY}]}}", "x".repeat(178));
    assert_eq!(
        items(Reply::stream(vec![text_chunk("Fine."), data(line)])).await,
        vec![
            Ok(ModelEvent::TextDelta("Fine.".into())),
            Err(AdapterError::MalformedChunk {
                line: 2,
                detail: "expected value at line 1 column 13".into(),
                text: format!("{{\"choices\":[{}<redacted>…", "x".repeat(178)),
            })
        ]
    );
    // The start of the key, and its end, in an error event of the stream.
    let message = format!("key {} revoked; it ended {}", &KEY[..20], &KEY[26..]);
    assert_eq!(
        items(Reply::stream(vec![data(
            json!({"error": {"message": message}}).to_string()
        )]))
        .await,
        vec![Err(AdapterError::Provider {
            provider: "openai".into(),
            message: "key <redacted> revoked; it ended <redacted>".into(),
        })]
    );
}

#[tokio::test]
async fn text_reasoning_and_tool_calls_never_carry_the_key_even_split_across_deltas() {
    let events = items(Reply::stream(vec![
        data(json!({"choices": [{"index": 0, "delta": {"reasoning_content": format!("I know {KEY}.")}}]}).to_string()),
        text_chunk("Your key "),
        text_chunk(&KEY[..10]),
        text_chunk(&KEY[10..25]),
        text_chunk(&KEY[25..]),
        text_chunk(" is fine; the tail "),
        text_chunk(&KEY[28..]),
        text_chunk("."),
        data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": KEY, "function": {"name": "bash", "arguments": format!("{{\"command\":\"echo {}", &KEY[..12])}}]}}]}).to_string()),
        data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": format!("{}\"}}", &KEY[12..])}}]}}]}).to_string()),
        data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}).to_string()),
        Part::Text("data: [DONE]\n\n".into()),
    ]))
    .await;
    let text: String = events
        .iter()
        .filter_map(|event| match event {
            Ok(ModelEvent::TextDelta(delta)) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Your key <redacted> is fine; the tail <redacted>.");
    let others: Vec<_> = events
        .into_iter()
        .filter(|event| !matches!(event, Ok(ModelEvent::TextDelta(_))))
        .collect();
    assert_eq!(
        others,
        vec![
            Ok(ModelEvent::ReasoningDelta("I know <redacted>.".into())),
            Ok(ModelEvent::ToolCallStart {
                index: 0,
                id: "<redacted>".into(),
                name: "bash".into()
            }),
            Ok(ModelEvent::ToolCallArguments {
                index: 0,
                fragment: "{\"command\":\"echo <redacted>\"}".into()
            }),
            Ok(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: None
            }),
        ]
    );
}

/// `text` with every fifth character written as a JSON `\u` escape, as a server could
/// write the key inside a tool call's arguments.
fn escaped(text: &str) -> String {
    text.chars()
        .enumerate()
        .map(|(n, c)| {
            if n % 5 == 4 {
                format!("\\u{:04x}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `text` with its `\uXXXX` escapes decoded, as the agent loop reads arguments, and made
/// lowercase (the key is lowercase): what [`key_runs`] must find nothing in.
fn decoded(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\\u") {
        out.push_str(&rest[..at]);
        let hex = rest.get(at + 2..at + 6).unwrap_or_default();
        match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
            Some(c) => {
                out.push(c);
                rest = &rest[at + 6..];
            }
            None => {
                out.push_str("\\u");
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out.to_lowercase()
}

/// What the server's items show once escapes are decoded and case is folded.
fn shown(items: &[Result<ModelEvent, AdapterError>]) -> String {
    let mut text = String::new();
    for item in items {
        match item {
            Ok(ModelEvent::TextDelta(delta)) => text.push_str(delta),
            Ok(ModelEvent::ToolCallArguments { fragment, .. }) => text.push_str(fragment),
            Ok(event) => text.push_str(&format!("\n{event:?}\n")),
            Err(error) => text.push_str(&format!("\n{error}\n{error:?}\n")),
        }
    }
    decoded(&text)
}

#[tokio::test]
async fn a_key_disguised_by_json_escapes_or_letter_case_is_redacted_too() {
    let hidden = escaped(KEY);
    assert_eq!(key_runs(&hidden), Vec::<&str>::new());
    let call = |arguments: &str, first: bool| {
        let mut call = json!({"index": 0, "function": {"arguments": arguments}});
        if first {
            call["id"] = json!("c1");
            call["function"]["name"] = json!("bash");
        }
        data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).to_string())
    };
    let end = || {
        vec![
            data(
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                    .to_string(),
            ),
            Part::Text("data: [DONE]\n\n".into()),
        ]
    };
    // Valid arguments, the key escaped in a value and in a key, split mid-escape.
    let arguments = format!(r#"{{"command":"echo {hidden}","{hidden}":1}}"#);
    let cut = arguments.find("\\u").unwrap() + 3;
    let mut parts = vec![
        call(&arguments[..cut], true),
        call(&arguments[cut..], false),
    ];
    parts.extend(end());
    let events = items(Reply::stream(parts)).await;
    assert_eq!(
        shown(&events).matches("<redacted>").count(),
        2,
        "{events:?}"
    );
    let arguments: String = events
        .iter()
        .filter_map(|event| match event {
            Ok(ModelEvent::ToolCallArguments { fragment, .. }) => Some(fragment.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&arguments).unwrap(),
        json!({"command": "echo <redacted>", "<redacted>": 1})
    );
    // Arguments that are not JSON (an unterminated string), and the key in upper case.
    let mut parts = vec![
        text_chunk(&format!("Your key is {}.", KEY.to_uppercase())),
        call(&format!(r#"{{"command":"echo {hidden} and \q"#), true),
    ];
    parts.extend(end());
    let events = items(Reply::stream(parts)).await;
    let text = shown(&events);
    assert_eq!(key_runs(&text), Vec::<&str>::new(), "{text}");
    assert!(text.starts_with("your key is <redacted>."), "{text}");
    // A malformed data line, and an error body that is not JSON, quoting the escaped key.
    for reply in [
        Reply::stream(vec![data(format!(r#"{{"choices":[x, "{hidden}"]}}"#))]),
        Reply::error(401, &format!("bad key: {hidden}")),
        Reply::error(401, &format!("<p>bad key: \"{hidden}\"</p>")),
    ] {
        let events = items(reply).await;
        let text = shown(&events);
        assert_eq!(key_runs(&text), Vec::<&str>::new(), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}
