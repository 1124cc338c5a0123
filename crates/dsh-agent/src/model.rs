//! The model of a session: a provider (`--model`, `DSH_MODEL`), a script (`--script`) or the
//! embedded demo; the system prompt; and, for `chat`, an adapter that echoes the streamed text.

use crate::cli::RunOptions;
use crate::render::Style;
use crate::{DEMO, Failure, MODEL_VARIABLE, output, render};
use agent_loop::ModelAdapter;
use dsh_tools::ToolRegistry;
use mock_adapter::MockAdapter;
use openai_adapter::{AdapterConfig, OpenAiAdapter};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub(crate) fn load_script(options: &RunOptions) -> Result<MockAdapter, Failure> {
    let text = match options.script.as_deref() {
        None => DEMO.to_owned(),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Failure::new(2, format!("cannot read the script from stdin: {e}")))?;
            text
        }
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Failure::new(2, format!("cannot read the script {path}: {e}")))?,
    };
    let source = options.script.as_deref().unwrap_or("the demo script");
    MockAdapter::from_json(&text).map_err(|e| Failure::new(2, format!("{source}: {e}")))
}

/// The model a run talks to.
pub(crate) enum Model {
    /// A script (the demo without `--script`), checked for steps left over at the end.
    Scripted(MockAdapter),
    /// A provider through the OpenAI-compatible adapter.
    Remote(OpenAiAdapter),
}

impl Model {
    pub(crate) fn adapter(&self) -> Arc<dyn ModelAdapter> {
        match self {
            Model::Scripted(script) => Arc::new(script.clone()),
            Model::Remote(adapter) => Arc::new(adapter.clone()),
        }
    }
}

/// How to set a model, for the lines that say none is configured.
pub(crate) const SET_A_MODEL: &str =
    "set one with --model PROVIDER:MODEL or DSH_MODEL=PROVIDER:MODEL";

/// `--model`, else `DSH_MODEL` unless a script was asked for.
fn model_spec(options: &RunOptions) -> Option<String> {
    let from_env = std::env::var(MODEL_VARIABLE)
        .ok()
        .filter(|spec| !spec.trim().is_empty() && options.script.is_none());
    options.model.clone().or(from_env)
}

/// Whether the embedded demo plays: no model and no script.
pub(crate) fn plays_demo(options: &RunOptions) -> bool {
    options.script.is_none() && model_spec(options).is_none()
}

/// `--model`, else `DSH_MODEL` unless a script was asked for; a model's endpoint options
/// without a model are a mistake worth saying.
pub(crate) fn select_model(options: &RunOptions) -> Result<Model, Failure> {
    let Some(spec) = model_spec(options) else {
        for (given, flag) in [
            (options.base_url.is_some(), "--base-url"),
            (options.api_key_env.is_some(), "--api-key-env"),
            (options.no_stream, "--no-stream"),
        ] {
            if given {
                return Err(Failure::new(
                    2,
                    format!("{flag} needs a model (--model PROVIDER:MODEL or {MODEL_VARIABLE})"),
                ));
            }
        }
        return load_script(options).map(Model::Scripted);
    };
    let config = AdapterConfig::from_spec_with(
        spec.trim(),
        options.base_url.as_deref(),
        options.api_key_env.as_deref(),
        crate::secrets::var,
    )
    .map_err(|e| Failure::new(2, e.to_string()))?
    .streaming(!options.no_stream);
    OpenAiAdapter::new(config)
        .map(Model::Remote)
        .map_err(|e| Failure::new(1, e.to_string()))
}

/// The system prompt of a model run: `--system FILE`, or one that names the tools, the working
/// directory and the operating system. A script ignores it.
pub(crate) fn system_prompt(
    options: &RunOptions,
    registry: &ToolRegistry,
    cwd: &Path,
) -> Result<String, Failure> {
    if let Some(path) = &options.system {
        return std::fs::read_to_string(path)
            .map_err(|e| Failure::new(2, format!("cannot read the system prompt {path}: {e}")));
    }
    Ok(agent_loop::default_system_prompt(
        "dsh-agent",
        registry,
        cwd,
    ))
}

/// A model adapter that also writes text and reasoning to stdout as they stream, for `chat`,
/// where the assistant's message is then not printed again.
pub(crate) struct Echo {
    pub(crate) inner: Arc<dyn ModelAdapter>,
    pub(crate) style: Style,
}

impl ModelAdapter for Echo {
    fn stream(
        &self,
        request: agent_loop::ModelRequest,
        signal: CancellationToken,
    ) -> agent_loop::ModelStream {
        use futures::StreamExt;
        let style = self.style;
        // What was last written: the label goes out once per run of the same kind.
        let mut last: Option<bool> = None;
        Box::pin(self.inner.stream(request, signal).map(move |item| {
            let (reasoning, delta) = match &item {
                Ok(agent_loop::ModelEvent::ReasoningDelta(d)) => (true, d.as_str()),
                Ok(agent_loop::ModelEvent::TextDelta(d)) => (false, d.as_str()),
                Ok(agent_loop::ModelEvent::Finish { .. }) | Err(_) if last.is_some() => {
                    last = None;
                    let _ = output::text("\n");
                    return item;
                }
                _ => return item,
            };
            if last != Some(reasoning) {
                let label = if reasoning {
                    render::thinking_label(style)
                } else {
                    render::agent_label(style)
                };
                let gap = if last.is_some() { "\n" } else { "" };
                let _ = output::text(&format!("{gap}{label} "));
                last = Some(reasoning);
            }
            let _ = output::text(&presenters::escape_controls(delta));
            item
        }))
    }
}
