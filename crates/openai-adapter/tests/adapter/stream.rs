//! Streams written from the providers' documented formats, and the failures they document.

use crate::support::{
    Item, KEY, Part, Reply, Server, collect, deepseek, fast_timeouts, hello, openai, text,
};
use agent_loop::{AssistantToolCall, FinishReason, Message, ModelEvent, ModelRequest, Usage};
use dsh_tools::{ContentBlock, ToolSchema};
use futures::StreamExt;
use openai_adapter::{AdapterConfig, AdapterError, OpenAiAdapter, RetryPolicy, Timeouts};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn text_only() {
    let server = Server::start(vec![Reply::events(&[
        r#"{"id":"c1","object":"chat.completion.chunk","model":"deepseek-chat","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","model":"deepseek-chat","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","model":"deepseek-chat","choices":[{"index":0,"delta":{"content":", world."},"finish_reason":null}]}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","model":"deepseek-chat","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}"#,
        "[DONE]",
    ])])
    .await;
    let events = collect(deepseek(&server, "deepseek-chat"), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text(", world."),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Some(Usage::new(12, 4)),
            }),
        ]
    );
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        (received[0].method.as_str(), received[0].path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        received[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        received[0].body,
        json!({
            "model": "deepseek-chat",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Say hello."},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn reasoning_then_text() {
    let server = Server::start(vec![Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"The user"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":" wants a greeting."},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hi!","reasoning_content":null},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":9}}"#,
        "[DONE]",
    ])])
    .await;
    let events = collect(deepseek(&server, "deepseek-reasoner"), &hello()).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ReasoningDelta("The user".into())),
            Ok(ModelEvent::ReasoningDelta(" wants a greeting.".into())),
            text("Hi!"),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Some(Usage::new(10, 9)),
            }),
        ]
    );
}

#[tokio::test]
async fn two_parallel_tool_calls_with_fragmented_arguments() {
    let server = Server::start(vec![Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\": \"ls\"}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"job_list","arguments":"{"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":80,"completion_tokens":30}}"#,
        "[DONE]",
    ])])
    .await;
    let bash = ToolSchema {
        name: "bash".into(),
        description: "Run a command.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout_ms": {"type": "integer"}},
            "required": ["command"],
        })
        .into(),
    };
    // A later step of a DeepSeek thinking-mode turn: the reasoning of the tool-call message
    // goes back; the reasoning of a plain answer does not.
    let request = ModelRequest::new(
        "Use the tools.",
        vec![
            Message::user("What is here?"),
            Message::Assistant {
                text: "Let me look.".into(),
                reasoning: Some("I should list the files.".into()),
                tool_calls: vec![AssistantToolCall {
                    call_id: "call_0".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"pwd\"}".into(),
                }],
            },
            Message::Tool {
                call_id: "call_0".into(),
                content: vec![ContentBlock::text("/tmp"), ContentBlock::text("exit 0")],
                is_error: false,
            },
            Message::Assistant {
                text: "You are in /tmp.".into(),
                reasoning: Some("Done.".into()),
                tool_calls: vec![],
            },
            Message::user("And the jobs?"),
        ],
        vec![bash],
    );
    let events = collect(deepseek(&server, "deepseek-reasoner"), &request).await;
    let start = |index, id: &str, name: &str| {
        Ok(ModelEvent::ToolCallStart {
            index,
            id: id.into(),
            name: name.into(),
        })
    };
    let arguments = |index, fragment: &str| {
        Ok(ModelEvent::ToolCallArguments {
            index,
            fragment: fragment.into(),
        })
    };
    assert_eq!(
        events,
        vec![
            start(0, "call_a", "bash"),
            start(1, "call_b", "job_list"),
            // A call's arguments go out whole at the end, redacted in their decoded form.
            arguments(0, "{\"command\": \"ls\"}"),
            arguments(1, "{}"),
            Ok(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: Some(Usage::new(80, 30)),
            }),
        ]
    );
    assert_eq!(
        server.received()[0].body,
        json!({
            "model": "deepseek-reasoner",
            "messages": [
                {"role": "system", "content": "Use the tools."},
                {"role": "user", "content": "What is here?"},
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "reasoning_content": "I should list the files.",
                    "tool_calls": [{
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{\"command\":\"pwd\"}"},
                    }],
                },
                {"role": "tool", "tool_call_id": "call_0", "content": "/tmp\nexit 0"},
                {"role": "assistant", "content": "You are in /tmp."},
                {"role": "user", "content": "And the jobs?"},
            ],
            "tools": [{
                "type": "function",
                "function": {
                    "name": "bash",
                    "description": "Run a command.",
                    "parameters": {
                        "type": "object",
                        "properties": {"command": {"type": "string"}, "timeout_ms": {"type": "integer"}},
                        "required": ["command"],
                    },
                },
            }],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn strict_tools_are_sent_in_the_strict_projection_and_others_as_declared() {
    let server = Server::start(vec![Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ])])
    .await;
    let tool = ToolSchema {
        name: "bash".into(),
        description: "Run a command.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout_ms": {"type": "integer"}},
            "required": ["command"],
        })
        .into(),
    };
    // An MCP-style schema outside the subset has no strict projection: sent as declared,
    // marked non-strict, beside the strict tool.
    let fetch_parameters = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"url": {"type": "string", "format": "uri"}, "max": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}},
        "required": ["url"],
    });
    let fetch = ToolSchema {
        name: "fetch".into(),
        description: "Fetch a page.".into(),
        parameters: fetch_parameters.clone().into(),
    };
    let request = ModelRequest::new("", vec![Message::user("go")], vec![tool, fetch]);
    let events = collect(openai(&server).strict_tools(true), &request).await;
    assert_eq!(
        events,
        vec![
            text("ok"),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None
            })
        ]
    );
    assert_eq!(
        server.received()[0].body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a command.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string"},
                        "timeout_ms": {"type": ["integer", "null"]},
                    },
                    "required": ["command", "timeout_ms"],
                    "additionalProperties": false,
                },
                "strict": true,
            },
        }, {
            "type": "function",
            "function": {
                "name": "fetch",
                "description": "Fetch a page.",
                "parameters": fetch_parameters,
                "strict": false,
            },
        }])
    );
}

#[tokio::test]
async fn settings_the_provider_would_not_honour_are_errors_before_any_request() {
    let server = Server::start(vec![]).await;
    let tool = ToolSchema {
        name: "bash".into(),
        description: "Run a command.".into(),
        parameters: json!({"type": "object", "properties": {}}).into(),
    };
    let request = ModelRequest::new("", vec![Message::user("go")], vec![tool]);
    let events = collect(
        deepseek(&server, "deepseek-reasoner").temperature(0.2),
        &request,
    )
    .await;
    assert_eq!(
        events,
        vec![Err(AdapterError::Unsupported {
            provider: "deepseek".into(),
            what: "model deepseek-reasoner ignores the temperature".into(),
        })]
    );
    let events = collect(
        deepseek(&server, "deepseek-chat").strict_tools(true),
        &request,
    )
    .await;
    assert_eq!(
        events,
        vec![Err(AdapterError::Unsupported {
            provider: "deepseek".into(),
            what: format!(
                "strict tools need DeepSeek's beta endpoint (https://api.deepseek.com/beta), not {}",
                server.base_url()
            ),
        })]
    );
    assert_eq!(server.received().len(), 0);
}

#[tokio::test]
async fn usage_only_trailing_chunk() {
    let server = Server::start(vec![Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}"#,
        "[DONE]",
    ])])
    .await;
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Done."),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Length,
                usage: Some(Usage::new(7, 2)),
            }),
        ]
    );
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out_then_retried() {
    let server = Server::start(vec![
        Reply::error(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#,
        )
        .header("Retry-After", "1"),
        Reply::events(&[
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]),
    ])
    .await;
    let started = Instant::now();
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Hi"),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None
            }),
        ]
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured: {:?}",
        started.elapsed()
    );
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn a_500_with_a_json_error_body_is_retried_then_reported_with_the_providers_message() {
    let body = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null}}"#;
    let server = Server::start(vec![Reply::error(500, body); 3]).await;
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![Err(AdapterError::Http {
            provider: "openai".into(),
            status: 500,
            message: "The server had an error while processing your request. (server_error)".into(),
            attempts: 3,
        })]
    );
    assert_eq!(server.received().len(), 3);
    assert_eq!(
        events[0].as_ref().unwrap_err().to_string(),
        "HTTP 500 from openai: The server had an error while processing your request. \
         (server_error) (after 3 attempts)"
    );
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let server = Server::start(vec![Reply::error(
        401,
        r#"{"error":{"message":"Authentication Fails, Your api key is invalid","type":"authentication_error"}}"#,
    )])
    .await;
    let events = collect(deepseek(&server, "deepseek-chat"), &hello()).await;
    assert_eq!(
        events,
        vec![Err(AdapterError::Http {
            provider: "deepseek".into(),
            status: 401,
            message: "Authentication Fails, Your api key is invalid (authentication_error)".into(),
            attempts: 1,
        })]
    );
}

#[tokio::test]
async fn an_error_after_partial_output_ends_the_stream_and_is_not_retried() {
    let server = Server::start(vec![
        Reply::events(&[
            r#"{"choices":[{"index":0,"delta":{"content":"Part"},"finish_reason":null}]}"#,
            r#"{"error":{"message":"The engine is currently overloaded","type":"server_error"}}"#,
        ]),
        Reply::events(&["[DONE]"]),
    ])
    .await;
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Part"),
            Err(AdapterError::Provider {
                provider: "openai".into(),
                message: "The engine is currently overloaded (server_error)".into(),
            }),
        ]
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_silent_stream_hits_the_idle_timeout() {
    let server = Server::start(vec![Reply::stream(vec![
        Part::Text(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Thinking\"}}]}\n\n".into(),
        ),
        // A keep-alive comment resets the idle timer without producing an event.
        Part::Text(": keep-alive\n\n".into()),
        Part::Hang,
    ])])
    .await;
    let idle = Duration::from_millis(300);
    let config = openai(&server).timeouts(Timeouts::new(
        Duration::from_secs(5),
        Duration::from_secs(5),
        idle,
    ));
    let events = collect(config, &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Thinking"),
            Err(AdapterError::IdleTimeout {
                provider: "openai".into(),
                timeout: idle,
            }),
        ]
    );
}

#[tokio::test]
async fn a_stream_that_ends_without_its_marker_is_truncated() {
    let server = Server::start(vec![
        Reply::events(&[
            r#"{"choices":[{"index":0,"delta":{"content":"Half a"},"finish_reason":null}]}"#,
        ]),
        Reply::events(&[
            r#"{"choices":[{"index":0,"delta":{"content":"No reason"},"finish_reason":null}]}"#,
            "[DONE]",
        ]),
    ])
    .await;
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Half a"),
            Err(AdapterError::Truncated(
                "the body ended before the [DONE] marker".into()
            )),
        ]
    );
    assert_eq!(
        events[1].as_ref().unwrap_err().to_string(),
        "stream truncated: the body ended before the [DONE] marker"
    );
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("No reason"),
            Err(AdapterError::Truncated(
                "the end marker came without a finish reason".into()
            )),
        ]
    );
}

#[tokio::test]
async fn an_invalid_json_line_is_named_by_its_number() {
    let server = Server::start(vec![Reply::stream(vec![
        Part::Text(": OPENROUTER PROCESSING\n\n".into()),
        Part::Text("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n".into()),
        Part::Text("data: {\"choices\":[{\"index\":0,\"delta\":\n\n".into()),
        Part::Text("data: [DONE]\n\n".into()),
    ])])
    .await;
    let events = collect(openai(&server), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("ok"),
            Err(AdapterError::MalformedChunk {
                line: 2,
                detail: "EOF while parsing a value at line 1 column 31".into(),
                text: "{\"choices\":[{\"index\":0,\"delta\":".into(),
            }),
        ]
    );
}

#[tokio::test]
async fn cancellation_mid_stream_ends_the_stream_and_closes_the_connection() {
    let mut server = Server::start(vec![Reply::stream(vec![
        Part::Text(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Working\"}}]}\n\n".into(),
        ),
        Part::Hang,
    ])])
    .await;
    let adapter = OpenAiAdapter::new(openai(&server)).unwrap();
    let signal = CancellationToken::new();
    let mut events = adapter.events(&hello(), signal.clone());
    assert_eq!(events.next().await, Some(text("Working")));
    signal.cancel();
    let rest: Vec<Item> = tokio::time::timeout(Duration::from_secs(5), events.collect())
        .await
        .expect("the stream did not end after cancellation");
    assert_eq!(rest, vec![Err(AdapterError::Cancelled)]);
    tokio::time::timeout(Duration::from_secs(5), server.client_closed())
        .await
        .expect("the connection stayed open after cancellation");
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let config = AdapterConfig::compatible("m", &format!("http://{addr}/v1"))
        .timeouts(fast_timeouts())
        .retry(RetryPolicy::new(
            2,
            Duration::from_millis(1),
            Duration::from_secs(1),
        ));
    let events = collect(config, &hello()).await;
    match events.as_slice() {
        [
            Err(AdapterError::Connect {
                provider, attempts, ..
            }),
        ] => assert_eq!((provider.as_str(), *attempts), ("compatible", 3)),
        other => panic!("expected one connection error, got {other:?}"),
    }
}

#[tokio::test]
async fn without_streaming_a_whole_completion_yields_the_same_events() {
    let server = Server::start(vec![Reply {
        status: 200,
        headers: vec![("Content-Type".into(), "application/json".into())],
        parts: vec![Part::Text(
            r#"{"id":"c9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Looking.","tool_calls":[{"type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":6}}"#.into(),
        )],
    }])
    .await;
    let events = collect(openai(&server).streaming(false), &hello()).await;
    assert_eq!(
        events,
        vec![
            text("Looking."),
            Ok(ModelEvent::ToolCallStart {
                index: 0,
                id: "call_0".into(),
                name: "bash".into(),
            }),
            Ok(ModelEvent::ToolCallArguments {
                index: 0,
                fragment: "{\"command\":\"ls\"}".into(),
            }),
            Ok(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: Some(Usage::new(20, 6)),
            }),
        ]
    );
    assert_eq!(server.received()[0].body["stream"], json!(false));
    assert_eq!(server.received()[0].body.get("stream_options"), None);
}
