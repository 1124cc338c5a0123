//! Buffered serde shapes carrying floats deserialise with plain `serde_json::from_str` while
//! the dsh library crates are in the graph.

use pretty_assertions::assert_eq;
use serde::Deserialize;

// Naming the crates keeps them linked into this test, as in a user's program.
use agent_loop as _;
use dsh_tools as _;
use mock_adapter as _;
use presenters as _;
use tool_bash as _;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum Temperature {
    Fixed(f64),
    Named(String),
}

#[derive(Debug, Deserialize, PartialEq)]
struct Sampling {
    top_p: f64,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Request {
    model: String,
    #[serde(flatten)]
    sampling: Sampling,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    Logprob { token: String, logprob: f64 },
}

#[test]
fn an_untagged_enum_reads_an_f64() {
    assert_eq!(
        serde_json::from_str::<Temperature>("0.7").unwrap(),
        Temperature::Fixed(0.7)
    );
}

#[test]
fn a_flattened_struct_reads_an_f64() {
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"model": "m", "top_p": 0.9}"#).unwrap(),
        Request {
            model: "m".into(),
            sampling: Sampling { top_p: 0.9 }
        }
    );
}

#[test]
fn an_internally_tagged_enum_reads_an_f64() {
    assert_eq!(
        serde_json::from_str::<Event>(r#"{"type": "logprob", "token": "a", "logprob": -0.25}"#)
            .unwrap(),
        Event::Logprob {
            token: "a".into(),
            logprob: -0.25
        }
    );
}

#[test]
fn serde_json_maps_are_sorted() {
    // `preserve_order` would keep insertion order; without it `Map` is a `BTreeMap`.
    let value: serde_json::Value = serde_json::from_str(r#"{"b": 1, "a": 2}"#).unwrap();
    assert_eq!(value.to_string(), r#"{"a":2,"b":1}"#);
}
