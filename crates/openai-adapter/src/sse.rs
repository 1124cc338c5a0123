//! The transport: sending a request (with retries and timeouts) and reading its body as
//! server-sent events, each `data:` payload numbered in stream order.

use crate::config::{AdapterConfig, Timeouts};
use crate::error::AdapterError;
use crate::wire::ErrorBody;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The statuses worth another attempt: rate limits and transient server failures.
const RETRYABLE: [u16; 5] = [429, 500, 502, 503, 504];

/// The longest error body read for its message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The end-of-stream marker.
pub(crate) const DONE: &str = "[DONE]";

/// Sends the request body and returns the response once its status is a success, retrying as
/// the policy allows. Nothing has been streamed to the loop yet, so a retry is invisible.
pub(crate) async fn open(
    client: &reqwest::Client,
    config: &AdapterConfig,
    body: Vec<u8>,
) -> Result<reqwest::Response, AdapterError> {
    let provider = config.provider.to_string();
    let url = config.endpoint();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    if let Some(key) = &config.api_key {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                AdapterError::Config(String::from(
                    "the API key holds characters a header cannot carry",
                ))
            })?;
        // Keeps the value out of reqwest's and hyper's debug output.
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        tracing::debug!(%provider, model = %config.model, attempt = attempts, "sending a chat completion request");
        let send = client
            .post(&url)
            .headers(headers.clone())
            .body(body.clone())
            .send();
        let retry_in = match tokio::time::timeout(config.timeouts.first_byte, send).await {
            Err(_) => {
                return Err(AdapterError::FirstByteTimeout {
                    provider,
                    timeout: config.timeouts.first_byte,
                });
            }
            Ok(Err(error)) => {
                let detail = describe(&error);
                if (error.is_connect() || error.is_request())
                    && attempts <= config.retry.max_retries
                {
                    tracing::debug!(%provider, %detail, "connection failed; retrying");
                    config.retry.backoff(attempts - 1)
                } else {
                    return Err(AdapterError::Connect {
                        provider,
                        detail,
                        attempts,
                    });
                }
            }
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let retry_after = retry_after(response.headers());
                let mut message = error_message(response, config.timeouts).await;
                if let Some(key) = &config.api_key {
                    // A provider may quote the key it rejected; it must not reach the logs.
                    message = message.replace(key.expose(), "<redacted>");
                }
                let retryable = RETRYABLE.contains(&status) && attempts <= config.retry.max_retries;
                let delay = retry_after.unwrap_or_else(|| config.retry.backoff(attempts - 1));
                if !retryable || delay > config.retry.max_delay {
                    return Err(AdapterError::Http {
                        provider,
                        status,
                        message,
                        attempts,
                    });
                }
                tracing::debug!(%provider, status, ?delay, %message, "retryable answer; retrying");
                delay
            }
        };
        tokio::time::sleep(retry_in).await;
    }
}

/// The error and its sources on one line.
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// The server's requested wait: `retry-after-ms` (OpenAI) or `Retry-After` in seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number("retry-after").map(Duration::from_secs_f64))
}

/// The provider's message from an error body: the JSON error object's message (and type or
/// code), else the body's text, else the status's reason.
async fn error_message(response: reqwest::Response, timeouts: Timeouts) -> String {
    let reason = response
        .status()
        .canonical_reason()
        .unwrap_or("error")
        .to_owned();
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout(timeouts.idle, chunks.next()).await {
            Ok(Some(Ok(bytes))) => body.extend_from_slice(&bytes),
            _ => break,
        }
    }
    if let Ok(parsed) = serde_json::from_slice::<ErrorBody>(&body) {
        let described = parsed.error.describe();
        if !described.is_empty() {
            return described;
        }
    }
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    if text.is_empty() {
        reason
    } else {
        clip(text, 500)
    }
}

/// At most `limit` characters of `text`, with an ellipsis when cut.
pub(crate) fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Why the body stopped yielding bytes.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("idle")]
    Idle,
    #[error("{0}")]
    Transport(String),
}

/// The body's bytes, failing once no bytes came for the idle timeout.
struct IdleBody {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Stream for IdleBody {
    type Item = Result<bytes::Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(item)) => {
                let deadline = tokio::time::Instant::now() + self.idle;
                self.timer.as_mut().reset(deadline);
                Poll::Ready(Some(item.map_err(|e| BodyError::Transport(describe(&e)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyError::Idle))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// The whole body of a non-streamed response, each piece within the idle timeout.
pub(crate) async fn read_body(
    response: reqwest::Response,
    config: &AdapterConfig,
) -> Result<Vec<u8>, AdapterError> {
    let idle = config.timeouts.idle;
    let mut body = IdleBody {
        inner: Box::pin(response.bytes_stream()),
        idle,
        timer: Box::pin(tokio::time::sleep(idle)),
    };
    let mut bytes = Vec::new();
    while let Some(piece) = body.next().await {
        match piece {
            Ok(piece) => bytes.extend_from_slice(&piece),
            Err(BodyError::Idle) => {
                return Err(AdapterError::IdleTimeout {
                    provider: config.provider.to_string(),
                    timeout: idle,
                });
            }
            Err(BodyError::Transport(detail)) => {
                return Err(AdapterError::Stream {
                    provider: config.provider.to_string(),
                    detail,
                });
            }
        }
    }
    Ok(bytes)
}

/// One `data:` payload and its 1-based number among the stream's data payloads.
pub(crate) type DataLine = (usize, String);

/// The `data:` payloads of a response body, in order; events without data (comments,
/// keep-alives) are skipped. The stream ends with the body.
pub(crate) fn data_lines(
    response: reqwest::Response,
    config: &AdapterConfig,
) -> Pin<Box<dyn Stream<Item = Result<DataLine, AdapterError>> + Send>> {
    let provider = config.provider.to_string();
    let idle = config.timeouts.idle;
    let body = IdleBody {
        inner: Box::pin(response.bytes_stream()),
        idle,
        timer: Box::pin(tokio::time::sleep(idle)),
    };
    Box::pin(numbered(
        sse_stream::SseByteStream::new(body),
        move |error| match error {
            sse_stream::Error::Body(inner) => match inner.downcast_ref::<BodyError>() {
                Some(BodyError::Idle) => AdapterError::IdleTimeout {
                    provider: provider.clone(),
                    timeout: idle,
                },
                _ => AdapterError::Stream {
                    provider: provider.clone(),
                    detail: inner.to_string(),
                },
            },
            other => AdapterError::Stream {
                provider: provider.clone(),
                detail: other.to_string(),
            },
        },
    ))
}

/// The `data:` payloads of a recorded stream (the whole body in memory).
pub(crate) fn recorded_data_lines(
    body: bytes::Bytes,
) -> impl Stream<Item = Result<DataLine, AdapterError>> {
    let bytes = futures::stream::iter([Ok::<_, std::io::Error>(body)]);
    numbered(sse_stream::SseByteStream::new(bytes), |error| {
        AdapterError::Stream {
            provider: String::from("recording"),
            detail: error.to_string(),
        }
    })
}

fn numbered<S>(
    events: S,
    on_error: impl Fn(sse_stream::Error) -> AdapterError + Send + 'static,
) -> impl Stream<Item = Result<DataLine, AdapterError>> + Send
where
    S: Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send,
{
    events
        .filter_map(|event| async move {
            match event {
                Ok(sse) => sse.data.map(Ok),
                Err(error) => Some(Err(error)),
            }
        })
        .enumerate()
        .map(move |(n, data)| data.map(|data| (n + 1, data)).map_err(&on_error))
}
