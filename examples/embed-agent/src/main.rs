//! The agent loop inside someone else's program. The host here is a small help desk that
//! keeps its tickets in memory; it gives the model one tool of its own, `lookup_ticket`, asks
//! one question, and uses the answer as a value: no terminal UI, no shell, no session store.
//!
//! `DSH_MODEL=deepseek:deepseek-chat DEEPSEEK_API_KEY=… cargo run -p embed-agent` asks a real
//! model (any `PROVIDER:MODEL` of the adapter); without `DSH_MODEL` a scripted model plays
//! the same conversation, with no network and no key: `cargo run -p embed-agent`.

#![allow(clippy::print_stdout)]

use agent_loop::{Agent, ModelAdapter, TurnEndReason};
use dsh_tools::prelude::*;
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use openai_adapter::{AdapterConfig, OpenAiAdapter};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The host's own data, which the tool reads: shared with the tool, not copied into it.
#[derive(Clone)]
struct HelpDesk {
    tickets: Arc<BTreeMap<u32, &'static str>>,
}

/// The arguments the model passes; the doc comment on a field is the description it reads.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "dsh_tools::prelude::serde", deny_unknown_fields)]
struct TicketArgs {
    /// The ticket's number, as the user wrote it (`42` for "#42").
    number: u32,
}

/// The host's tool: a value holding the host's data, so the tool is written by hand (the
/// `#[tool]` macro makes tools of free functions).
struct LookupTicket(HelpDesk);

impl Tool for LookupTicket {
    type Args = TicketArgs;
    type Output = String;

    fn name(&self) -> &str {
        "lookup_ticket"
    }

    fn description(&self) -> &str {
        "Look up a help-desk ticket by its number and return its text. Use it whenever the user mentions a ticket number."
    }

    async fn execute(&self, args: TicketArgs, _exec: ExecContext) -> Result<String, ToolError> {
        let number = args.number;
        self.0
            .tickets
            .get(&number)
            .map(|text| (*text).to_owned())
            .ok_or_else(|| {
                ToolError::invalid_args(format!("/number: there is no ticket #{number}"))
            })
    }

    fn render(&self, _args: &TicketArgs, value: &String) -> Vec<ContentBlock> {
        vec![ContentBlock::text(value.clone())]
    }
}

/// The model: the one `DSH_MODEL` names, or a script that plays the same conversation.
fn model() -> anyhow::Result<Arc<dyn ModelAdapter>> {
    if let Ok(spec) = std::env::var("DSH_MODEL") {
        let config = AdapterConfig::from_spec(&spec, None, None)?;
        return Ok(Arc::new(OpenAiAdapter::new(config)?));
    }
    Ok(Arc::new(MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "call-1",
            "lookup_ticket",
            json!({"number": 42}),
        )])),
        Response::text("Ticket #42: the printer on floor 3 is out of toner.").into(),
    ])))
}

/// Asks the model one question with the host's tool, and returns its answer.
async fn ask(
    desk: HelpDesk,
    model: Arc<dyn ModelAdapter>,
    question: &str,
) -> anyhow::Result<String> {
    let registry = ToolRegistry::new();
    registry.register_tool(LookupTicket(desk))?;
    let agent = Agent::builder(registry, model)
        .system_prompt("You answer questions about help-desk tickets. Be brief.")
        .build()?;
    let outcome = agent.run(question).await;
    // Disposing ends the session and waits for whatever the turn started.
    agent.dispose().await;
    let outcome = outcome?;
    anyhow::ensure!(
        outcome.reason == TurnEndReason::Completed,
        "the turn ended early: {}",
        outcome.reason.as_str()
    );
    Ok(outcome.text)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let desk = HelpDesk {
        tickets: Arc::new(BTreeMap::from([
            (41, "VPN drops every hour."),
            (42, "The printer on floor 3 is out of toner."),
        ])),
    };
    let answer = ask(desk, model()?, "What is ticket 42 about?").await?;
    println!("{answer}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desk() -> HelpDesk {
        HelpDesk {
            tickets: Arc::new(BTreeMap::from([(7, "The coffee machine leaks.")])),
        }
    }

    /// The host's tool reads the host's data, and the model's answer comes back as a value.
    #[tokio::test]
    async fn the_answer_comes_back_after_the_hosts_tool_ran() {
        let model = MockAdapter::new([
            Step::from(Response::calls([ScriptedCall::json(
                "c1",
                "lookup_ticket",
                json!({"number": 7}),
            )])),
            Response::text("It leaks.").into(),
        ]);
        let answer = ask(desk(), Arc::new(model.clone()), "ticket 7?")
            .await
            .unwrap();
        assert_eq!(answer, "It leaks.");
        // The second request carried the tool's result, read from the host's data.
        let requests = model.requests();
        let last = format!("{:?}", requests[1].messages);
        assert!(last.contains("The coffee machine leaks."), "{last}");
    }
}
