//! `presenters`' lenient reader of logged `bash` arguments (`BashArgs::read`) reads every
//! argument value the tool accepts exactly as the tool does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use presenters::bash::BashArgs;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tool_bash::tool::parse_bash_arguments;

/// A string with something other than whitespace in it (any Unicode, controls included).
fn non_blank() -> impl Strategy<Value = String> {
    (any::<String>(), "[^\\s]", any::<String>()).prop_map(|(a, b, c)| format!("{a}{b}{c}"))
}

/// Every shape of a valid `bash` argument object where background jobs and the sandbox are
/// offered: the required fields, each optional field present or absent, in any order.
fn valid_args() -> impl Strategy<Value = Value> {
    (
        non_blank(),
        non_blank(),
        proptest::option::of(1u64..),
        proptest::option::of(any::<String>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(non_blank()),
        any::<bool>(),
    )
        .prop_map(
            |(command, description, timeout, workdir, background, justification, reversed)| {
                let mut fields: Vec<(&str, Value)> = vec![
                    ("command", json!(command)),
                    ("description", json!(description)),
                ];
                fields.extend(timeout.map(|t| ("timeout_ms", json!(t))));
                fields.extend(workdir.map(|w| ("workdir", json!(w))));
                fields.extend(background.map(|b| ("run_in_background", json!(b))));
                if let Some(why) = justification {
                    fields.push(("sandbox", json!("escalate")));
                    fields.push(("justification", json!(why)));
                }
                if reversed {
                    fields.reverse();
                }
                let object: Map<String, Value> =
                    fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                Value::Object(object)
            },
        )
}

proptest! {
    #[test]
    fn the_lenient_reader_reads_every_valid_value_as_the_tool_does(args in valid_args()) {
        let tool = parse_bash_arguments(&args.to_string(), true, true)
            .expect("the strategy generates only arguments the tool accepts");
        let lenient = BashArgs::read(&args).expect("a valid value reads leniently");
        prop_assert_eq!(lenient, tool);
    }
}

/// The reader is lenient where logs need it: an old log's fields the tool no longer accepts
/// and a later version's unknown fields do not hide the card.
#[test]
fn the_lenient_reader_accepts_what_the_tool_refuses() {
    let old = json!({"command": "ls", "description": "", "timeout_ms": 3e4, "future": 1});
    assert!(parse_bash_arguments(&old.to_string(), true, true).is_err());
    let read = BashArgs::read(&old).unwrap();
    assert_eq!(read.command, "ls");
    assert_eq!(read.description, "");
    assert_eq!(read.timeout_ms, Some(30_000));
}
