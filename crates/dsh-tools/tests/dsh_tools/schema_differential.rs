//! Differential test: on the supported subset, our validator's verdict equals the `jsonschema`
//! crate's (draft 2020-12) for every generated (schema, value) pair.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::json::JsonValue;
use dsh_tools::schema::SchemaKind;
use dsh_tools::{ValueSchema, validate};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "../support/schema_strategies.rs"]
mod strategies;

#[test]
fn validator_agrees_with_jsonschema_on_the_subset() {
    const PAIRS: u32 = 10_000;
    let checked = AtomicUsize::new(0);
    let valid = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: PAIRS,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategies::pairs(), |(schema, value)| {
            let raw = schema.to_json();
            let oracle = jsonschema::draft202012::new(&serde_json::to_value(&raw).unwrap())
                .expect("oracle accepts our schema");
            let expected = oracle.is_valid(&value);
            let ours = validate(&schema, &JsonValue::from(&value));
            prop_assert_eq!(
                ours.is_ok(),
                expected,
                "schema {} value {} ours {:?}",
                raw,
                value,
                ours
            );
            checked.fetch_add(1, Ordering::Relaxed);
            if expected {
                valid.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
    let checked = checked.into_inner();
    let valid = valid.into_inner();
    assert!(checked >= PAIRS as usize, "only {checked} pairs checked");
    // Both verdicts must be well represented, or the comparison proves little.
    assert!(
        valid * 5 >= checked && valid * 5 <= checked * 4,
        "{valid} of {checked} pairs valid"
    );
}
