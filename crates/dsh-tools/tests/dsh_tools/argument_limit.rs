//! Argument text beyond the registry's limit is refused with `INVALID_ARGS` before it is
//! parsed, so memory stays bounded whatever a model sends.
//!
//! A binary of its own: the memory test reads this process's peak resident set, which a
//! neighbouring test's allocations would blur.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_test_support::raw_echo;
use dsh_tools::{
    CallArguments, DEFAULT_MAX_ARGUMENT_BYTES, FailureCode, RegistryConfig, ToolRegistry,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::{Arc, Mutex};
use support::{expect_failure, expect_value, run};

/// This process's peak resident set size in KiB (`VmHWM`).
fn peak_resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn refusal(bytes: usize, limit: usize) -> String {
    format!(
        "invalid arguments: the argument text is {bytes} bytes, over the limit of {limit} bytes \
         per call; it was not read. Send shorter arguments (large content belongs in a file)"
    )
}

#[tokio::test]
async fn the_limit_is_one_mebibyte_by_default_and_configurable_to_the_byte() {
    assert_eq!(DEFAULT_MAX_ARGUMENT_BYTES, 1 << 20);
    assert_eq!(
        ToolRegistry::new().config().max_argument_bytes,
        DEFAULT_MAX_ARGUMENT_BYTES
    );

    let mut config = RegistryConfig::default();
    config.max_argument_bytes = 64;
    let registry = ToolRegistry::with_config(config);
    registry.register(raw_echo("echo")).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    registry
        .global_scope()
        .on_result(move |execution, _| sink.lock().unwrap().push(execution.arguments().clone()))
        .unwrap();

    // `{"x":"` + filler + `"}` is exactly the limit, then one byte more.
    let at_limit = format!(r#"{{"x":"{}"}}"#, "a".repeat(64 - 8));
    assert_eq!(at_limit.len(), 64);
    assert_eq!(
        expect_value(&run(&registry, "echo", at_limit.as_str()).await),
        json!({"x": "a".repeat(56)})
    );
    let over = format!(r#"{{"x":"{}"}}"#, "a".repeat(64 - 7));
    let result = run(&registry, "echo", over.as_str()).await;
    assert_eq!(
        expect_failure(&result, FailureCode::InvalidArgs),
        refusal(65, 64)
    );
    // Hooks see the refusal's facts, not the text.
    assert_eq!(
        seen.lock().unwrap()[1],
        CallArguments::Oversized {
            bytes: 65,
            limit: 64
        }
    );
    // A value built in process is not measured.
    let big = json!({"x": "a".repeat(1_000)});
    assert_eq!(
        expect_value(&run(&registry, "echo", big.clone()).await),
        big
    );
}

#[tokio::test]
async fn a_fifty_megabyte_argument_is_refused_unread_in_bounded_memory() {
    let registry = ToolRegistry::new();
    registry.register(raw_echo("echo")).unwrap();
    // Small numbers are the costliest JSON to parse: each becomes a `Value` holding its own
    // text, about 35 times the input (1.7 GB for this one).
    let size = 50_000_000;
    let mut text = String::with_capacity(size + 16);
    text.push_str(r#"{"x":"n","items":["#);
    while text.len() < size - 2 {
        text.push_str("0,");
    }
    text.push_str("0]}");
    let bytes = text.len();
    let before = peak_resident_kib();
    let result = run(&registry, "echo", text).await;
    let growth_kib = peak_resident_kib().saturating_sub(before);
    // The text itself was allocated before `before`; refusing it allocates next to nothing.
    assert!(
        growth_kib < 16 * 1024,
        "the peak resident set grew by {growth_kib} KiB"
    );
    assert_eq!(
        expect_failure(&result, FailureCode::InvalidArgs),
        refusal(bytes, DEFAULT_MAX_ARGUMENT_BYTES)
    );
}
