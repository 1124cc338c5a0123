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

mod number;
#[cfg(test)]
mod tests;
mod typed;

pub(crate) use number::Decimal;
use number::NumberText;
pub use number::{JsonNumber, is_integer, numbers_equal};
pub use typed::{from_str, from_str_located, from_value, from_value_located};

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;
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
