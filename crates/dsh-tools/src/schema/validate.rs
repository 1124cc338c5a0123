//! The validator: every rule the subset can declare, checked with JSON-pointer violations.

use super::{ObjectSchema, ScalarType, SchemaKind, ValueSchema};
use crate::json::{JsonNumber, JsonValue, is_integer};
use crate::json::{pointer_push, type_name, values_equal};
use crate::violation::Violation;
use serde_json::Value;

/// Validates a value against a schema, reporting every violation.
///
/// Numbers are compared losslessly: an integer beyond `u64` is still an integer, `1.0` is a valid
/// integer, and `enum`/`const` compare numbers by value. Parse argument text with
/// [`JsonValue::parse`](crate::json::JsonValue::parse) to keep every digit; a
/// `serde_json::Value` converts with `JsonValue::from`, with the digits it has kept.
pub fn validate(schema: &ValueSchema, value: &JsonValue) -> Result<(), Vec<Violation>> {
    // The common case, a valid value, takes a pass that allocates nothing; pointers and
    // messages are built only when there is something to report.
    if is_valid(schema, value) {
        return Ok(());
    }
    let mut out = Vec::new();
    check(schema, value, "", &mut out);
    // The two passes implement the same rules (`the_fast_pass_agrees_with_the_diagnostic_pass`
    // holds them to it); a disagreement here is a bug in one of them.
    debug_assert!(
        !out.is_empty(),
        "the diagnostic pass found nothing the fast pass refused"
    );
    if out.is_empty() {
        out.push(Violation::new("", "the value does not match the schema"));
    }
    Err(out)
}

/// Validates a `serde_json::Value` exactly as [`validate`] judges `JsonValue::from(value)`,
/// without converting a valid value: the canonical values tools return are checked on every
/// call, and converting them cost an allocation per key and per number. Only an invalid value
/// is converted, to report its violations.
pub(crate) fn validate_value(schema: &ValueSchema, value: &Value) -> Result<(), Vec<Violation>> {
    if is_valid(schema, value) {
        return Ok(());
    }
    validate(schema, &JsonValue::from(value))
}

/// Whether a `serde_json::Value` is valid, with the verdict of [`validate_value`] and without
/// building its violations: a caller that only needs the verdict (the concurrency classifier)
/// pays for no conversion when the value is invalid.
pub(crate) fn accepts_value(schema: &ValueSchema, value: &Value) -> bool {
    is_valid(schema, value)
}

/// What the allocation-free pass needs to know of a value. [`JsonValue`] answers for itself; a
/// `serde_json::Value` answers as its `JsonValue::from` conversion would, so both are judged by
/// the same rules.
trait Judged: Sized {
    /// Whether the value is of a scalar type (`1.0` is an `integer`).
    fn has_type(&self, ty: ScalarType) -> bool;
    /// Equality in the sense of JSON Schema's `enum` and `const` ([`values_equal`]).
    fn equals(&self, expected: &JsonValue) -> bool;
    /// The items, for arrays.
    fn items(&self) -> Option<&[Self]>;
    /// The members, for objects.
    fn members(&self) -> Option<impl Iterator<Item = (&str, &Self)>>;
    /// Whether an object has a key (`false` for anything else).
    fn has_key(&self, key: &str) -> bool;
}

impl Judged for JsonValue {
    fn has_type(&self, ty: ScalarType) -> bool {
        ty.matches(self)
    }

    fn equals(&self, expected: &JsonValue) -> bool {
        values_equal(expected, self)
    }

    fn items(&self) -> Option<&[JsonValue]> {
        self.as_array().map(Vec::as_slice)
    }

    fn members(&self) -> Option<impl Iterator<Item = (&str, &JsonValue)>> {
        self.as_object()
            .map(|map| map.iter().map(|(k, v)| (k.as_str(), v)))
    }

    fn has_key(&self, key: &str) -> bool {
        self.as_object().is_some_and(|map| map.contains_key(key))
    }
}

impl Judged for Value {
    fn has_type(&self, ty: ScalarType) -> bool {
        match (ty, self) {
            (ScalarType::String, Value::String(_))
            | (ScalarType::Number, Value::Number(_))
            | (ScalarType::Boolean, Value::Bool(_))
            | (ScalarType::Null, Value::Null) => true,
            // `u64` and `i64` convert to plain digits; a float converts to the text
            // `is_integer` judges (`1.0` is an integer, `0.5` is not).
            (ScalarType::Integer, Value::Number(n)) => {
                n.is_u64() || n.is_i64() || is_integer(&JsonNumber::from(n))
            }
            _ => false,
        }
    }

    fn equals(&self, expected: &JsonValue) -> bool {
        // `enum` and `const` are rare in output schemas; converting here keeps one notion of
        // equality.
        values_equal(expected, &JsonValue::from(self))
    }

    fn items(&self) -> Option<&[Value]> {
        self.as_array().map(Vec::as_slice)
    }

    fn members(&self) -> Option<impl Iterator<Item = (&str, &Value)>> {
        self.as_object()
            .map(|map| map.iter().map(|(k, v)| (k.as_str(), v)))
    }

    fn has_key(&self, key: &str) -> bool {
        self.as_object().is_some_and(|map| map.contains_key(key))
    }
}

/// Whether a value is valid, without building any diagnostics. It restates every rule of
/// [`check`]; a property test holds the two to the same verdict.
fn is_valid<V: Judged>(schema: &ValueSchema, value: &V) -> bool {
    match &schema.kind {
        SchemaKind::Json => true,
        SchemaKind::Scalar {
            ty,
            allowed,
            constant,
        } => {
            value.has_type(*ty)
                && allowed
                    .as_ref()
                    .is_none_or(|allowed| allowed.iter().any(|a| value.equals(a)))
                && constant
                    .as_ref()
                    .is_none_or(|constant| value.equals(constant))
        }
        SchemaKind::Array { items } => match value.items() {
            Some(list) => items
                .as_ref()
                .is_none_or(|items| list.iter().all(|item| is_valid(items, item))),
            None => false,
        },
        SchemaKind::Object(object) => {
            let Some(mut members) = value.members() else {
                return false;
            };
            object.required.iter().all(|name| value.has_key(name))
                && members.all(|(key, item)| match object.property(key) {
                    Some(schema) => is_valid(schema, item),
                    None => object.additional_properties,
                })
        }
        SchemaKind::OneOf(branches) => {
            let mut matched = 0;
            for branch in branches {
                if is_valid(branch, value) {
                    matched += 1;
                    if matched > 1 {
                        return false;
                    }
                }
            }
            matched == 1
        }
    }
}

fn check(schema: &ValueSchema, value: &JsonValue, at: &str, out: &mut Vec<Violation>) {
    match &schema.kind {
        SchemaKind::Json => {}
        SchemaKind::Scalar {
            ty,
            allowed,
            constant,
        } => {
            if !ty.matches(value) {
                out.push(Violation::new(at, type_mismatch(*ty, value)));
                return;
            }
            if let Some(allowed) = allowed
                && !allowed.iter().any(|a| values_equal(a, value))
            {
                let list = allowed
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                out.push(Violation::new(
                    at,
                    format!("expected one of {list}, got {value}"),
                ));
            }
            if let Some(constant) = constant
                && !values_equal(constant, value)
            {
                out.push(Violation::new(
                    at,
                    format!("expected {constant}, got {value}"),
                ));
            }
        }
        SchemaKind::Array { items } => {
            let JsonValue::Array(list) = value else {
                out.push(Violation::new(
                    at,
                    format!("expected array, got {}", type_name(value)),
                ));
                return;
            };
            if let Some(items) = items {
                for (i, item) in list.iter().enumerate() {
                    check(items, item, &format!("{at}/{i}"), out);
                }
            }
        }
        SchemaKind::Object(object) => check_object(object, value, at, out),
        SchemaKind::OneOf(branches) => check_one_of(branches, value, at, out),
    }
}

fn check_object(object: &ObjectSchema, value: &JsonValue, at: &str, out: &mut Vec<Violation>) {
    let JsonValue::Object(map) = value else {
        out.push(Violation::new(
            at,
            format!("expected object, got {}", type_name(value)),
        ));
        return;
    };
    for name in &object.required {
        if !map.contains_key(name) {
            out.push(Violation::new(
                pointer_push(at, name),
                "required property is missing",
            ));
        }
    }
    for (key, item) in map {
        match object.property(key) {
            Some(schema) => check(schema, item, &pointer_push(at, key), out),
            None if !object.additional_properties => out.push(Violation::new(
                pointer_push(at, key),
                object.withheld(key).unwrap_or(
                    "unknown property (this object accepts only its declared properties)",
                ),
            )),
            None => {}
        }
    }
}

fn check_one_of(branches: &[ValueSchema], value: &JsonValue, at: &str, out: &mut Vec<Violation>) {
    let mut matched = Vec::new();
    let mut failures = Vec::with_capacity(branches.len());
    for (i, branch) in branches.iter().enumerate() {
        let mut branch_out = Vec::new();
        check(branch, value, at, &mut branch_out);
        if branch_out.is_empty() {
            matched.push(i);
        } else {
            failures.push((i, branch_out));
        }
    }
    match matched.len() {
        1 => {}
        0 => {
            // Point at the real problem when one branch is clearly the one the value was aiming
            // for: the only branch of the value's JSON type whose `const` properties all match
            // (how tagged enums are told apart).
            let aimed: Vec<&(usize, Vec<Violation>)> = failures
                .iter()
                .filter(|(i, _)| aims_at(&branches[*i], value))
                .collect();
            if let [(_, violations)] = aimed.as_slice() {
                out.extend(violations.iter().cloned());
            } else {
                out.push(Violation::new(
                    at,
                    format!(
                        "expected {}, got {}",
                        alternatives(branches),
                        describe_value(value)
                    ),
                ));
            }
        }
        n => out.push(Violation::new(
            at,
            format!(
                "value matches {n} alternatives (#{}); exactly one must match",
                matched
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", #")
            ),
        )),
    }
}

/// Why a value is not of a scalar type. A fraction where an integer is due says so in words
/// (`expected a whole number, got 1000.5`), since `expected integer, got number` reads as a
/// contradiction to a model that sent `1000.5` for a count.
fn type_mismatch(ty: ScalarType, value: &JsonValue) -> String {
    match (ty, value) {
        (ScalarType::Integer, JsonValue::Number(n)) if n.as_str().len() <= 40 => {
            format!("expected a whole number, got {}", n.as_str())
        }
        (ScalarType::Integer, JsonValue::Number(_)) => {
            String::from("expected a whole number, got number")
        }
        _ => format!("expected {ty}, got {}", type_name(value)),
    }
}

/// A short description of what a branch accepts (`integer`, `"circle"`, `object with kind
/// "square"`).
fn describe(schema: &ValueSchema) -> String {
    match &schema.kind {
        SchemaKind::Json => String::from("any value"),
        SchemaKind::Scalar {
            constant: Some(constant),
            ..
        } => constant.to_string(),
        SchemaKind::Scalar {
            allowed: Some(allowed),
            ..
        } => allowed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" or "),
        SchemaKind::Scalar { ty, .. } => ty.as_str().to_owned(),
        SchemaKind::Array { .. } => String::from("an array"),
        SchemaKind::Object(object) => {
            let tags: Vec<String> = object
                .properties()
                .filter_map(|(name, property)| match &property.kind {
                    SchemaKind::Scalar {
                        constant: Some(constant),
                        ..
                    } => Some(format!("{name} {constant}")),
                    _ => None,
                })
                .collect();
            if tags.is_empty() {
                String::from("an object")
            } else {
                format!("an object with {}", tags.join(" and "))
            }
        }
        SchemaKind::OneOf(branches) => alternatives(branches),
    }
}

/// The alternatives of a `oneOf`, as `a, b or c`.
fn alternatives(branches: &[ValueSchema]) -> String {
    let described: Vec<String> = branches.iter().map(describe).collect();
    match described.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => described.join(""),
    }
}

/// A value as a message shows it: its type, and its text when short.
fn describe_value(value: &JsonValue) -> String {
    match value {
        // `null` is its own text: `got null`, not `got null null`.
        JsonValue::Object(_) | JsonValue::Array(_) | JsonValue::Null => type_name(value).to_owned(),
        scalar => {
            let text = scalar.to_string();
            if text.len() <= 40 {
                format!("{} {text}", type_name(value))
            } else {
                type_name(value).to_owned()
            }
        }
    }
}

/// Whether a value looks like it was meant for this branch: same JSON type, and for objects,
/// every present `const`-valued property agrees.
fn aims_at(branch: &ValueSchema, value: &JsonValue) -> bool {
    match (&branch.kind, value) {
        (SchemaKind::Json, _) => true,
        (SchemaKind::Scalar { ty, .. }, v) => {
            ty.matches(v) || matches!((ty, v), (super::ScalarType::Integer, JsonValue::Number(_)))
        }
        (SchemaKind::Array { .. }, JsonValue::Array(_)) => true,
        (SchemaKind::Object(object), JsonValue::Object(map)) => {
            let mut has_tag = false;
            for (name, schema) in object.properties() {
                if let SchemaKind::Scalar {
                    constant: Some(constant),
                    ..
                } = &schema.kind
                {
                    has_tag = true;
                    if !map.get(name).is_some_and(|v| values_equal(v, constant)) {
                        return false;
                    }
                }
            }
            has_tag || map.keys().all(|k| object.property(k).is_some())
        }
        (SchemaKind::OneOf(branches), v) => branches.iter().any(|b| aims_at(b, v)),
        _ => false,
    }
}

// The generators the differential test uses, so both tests cover the same pairs.
#[cfg(test)]
#[path = "../../tests/support/schema_strategies.rs"]
mod strategies;

#[cfg(test)]
mod tests;
