//! Every card variant in the wire form of `docs/subsystems/presenters.md`: tagged by `"card"`, camelCase, checked
//! against hand-written JSON fixtures in both directions.

use crate::support;

use dsh_tools::json::values_equal;
use dsh_tools::{ToolCallView, ToolResultView, ValueSchema};
use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Debug;
use support::{call_fixtures, fixture_json, fixtures_dir, result_fixtures};

/// The fixture decodes to `expected`, and `expected` encodes back to the fixture exactly (no
/// field renamed, dropped or added).
fn check<T>(name: &str, expected: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let json = fixture_json(name);
    let decoded: T = dsh_tools::json::from_value(&json)
        .unwrap_or_else(|e| panic!("{name}: the fixture does not decode: {e}"));
    assert_eq!(&decoded, expected, "{name}: decoded value");
    let encoded = serde_json::to_value(expected).unwrap();
    assert!(
        values_equal(&(&encoded).into(), &(&json).into()),
        "{name}: encoded form differs from the fixture\nencoded: {encoded:#}\nfixture: {json:#}"
    );
}

#[test]
fn call_cards_match_their_fixtures() {
    for (name, card) in call_fixtures() {
        check(name, &card);
    }
}

#[test]
fn result_cards_match_their_fixtures() {
    for (name, card) in result_fixtures() {
        check(name, &card);
    }
}

#[test]
fn every_card_variant_has_a_fixture() {
    let tags: BTreeSet<String> = call_fixtures()
        .iter()
        .map(|(_, card)| format!("call:{}", tag(card)))
        .chain(
            result_fixtures()
                .iter()
                .map(|(_, card)| format!("result:{}", tag(card))),
        )
        .collect();
    // The variants come from the types' own schemas, so a new card variant fails this test
    // until it has a fixture.
    let expected: BTreeSet<String> = schema_tags::<ToolCallView>("call")
        .into_iter()
        .chain(schema_tags::<ToolResultView>("result"))
        .collect();
    assert_eq!(tags, expected);
}

/// Every variant a card type's schema allows, spelled as [`tag`] spells a card: each object
/// schema that fixes `card`, with its fixed `shape` (or, for web cards, `kind`).
fn schema_tags<T: schemars::JsonSchema>(side: &str) -> BTreeSet<String> {
    fn walk(schema: &Value, side: &str, out: &mut BTreeSet<String>) {
        match schema {
            Value::Object(map) => {
                let fixed = |key: &str| schema["properties"][key]["const"].as_str();
                if let Some(card) = fixed("card") {
                    let inner = fixed("shape").or_else(|| fixed("kind").filter(|_| card == "web"));
                    out.insert(match inner {
                        Some(inner) => format!("{side}:{card}/{inner}"),
                        None => format!("{side}:{card}"),
                    });
                }
                map.values().for_each(|v| walk(v, side, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, side, out)),
            _ => {}
        }
    }
    let schema = ValueSchema::for_type::<T>().unwrap().to_json().to_value();
    let mut out = BTreeSet::new();
    walk(&schema, side, &mut out);
    out
}

#[test]
fn every_fixture_file_is_checked() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let checked: BTreeSet<String> = call_fixtures()
        .iter()
        .map(|(name, _)| *name)
        .chain(result_fixtures().iter().map(|(name, _)| *name))
        .map(|name| format!("{name}.json"))
        .collect();
    assert_eq!(on_disk, checked);
}

#[test]
fn unknown_card_tags_are_rejected() {
    let unknown = serde_json::json!({"card": "hologram", "title": "x"});
    assert!(dsh_tools::json::from_value::<dsh_tools::ToolCallView>(&unknown).is_err());
    assert!(dsh_tools::json::from_value::<dsh_tools::ToolResultView>(&unknown).is_err());
}

/// The card tag, with the nested shape or kind tag where there is one.
fn tag(card: &impl Serialize) -> String {
    let json = serde_json::to_value(card).unwrap();
    let card = json["card"].as_str().unwrap().to_owned();
    match json
        .get("shape")
        .or_else(|| json.get("kind").filter(|_| card == "web"))
    {
        Some(inner) => format!("{card}/{}", inner.as_str().unwrap()),
        None => card,
    }
}

/// `ToolKind::as_str`, which the terminal text and the ACP projection both show, is the wire
/// spelling of every kind.
#[test]
fn tool_kind_as_str_is_its_wire_spelling() {
    use dsh_tools::card::ToolKind;
    let kinds = [
        ToolKind::Read,
        ToolKind::Edit,
        ToolKind::Delete,
        ToolKind::Move,
        ToolKind::Search,
        ToolKind::Execute,
        ToolKind::Fetch,
        ToolKind::Other,
    ];
    for kind in kinds {
        assert_eq!(
            serde_json::to_value(kind).unwrap(),
            Value::from(kind.as_str())
        );
        assert_eq!(presenters::acp::tool_kind(kind), kind.as_str());
    }
}
