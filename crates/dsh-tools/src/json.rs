//! Lossless JSON: the exact argument text, numbers digit for digit, and keys in their order.
//!
//! The workspace builds `serde_json` without `arbitrary_precision` and `preserve_order`: Cargo
//! unifies features across a user's whole dependency graph, and both change how the user's own
//! code deserialises (a float inside an untagged enum or a flattened struct stops reading).
//! Without them a [`serde_json::Value`] holds numbers as `u64`, `i64` or `f64` and sorts object
//! keys, so this module keeps what a tool call needs exactly in a small value type of its own
//! (`docs/design/lossless-json.md`):
//!
//! - [`JsonValue`] is parsed from the argument text ([`JsonValue::parse`]). Its numbers
//!   ([`JsonNumber`]) are their text as sent (`18446744073709551617`, `1e400`, `0.10`, `-0`) and
//!   its objects ([`JsonObject`]) keep their keys in the order they came. The validator walks it,
//!   raw tools read it (`ExecContext::exact_args`), and schemas are built and serialised as
//!   `JsonValue` so declared property order reaches the model.
//! - Numbers are compared by their mathematical value, not their text ([`numbers_equal`],
//!   [`is_integer`]): `1`, `1.0` and `1e0` are the same number, as JSON Schema requires.
//! - Typed arguments are deserialised from the argument text itself ([`from_str_located`]):
//!   `serde_json` reads `u64`, `i128` and `u128` fields from the digits exactly, and buffered
//!   serde shapes (untagged and internally tagged enums, `#[serde(flatten)]`) read any number
//!   spelling, since without `arbitrary_precision` they see plain `f64`s.
//! - [`JsonValue::to_value`] is the convenient, lossy view as a `serde_json::Value`: integers
//!   that fit `u64`/`i64` exactly, other numbers as the nearest `f64`, numbers beyond `f64`'s
//!   range as a string of their text, keys sorted.
//!
//! Parsing leans on `serde_json` (its `raw_value` feature) rather than on a parser of our own:
//! `serde_json` checks the whole text once, and each container is then split into the raw
//! text of its members, so no JSON grammar is restated here.

use crate::schema::Violation;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Number, Value};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;

/// A JSON value that keeps every number's text and every object's key order.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum JsonValue {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as its exact text.
    Number(JsonNumber),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<JsonValue>),
    /// An object, in key order.
    Object(JsonObject),
}

/// A JSON number kept as the text it was written with (`0.10` stays `0.10`).
///
/// Equality of two `JsonNumber`s is textual; [`numbers_equal`] compares by value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JsonNumber(NumberText);

/// The longest number text kept in place rather than on the heap: every `i64` and `u64`, and
/// the decimals arguments usually carry, fit.
const INLINE_NUMBER: usize = 22;

/// A number's text. Short text is kept in place: a call's arguments are parsed once per call,
/// and a heap allocation per number was a good part of that. Text of up to
/// [`INLINE_NUMBER`] bytes is always inline (and zero-padded), so the derived equality and
/// hash are those of the text.
#[derive(Clone, PartialEq, Eq, Hash)]
enum NumberText {
    Inline { len: u8, bytes: [u8; INLINE_NUMBER] },
    Heap(Box<str>),
}

impl NumberText {
    fn new(text: &str) -> NumberText {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= INLINE_NUMBER => {
                let mut bytes = [0; INLINE_NUMBER];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                NumberText::Inline { len, bytes }
            }
            _ => NumberText::Heap(text.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // The bytes were copied from a `str` whole, so they are UTF-8; the fallback is
            // unreachable.
            NumberText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            NumberText::Heap(text) => text,
        }
    }
}

impl fmt::Debug for NumberText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A JSON object that keeps its keys in insertion order. A repeated key keeps its first
/// position and its last value, as `serde_json` keeps the last value.
///
/// The entries are a vector: argument objects are small, and a linear scan of a few keys is
/// faster than hashing them. Objects with more than 16 keys also keep a hash index,
/// so a hostile object with many keys still parses and looks up in linear time.
#[derive(Clone, Default)]
pub struct JsonObject {
    entries: Vec<(String, JsonValue)>,
    index: Option<HashMap<String, usize>>,
}

/// The number of keys from which an object keeps a hash index.
const INDEXED_FROM: usize = 16;

static NULL: JsonValue = JsonValue::Null;

/// How deeply arrays and objects may nest in parsed JSON: `serde_json`'s own limit for a
/// `Value`.
pub const MAX_DEPTH: usize = 128;

impl JsonNumber {
    /// The number's text, exactly as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Parses a number's text; `None` for text that is not a JSON number.
    pub fn parse(text: &str) -> Option<JsonNumber> {
        Decimal::parse(text).map(|_| JsonNumber(NumberText::new(text)))
    }

    /// The number as a `u64`, when it is written as plain digits within range.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_str().parse().ok()
    }

    /// The number as an `i64`, when it is written as plain digits within range.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_str().parse().ok()
    }

    /// The nearest `f64` (infinite beyond `f64`'s range).
    pub fn as_f64(&self) -> f64 {
        // Every JSON number is valid `f64` syntax; the fallback is unreachable.
        self.as_str().parse().unwrap_or(f64::NAN)
    }

    /// The nearest `serde_json::Number`: integers exactly when they fit `u64`/`i64`, other
    /// numbers as the nearest finite `f64`; `None` beyond `f64`'s range.
    pub fn to_number(&self) -> Option<Number> {
        if let Some(u) = self.as_u64() {
            return Some(Number::from(u));
        }
        if let Some(i) = self.as_i64() {
            return Some(Number::from(i));
        }
        Number::from_f64(self.as_f64())
    }
}

impl fmt::Display for JsonNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&Number> for JsonNumber {
    fn from(number: &Number) -> JsonNumber {
        JsonNumber(NumberText::new(&number.to_string()))
    }
}

impl From<u64> for JsonNumber {
    fn from(n: u64) -> JsonNumber {
        JsonNumber(NumberText::new(&n.to_string()))
    }
}

impl From<i64> for JsonNumber {
    fn from(n: i64) -> JsonNumber {
        JsonNumber(NumberText::new(&n.to_string()))
    }
}

impl JsonObject {
    /// An empty object.
    pub fn new() -> JsonObject {
        JsonObject::default()
    }

    fn position(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.entries.iter().position(|(k, _)| k == key),
        }
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    /// The value of a key, to change it in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut JsonValue> {
        self.position(key).map(|i| &mut self.entries[i].1)
    }

    /// Whether the object has a key.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets a key; a new key goes last, an existing one keeps its place.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<JsonValue>) {
        let key = key.into();
        let value = value.into();
        if let Some(i) = self.position(&key) {
            self.entries[i].1 = value;
            return;
        }
        if let Some(index) = &mut self.index {
            index.insert(key.clone(), self.entries.len());
        }
        self.entries.push((key, value));
        if self.index.is_none() && self.entries.len() > INDEXED_FROM {
            self.reindex();
        }
    }

    /// Removes a key, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<JsonValue> {
        let i = self.position(key)?;
        let (_, value) = self.entries.remove(i);
        if self.index.is_some() {
            self.reindex();
        }
        Some(value)
    }

    fn reindex(&mut self) {
        self.index = Some(
            self.entries
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.clone(), i))
                .collect(),
        );
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &JsonValue)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }
}

/// Equal when both have the same keys with equal values, whatever their order (as JSON
/// objects are compared).
impl PartialEq for JsonObject {
    fn eq(&self, other: &JsonObject) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl fmt::Debug for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<String>, V: Into<JsonValue>> FromIterator<(K, V)> for JsonObject {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> JsonObject {
        let mut object = JsonObject::new();
        for (k, v) in iter {
            object.insert(k, v);
        }
        object
    }
}

impl<'a> IntoIterator for &'a JsonObject {
    type Item = (&'a String, &'a JsonValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, JsonValue)>,
        fn(&'a (String, JsonValue)) -> (&'a String, &'a JsonValue),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl JsonValue {
    /// Parses JSON text, keeping every number's text and every object's key order.
    ///
    /// Nesting is limited to [`MAX_DEPTH`] arrays and objects, as `serde_json` limits a
    /// `Value`.
    pub fn parse(text: &str) -> Result<JsonValue, serde_json::Error> {
        // A container is checked whole by splitting it (`serde_json` reads it, members and
        // trailing text included); a scalar has to be checked first.
        let trimmed = text.trim_start_matches([' ', '\t', '\n', '\r']);
        if !matches!(trimmed.as_bytes().first(), Some(b'{' | b'[')) {
            let _: &RawValue = serde_json::from_str(text)?;
        }
        JsonValue::from_raw(text, 0)
    }

    /// Builds the value of one piece of JSON text that `serde_json` has already checked.
    /// Containers are split into the raw text of their members, one level at a time, so the
    /// text of a value `d` levels deep is scanned `d` times; the depth limit bounds both that
    /// and the recursion (`serde_json` checks a raw value's nesting without a limit).
    fn from_raw(text: &str, depth: usize) -> Result<JsonValue, serde_json::Error> {
        let text = text.trim_matches([' ', '\t', '\n', '\r']);
        let container = matches!(text.as_bytes().first(), Some(b'{' | b'['));
        if container && depth >= MAX_DEPTH {
            return Err(serde::de::Error::custom(format!(
                "recursion limit exceeded: the JSON nests deeper than {MAX_DEPTH} arrays and objects"
            )));
        }
        Ok(match text.as_bytes().first() {
            Some(b'{') => {
                let RawEntries(entries) = serde_json::from_str(text)?;
                let mut object = JsonObject {
                    entries: Vec::with_capacity(entries.len()),
                    index: None,
                };
                for (key, raw) in entries {
                    object.insert(key, JsonValue::from_raw(raw.get(), depth + 1)?);
                }
                JsonValue::Object(object)
            }
            Some(b'[') => {
                let items: Vec<&RawValue> = serde_json::from_str(text)?;
                JsonValue::Array(
                    items
                        .into_iter()
                        .map(|raw| JsonValue::from_raw(raw.get(), depth + 1))
                        .collect::<Result<_, _>>()?,
                )
            }
            // A string without escapes is its text between the quotes.
            Some(b'"') if !text.contains('\\') => {
                JsonValue::String(text[1..text.len() - 1].to_owned())
            }
            Some(b'"') => JsonValue::String(serde_json::from_str(text)?),
            Some(b't') => JsonValue::Bool(true),
            Some(b'f') => JsonValue::Bool(false),
            Some(b'n') => JsonValue::Null,
            _ => JsonValue::Number(JsonNumber(NumberText::new(text))),
        })
    }

    /// The lossy view as a `serde_json::Value` (see the module docs for what it rounds).
    pub fn to_value(&self) -> Value {
        match self {
            JsonValue::Null => Value::Null,
            JsonValue::Bool(b) => Value::Bool(*b),
            JsonValue::Number(n) => n
                .to_number()
                .map_or_else(|| Value::String(n.as_str().to_owned()), Value::Number),
            JsonValue::String(s) => Value::String(s.clone()),
            JsonValue::Array(items) => {
                Value::Array(items.iter().map(JsonValue::to_value).collect())
            }
            JsonValue::Object(object) => {
                // Inserted one by one: collecting a `BTreeMap` first gathers and sorts the
                // entries in a vector of their own, an allocation more per object.
                let mut map = serde_json::Map::new();
                for (key, value) in object {
                    map.insert(key.clone(), value.to_value());
                }
                Value::Object(map)
            }
        }
    }

    /// The string, for string values.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, for boolean values.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            JsonValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, for number values.
    pub fn as_number(&self) -> Option<&JsonNumber> {
        match self {
            JsonValue::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The items, for arrays.
    pub fn as_array(&self) -> Option<&Vec<JsonValue>> {
        match self {
            JsonValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The entries, for objects.
    pub fn as_object(&self) -> Option<&JsonObject> {
        match self {
            JsonValue::Object(object) => Some(object),
            _ => None,
        }
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, JsonValue::Null)
    }

    /// The value of an object's key.
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        self.as_object().and_then(|object| object.get(key))
    }

    /// The value an RFC 6901 JSON pointer names (`""` is the whole value).
    pub fn pointer(&self, pointer: &str) -> Option<&JsonValue> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        rest.split('/').try_fold(self, |value, token| {
            let token = token.replace("~1", "/").replace("~0", "~");
            match value {
                JsonValue::Object(object) => object.get(&token),
                JsonValue::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
        })
    }
}

impl std::ops::Index<&str> for JsonValue {
    type Output = JsonValue;

    /// The value of an object's key, or `null` (as `serde_json::Value` indexes).
    fn index(&self, key: &str) -> &JsonValue {
        self.get(key).unwrap_or(&NULL)
    }
}

impl std::ops::Index<usize> for JsonValue {
    type Output = JsonValue;

    /// An array's item, or `null` (as `serde_json::Value` indexes).
    fn index(&self, index: usize) -> &JsonValue {
        self.as_array()
            .and_then(|items| items.get(index))
            .unwrap_or(&NULL)
    }
}

/// Compares with a `serde_json::Value` as JSON Schema would: numbers by value, objects
/// regardless of key order.
impl PartialEq<Value> for JsonValue {
    fn eq(&self, other: &Value) -> bool {
        values_equal(self, &JsonValue::from(other))
    }
}

/// A string value equals its text (as `serde_json::Value` compares).
impl PartialEq<str> for JsonValue {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

/// A string value equals its text (as `serde_json::Value` compares).
impl PartialEq<&str> for JsonValue {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl From<&Value> for JsonValue {
    fn from(value: &Value) -> JsonValue {
        match value {
            Value::Null => JsonValue::Null,
            Value::Bool(b) => JsonValue::Bool(*b),
            Value::Number(n) => JsonValue::Number(JsonNumber::from(n)),
            Value::String(s) => JsonValue::String(s.clone()),
            Value::Array(items) => JsonValue::Array(items.iter().map(JsonValue::from).collect()),
            Value::Object(map) => JsonValue::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), JsonValue::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<Value> for JsonValue {
    fn from(value: Value) -> JsonValue {
        JsonValue::from(&value)
    }
}

impl From<&str> for JsonValue {
    fn from(text: &str) -> JsonValue {
        JsonValue::String(text.to_owned())
    }
}

impl From<String> for JsonValue {
    fn from(text: String) -> JsonValue {
        JsonValue::String(text)
    }
}

impl From<bool> for JsonValue {
    fn from(b: bool) -> JsonValue {
        JsonValue::Bool(b)
    }
}

impl From<JsonNumber> for JsonValue {
    fn from(n: JsonNumber) -> JsonValue {
        JsonValue::Number(n)
    }
}

impl From<Vec<JsonValue>> for JsonValue {
    fn from(items: Vec<JsonValue>) -> JsonValue {
        JsonValue::Array(items)
    }
}

impl From<JsonObject> for JsonValue {
    fn from(object: JsonObject) -> JsonValue {
        JsonValue::Object(object)
    }
}

/// Compact JSON text, numbers as written and keys in order.
impl fmt::Display for JsonValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonValue::Null => f.write_str("null"),
            JsonValue::Bool(b) => write!(f, "{b}"),
            JsonValue::Number(n) => f.write_str(n.as_str()),
            JsonValue::String(s) => write_string(f, s),
            JsonValue::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            JsonValue::Object(object) => {
                f.write_str("{")?;
                for (i, (key, item)) in object.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write_string(f, key)?;
                    write!(f, ":{item}")?;
                }
                f.write_str("}")
            }
        }
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    // Escaping a string cannot fail; `serde_json` spells the escapes.
    let quoted = serde_json::to_string(s).map_err(|_| fmt::Error)?;
    f.write_str(&quoted)
}

/// Serialises numbers as written and keys in order. Integers that fit `u64`/`i64` in their
/// plain spelling are serialised as integers (every format has them); other numbers go out as
/// their exact text through `serde_json`'s raw values, which `serde_json` writes verbatim.
impl Serialize for JsonValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            JsonValue::Null => serializer.serialize_unit(),
            JsonValue::Bool(b) => serializer.serialize_bool(*b),
            JsonValue::Number(n) => {
                let text = n.as_str();
                match (n.as_u64(), n.as_i64()) {
                    (Some(u), _) if u.to_string() == text => serializer.serialize_u64(u),
                    (_, Some(i)) if i.to_string() == text => serializer.serialize_i64(i),
                    _ => RawValue::from_string(text.to_owned())
                        .map_err(serde::ser::Error::custom)?
                        .serialize(serializer),
                }
            }
            JsonValue::String(s) => serializer.serialize_str(s),
            JsonValue::Array(items) => serializer.collect_seq(items),
            JsonValue::Object(object) => serializer.collect_map(object.iter()),
        }
    }
}

/// Reads a value from a `serde_json` deserializer without losing digits or order (it goes
/// through the raw text; other formats are refused).
impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JsonValue, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        JsonValue::from_raw(raw.get(), 0).map_err(serde::de::Error::custom)
    }
}

/// Any JSON value: the schema of a field that holds a `JsonValue`.
impl schemars::JsonSchema for JsonValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AnyValue".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::Schema::default()
    }
}

/// An object's entries as raw text, in order.
struct RawEntries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for RawEntries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RawEntries<'de>, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = RawEntries<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntries<'de>, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(key) = map.next_key::<String>()? {
                    entries.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(RawEntries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

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

    /// A whole number as plain digits (`-0` and `0.0` are `0`); `None` for a fraction or for
    /// more than 39 digits (beyond every integer type serde reads).
    fn plain_integer(&self) -> Option<String> {
        if !self.is_integer() {
            return None;
        }
        if self.digits.is_empty() {
            return Some(String::from("0"));
        }
        let zeros = usize::try_from(self.exponent).ok()?;
        if self.digits.len().saturating_add(zeros) > 39 {
            return None;
        }
        let mut text = String::with_capacity(self.digits.len() + zeros + 1);
        if self.negative {
            text.push('-');
        }
        text.extend(self.digits.iter().map(|d| char::from(b'0' + d)));
        text.extend(std::iter::repeat_n('0', zeros));
        Some(text)
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

/// Whether a `serde_json::Value` nests deeper than `limit` arrays and objects. It walks with a
/// stack of its own, so a hand-built value of any depth is measured without recursion (the
/// conversion into [`JsonValue`] recurses).
pub(crate) fn nests_deeper_than(value: &Value, limit: usize) -> bool {
    let mut pending = vec![(value, 0usize)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth >= limit {
            return true;
        }
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

fn decimal(number: &JsonNumber) -> Option<Decimal> {
    Decimal::parse(number.as_str())
}

/// Whether a JSON number is mathematically an integer (`1.0` and `2^64+1` are; `0.5` is not).
pub fn is_integer(number: &JsonNumber) -> bool {
    let text = number.as_str();
    // The common spelling needs no parsing: plain digits are an integer.
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return true;
    }
    decimal(number).is_some_and(|d| d.is_integer())
}

/// Whether two JSON numbers denote the same value, whatever their spelling.
pub fn numbers_equal(a: &JsonNumber, b: &JsonNumber) -> bool {
    if a.as_str() == b.as_str() {
        return true;
    }
    match (decimal(a), decimal(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Deep JSON equality with numbers compared by value and objects regardless of key order
/// (JSON Schema's notion of equality).
pub fn values_equal(a: &JsonValue, b: &JsonValue) -> bool {
    match (a, b) {
        (JsonValue::Number(a), JsonValue::Number(b)) => numbers_equal(a, b),
        (JsonValue::Array(a), JsonValue::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_equal(x, y))
        }
        (JsonValue::Object(a), JsonValue::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Deserialises a typed value from a `serde_json::Value` (whose numbers are already `u64`,
/// `i64` or `f64`).
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(value)
}

/// Like [`from_value`], but a failure names where in the value it happened, as a
/// [`Violation`] (`/limit: -1 is out of range for this field` for a `u32` given `-1`).
pub fn from_value_located<T: DeserializeOwned>(value: &Value) -> Result<T, Violation> {
    // Tracking the path costs on every field; do it only to explain a failure.
    if let Ok(typed) = from_value(value) {
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

/// The JSON type name of a value, as JSON Schema spells it (`integer` for integral numbers).
pub(crate) fn type_name(value: &JsonValue) -> &'static str {
    match value {
        JsonValue::Null => "null",
        JsonValue::Bool(_) => "boolean",
        JsonValue::Number(n) if is_integer(n) => "integer",
        JsonValue::Number(_) => "number",
        JsonValue::String(_) => "string",
        JsonValue::Array(_) => "array",
        JsonValue::Object(_) => "object",
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
        let printed =
            r#"{"z":[18446744073709551617,1e400,0.10,-0],"a":{"y":"é\n","b":null},"m":true}"#;
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

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(pointer_push("/a", "b/c~d"), "/a/b~1c~0d");
    }
}
