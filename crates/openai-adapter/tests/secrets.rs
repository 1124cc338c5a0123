//! The API key never shows: not in `Debug` output, errors, events or logs, even when the
//! provider quotes it back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use agent_loop::{Message, ModelAdapter, ModelRequest};
use futures::StreamExt;
use openai_adapter::{AdapterConfig, AdapterError, ApiKey, OpenAiAdapter, RetryPolicy};
use pretty_assertions::assert_eq;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Reply, Server};
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
