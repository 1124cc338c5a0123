//! From the loop's request to a Chat Completions request body.

use crate::config::{AdapterConfig, DEEPSEEK_BASE_URL};
use crate::error::AdapterError;
use crate::wire::{
    ChatRequest, StreamOptions, WireFunction, WireFunctionCall, WireMessage, WireTool, WireToolCall,
};
use agent_loop::{Message, ModelRequest};
use dsh_tools::{ToolSchema, ValueSchema, content_text};

/// Builds the body of one streamed request. A request the provider would not honour as asked
/// (a temperature the model ignores, strict tools where strict mode is not offered, a message
/// kind this adapter does not know) is an error rather than a silently different request.
pub(crate) fn chat_request(
    config: &AdapterConfig,
    request: &ModelRequest,
) -> Result<ChatRequest, AdapterError> {
    let unsupported = |what: String| AdapterError::Unsupported {
        provider: config.provider.to_string(),
        what,
    };
    if config.temperature.is_some() && config.ignores_temperature() {
        return Err(unsupported(format!(
            "model {} ignores the temperature",
            config.model
        )));
    }
    if config.strict_tools && !request.tools.is_empty() && !config.honours_strict_tools() {
        return Err(unsupported(format!(
            "strict tools need DeepSeek's beta endpoint ({DEEPSEEK_BASE_URL}/beta), not {}",
            config.base_url
        )));
    }
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::System {
            content: request.system.clone(),
        });
    }
    for message in &request.messages {
        messages.push(wire_message(config, message).ok_or_else(|| {
            unsupported(format!("a history message of an unknown kind: {message:?}"))
        })?);
    }
    let tools = request
        .tools
        .iter()
        .map(|tool| wire_tool(config, tool))
        .collect();
    Ok(ChatRequest {
        model: config.model.clone(),
        messages,
        tools,
        stream: config.streaming,
        // Only a streamed request may carry stream options.
        stream_options: config.streaming.then_some(StreamOptions {
            include_usage: true,
        }),
        temperature: config.temperature,
        max_tokens: config.max_tokens,
    })
}

/// One history message on the wire; `None` for a kind this adapter does not know.
fn wire_message(config: &AdapterConfig, message: &Message) -> Option<WireMessage> {
    Some(match message {
        Message::User { content, .. } => WireMessage::User {
            content: content.clone(),
        },
        Message::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => {
            // DeepSeek's thinking mode rejects a tool-call turn sent back without its
            // reasoning; elsewhere reasoning is the model's own and is not sent back.
            let reasoning_content = if config.echoes_reasoning() && !tool_calls.is_empty() {
                reasoning.clone()
            } else {
                None
            };
            WireMessage::Assistant {
                content: (!text.is_empty() || tool_calls.is_empty()).then(|| text.clone()),
                reasoning_content,
                tool_calls: tool_calls
                    .iter()
                    .map(|call| WireToolCall {
                        id: call.call_id.clone(),
                        kind: "function",
                        function: WireFunctionCall {
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        },
                    })
                    .collect(),
            }
        }
        Message::Tool {
            call_id, content, ..
        } => WireMessage::Tool {
            tool_call_id: call_id.clone(),
            content: content_text(content),
        },
        _ => return None,
    })
}

/// One tool declaration, in the strict projection when configured.
fn wire_tool(config: &AdapterConfig, tool: &ToolSchema) -> WireTool {
    // Strict function calling accepts only a fragment of JSON Schema: a raw schema outside the
    // subset (an MCP server's `$ref`s, `anyOf`, formats) has no strict projection, so it is sent
    // as declared with `"strict": false`, while the other tools of the request stay strict.
    let strict_schema = config
        .strict_tools
        .then(|| ValueSchema::parameters_from_exact_json(&tool.parameters).ok())
        .flatten();
    let (parameters, strict) = match strict_schema {
        Some(schema) => (schema.to_strict_json(), Some(true)),
        None if config.strict_tools => (tool.parameters.clone(), Some(false)),
        None => (tool.parameters.clone(), None),
    };
    WireTool {
        kind: "function",
        function: WireFunction {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters,
            strict,
        },
    }
}
