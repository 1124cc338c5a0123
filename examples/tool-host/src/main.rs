//! A host's own tool, served to an editor or an MCP client. The host here has one tool,
//! `word_count`, in a registry of its own; `tool-host acp` serves it over the Agent Client
//! Protocol on stdio through `agent-acp`, so an editor (Zed, or any ACP client) can prompt a
//! model that calls it, asking the person in the editor before each call; `tool-host mcp`
//! serves the same registry over MCP on stdio through `tool-mcp`, so any MCP client (another
//! agent, an IDE) can list and call the tool itself.
//!
//! ```text
//! cargo run -p tool-host -- acp                      # a scripted model, no network
//! DSH_MODEL=deepseek:deepseek-chat DEEPSEEK_API_KEY=… cargo run -p tool-host -- acp
//! cargo run -p tool-host -- acp --script turns.json  # a script of `dsh-agent run --script`
//! cargo run -p tool-host -- mcp                      # the tool to an MCP client
//! ```
//!
//! `--sessions DIR` keeps the sessions there (default: `tool-host-sessions` in the system's
//! temporary directory), so `session/load` can continue them.

use agent_acp::{AcpAgent, OpenError, SessionSetup, SessionTools};
use agent_loop::{FsSessionStore, ModelAdapter};
use anyhow::{Context, bail};
use dsh_tools::prelude::*;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use openai_adapter::{AdapterConfig, OpenAiAdapter};
use std::path::PathBuf;
use std::sync::Arc;
use tool_mcp::{ServeOptions, serve_stdio};

/// Count the words of a text (runs of characters between whitespace).
#[tool]
async fn word_count(
    /// The text whose words are counted.
    text: String,
) -> String {
    format!("{} words", text.split_whitespace().count())
}

/// The host's registry: the same tools whichever protocol serves them.
fn registry() -> Result<ToolRegistry, RegistrationError> {
    let registry = ToolRegistry::new();
    registry.register_tool(WordCount)?;
    Ok(registry)
}

/// The tools of one ACP session: a registry of its own, since the agent installs the
/// session's approvals on it.
async fn session_tools(_setup: SessionSetup) -> Result<SessionTools, OpenError> {
    let registry = registry().map_err(|e| OpenError::Internal(e.to_string()))?;
    Ok(SessionTools::new(registry))
}

/// What the command line asked for.
struct Options {
    mode: String,
    script: Option<PathBuf>,
    sessions: PathBuf,
}

fn options() -> anyhow::Result<Options> {
    let mut args = std::env::args().skip(1);
    let mode = args
        .next()
        .context("usage: tool-host acp|mcp [--script FILE] [--sessions DIR]")?;
    let mut options = Options {
        mode,
        script: None,
        sessions: std::env::temp_dir().join("tool-host-sessions"),
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--script" => options.script = Some(PathBuf::from(value)),
            "--sessions" => options.sessions = PathBuf::from(value),
            other => bail!("unknown option {other}"),
        }
    }
    Ok(options)
}

/// The model: the script given, else the one `DSH_MODEL` names, else a script that counts the
/// words of a sentence once.
fn model(script: Option<&PathBuf>) -> anyhow::Result<Arc<dyn ModelAdapter>> {
    if let Some(path) = script {
        let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
        return Ok(Arc::new(MockAdapter::from_json(&text)?));
    }
    if let Ok(spec) = std::env::var("DSH_MODEL") {
        let config = AdapterConfig::from_spec(&spec, None, None)?;
        return Ok(Arc::new(OpenAiAdapter::new(config)?));
    }
    Ok(Arc::new(MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "call-1",
            "word_count",
            json!({"text": "the quick brown fox"}),
        )])),
        Response::text("That sentence has 4 words.").into(),
    ])))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let options = options()?;
    match options.mode.as_str() {
        "acp" => {
            let store = FsSessionStore::new(&options.sessions);
            AcpAgent::new(
                model(options.script.as_ref())?,
                Arc::new(store),
                session_tools,
            )
            .agent_info("tool-host", env!("CARGO_PKG_VERSION"))
            .ask_before("word_count", "word_count reads the text you give it")
            .serve_stdio()
            .await;
            Ok(())
        }
        "mcp" => {
            let options = ServeOptions::new("tool-host", env!("CARGO_PKG_VERSION"));
            serve_stdio(registry()?, options).await?;
            Ok(())
        }
        other => {
            bail!("unknown mode {other}: usage: tool-host acp|mcp [--script FILE] [--sessions DIR]")
        }
    }
}
