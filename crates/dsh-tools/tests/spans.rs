//! Observability: each call is one `tool.call` span that records its outcome.
//!
//! This binary holds one test on purpose. Its subscriber is installed for this thread only,
//! and tracing caches per callsite whether any subscriber is interested: a test on another
//! thread reaching the same callsite while this one installs its subscriber can cache "never",
//! and the spans then go unseen.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Arc;
use support::{call, constant_tool};

#[tokio::test]
async fn each_call_gets_one_span_with_its_outcome() {
    use std::sync::Mutex;
    use tracing::Subscriber;
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    #[derive(Default, Clone)]
    struct Spans(Arc<Mutex<Vec<String>>>);
    struct Record<'a>(&'a mut String);
    impl tracing::field::Visit for Record<'_> {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            self.0.push_str(&format!(" {}={value}", field.name()));
        }
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() != "duration_ms" {
                self.0.push_str(&format!(" {}={:?}", field.name(), value));
            }
        }
    }
    impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _: &tracing::span::Id,
            _: Context<'_, S>,
        ) {
            let mut line = attrs.metadata().name().to_owned();
            attrs.record(&mut Record(&mut line));
            self.0.lock().unwrap().push(line);
        }
        fn on_record(
            &self,
            _: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            _: Context<'_, S>,
        ) {
            let mut line = String::from("record");
            values.record(&mut Record(&mut line));
            self.0.lock().unwrap().push(line);
        }
    }

    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let registry = ToolRegistry::new();
    registry.register(constant_tool("k", "v")).unwrap();
    registry.execute(call("k", json!({}))).await;
    registry.execute(call("missing", json!({}))).await;
    let lines = spans.0.lock().unwrap().clone();
    let tool_spans = lines.iter().filter(|l| l.starts_with("tool.call")).count();
    assert_eq!(tool_spans, 2, "{lines:#?}");
    assert!(lines.iter().any(|l| l == "record outcome=OK"), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l == "record outcome=UNKNOWN_TOOL"),
        "{lines:#?}"
    );
}
