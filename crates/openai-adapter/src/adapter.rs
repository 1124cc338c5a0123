//! The adapter: one streamed request per model request, from body to events.

use crate::config::AdapterConfig;
use crate::error::AdapterError;
use crate::serialize::chat_request;
use crate::sse::{self, DONE, DataLine, clip};
use crate::translate::Translator;
use crate::wire::{ChatChunk, Completion};
use agent_loop::{ModelAdapter, ModelError, ModelEvent, ModelRequest, ModelStream};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
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
        Ok(OpenAiAdapter {
            inner: Arc::new(Inner { config, client }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AdapterConfig {
        &self.inner.config
    }

    /// Streams one response with the adapter's typed errors. After an error or `Finish` the
    /// stream ends; once `signal` fires it yields [`AdapterError::Cancelled`] and ends, and the
    /// connection is closed.
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
            phase,
            queue: VecDeque::new(),
        };
        let secret = self
            .inner
            .config
            .api_key
            .as_ref()
            .map(|key| key.expose().to_owned())
            .unwrap_or_default();
        Box::pin(
            futures::stream::unfold(run, Run::next)
                .map(move |item| item.map_err(|error| error.redacted(&secret))),
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

type DataLines = Pin<Box<dyn Stream<Item = Result<DataLine, AdapterError>> + Send>>;

enum Phase {
    /// The request body, not yet sent.
    Connect(Vec<u8>),
    /// Reading the body.
    Streaming {
        lines: DataLines,
        translator: Translator,
    },
    /// Building the request failed; the error is yielded first.
    Failed(AdapterError),
    /// Nothing more.
    Finished,
}

struct Run {
    inner: Arc<Inner>,
    signal: CancellationToken,
    phase: Phase,
    queue: VecDeque<ModelEvent>,
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
                    let config = &self.inner.config;
                    let opened = tokio::select! {
                        biased;
                        () = self.signal.cancelled() => Err(AdapterError::Cancelled),
                        opened = sse::open(&self.inner.client, config, body) => opened,
                    };
                    match opened {
                        Ok(response) if !config.streaming => {
                            let read = tokio::select! {
                                biased;
                                () = self.signal.cancelled() => Err(AdapterError::Cancelled),
                                read = sse::read_body(response, config) => read,
                            };
                            match read.and_then(|body| whole(config.provider.name(), &body)) {
                                Ok(events) => self.queue.extend(events),
                                Err(error) => return Some((Err(error), self)),
                            }
                        }
                        Ok(response) => {
                            self.phase = Phase::Streaming {
                                lines: sse::data_lines(response, config),
                                translator: Translator::new(config.provider.name()),
                            };
                        }
                        Err(error) => return Some((Err(error), self)),
                    }
                }
                Phase::Streaming {
                    mut lines,
                    mut translator,
                } => {
                    let next = tokio::select! {
                        biased;
                        () = self.signal.cancelled() => return Some((Err(AdapterError::Cancelled), self)),
                        next = lines.next() => next,
                    };
                    let mut events = Vec::new();
                    match decode(next, &mut translator, &mut events) {
                        Ok(Decoded::More) => {
                            self.phase = Phase::Streaming { lines, translator };
                        }
                        Ok(Decoded::Done) => events.push(match translator.done() {
                            Ok(finish) => finish,
                            Err(error) => return Some((Err(error), self)),
                        }),
                        Err(error) => {
                            // Events decoded before the failure still reach the loop first.
                            self.phase = Phase::Failed(error);
                        }
                    }
                    self.queue.extend(events);
                }
            }
        }
    }
}

/// The events of a whole completion: what streaming it would have yielded, in one go.
fn whole(provider: &str, body: &[u8]) -> Result<Vec<ModelEvent>, AdapterError> {
    let completion: Completion =
        serde_json::from_slice(body).map_err(|error| AdapterError::MalformedChunk {
            line: 1,
            detail: error.to_string(),
            text: clip(&String::from_utf8_lossy(body), 200),
        })?;
    let mut translator = Translator::new(provider);
    let mut events = Vec::new();
    translator.chunk(completion.into_chunk(), &mut events)?;
    events.push(translator.done()?);
    Ok(events)
}

/// What one data line meant.
enum Decoded {
    More,
    Done,
}

/// Feeds one data line (or the end of the body) to the translator.
fn decode(
    next: Option<Result<DataLine, AdapterError>>,
    translator: &mut Translator,
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
            detail: error.to_string(),
            text: clip(data, 200),
        })?;
    translator.chunk(chunk, out)?;
    Ok(Decoded::More)
}

/// Decodes a recorded stream (a whole response body of server-sent events) into the events
/// the adapter would stream for it, or the error it would fail with. No network: for tests,
/// benchmarks and replaying captured responses.
pub async fn decode_recording(
    body: impl Into<bytes::Bytes>,
) -> Result<Vec<ModelEvent>, AdapterError> {
    let mut lines = std::pin::pin!(sse::recorded_data_lines(body.into()));
    let mut translator = Translator::new("recording");
    let mut events = Vec::new();
    loop {
        match decode(lines.next().await, &mut translator, &mut events)? {
            Decoded::More => {}
            Decoded::Done => {
                events.push(translator.done()?);
                return Ok(events);
            }
        }
    }
}
