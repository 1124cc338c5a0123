//! Typed values from JSON: serde deserialisation from a `serde_json::Value` or from the
//! argument text, with failures located by JSON pointer.

use super::number::{Decimal, NumberText};
use super::{JsonNumber, JsonValue, is_integer, pointer_push};
use crate::violation::Violation;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Deserialises a typed value from a `serde_json::Value` (whose numbers are already `u64`,
/// `i64` or `f64`).
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(value)
}

/// Like [`from_value`], but a failure names where in the value it happened, as a
/// [`Violation`] (`/limit: -1 is out of range for this field` for a `u32` given `-1`).
///
/// A whole number held as a float (`1000.0` or `1e3` parsed into a `serde_json::Value`, as the
/// agent loop and the MCP server hand arguments over) is a JSON Schema integer; when serde refuses it for an integer field, the value is read
/// once more with such numbers spelled as plain digits, as [`from_str_located`] does.
pub fn from_value_located<T: DeserializeOwned>(value: &Value) -> Result<T, Violation> {
    // Tracking the path costs on every field; do it only to explain a failure.
    if let Ok(typed) = from_value(value) {
        return Ok(typed);
    }
    if let Some(canonical) = with_plain_integers(&JsonValue::from(value))
        && let Ok(typed) = serde_json::from_str(&canonical.to_string())
    {
        return Ok(typed);
    }
    match serde_path_to_error::deserialize(value) {
        Ok(typed) => Ok(typed),
        Err(error) => Err(located(error, |pointer| match value.pointer(pointer) {
            Some(Value::Number(n)) => Some(JsonNumber::from(n)),
            _ => None,
        })),
    }
}

/// Deserialises a typed value from JSON text. `serde_json` reads integer fields (`u64`,
/// `i128`, `u128`) from the digits exactly.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(text)
}

/// Like [`from_str`], but a failure names where in the text's value it happened, as a
/// [`Violation`]; a number that does not fit its field is quoted exactly as sent.
///
/// A whole number spelled with a fraction or an exponent (`1.0`, `1e2`) is a JSON Schema
/// integer; when serde refuses it for an integer field, the text is read once more with such
/// numbers spelled as plain digits.
pub fn from_str_located<T: DeserializeOwned>(text: &str) -> Result<T, Violation> {
    let first = match serde_json::from_str(text) {
        Ok(typed) => return Ok(typed),
        Err(error) => error,
    };
    if let Ok(exact) = JsonValue::parse(text)
        && let Some(canonical) = with_plain_integers(&exact)
        && let Ok(typed) = serde_json::from_str(&canonical.to_string())
    {
        return Ok(typed);
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize(&mut deserializer) {
        Ok(typed) => Ok(typed),
        Err(error) if error.inner().is_syntax() || error.inner().is_eof() => {
            Err(Violation::new("", without_position(&first)))
        }
        Err(error) => {
            let exact = JsonValue::parse(text).ok();
            Err(located(error, |pointer| {
                exact
                    .as_ref()
                    .and_then(|v| v.pointer(pointer))
                    .and_then(JsonValue::as_number)
                    .cloned()
            }))
        }
    }
}

/// The value with every whole number spelled as plain digits (`1.0` → `1`, `1e2` → `100`), or
/// `None` when no number needed it. Numbers beyond `u128`'s 39 digits keep their spelling.
fn with_plain_integers(value: &JsonValue) -> Option<JsonValue> {
    match value {
        JsonValue::Number(n) => {
            let plain = Decimal::parse(n.as_str())?.plain_integer()?;
            (plain != n.as_str()).then(|| JsonValue::Number(JsonNumber(NumberText::new(&plain))))
        }
        JsonValue::Array(items) => {
            let changed: Vec<Option<JsonValue>> = items.iter().map(with_plain_integers).collect();
            changed.iter().any(Option::is_some).then(|| {
                JsonValue::Array(
                    items
                        .iter()
                        .zip(changed)
                        .map(|(item, changed)| changed.unwrap_or_else(|| item.clone()))
                        .collect(),
                )
            })
        }
        JsonValue::Object(object) => {
            let changed: Vec<Option<JsonValue>> =
                object.iter().map(|(_, v)| with_plain_integers(v)).collect();
            changed.iter().any(Option::is_some).then(|| {
                JsonValue::Object(
                    object
                        .iter()
                        .zip(changed)
                        .map(|((k, v), changed)| (k.clone(), changed.unwrap_or_else(|| v.clone())))
                        .collect(),
                )
            })
        }
        _ => None,
    }
}

/// Turns a located serde error into a violation, saying which number did not fit and why
/// when the field is an integer type.
fn located(
    error: serde_path_to_error::Error<serde_json::Error>,
    number_at: impl FnOnce(&str) -> Option<JsonNumber>,
) -> Violation {
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
    let message = without_position(error.inner());
    // serde names the number it saw after rounding it (`floating point 1.8446744073709552e19`
    // for `18446744073709551616`); the field is known here, so quote the number as sent.
    let message = match number_at(&pointer) {
        Some(n) if integer_misfit(&message) => number_misfit(&n),
        _ => message,
    };
    Violation::new(pointer, message)
}

/// A serde error's message without `serde_json`'s ` at line L column C` suffix.
fn without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    if error.line() == 0 {
        return message;
    }
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    message
        .strip_suffix(&suffix)
        .map_or(message.clone(), str::to_owned)
}

/// Whether serde refused a number for an integer field.
fn integer_misfit(message: &str) -> bool {
    const INTEGER_TYPES: [&str; 12] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
    ];
    let number_refused = message.starts_with("invalid value: integer")
        || message.starts_with("invalid type: floating point")
        || message.starts_with("invalid type: integer");
    number_refused
        && message
            .rsplit_once("expected ")
            .is_some_and(|(_, expected)| INTEGER_TYPES.contains(&expected))
}

/// Why a number could not be read into its field's type.
fn number_misfit(n: &JsonNumber) -> String {
    let text = n.as_str();
    if is_integer(n) {
        format!("{text} is out of range for this field")
    } else {
        format!("{text} is not a whole number, or out of range for this field")
    }
}
