//! A hostile server: `Retry-After` values of every size and form, responses past each of
//! their limits, keep-alives past the total timeout, pages and bodies that are no answer,
//! calls without ids, odd usage counts. None may panic, hang or exhaust memory.

use crate::support::{Item, Part, Reply, Server, collect, fast_timeouts, hello, openai, text};
use agent_loop::{FinishReason, ModelEvent, Usage};
use openai_adapter::{AdapterError, ResponseLimit};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};

fn rate_limited() -> Reply {
    Reply::error(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#,
    )
}

fn hi() -> Reply {
    Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ])
}

#[tokio::test]
async fn a_retry_after_of_any_size_or_form_is_an_answer_never_a_panic() {
    // Longer than `max_delay` (5 s here), however much longer: no retry, the 429 is the answer.
    for (name, value) in [
        ("Retry-After", "1e300"),
        ("retry-after-ms", "1e300"),
        ("Retry-After", "inf"),
        ("Retry-After", "18446744073709551616"),
        ("retry-after-ms", "1e30"),
        ("Retry-After", "6"),
    ] {
        let server = Server::start(vec![rate_limited().header(name, value), hi()]).await;
        let events = collect(openai(&server), &hello()).await;
        assert_eq!(
            events,
            vec![Err(AdapterError::Http {
                provider: "openai".into(),
                status: 429,
                message: "Rate limit reached (rate_limit_error)".into(),
                attempts: 1,
            })],
            "{name}: {value}"
        );
    }
    // Negative, not a number, or a date: ignored, and the backoff decides.
    for (name, value) in [
        ("Retry-After", "-1"),
        ("retry-after-ms", "-1e300"),
        ("Retry-After", "NaN"),
        ("Retry-After", "soon"),
        ("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ("retry-after-ms", ""),
    ] {
        let server = Server::start(vec![rate_limited().header(name, value), hi()]).await;
        let events = collect(openai(&server), &hello()).await;
        assert_eq!(
            events,
            vec![
                text("Hi"),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: None
                }),
            ],
            "{name}: {value}"
        );
        assert_eq!(server.received().len(), 2, "{name}: {value}");
    }
}

#[tokio::test]
async fn a_tool_call_without_an_id_gets_one_unique_within_the_response() {
    let server = Server::start(vec![Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","type":"function","function":{"name":"bash","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"job_list","arguments":"{}"}}]}}]}"#,
        // The server's own id, taken by the first call's assigned one.
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_0","function":{"name":"job_list","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"call_x","function":{"name":"bash","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":4,"id":"call_x","function":{"name":"bash","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ])])
    .await;
    let events = collect(openai(&server), &hello()).await;
    let starts: Vec<(usize, String)> = events
        .iter()
        .filter_map(|event| match event {
            Ok(ModelEvent::ToolCallStart { index, id, .. }) => Some((*index, id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        vec![
            (0, "call_0".to_owned()),
            (1, "call_1".to_owned()),
            (2, "call_2".to_owned()),
            (3, "call_x".to_owned()),
            (4, "call_4".to_owned()),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&Ok(ModelEvent::Finish {
            reason: FinishReason::ToolCalls,
            usage: None
        }))
    );
}

/// The `Finish` of a recorded response whose usage chunks are `usages`.
async fn finish_with_usage(usages: &[&str]) -> Result<Vec<ModelEvent>, AdapterError> {
    let mut recording = String::from(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
    );
    for usage in usages {
        recording.push_str(&format!("data: {{\"choices\":[],\"usage\":{usage}}}\n\n"));
    }
    recording.push_str("data: [DONE]\n\n");
    openai_adapter::decode_recording(recording).await
}

#[tokio::test]
async fn odd_usage_counts_are_unknown_and_the_answer_stands() {
    let answer = |usage| {
        Ok(vec![
            ModelEvent::TextDelta("ok".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage,
            },
        ])
    };
    for usage in [
        r#"{"prompt_tokens":null,"completion_tokens":3}"#,
        r#"{"prompt_tokens":12.5,"completion_tokens":3}"#,
        r#"{"prompt_tokens":-1,"completion_tokens":3}"#,
        r#"{"prompt_tokens":"12","completion_tokens":3}"#,
        r#"{"prompt_tokens":18446744073709551616,"completion_tokens":3}"#,
        r#"{"prompt_tokens":1e30,"completion_tokens":3}"#,
        r#"{"completion_tokens":3}"#,
        r#""unknown""#,
        "[1,2]",
    ] {
        assert_eq!(finish_with_usage(&[usage]).await, answer(None), "{usage}");
    }
    assert_eq!(
        finish_with_usage(&[
            r#"{"prompt_tokens":18446744073709551615,"completion_tokens":0,"total_tokens":"many"}"#
        ])
        .await,
        answer(Some(Usage::new(u64::MAX, 0)))
    );
    // A later chunk's odd count does not undo an earlier valid one.
    assert_eq!(
        finish_with_usage(&[
            r#"{"prompt_tokens":5,"completion_tokens":null}"#,
            r#"{"prompt_tokens":null,"completion_tokens":2}"#,
        ])
        .await,
        answer(Some(Usage::new(5, 2)))
    );
}

/// The elements of the `usage` array in [`a_huge_usage_array_is_skipped_as_it_is_read`]:
/// 16 MiB of `0,`, as large as one event may be by default.
const HUGE_USAGE_ELEMENTS: usize = 8 * 1024 * 1024;

#[tokio::test]
async fn a_huge_usage_array_is_skipped_as_it_is_read() {
    let zeros = "0,".repeat(HUGE_USAGE_ELEMENTS);
    let usage = format!("[{}0]", zeros);
    drop(zeros);
    let events = finish_with_usage(&[&usage]).await;
    drop(usage);
    assert_eq!(
        events,
        Ok(vec![
            ModelEvent::TextDelta("ok".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None,
            },
        ])
    );
    dsh_test_support::report_peak_rss();
}

#[test]
fn reading_a_huge_usage_array_costs_no_more_memory_than_its_text() {
    // The event's text is held a few times over (the recording, the event, its line); a
    // value tree of its 8 Mi elements would take 256 MiB more.
    let peak =
        dsh_test_support::peak_rss_of_test("hostile::a_huge_usage_array_is_skipped_as_it_is_read");
    assert!(peak < 160 << 20, "peak resident memory {} MiB", peak >> 20);
}

#[tokio::test]
async fn a_response_past_its_byte_limit_ends_with_an_error_naming_the_limit() {
    // No letter of the key (whatever its case): no delta is held back by the redaction.
    let piece = "a".repeat(100);
    let delta =
        |field: &str| json!({"choices": [{"index": 0, "delta": {field: piece}}]}).to_string();
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash", "arguments": piece}}]}}]}).to_string();
    let (reasoning, content) = (delta("reasoning_content"), delta("content"));
    // 100 bytes of reasoning, 200 of text, 106 of a call (its id, name and arguments): 406
    // bytes, and the next 100 pass the limit of 450.
    let server = Server::start(vec![Reply::events(&[
        &reasoning, &content, &content, &call, &content, &content, "[DONE]",
    ])])
    .await;
    let events = collect(openai(&server).max_response_bytes(450), &hello()).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ReasoningDelta(piece.clone())),
            text(&piece),
            text(&piece),
            Ok(ModelEvent::ToolCallStart {
                index: 0,
                id: "c1".into(),
                name: "bash".into()
            }),
            Ok(ModelEvent::ToolCallArguments {
                index: 0,
                fragment: piece.clone()
            }),
            Err(AdapterError::ResponseTooLarge {
                provider: "openai".into(),
                what: ResponseLimit::Content,
                limit: 450,
            }),
        ]
    );
    assert_eq!(
        events[5].as_ref().unwrap_err().to_string(),
        "the response from openai passed its limit of 450 bytes of text, reasoning and tool \
         calls (max_response_bytes); the rest was not read"
    );
    // Far more than the limit, streamed: the stream ends at the limit.
    let chunk = format!("data: {content}\n\n");
    let server = Server::start(vec![Reply::stream(vec![Part::Repeat(chunk, 100_000)])]).await;
    let events = collect(openai(&server).max_response_bytes(1000), &hello()).await;
    let mut expected: Vec<Item> = vec![text(&piece); 10];
    expected.push(Err(AdapterError::ResponseTooLarge {
        provider: "openai".into(),
        what: ResponseLimit::Content,
        limit: 1000,
    }));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn an_event_or_a_body_past_its_limit_ends_the_response_without_reading_it_all() {
    let config = |server: &Server| openai(server).max_response_bytes(1000);
    let limit = config(&Server::start(vec![]).await).event_limit();
    assert_eq!(limit, 4 * 1000 + 64 * 1024);
    let too_large = |what| {
        vec![Err(AdapterError::ResponseTooLarge {
            provider: "openai".into(),
            what,
            limit,
        })]
    };
    // A data line, a comment and a field that never end, each far past the limit.
    for start in ["data: ", ": ", "retry: "] {
        let server = Server::start(vec![Reply::stream(vec![
            Part::Text(start.into()),
            Part::Repeat("y".repeat(1000), 1000),
        ])])
        .await;
        assert_eq!(
            collect(config(&server), &hello()).await,
            too_large(ResponseLimit::Event),
            "{start}"
        );
    }
    // Many data lines of one event, each short.
    let server = Server::start(vec![Reply::stream(vec![Part::Repeat(
        "data: yyyyyyyyyy\n".into(),
        100_000,
    )])])
    .await;
    assert_eq!(
        collect(config(&server), &hello()).await,
        too_large(ResponseLimit::Event)
    );
    // A whole completion.
    let body = format!(
        r#"{{"choices":[{{"index":0,"message":{{"content":"{}"}},"finish_reason":"stop"}}]}}"#,
        "y".repeat(200_000)
    );
    let server = Server::start(vec![Reply::error(200, &body)]).await;
    assert_eq!(
        collect(config(&server).streaming(false), &hello()).await,
        too_large(ResponseLimit::Body)
    );
}

#[tokio::test]
async fn a_response_may_carry_at_most_the_tool_call_limit() {
    let calls: Vec<String> = (0..=openai_adapter::MAX_TOOL_CALLS)
        .map(|n| {
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("c{n}"), "function": {"name": "job_list"}}]}}]}).to_string()
        })
        .collect();
    let payloads: Vec<&str> = calls.iter().map(String::as_str).collect();
    let server = Server::start(vec![Reply::events(&payloads)]).await;
    let events = collect(openai(&server), &hello()).await;
    let mut expected: Vec<Item> = (0..openai_adapter::MAX_TOOL_CALLS)
        .map(|n| {
            Ok(ModelEvent::ToolCallStart {
                index: n,
                id: format!("c{n}"),
                name: "job_list".into(),
            })
        })
        .collect();
    expected.push(Err(AdapterError::ResponseTooLarge {
        provider: "openai".into(),
        what: ResponseLimit::ToolCalls,
        limit: openai_adapter::MAX_TOOL_CALLS,
    }));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn keep_alives_do_not_hold_a_response_past_its_total_timeout() {
    let mut server = Server::start(vec![Reply::stream(vec![
        Part::Text(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Thinking\"}}]}\n\n".into(),
        ),
        Part::Every(": ping\n\n".into(), Duration::from_millis(50)),
    ])])
    .await;
    let total = Duration::from_millis(800);
    let config = openai(&server).timeouts(fast_timeouts().total(total));
    let started = Instant::now();
    let events = collect(config, &hello()).await;
    let took = started.elapsed();
    assert_eq!(
        events,
        vec![
            text("Thinking"),
            Err(AdapterError::TotalTimeout {
                provider: "openai".into(),
                timeout: total,
            }),
        ]
    );
    assert!(total <= took && took < Duration::from_secs(3), "{took:?}");
    tokio::time::timeout(Duration::from_secs(5), server.client_closed())
        .await
        .expect("the connection stayed open after the total timeout");
    // A retry whose wait would pass the total timeout is not waited for: the answer stands.
    let server = Server::start(vec![rate_limited().header("Retry-After", "2"), hi()]).await;
    let config = openai(&server).timeouts(fast_timeouts().total(Duration::from_secs(1)));
    let started = Instant::now();
    assert_eq!(
        collect(config, &hello()).await,
        vec![Err(AdapterError::Http {
            provider: "openai".into(),
            status: 429,
            message: "Rate limit reached (rate_limit_error)".into(),
            attempts: 1,
        })]
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn a_body_that_is_not_what_was_asked_for_is_named_by_its_status_type_and_start() {
    let page = "<!DOCTYPE html>\n<html>\n  <head><title>Sign in</title></head>\n  <body>Please sign in.</body>\n</html>\n";
    let with_type = |status, content_type: Option<&str>, body: &str| Reply {
        status,
        headers: content_type
            .map(|t| vec![("Content-Type".into(), t.into())])
            .unwrap_or_default(),
        parts: vec![Part::Text(body.into())],
    };
    let unexpected = |content_type: &str, expected, start: &str| {
        vec![Err(AdapterError::UnexpectedBody {
            provider: "openai".into(),
            status: 200,
            content_type: content_type.into(),
            expected,
            start: start.into(),
        })]
    };
    let flat = "<!DOCTYPE html> <html> <head><title>Sign in</title></head> <body>Please sign in.</body> </html>";
    for (reply, streaming, expected) in [
        (
            with_type(200, Some("text/html; charset=utf-8"), page),
            true,
            unexpected("text/html; charset=utf-8", "an event stream", flat),
        ),
        (
            with_type(200, Some("text/html"), page),
            false,
            unexpected("text/html", "a JSON completion", flat),
        ),
        (
            with_type(200, Some("text/plain"), "hello\nworld\n"),
            true,
            unexpected("text/plain", "an event stream", "hello world"),
        ),
        (
            with_type(200, None, ""),
            true,
            unexpected("no Content-Type", "an event stream", "(an empty body)"),
        ),
        (
            with_type(404, Some("text/html"), page),
            true,
            vec![Err(AdapterError::Http {
                provider: "openai".into(),
                status: 404,
                message: format!("an HTML page: {flat}"),
                attempts: 1,
            })],
        ),
        // A whole completion in answer to a streamed request is read as one.
        (
            with_type(
                200,
                Some("application/json"),
                r#"{"choices":[{"index":0,"message":{"content":"Whole."},"finish_reason":"stop"}]}"#,
            ),
            true,
            vec![
                text("Whole."),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: None,
                }),
            ],
        ),
    ] {
        let server = Server::start(vec![reply]).await;
        assert_eq!(
            collect(openai(&server).streaming(streaming), &hello()).await,
            expected
        );
    }
    let error = &unexpected("text/html", "an event stream", flat)[0];
    assert_eq!(
        error.as_ref().unwrap_err().to_string(),
        format!("openai answered HTTP 200 with text/html, not an event stream: {flat}")
    );
}
