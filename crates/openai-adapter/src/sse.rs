//! The transport: sending a request (with retries and timeouts) and reading its body as
//! server-sent events, each `data:` payload numbered in stream order, no event longer than
//! the configured limit.

use crate::config::AdapterConfig;
use crate::error::{AdapterError, ResponseLimit};
use crate::redact::{Redactor, clip};
use crate::wire::ErrorBody;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// The statuses worth another attempt: rate limits and transient server failures.
const RETRYABLE: [u16; 5] = [429, 500, 502, 503, 504];

/// The longest error body read for its message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How much of a body is kept to show its start when it is no answer (an HTML page, a
/// body without events): enough for [`START_CHARS`] characters once whitespace is folded.
pub(crate) const START_BYTES: usize = 4 * 1024;

/// The characters of provider text an error message keeps (after redaction).
pub(crate) const MESSAGE_CHARS: usize = 500;

/// The characters of a body's start that an error shows (after redaction).
pub(crate) const START_CHARS: usize = 200;

/// The end-of-stream marker.
pub(crate) const DONE: &str = "[DONE]";

/// Sends the request body and returns the response once its status is a success, retrying as
/// the policy allows. Nothing has been streamed to the loop yet, so a retry is invisible.
/// A wait that would end after `deadline` is not made: the answer in hand is the result.
pub(crate) async fn open(
    client: &reqwest::Client,
    config: &AdapterConfig,
    redactor: &Redactor,
    body: Vec<u8>,
    deadline: Option<Instant>,
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
                let detail = redactor.redact(&describe(&error));
                let delay = config.retry.backoff(attempts - 1);
                if (error.is_connect() || error.is_request())
                    && attempts <= config.retry.max_retries
                    && ends_before(delay, deadline)
                {
                    tracing::debug!(%provider, %detail, "connection failed; retrying");
                    delay
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
                let asked = retry_after(response.headers());
                // A provider may quote the key it rejected: the message is redacted.
                let message = error_message(response, config, redactor).await;
                let retryable = RETRYABLE.contains(&status) && attempts <= config.retry.max_retries;
                let delay = match asked {
                    RetryAfter::Wait(delay) => Some(delay),
                    RetryAfter::TooLong => None,
                    RetryAfter::Unset => Some(config.retry.backoff(attempts - 1)),
                }
                .filter(|delay| *delay <= config.retry.max_delay && ends_before(*delay, deadline));
                match delay {
                    Some(delay) if retryable => {
                        tracing::debug!(%provider, status, ?delay, %message, "retryable answer; retrying");
                        delay
                    }
                    _ => {
                        if retryable {
                            tracing::debug!(%provider, status, ?asked, "the wait the answer asks for is longer than the retry policy or the total timeout allows; not retrying");
                        }
                        return Err(AdapterError::Http {
                            provider,
                            status,
                            message,
                            attempts,
                        });
                    }
                }
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

/// Whether a wait of `delay` from now ends before `deadline` (no deadline: it does).
fn ends_before(delay: Duration, deadline: Option<Instant>) -> bool {
    match deadline {
        None => true,
        Some(deadline) => Instant::now()
            .checked_add(delay)
            .is_some_and(|end| end < deadline),
    }
}

/// What a server's `retry-after-ms` (OpenAI) or `Retry-After` (seconds) header asks for.
///
/// A value is a non-negative number (fractions and exponents allowed). One too large for any
/// clock, infinity included, is [`RetryAfter::TooLong`], which no retry policy waits for; a
/// negative number, `NaN`, an HTTP date or anything else is no request at all, and the
/// backoff decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RetryAfter {
    /// No usable value.
    Unset,
    /// Wait this long.
    Wait(Duration),
    /// Longer than a [`Duration`] can hold.
    TooLong,
}

fn retry_after(headers: &HeaderMap) -> RetryAfter {
    let asked = |name: &str, unit_per_second: f64| {
        let value: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        if value.is_nan() || value < 0.0 {
            return None;
        }
        Some(match Duration::try_from_secs_f64(value / unit_per_second) {
            Ok(delay) => RetryAfter::Wait(delay),
            Err(_) => RetryAfter::TooLong,
        })
    };
    asked("retry-after-ms", 1000.0)
        .or_else(|| asked("retry-after", 1.0))
        .unwrap_or(RetryAfter::Unset)
}

/// The provider's message from an error body, redacted and clipped: the JSON error object's
/// message (and type or code), else the body's text (an HTML page's flattened), else the
/// status's reason.
async fn error_message(
    response: reqwest::Response,
    config: &AdapterConfig,
    redactor: &Redactor,
) -> String {
    let reason = response
        .status()
        .canonical_reason()
        .unwrap_or("error")
        .to_owned();
    let html = is_html(content_type(&response).as_deref());
    let body = read_start(response, config, ERROR_BODY_LIMIT).await;
    if let Ok(parsed) = serde_json::from_slice::<ErrorBody>(&body) {
        let described = parsed.error.describe();
        if !described.is_empty() {
            return redactor.clip(&described, MESSAGE_CHARS);
        }
    }
    let text = redactor.redact_escaped(String::from_utf8_lossy(&body).trim());
    if text.is_empty() {
        reason
    } else if html {
        format!("an HTML page: {}", clip(&flatten(&text), MESSAGE_CHARS))
    } else {
        clip(&text, MESSAGE_CHARS)
    }
}

/// The response's `Content-Type`, if it has a readable one.
pub(crate) fn content_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_owned())
}

/// Whether a content type is an HTML page: a login wall, a proxy's or a gateway's error page.
pub(crate) fn is_html(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| {
        let value = value.to_ascii_lowercase();
        value.starts_with("text/html") || value.starts_with("application/xhtml")
    })
}

/// Whether a content type is the media type of a JSON document.
pub(crate) fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| value.to_ascii_lowercase().starts_with("application/json"))
}

/// Whether a content type is an event stream's.
pub(crate) fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| value.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// The start of a body for a message: redacted, whitespace runs made single spaces, clipped.
pub(crate) fn body_start(body: &[u8], redactor: &Redactor) -> String {
    let text = flatten(&redactor.redact_escaped(&String::from_utf8_lossy(body)));
    if text.is_empty() {
        String::from("(an empty body)")
    } else {
        clip(&text, START_CHARS)
    }
}

/// `text` on one line: each run of whitespace becomes one space.
fn flatten(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `limit` bytes from the start of a body, each piece within the idle timeout; a
/// failure ends the reading with what came.
pub(crate) async fn read_start(
    response: reqwest::Response,
    config: &AdapterConfig,
    limit: usize,
) -> Vec<u8> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < limit {
        match tokio::time::timeout(config.timeouts.idle, chunks.next()).await {
            Ok(Some(Ok(bytes))) => body.extend_from_slice(&bytes),
            _ => break,
        }
    }
    body.truncate(limit);
    body
}

/// Why the body stopped yielding bytes.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("idle")]
    Idle,
    #[error("{0}")]
    Transport(String),
    #[error("an event passed its limit")]
    EventTooLarge,
}

/// The size of the server-sent event being received: its bytes since the last blank line
/// (line ends not counted; `\r\n`, `\n` and `\r` all end a line).
#[derive(Debug)]
struct EventSize {
    bytes: usize,
    line_empty: bool,
    after_cr: bool,
}

impl EventSize {
    fn new() -> EventSize {
        EventSize {
            bytes: 0,
            line_empty: true,
            after_cr: false,
        }
    }

    /// Takes the next piece of the body; false as soon as one event passes `limit`.
    fn take(&mut self, piece: &[u8], limit: usize) -> bool {
        for &byte in piece {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            if byte == b'\r' || byte == b'\n' {
                if self.line_empty {
                    self.bytes = 0;
                }
                self.line_empty = true;
                self.after_cr = byte == b'\r';
            } else {
                self.line_empty = false;
                self.bytes += 1;
                if self.bytes > limit {
                    return false;
                }
            }
        }
        true
    }
}

/// The body's bytes, failing once no bytes came for the idle timeout or one event passes the
/// event limit, and keeping the body's first bytes for a message about it.
struct GuardedBody {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    event: EventSize,
    event_limit: usize,
    start: Arc<Mutex<Vec<u8>>>,
}

impl GuardedBody {
    fn new(response: reqwest::Response, config: &AdapterConfig) -> GuardedBody {
        let idle = config.timeouts.idle;
        GuardedBody {
            inner: Box::pin(response.bytes_stream()),
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            event: EventSize::new(),
            event_limit: config.event_limit(),
            start: Arc::default(),
        }
    }

    fn keep_start(&self, piece: &[u8]) {
        if let Ok(mut start) = self.start.lock() {
            let room = START_BYTES.saturating_sub(start.len());
            start.extend_from_slice(&piece[..room.min(piece.len())]);
        }
    }
}

impl Stream for GuardedBody {
    type Item = Result<bytes::Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(piece))) => {
                // A configured idle timeout too long for the clock is no timeout.
                if let Some(deadline) = Instant::now().checked_add(self.idle) {
                    self.timer.as_mut().reset(deadline);
                }
                self.keep_start(&piece);
                let limit = self.event_limit;
                if self.event.take(&piece, limit) {
                    Poll::Ready(Some(Ok(piece)))
                } else {
                    Poll::Ready(Some(Err(BodyError::EventTooLarge)))
                }
            }
            Poll::Ready(Some(Err(error))) => {
                Poll::Ready(Some(Err(BodyError::Transport(describe(&error)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyError::Idle))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// The whole body of a response read at once, each piece within the idle timeout, at most
/// the event limit long.
pub(crate) async fn read_body(
    response: reqwest::Response,
    config: &AdapterConfig,
    redactor: &Redactor,
) -> Result<Vec<u8>, AdapterError> {
    let provider = config.provider.to_string();
    let limit = config.event_limit();
    let idle = config.timeouts.idle;
    let mut chunks = response.bytes_stream();
    let mut bytes = Vec::new();
    loop {
        match tokio::time::timeout(idle, chunks.next()).await {
            Err(_) => {
                return Err(AdapterError::IdleTimeout {
                    provider,
                    timeout: idle,
                });
            }
            Ok(None) => return Ok(bytes),
            Ok(Some(Ok(piece))) => {
                if bytes.len().saturating_add(piece.len()) > limit {
                    return Err(AdapterError::ResponseTooLarge {
                        provider,
                        what: ResponseLimit::Body,
                        limit,
                    });
                }
                bytes.extend_from_slice(&piece);
            }
            Ok(Some(Err(error))) => {
                return Err(AdapterError::Stream {
                    provider,
                    detail: redactor.redact(&describe(&error)),
                });
            }
        }
    }
}

/// The first bytes of a streamed body, shared with the stream that reads it: what a message
/// about a body without events shows.
pub(crate) type BodyStart = Arc<Mutex<Vec<u8>>>;

/// One `data:` payload and its 1-based number among the stream's data payloads.
pub(crate) type DataLine = (usize, String);

/// The `data:` payloads of a body.
pub(crate) type DataLines = Pin<Box<dyn Stream<Item = Result<DataLine, AdapterError>> + Send>>;

/// The `data:` payloads of a response body, in order; events without data (comments,
/// keep-alives) are skipped. The stream ends with the body.
pub(crate) fn data_lines(
    response: reqwest::Response,
    config: &AdapterConfig,
) -> (DataLines, BodyStart) {
    let provider = config.provider.to_string();
    let idle = config.timeouts.idle;
    let event_limit = config.event_limit();
    let body = GuardedBody::new(response, config);
    let start = Arc::clone(&body.start);
    let lines = Box::pin(numbered(
        sse_stream::SseByteStream::new(body),
        move |error| match error {
            sse_stream::Error::Body(inner) => match inner.downcast_ref::<BodyError>() {
                Some(BodyError::Idle) => AdapterError::IdleTimeout {
                    provider: provider.clone(),
                    timeout: idle,
                },
                Some(BodyError::EventTooLarge) => AdapterError::ResponseTooLarge {
                    provider: provider.clone(),
                    what: ResponseLimit::Event,
                    limit: event_limit,
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
    ));
    (lines, start)
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
