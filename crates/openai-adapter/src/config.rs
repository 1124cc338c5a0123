//! What the adapter talks to and how: the provider preset, model, endpoint, key, request
//! options, timeouts and retries.

use crate::error::AdapterError;
use std::fmt;
use std::time::Duration;

/// The DeepSeek API base URL.
pub const DEEPSEEK_BASE_URL: &str = "https://api.deepseek.com";
/// The OpenAI API base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The default of [`AdapterConfig::max_response_bytes`]: 4 MiB, an eighth of the session log's
/// line limit ([`agent_loop::MAX_LINE_BYTES`]), so that a response filling it still makes a log
/// line `replay` can read, even were JSON escaping to make each of its bytes six (`\u0001`).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = agent_loop::MAX_LINE_BYTES / 8;

/// The most tool calls one response may carry.
pub const MAX_TOOL_CALLS: usize = 1024;

/// What a server-sent event or a body read whole may hold beyond its share of
/// [`AdapterConfig::max_response_bytes`]: the JSON around the text.
const EVENT_FRAMING_BYTES: usize = 64 * 1024;

/// A known provider, which decides the defaults (base URL, key variable) and what a request
/// may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provider {
    /// DeepSeek (`deepseek-chat`, `deepseek-reasoner`); key in `DEEPSEEK_API_KEY`.
    DeepSeek,
    /// OpenAI; key in `OPENAI_API_KEY`.
    OpenAi,
    /// Any other OpenAI-compatible server (vLLM, llama.cpp, Ollama, …): a base URL is
    /// required and a key only when a variable is named.
    Compatible,
}

impl Provider {
    /// The name used in `PROVIDER:MODEL` specs.
    pub fn name(self) -> &'static str {
        match self {
            Provider::DeepSeek => "deepseek",
            Provider::OpenAi => "openai",
            Provider::Compatible => "compatible",
        }
    }

    /// The provider of a spec name (`deepseek`, `openai`, `compatible`).
    pub fn from_name(name: &str) -> Option<Provider> {
        match name {
            "deepseek" => Some(Provider::DeepSeek),
            "openai" => Some(Provider::OpenAi),
            "compatible" => Some(Provider::Compatible),
            _ => None,
        }
    }

    /// The default base URL, if the provider has one.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::DeepSeek => Some(DEEPSEEK_BASE_URL),
            Provider::OpenAi => Some(OPENAI_BASE_URL),
            Provider::Compatible => None,
        }
    }

    /// The environment variable the key is read from by default.
    pub fn default_key_variable(self) -> Option<&'static str> {
        match self {
            Provider::DeepSeek => Some("DEEPSEEK_API_KEY"),
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Compatible => None,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An API key. It is sent only in the `Authorization` header (marked sensitive) and never
/// shown: `Debug` prints a placeholder and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from its text.
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key from an environment variable; an unset or empty variable is an error that
    /// names the variable.
    pub fn from_env(variable: &str) -> Result<ApiKey, AdapterError> {
        ApiKey::from_lookup(variable, |name| std::env::var(name).ok())
    }

    /// The key `lookup` finds for `variable` (a host that keeps its secrets out of its
    /// environment finds them where it keeps them); none, or an empty one, is an error that
    /// names the variable.
    pub fn from_lookup(
        variable: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ApiKey, AdapterError> {
        match lookup(variable) {
            Some(key) if !key.trim().is_empty() => Ok(ApiKey(key.trim().to_owned())),
            _ => Err(AdapterError::MissingKey {
                variable: variable.to_owned(),
            }),
        }
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// How long each phase of a request may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// Establishing the connection (TCP and TLS).
    pub connect: Duration,
    /// From sending the request to the response headers.
    pub first_byte: Duration,
    /// Between two pieces of the streamed body (keep-alive comments count).
    pub idle: Duration,
    /// The whole response: from the first request to the last event, retries and their waits
    /// included. Keep-alive comments do not extend it.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(60),
            idle: Duration::from_secs(90),
            total: Duration::from_secs(600),
        }
    }
}

impl Timeouts {
    /// The given timeouts, with the default total timeout (10 minutes).
    pub fn new(connect: Duration, first_byte: Duration, idle: Duration) -> Timeouts {
        Timeouts {
            connect,
            first_byte,
            idle,
            ..Timeouts::default()
        }
    }

    /// Replaces the total timeout of a response.
    pub fn total(mut self, total: Duration) -> Timeouts {
        self.total = total;
        self
    }
}

/// Retries of `429`, `500`, `502`, `503` and `504` answers and of failed connections, before
/// any event has been streamed: exponential backoff from `base_delay` with jitter, capped at
/// `max_delay`. A `Retry-After` the server sends replaces the backoff; one longer than
/// `max_delay` ends the retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: none).
    pub max_retries: u32,
    /// The first backoff.
    pub base_delay: Duration,
    /// The longest wait before a retry.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The given policy.
    pub fn new(max_retries: u32, base_delay: Duration, max_delay: Duration) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            base_delay,
            max_delay,
        }
    }

    /// The backoff before retry `retry` (0-based): `base_delay · 2^retry`, capped, then a
    /// uniformly random point in its upper half, so that clients failing together do not
    /// retry together.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(16));
        let full = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let half = full / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(fastrand::u64(0..=jitter_ms))
    }
}

/// The adapter's configuration. Start from a preset ([`AdapterConfig::deepseek`],
/// [`AdapterConfig::openai`], [`AdapterConfig::compatible`]) or a spec
/// ([`AdapterConfig::from_spec`]) and adjust with the builder methods.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AdapterConfig {
    /// The provider preset.
    pub provider: Provider,
    /// The model name sent in each request.
    pub model: String,
    /// The base URL; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The key, if the endpoint needs one.
    pub api_key: Option<ApiKey>,
    /// Send tools in the strict projection with `"strict": true`.
    pub strict_tools: bool,
    /// Stream responses (the default). Off, each response is read whole and then yields the
    /// same events: for servers that cannot stream tool calls.
    pub streaming: bool,
    /// Sampling temperature, when set.
    pub temperature: Option<f64>,
    /// The completion token limit, when set.
    pub max_tokens: Option<u32>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryPolicy,
    /// The most bytes of text, reasoning and tool calls (ids, names and arguments) one
    /// response may carry, together; past it the stream ends with
    /// [`AdapterError::ResponseTooLarge`]. Default: [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: usize,
}

impl AdapterConfig {
    fn preset(provider: Provider, model: &str, base_url: &str) -> AdapterConfig {
        AdapterConfig {
            provider,
            model: model.to_owned(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: None,
            strict_tools: false,
            streaming: true,
            temperature: None,
            max_tokens: None,
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// DeepSeek with `model` (`deepseek-chat` or `deepseek-reasoner`), key not yet set.
    pub fn deepseek(model: &str) -> AdapterConfig {
        AdapterConfig::preset(Provider::DeepSeek, model, DEEPSEEK_BASE_URL)
    }

    /// OpenAI with `model`, key not yet set.
    pub fn openai(model: &str) -> AdapterConfig {
        AdapterConfig::preset(Provider::OpenAi, model, OPENAI_BASE_URL)
    }

    /// Another OpenAI-compatible server at `base_url` (for example `http://127.0.0.1:8000/v1`).
    pub fn compatible(model: &str, base_url: &str) -> AdapterConfig {
        AdapterConfig::preset(Provider::Compatible, model, base_url)
    }

    /// The configuration a `PROVIDER:MODEL` spec names (`deepseek:deepseek-chat`,
    /// `openai:gpt-4o-mini`, `compatible:llama3`), with `base_url` replacing the preset's, and
    /// the key read from the preset's variable (or `key_variable` when given). A
    /// `compatible` spec needs a base URL, and a key only when `key_variable` names one.
    pub fn from_spec(
        spec: &str,
        base_url: Option<&str>,
        key_variable: Option<&str>,
    ) -> Result<AdapterConfig, AdapterError> {
        AdapterConfig::from_spec_with(spec, base_url, key_variable, |name| {
            std::env::var(name).ok()
        })
    }

    /// As [`AdapterConfig::from_spec`], with the key's variable resolved by `lookup`.
    pub fn from_spec_with(
        spec: &str,
        base_url: Option<&str>,
        key_variable: Option<&str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<AdapterConfig, AdapterError> {
        let Some((provider, model)) = spec.split_once(':') else {
            return Err(AdapterError::Config(format!(
                "model `{spec}` is not PROVIDER:MODEL (for example deepseek:deepseek-chat)"
            )));
        };
        let provider = Provider::from_name(provider).ok_or_else(|| {
            AdapterError::Config(format!(
                "unknown provider `{provider}` (known: deepseek, openai, compatible)"
            ))
        })?;
        if model.is_empty() {
            return Err(AdapterError::Config(format!(
                "model `{spec}` names no model"
            )));
        }
        let base_url = match (base_url, provider.default_base_url()) {
            (Some(url), _) | (None, Some(url)) => url,
            (None, None) => {
                return Err(AdapterError::Config(format!(
                    "provider `{provider}` needs a base URL"
                )));
            }
        };
        let config = AdapterConfig::preset(provider, model, base_url);
        match key_variable.or(provider.default_key_variable()) {
            Some(variable) => Ok(config.api_key(ApiKey::from_lookup(variable, lookup)?)),
            None => Ok(config),
        }
    }

    /// Sets the key.
    pub fn api_key(mut self, key: ApiKey) -> AdapterConfig {
        self.api_key = Some(key);
        self
    }

    /// Replaces the base URL.
    pub fn base_url(mut self, url: &str) -> AdapterConfig {
        self.base_url = url.trim_end_matches('/').to_owned();
        self
    }

    /// Sends tools in the strict projection.
    pub fn strict_tools(mut self, strict: bool) -> AdapterConfig {
        self.strict_tools = strict;
        self
    }

    /// Streams responses (`true`, the default) or reads each whole.
    pub fn streaming(mut self, streaming: bool) -> AdapterConfig {
        self.streaming = streaming;
        self
    }

    /// Sets the sampling temperature.
    pub fn temperature(mut self, temperature: f64) -> AdapterConfig {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the completion token limit.
    pub fn max_tokens(mut self, max_tokens: u32) -> AdapterConfig {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Replaces the timeouts.
    pub fn timeouts(mut self, timeouts: Timeouts) -> AdapterConfig {
        self.timeouts = timeouts;
        self
    }

    /// Replaces the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> AdapterConfig {
        self.retry = retry;
        self
    }

    /// Replaces the bound of one response's text, reasoning and tool calls.
    pub fn max_response_bytes(mut self, bytes: usize) -> AdapterConfig {
        self.max_response_bytes = bytes;
        self
    }

    /// The most bytes one server-sent event, or a body read whole, may hold: four times
    /// [`AdapterConfig::max_response_bytes`] (JSON escaping may make text up to six times
    /// longer, but only for control characters) plus 64 KiB for the JSON around it.
    pub fn event_limit(&self) -> usize {
        self.max_response_bytes
            .saturating_mul(4)
            .saturating_add(EVENT_FRAMING_BYTES)
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    /// Whether the model runs DeepSeek's thinking mode, which needs the reasoning of a
    /// tool-call turn sent back.
    pub(crate) fn echoes_reasoning(&self) -> bool {
        self.provider == Provider::DeepSeek
    }

    /// Whether the model ignores the sampling temperature (DeepSeek's reasoner accepts the
    /// field and drops it, which the adapter refuses to hide).
    pub(crate) fn ignores_temperature(&self) -> bool {
        self.provider == Provider::DeepSeek && self.model.contains("reasoner")
    }

    /// Whether the endpoint honours strict function calling: OpenAI does, DeepSeek only on
    /// its beta endpoint, other servers are trusted with it.
    pub(crate) fn honours_strict_tools(&self) -> bool {
        match self.provider {
            Provider::DeepSeek => self.base_url.ends_with("/beta"),
            _ => true,
        }
    }
}
