//! The adapter: one streamed request per model request, from body to events.

use crate::config::AdapterConfig;
use crate::error::AdapterError;
use crate::redact::Redactor;
use crate::serialize::chat_request;
use crate::sse::{self, BodyStart, DONE, DataLine, DataLines, START_BYTES, START_CHARS};
use crate::translate::Translator;
use crate::wire::{ChatChunk, Completion};
use agent_loop::{ModelAdapter, ModelError, ModelEvent, ModelRequest, ModelStream};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A streaming Chat Completions adapter for DeepSeek, OpenAI and other OpenAI-compatible
/// endpoints. Cheap to clone; clones share the connection pool.
#[derive(Clone, Debug)]
pub struct OpenAiAdapter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: AdapterConfig,
    client: reqwest::Client,
    redactor: Redactor,
}

impl OpenAiAdapter {
    /// An adapter for `config`. TLS uses rustls with the ring provider, installed as the
    /// process default unless another provider already is.
    pub fn new(config: AdapterConfig) -> Result<OpenAiAdapter, AdapterError> {
        // Fails only when a provider is already installed, which reqwest then uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeouts.connect)
            .build()
            .map_err(|e| AdapterError::Config(format!("cannot build the HTTP client: {e}")))?;
        let redactor = match &config.api_key {
            Some(key) => Redactor::new(key.expose()),
            None => Redactor::none(),
        };
        Ok(OpenAiAdapter {
            inner: Arc::new(Inner {
                config,
                client,
                redactor,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AdapterConfig {
        &self.inner.config
    }

    /// Streams one response with the adapter's typed errors. After an error or `Finish` the
    /// stream ends; once `signal` fires it yields [`AdapterError::Cancelled`] and ends, and the
    /// connection is closed. The whole response, retries included, takes at most the total
    /// timeout ([`AdapterError::TotalTimeout`]).
    pub fn events(
        &self,
        request: &ModelRequest,
        signal: CancellationToken,
    ) -> BoxStream<'static, Result<ModelEvent, AdapterError>> {
        let phase = match chat_request(&self.inner.config, request).and_then(|body| {
            serde_json::to_vec(&body).map_err(|e| AdapterError::Config(e.to_string()))
        }) {
            Ok(body) => Phase::Connect(body),
            Err(error) => Phase::Failed(error),
        };
        let run = Run {
            inner: Arc::clone(&self.inner),
            signal,
            deadline: None,
            phase,
            queue: VecDeque::new(),
        };
        let redactor = self.inner.redactor.clone();
        Box::pin(
            futures::stream::unfold(run, Run::next)
                .map(move |item| item.map_err(|error| error.redacted(&redactor))),
        )
    }
}

impl ModelAdapter for OpenAiAdapter {
    fn stream(&self, request: ModelRequest, signal: CancellationToken) -> ModelStream {
        Box::pin(
            self.events(&request, signal)
                .map(|item| item.map_err(ModelError::from)),
        )
    }
}

/// What a successful response's body is read as.
struct Body {
    status: u16,
    /// Its `Content-Type`, if readable.
    content_type: Option<String>,
    /// Its first bytes, kept as it streams.
    start: BodyStart,
}

impl Body {
    /// The error for a body that is not `expected`, showing its start.
    fn unexpected(&self, inner: &Inner, expected: &'static str, start: &[u8]) -> AdapterError {
        AdapterError::UnexpectedBody {
            provider: inner.config.provider.to_string(),
            status: self.status,
            content_type: match &self.content_type {
                Some(value) => inner.redactor.clip(value, START_CHARS),
                None => String::from("no Content-Type"),
            },
            expected,
            start: sse::body_start(start, &inner.redactor),
        }
    }
}

/// A body being streamed.
struct Streaming {
    lines: DataLines,
    translator: Translator,
    body: Body,
    /// Whether a `data:` payload came.
    seen_data: bool,
}

impl Streaming {
    /// Decodes the next data line (`next`, `None` at the end of the body) into `out`.
    fn take(
        &mut self,
        inner: &Inner,
        next: Option<Result<DataLine, AdapterError>>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Decoded, AdapterError> {
        self.seen_data |= matches!(next, Some(Ok(_)));
        // A body of another type that ended without one event was never an event stream.
        if next.is_none()
            && !self.seen_data
            && !sse::is_event_stream(self.body.content_type.as_deref())
        {
            let start = self
                .body
                .start
                .lock()
                .map(|start| start.clone())
                .unwrap_or_default();
            return Err(self.body.unexpected(inner, "an event stream", &start));
        }
        decode(next, &mut self.translator, &inner.redactor, out)
    }
}

enum Phase {
    /// The request body, not yet sent.
    Connect(Vec<u8>),
    /// Reading the body.
    Streaming(Box<Streaming>),
    /// Building the request failed; the error is yielded first.
    Failed(AdapterError),
    /// Nothing more.
    Finished,
}

struct Run {
    inner: Arc<Inner>,
    signal: CancellationToken,
    /// When the total timeout ends, set as the first request goes out (`None`: never, for a
    /// timeout the clock cannot add).
    deadline: Option<Instant>,
    phase: Phase,
    queue: VecDeque<ModelEvent>,
}

/// Runs `work` unless the signal fires or the total timeout ends first.
async fn guarded<T>(
    signal: &CancellationToken,
    deadline: Option<Instant>,
    config: &AdapterConfig,
    work: impl Future<Output = Result<T, AdapterError>>,
) -> Result<T, AdapterError> {
    let expired = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = signal.cancelled() => Err(AdapterError::Cancelled),
        () = expired => Err(AdapterError::TotalTimeout {
            provider: config.provider.to_string(),
            timeout: config.timeouts.total,
        }),
        result = work => result,
    }
}

impl Run {
    async fn next(mut self) -> Option<(Result<ModelEvent, AdapterError>, Run)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some((Ok(event), self));
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Failed(error) => return Some((Err(error), self)),
                Phase::Connect(body) => {
                    self.deadline = Instant::now().checked_add(self.inner.config.timeouts.total);
                    let inner = Arc::clone(&self.inner);
                    let opened = guarded(&self.signal, self.deadline, &inner.config, async {
                        let response = sse::open(
                            &inner.client,
                            &inner.config,
                            &inner.redactor,
                            body,
                            self.deadline,
                        )
                        .await?;
                        begin(&inner, response).await
                    })
                    .await;
                    match opened {
                        Ok(Begun::Whole(events)) => self.queue.extend(events),
                        Ok(Begun::Streaming(lines, body)) => {
                            self.phase = Phase::Streaming(Box::new(Streaming {
                                lines,
                                translator: translator(&inner),
                                body,
                                seen_data: false,
                            }));
                        }
                        Err(error) => return Some((Err(error), self)),
                    }
                }
                Phase::Streaming(mut streaming) => {
                    let inner = Arc::clone(&self.inner);
                    let next = guarded(&self.signal, self.deadline, &inner.config, async {
                        Ok(streaming.lines.next().await)
                    })
                    .await;
                    let mut events = Vec::new();
                    match next.and_then(|next| streaming.take(&inner, next, &mut events)) {
                        Ok(Decoded::More) => self.phase = Phase::Streaming(streaming),
                        Ok(Decoded::Done) => {
                            if let Err(error) = streaming.translator.done(&mut events) {
                                self.phase = Phase::Failed(error);
                            }
                        }
                        Err(error) => {
                            // Events decoded before the failure, and the text the redaction
                            // held back, still reach the loop first; dropping the body closes
                            // the connection.
                            streaming.translator.flush(&mut events);
                            self.phase = Phase::Failed(error);
                        }
                    }
                    self.queue.extend(events);
                }
            }
        }
    }
}

fn translator(inner: &Inner) -> Translator {
    Translator::new(
        inner.config.provider.name(),
        &inner.redactor,
        inner.config.max_response_bytes,
    )
}

/// How a successful response begins.
enum Begun {
    /// A body read whole, and its events.
    Whole(Vec<ModelEvent>),
    /// A body to stream.
    Streaming(DataLines, Body),
}

/// Looks at a successful response: an HTML page (a login wall, a proxy's page) is no answer;
/// a JSON body, asked for or sent in answer to a streamed request, is a whole completion;
/// anything else is read as an event stream.
async fn begin(inner: &Inner, response: reqwest::Response) -> Result<Begun, AdapterError> {
    let config = &inner.config;
    let content_type = sse::content_type(&response);
    let mut body = Body {
        status: response.status().as_u16(),
        content_type,
        start: BodyStart::default(),
    };
    let expected = if config.streaming {
        "an event stream"
    } else {
        "a JSON completion"
    };
    if sse::is_html(body.content_type.as_deref()) {
        let start = sse::read_start(response, config, START_BYTES).await;
        return Err(body.unexpected(inner, expected, &start));
    }
    if config.streaming && !sse::is_json(body.content_type.as_deref()) {
        let (lines, start) = sse::data_lines(response, config);
        body.start = start;
        return Ok(Begun::Streaming(lines, body));
    }
    let bytes = sse::read_body(response, config, &inner.redactor).await?;
    let json = sse::is_json(body.content_type.as_deref());
    match whole(inner, &bytes) {
        Err(AdapterError::MalformedChunk { .. }) if !json => {
            Err(body.unexpected(inner, "a JSON completion", &bytes))
        }
        result => result.map(Begun::Whole),
    }
}

/// The events of a whole completion: what streaming it would have yielded, in one go.
fn whole(inner: &Inner, body: &[u8]) -> Result<Vec<ModelEvent>, AdapterError> {
    let completion: Completion =
        serde_json::from_slice(body).map_err(|error| AdapterError::MalformedChunk {
            line: 1,
            detail: inner.redactor.clip(&error.to_string(), LINE_CHARS),
            text: inner
                .redactor
                .clip(&String::from_utf8_lossy(body), LINE_CHARS),
        })?;
    let mut translator = translator(inner);
    let mut events = Vec::new();
    translator.chunk(completion.into_chunk(), &mut events)?;
    translator.done(&mut events)?;
    Ok(events)
}

/// The characters of a malformed data line an error shows (after redaction).
const LINE_CHARS: usize = 200;

/// What one data line meant.
enum Decoded {
    More,
    Done,
}

/// Feeds one data line (or the end of the body) to the translator.
fn decode(
    next: Option<Result<DataLine, AdapterError>>,
    translator: &mut Translator,
    redactor: &Redactor,
    out: &mut Vec<crate::ModelEvent>,
) -> Result<Decoded, AdapterError> {
    let (line, data) = match next {
        None => {
            return Err(AdapterError::Truncated(format!(
                "the body ended before the {DONE} marker"
            )));
        }
        Some(item) => item?,
    };
    let data = data.trim();
    if data == DONE {
        return Ok(Decoded::Done);
    }
    let chunk: ChatChunk =
        serde_json::from_str(data).map_err(|error| AdapterError::MalformedChunk {
            line,
            detail: redactor.clip(&error.to_string(), LINE_CHARS),
            text: redactor.clip(data, LINE_CHARS),
        })?;
    translator.chunk(chunk, out)?;
    Ok(Decoded::More)
}

/// Decodes a recorded stream (a whole response body of server-sent events) into the events
/// the adapter would stream for it, or the error it would fail with. No network: for tests,
/// benchmarks and replaying captured responses. The response limits are the defaults'.
pub async fn decode_recording(
    body: impl Into<bytes::Bytes>,
) -> Result<Vec<ModelEvent>, AdapterError> {
    let mut lines = std::pin::pin!(sse::recorded_data_lines(body.into()));
    let redactor = Redactor::none();
    let mut translator = Translator::new(
        "recording",
        &redactor,
        crate::config::DEFAULT_MAX_RESPONSE_BYTES,
    );
    let mut events = Vec::new();
    loop {
        match decode(lines.next().await, &mut translator, &redactor, &mut events)? {
            Decoded::More => {}
            Decoded::Done => {
                translator.done(&mut events)?;
                return Ok(events);
            }
        }
    }
}
