//! Lossless JSON helpers.
//!
//! The workspace builds `serde_json` with `arbitrary_precision`, so a [`Value`] keeps the exact
//! text of every number a model sent (`18446744073709551617`, `0.1`, `-0`). Two consequences
//! live here, in one place:
//!
//! - Numbers are compared by their mathematical value, not their text ([`numbers_equal`],
//!   [`is_integer`]): `1`, `1.0` and `1e0` are the same number, as JSON Schema requires.
//! - serde's buffered shapes (internally tagged and untagged enums, `#[serde(flatten)]`) cannot
//!   read a number whose text is not the shortest form of an `f64` (`0.10`, `1e2`).
//!   [`from_value`] retries such a value with every number in its canonical form, so typed
//!   arguments deserialise whatever spelling the model chose.

use crate::schema::Violation;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;

/// A JSON number decoded into sign, significant digits and a decimal exponent.
///
/// The value is `(-1)^negative × digits × 10^exponent`; `digits` has no leading or trailing
/// zeros, and zero is represented by empty `digits` (its sign is ignored, so `-0 == 0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

impl Decimal {
    /// Decodes a JSON number's text. Returns `None` for text that is not a JSON number.
    pub(crate) fn parse(text: &str) -> Option<Decimal> {
        let bytes = text.as_bytes();
        let mut i = 0;
        let negative = bytes.first() == Some(&b'-');
        if negative {
            i += 1;
        }
        let mut digits = Vec::new();
        let mut exponent: i64 = 0;
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            digits.push(bytes[i] - b'0');
            i += 1;
        }
        if i == start {
            return None;
        }
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            let frac_start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                digits.push(bytes[i] - b'0');
                exponent -= 1;
                i += 1;
            }
            if i == frac_start {
                return None;
            }
        }
        if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
            i += 1;
            let mut exp_negative = false;
            if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                exp_negative = bytes[i] == b'-';
                i += 1;
            }
            let exp_start = i;
            let mut exp: i64 = 0;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                // Saturate: an exponent beyond i64 is astronomically out of any range we compare.
                exp = exp
                    .saturating_mul(10)
                    .saturating_add(i64::from(bytes[i] - b'0'));
                i += 1;
            }
            if i == exp_start {
                return None;
            }
            exponent = exponent.saturating_add(if exp_negative { -exp } else { exp });
        }
        if i != bytes.len() {
            return None;
        }
        let first_nonzero = digits.iter().position(|d| *d != 0);
        let Some(first) = first_nonzero else {
            return Some(Decimal {
                negative: false,
                digits: Vec::new(),
                exponent: 0,
            });
        };
        digits.drain(..first);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent = exponent.saturating_add(1);
        }
        Some(Decimal {
            negative,
            digits,
            exponent,
        })
    }

    /// Whether the number has no fractional part (`1.0`, `1e2` and `2^64+1` are integers).
    pub(crate) fn is_integer(&self) -> bool {
        self.digits.is_empty() || self.exponent >= 0
    }

    /// The number as an `i128` when it is an integer within range.
    fn to_i128(&self) -> Option<i128> {
        if !self.is_integer() {
            return None;
        }
        let mut value: i128 = 0;
        for d in &self.digits {
            value = value.checked_mul(10)?.checked_add(i128::from(*d))?;
        }
        for _ in 0..self.exponent {
            value = value.checked_mul(10)?;
        }
        Some(if self.negative { -value } else { value })
    }

    fn magnitude_cmp(&self, other: &Decimal) -> Ordering {
        // Compare by the position of the most significant digit, then digit by digit.
        let self_top = self.exponent.saturating_add(self.digits.len() as i64);
        let other_top = other.exponent.saturating_add(other.digits.len() as i64);
        self_top
            .cmp(&other_top)
            .then_with(|| self.digits.cmp(&other.digits))
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => {
                return if other.negative {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
            }
            (false, true) => {
                return if self.negative {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
            }
            (false, false) => {}
        }
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.magnitude_cmp(other),
            (true, true) => other.magnitude_cmp(self),
        }
    }
}

fn decimal(number: &Number) -> Option<Decimal> {
    Decimal::parse(number.as_str())
}

/// Whether a JSON number is mathematically an integer (`1.0` is; `0.5` is not).
pub fn is_integer(number: &Number) -> bool {
    let text = number.as_str();
    // The common spelling needs no parsing: plain digits are an integer.
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return true;
    }
    decimal(number).is_some_and(|d| d.is_integer())
}

/// Whether two JSON numbers denote the same value, whatever their spelling.
pub fn numbers_equal(a: &Number, b: &Number) -> bool {
    if a.as_str() == b.as_str() {
        return true;
    }
    match (decimal(a), decimal(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Deep JSON equality with numbers compared by value (JSON Schema's notion of equality).
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => numbers_equal(a, b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Rewrites every number into the one spelling serde's buffered shapes can read: integers in
/// `i128`/`u128` range as plain integer text, other finite numbers as the shortest `f64` text.
/// Numbers beyond `f64` stay as they are.
fn canonical_numbers(value: &Value) -> Value {
    match value {
        Value::Number(n) => Value::Number(canonical_number(n)),
        Value::Array(items) => Value::Array(items.iter().map(canonical_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), canonical_numbers(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

fn canonical_number(n: &Number) -> Number {
    let Some(d) = decimal(n) else {
        return n.clone();
    };
    if let Some(i) = d.to_i128() {
        if let Ok(u) = u64::try_from(i) {
            return Number::from(u);
        }
        if let Ok(s) = i64::try_from(i) {
            return Number::from(s);
        }
        if let Ok(u) = u128::try_from(i) {
            return Number::from_u128(u).unwrap_or_else(|| n.clone());
        }
        return Number::from_i128(i).unwrap_or_else(|| n.clone());
    }
    n.as_f64()
        .filter(|f| f.is_finite())
        .and_then(Number::from_f64)
        .unwrap_or_else(|| n.clone())
}

/// Deserialises a typed value from lossless JSON.
///
/// Tries the value as it is first (so a `serde_json::Value` field keeps every digit), then, if
/// that fails, once more with canonical number spellings (see the module docs). The first error
/// is returned when both fail, since it names the author's real problem.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    // Deserialising from a reference copies only what `T` keeps; the canonical copy is made
    // only for the rare retry.
    match T::deserialize(value) {
        Ok(typed) => Ok(typed),
        Err(first) => T::deserialize(&canonical_numbers(value)).map_err(|_| first),
    }
}

/// Like [`from_value`], but a failure names where in the value it happened, as a
/// [`Violation`] (`/limit: -1 is out of range for this field` for a `u32` given `-1`).
pub fn from_value_located<T: DeserializeOwned>(value: &Value) -> Result<T, Violation> {
    // Tracking the path costs on every field; do it only to explain a failure. Only the value
    // as sent is replayed: its error is the one `from_value` reports, and the canonical copy
    // has already failed too.
    if let Ok(typed) = from_value(value) {
        return Ok(typed);
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let pointer = error
            .path()
            .iter()
            .map(|segment| match segment {
                serde_path_to_error::Segment::Seq { index } => format!("/{index}"),
                serde_path_to_error::Segment::Map { key } => pointer_push("", key),
                serde_path_to_error::Segment::Enum { variant } => pointer_push("", variant),
                serde_path_to_error::Segment::Unknown => String::new(),
            })
            .collect::<String>();
        let message = error.into_inner().to_string();
        // With `arbitrary_precision` serde reports a number that does not fit the field's type
        // only as "invalid number"; say which number and why, since the field is known here.
        let message = match value.pointer(&pointer) {
            Some(Value::Number(n)) if message == "invalid number" => number_misfit(n),
            _ => message,
        };
        Violation::new(pointer, message)
    })
}

/// Why a number could not be read into its field's type.
fn number_misfit(n: &Number) -> String {
    let text = n.as_str();
    if is_integer(n) {
        format!("{text} is out of range for this field")
    } else {
        format!("{text} is not a whole number, or out of range for this field")
    }
}

/// Parses JSON text into a typed value through [`from_value`], so buffered serde shapes read
/// any number spelling.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    let value: Value = serde_json::from_str(text)?;
    from_value(&value)
}

/// The JSON type name of a value, as JSON Schema spells it (`integer` for integral numbers).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/` (RFC 6901).
pub(crate) fn pointer_push(pointer: &str, token: &str) -> String {
    let escaped = token.replace('~', "~0").replace('/', "~1");
    format!("{pointer}/{escaped}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn num(text: &str) -> Number {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Number(n)) => n,
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
        ] {
            assert_eq!(
                from_str::<Tagged>(text).unwrap(),
                Tagged::Circle { r: 0.1, n: 1 },
                "{text}"
            );
        }
    }

    #[test]
    fn untyped_values_keep_every_digit() {
        let v: Value = serde_json::from_str("[18446744073709551617, 0.10, -0]").unwrap();
        assert_eq!(v.to_string(), "[18446744073709551617,0.10,-0]");
        // Through the typed path a `Value` keeps every digit too; only the sign of zero, which
        // no number type distinguishes, may be dropped.
        let typed: Value = from_str("[18446744073709551617, 0.10]").unwrap();
        assert_eq!(typed.to_string(), "[18446744073709551617,0.10]");
    }

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Limits {
        timeout_ms: Option<u64>,
        ratio: Option<u8>,
        items: Option<Vec<u32>>,
    }

    #[test]
    fn located_errors_name_the_field_and_the_number_that_does_not_fit() {
        let located = |text: &str| {
            let value: Value = serde_json::from_str(text).unwrap();
            from_value_located::<Limits>(&value)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            [
                r#"{"timeout_ms": -1}"#,
                r#"{"timeout_ms": 1e300}"#,
                r#"{"timeout_ms": 18446744073709551616}"#,
                r#"{"timeout_ms": "100"}"#,
                r#"{"ratio": 0.5}"#,
                r#"{"items": [1, -2]}"#,
                r#"{"extra": 1, "timeout_ms": true}"#,
            ]
            .map(located),
            [
                "/timeout_ms: -1 is out of range for this field",
                // The parser keeps every digit but spells the exponent's sign.
                "/timeout_ms: 1e+300 is out of range for this field",
                "/timeout_ms: 18446744073709551616 is out of range for this field",
                "/timeout_ms: invalid type: string \"100\", expected u64",
                "/ratio: 0.5 is not a whole number, or out of range for this field",
                "/items/1: -2 is out of range for this field",
                "/timeout_ms: invalid type: boolean `true`, expected u64",
            ]
        );
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(pointer_push("/a", "b/c~d"), "/a/b~1c~0d");
    }
}
