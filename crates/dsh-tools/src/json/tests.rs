//! Unit tests of the lossless JSON module.

use super::number::INLINE_NUMBER;
use super::*;
use pretty_assertions::assert_eq;
use serde::Deserialize;

fn num(text: &str) -> JsonNumber {
    match JsonValue::parse(text) {
        Ok(JsonValue::Number(n)) => n,
        other => panic!("not a number: {other:?}"),
    }
}

#[test]
fn numbers_compare_by_value() {
    let check = |a: &str, b: &str, equal: bool| {
        assert_eq!(numbers_equal(&num(a), &num(b)), equal, "{a} vs {b}");
    };
    check("1", "1.0", true);
    check("1", "1e0", true);
    check("100", "1E2", true);
    check("0.1", "1e-1", true);
    check("-0", "0", true);
    check("0.1", "0.10000000000000001", false);
    check("18446744073709551617", "18446744073709551616", false);
    check("1e400", "1e401", false);
    check("-1", "1", false);
}

#[test]
fn integers_are_recognised_losslessly() {
    for text in [
        "1",
        "1.0",
        "1e2",
        "-0",
        "18446744073709551617",
        "1.5e1",
        "1e400",
    ] {
        assert!(is_integer(&num(text)), "{text}");
    }
    for text in ["0.1", "1.5", "1e-1", "123456789012345678901.5"] {
        assert!(!is_integer(&num(text)), "{text}");
    }
}

#[test]
fn decimal_order_is_numeric() {
    let d = |t: &str| Decimal::parse(t).unwrap();
    assert!(d("2") > d("1.5"));
    assert!(d("-2") < d("-1.5"));
    assert!(d("0") > d("-0.001"));
    assert!(d("1e3") > d("999.9"));
    assert_eq!(d("10"), d("1e1"));
}

#[test]
fn parsed_values_keep_every_digit_and_key_order() {
    let text = r#"{"z": [18446744073709551617, 1e400, 0.10, -0], "a": {"y": "\u00e9\n", "b": null}, "m": true}"#;
    let value = JsonValue::parse(text).unwrap();
    let printed = r#"{"z":[18446744073709551617,1e400,0.10,-0],"a":{"y":"é\n","b":null},"m":true}"#;
    assert_eq!(value.to_string(), printed);
    assert_eq!(serde_json::to_string(&value).unwrap(), printed);
    assert_eq!(
        serde_json::from_str::<JsonValue>(text).unwrap(),
        value,
        "deserialising through serde_json keeps the same value"
    );
    assert_eq!(
        value.pointer("/z/0").unwrap().as_number().unwrap().as_str(),
        "18446744073709551617"
    );
    assert_eq!(value["a"]["y"].as_str(), Some("é\n"));
    assert!(value["missing"][3].is_null());
}

#[test]
fn a_repeated_key_keeps_its_first_place_and_last_value() {
    let value = JsonValue::parse(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
    assert_eq!(value.to_string(), r#"{"a":3,"b":2}"#);
}

#[test]
fn large_objects_keep_order_and_find_their_keys() {
    let keys: Vec<String> = (0..100).rev().map(|i| format!("k{i}")).collect();
    let text = format!(
        "{{{}, \"k7\": \"again\"}}",
        keys.iter()
            .map(|k| format!("\"{k}\": \"{k}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let JsonValue::Object(mut object) = JsonValue::parse(&text).unwrap() else {
        panic!("an object");
    };
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        keys.iter().collect::<Vec<_>>()
    );
    assert_eq!(object.get("k7"), Some(&JsonValue::from("again")));
    assert_eq!(object.remove("k50"), Some(JsonValue::from("k50")));
    assert_eq!(object.get("k49"), Some(&JsonValue::from("k49")));
    assert_eq!(object.get("k50"), None);
    assert_eq!(object.len(), 99);
}

#[test]
fn number_text_is_kept_whole_in_place_and_on_the_heap() {
    // 22 bytes and shorter are kept in place, longer text on the heap.
    for text in [
        "0",
        "-0",
        "0.10",
        "18446744073709551617",
        "1234567890123456789012",
        "12345678901234567890123",
        "1e400",
        "-1.5e-300",
        "340282366920938463463374607431768211457",
    ] {
        let number = JsonNumber::parse(text).unwrap();
        assert_eq!(
            matches!(number.0, NumberText::Inline { .. }),
            text.len() <= INLINE_NUMBER,
            "{text} ({} bytes) is inline exactly when it fits",
            text.len()
        );
        assert_eq!(number.as_str(), text);
        assert_eq!(number.to_string(), text);
        assert_eq!(format!("{number:?}"), format!("JsonNumber({text:?})"));
        assert_eq!(
            JsonValue::parse(text).unwrap(),
            JsonValue::Number(number.clone())
        );
        let mut longer = String::from(text);
        longer.push('0');
        assert_ne!(JsonNumber::parse(&longer), Some(number));
    }
    assert_ne!(JsonNumber::parse("1.0"), JsonNumber::parse("1"));
    // The boundary itself: 22 bytes in place, 23 on the heap.
    assert_eq!(INLINE_NUMBER, "1234567890123456789012".len());
    assert_eq!(JsonNumber::from(u64::MAX).as_str(), "18446744073709551615");
    assert_eq!(JsonNumber::from(i64::MIN).as_str(), "-9223372036854775808");
}

#[test]
fn invalid_text_is_refused() {
    for text in ["", "{", "[1,]", "01", "1.", "{\"a\" 1}", "nul", "1 2"] {
        assert!(JsonValue::parse(text).is_err(), "{text:?}");
    }
    let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    assert!(JsonValue::parse(&nested(MAX_DEPTH)).is_ok());
    let error = JsonValue::parse(&nested(10_000)).unwrap_err().to_string();
    assert!(error.contains("nests deeper than 128"), "{error}");
}

#[test]
fn the_lossy_view_rounds_only_what_serde_json_cannot_hold() {
    let value = JsonValue::parse(
        r#"{"u": 18446744073709551615, "i": -9223372036854775808, "big": 18446744073709551617, "f": 0.10, "huge": 1e400, "b": 1}"#,
    )
    .unwrap();
    assert_eq!(
        value.to_value().to_string(),
        r#"{"b":1,"big":1.8446744073709552e+19,"f":0.1,"huge":"1e400","i":-9223372036854775808,"u":18446744073709551615}"#
    );
    let plain = JsonValue::parse(r#"{"b": [1, -2, 0.5], "a": "x"}"#).unwrap();
    assert!(
        plain == plain.to_value(),
        "what a Value holds exactly, both views agree"
    );
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(tag = "kind")]
enum Tagged {
    Circle { r: f64, n: u32 },
}

#[test]
fn tagged_enums_read_any_number_spelling() {
    for text in [
        r#"{"kind":"Circle","r":0.10,"n":1.0}"#,
        r#"{"kind":"Circle","r":1e-1,"n":1e0}"#,
        r#"{"kind":"Circle","r":0.1,"n":10e-1}"#,
    ] {
        assert_eq!(
            from_str_located::<Tagged>(text).unwrap(),
            Tagged::Circle { r: 0.1, n: 1 },
            "{text}"
        );
    }
}

#[derive(Deserialize, Debug, PartialEq)]
struct Wide {
    a: u64,
    b: i128,
    c: u128,
}

#[test]
fn typed_integers_are_read_exactly_from_the_text() {
    assert_eq!(
        from_str_located::<Wide>(
            r#"{"a": 18446744073709551615, "b": -170141183460469231731687303715884105728, "c": 18446744073709551617}"#
        )
        .unwrap(),
        Wide {
            a: u64::MAX,
            b: i128::MIN,
            c: (1u128 << 64) + 1
        }
    );
}

#[derive(Deserialize, Debug)]
#[allow(dead_code)]
struct Limits {
    timeout_ms: Option<u64>,
    ratio: Option<u8>,
    items: Option<Vec<u32>>,
}

const MISFITS: [&str; 7] = [
    r#"{"timeout_ms": -1}"#,
    r#"{"timeout_ms": 1e300}"#,
    r#"{"timeout_ms": 18446744073709551616}"#,
    r#"{"timeout_ms": "100"}"#,
    r#"{"ratio": 0.5}"#,
    r#"{"items": [1, -2]}"#,
    r#"{"extra": 1, "timeout_ms": true}"#,
];

#[test]
fn located_errors_name_the_field_and_the_number_that_does_not_fit() {
    assert_eq!(
        MISFITS.map(|text| from_str_located::<Limits>(text).unwrap_err().to_string()),
        [
            "/timeout_ms: -1 is out of range for this field",
            "/timeout_ms: 1e300 is out of range for this field",
            "/timeout_ms: 18446744073709551616 is out of range for this field",
            "/timeout_ms: invalid type: string \"100\", expected u64",
            "/ratio: 0.5 is not a whole number, or out of range for this field",
            "/items/1: -2 is out of range for this field",
            "/timeout_ms: invalid type: boolean `true`, expected u64",
        ]
    );
}

#[test]
fn located_errors_from_a_value_quote_its_numbers() {
    let located = |text: &str| {
        let value: Value = serde_json::from_str(text).unwrap();
        from_value_located::<Limits>(&value)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        MISFITS.map(located),
        [
            "/timeout_ms: -1 is out of range for this field",
            // A `serde_json::Value` has already rounded these (and prints the exponent's
            // sign); the text path quotes them as sent.
            "/timeout_ms: 1e+300 is out of range for this field",
            "/timeout_ms: 1.8446744073709552e+19 is out of range for this field",
            "/timeout_ms: invalid type: string \"100\", expected u64",
            "/ratio: 0.5 is not a whole number, or out of range for this field",
            "/items/1: -2 is out of range for this field",
            "/timeout_ms: invalid type: boolean `true`, expected u64",
        ]
    );
}

#[derive(Deserialize, Clone, Debug, PartialEq)]
struct Counts {
    timeout_ms: u64,
    offset: Option<i32>,
    items: Vec<u8>,
}

/// A whole number is a JSON Schema integer however it is spelled, so it reads into an integer
/// field from the text and from a `serde_json::Value`, which holds `1000.0` and `1e3` as a float
/// (the agent loop and the MCP server hand arguments over as such a value).
#[test]
fn whole_numbers_in_any_spelling_read_into_integer_fields() {
    let texts = [
        r#"{"timeout_ms": 1000.0, "offset": -2.0, "items": [1e0, 2.00]}"#,
        r#"{"timeout_ms": 1e3, "offset": -2e0, "items": [10e-1, 0.2e1]}"#,
        r#"{"timeout_ms": 1E3, "offset": -20E-1, "items": [1, 2]}"#,
    ];
    let expected = Counts {
        timeout_ms: 1000,
        offset: Some(-2),
        items: vec![1, 2],
    };
    let read = |text: &str| {
        let value: Value = serde_json::from_str(text).unwrap();
        (
            from_str_located::<Counts>(text),
            from_value_located::<Counts>(&value),
        )
    };
    assert_eq!(
        texts.map(read),
        texts.map(|_| (Ok(expected.clone()), Ok(expected.clone())))
    );
}

#[test]
fn pointer_tokens_are_escaped() {
    assert_eq!(pointer_push("/a", "b/c~d"), "/a/b~1c~0d");
}
