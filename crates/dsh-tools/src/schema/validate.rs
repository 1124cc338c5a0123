//! The validator: every rule the subset can declare, checked with JSON-pointer violations.

use super::{ObjectSchema, SchemaKind, ValueSchema};
use crate::json::{pointer_push, type_name, values_equal};
use serde_json::Value;
use std::fmt;

/// One validation problem: where (a JSON pointer into the validated value, or into the schema
/// for schema problems) and what.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Violation {
    /// RFC 6901 JSON pointer; `""` is the root.
    pub pointer: String,
    /// A plain message, e.g. `expected string, got number`.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(pointer: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}

/// Validates a value against a schema, reporting every violation.
///
/// Numbers are compared losslessly: an integer beyond `u64` is still an integer, `1.0` is a valid
/// integer, and `enum`/`const` compare numbers by value.
pub fn validate(schema: &ValueSchema, value: &Value) -> Result<(), Vec<Violation>> {
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

/// Whether a value is valid, without building any diagnostics. It restates every rule of
/// [`check`]; a property test holds the two to the same verdict.
fn is_valid(schema: &ValueSchema, value: &Value) -> bool {
    match &schema.kind {
        SchemaKind::Json => true,
        SchemaKind::Scalar {
            ty,
            allowed,
            constant,
        } => {
            ty.matches(value)
                && allowed
                    .as_ref()
                    .is_none_or(|allowed| allowed.iter().any(|a| values_equal(a, value)))
                && constant
                    .as_ref()
                    .is_none_or(|constant| values_equal(constant, value))
        }
        SchemaKind::Array { items } => match value {
            Value::Array(list) => items
                .as_ref()
                .is_none_or(|items| list.iter().all(|item| is_valid(items, item))),
            _ => false,
        },
        SchemaKind::Object(object) => {
            let Value::Object(map) = value else {
                return false;
            };
            object.required.iter().all(|name| map.contains_key(name))
                && map.iter().all(|(key, item)| match object.property(key) {
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

fn check(schema: &ValueSchema, value: &Value, at: &str, out: &mut Vec<Violation>) {
    match &schema.kind {
        SchemaKind::Json => {}
        SchemaKind::Scalar {
            ty,
            allowed,
            constant,
        } => {
            if !ty.matches(value) {
                out.push(Violation::new(
                    at,
                    format!("expected {ty}, got {}", type_name(value)),
                ));
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
            let Value::Array(list) = value else {
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

fn check_object(object: &ObjectSchema, value: &Value, at: &str, out: &mut Vec<Violation>) {
    let Value::Object(map) = value else {
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
                "unknown property (this object accepts only its declared properties)",
            )),
            None => {}
        }
    }
}

fn check_one_of(branches: &[ValueSchema], value: &Value, at: &str, out: &mut Vec<Violation>) {
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
fn describe_value(value: &Value) -> String {
    match value {
        Value::Object(_) | Value::Array(_) => type_name(value).to_owned(),
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
fn aims_at(branch: &ValueSchema, value: &Value) -> bool {
    match (&branch.kind, value) {
        (SchemaKind::Json, _) => true,
        (SchemaKind::Scalar { ty, .. }, v) => {
            ty.matches(v) || matches!((ty, v), (super::ScalarType::Integer, Value::Number(_)))
        }
        (SchemaKind::Array { .. }, Value::Array(_)) => true,
        (SchemaKind::Object(object), Value::Object(map)) => {
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 4_000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn the_fast_pass_agrees_with_the_diagnostic_pass((schema, value) in strategies::pairs()) {
            let mut violations = Vec::new();
            check(&schema, &value, "", &mut violations);
            prop_assert_eq!(
                is_valid(&schema, &value),
                violations.is_empty(),
                "schema {} value {} violations {:?}",
                schema.to_json(),
                value,
                violations
            );
        }
    }

    fn violations(schema: &ValueSchema, value: Value) -> Vec<String> {
        match validate(schema, &value) {
            Ok(()) => Vec::new(),
            Err(list) => list.into_iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn reports_every_violation_with_its_pointer() {
        let schema = ValueSchema::closed_object()
            .required("path", ValueSchema::string())
            .required("items", ValueSchema::array(ValueSchema::integer()))
            .property("mode", ValueSchema::string().allowed(["fast", "slow"]));
        assert_eq!(
            violations(
                &schema,
                json!({"items": [1, 2.5, "x"], "mode": "medium", "extra": true})
            ),
            vec![
                "/path: required property is missing",
                "/items/1: expected integer, got number",
                "/items/2: expected integer, got string",
                "/mode: expected one of \"fast\", \"slow\", got \"medium\"",
                "/extra: unknown property (this object accepts only its declared properties)",
            ]
        );
    }

    #[test]
    fn numbers_are_checked_losslessly() {
        let int = ValueSchema::integer();
        for text in ["18446744073709551617", "1.0", "-0", "1e2"] {
            let v: Value = serde_json::from_str(text).unwrap();
            assert!(validate(&int, &v).is_ok(), "{text}");
        }
        let v: Value = serde_json::from_str("0.1").unwrap();
        assert!(validate(&int, &v).is_err());
        let one = ValueSchema::number().constant(json!(1));
        let v: Value = serde_json::from_str("1.0").unwrap();
        assert!(validate(&one, &v).is_ok());
    }

    #[test]
    fn one_of_requires_exactly_one_match() {
        let schema = ValueSchema::one_of([ValueSchema::number(), ValueSchema::integer()]);
        assert_eq!(
            violations(&schema, json!(1)),
            vec!["(root): value matches 2 alternatives (#0, #1); exactly one must match"]
        );
        assert!(violations(&schema, json!(1.5)).is_empty());
        assert_eq!(
            violations(&schema, json!("x")),
            vec!["(root): expected number or integer, got string \"x\""]
        );
        let nullable = ValueSchema::nullable(ValueSchema::integer());
        assert_eq!(
            violations(&nullable, json!("5")),
            vec!["(root): expected integer or null, got string \"5\""]
        );
    }

    #[test]
    fn tagged_alternatives_point_into_the_aimed_branch() {
        let shape = ValueSchema::one_of([
            ValueSchema::closed_object()
                .required("kind", ValueSchema::string().constant("circle"))
                .required("r", ValueSchema::number()),
            ValueSchema::closed_object()
                .required("kind", ValueSchema::string().constant("square"))
                .required("side", ValueSchema::integer()),
        ]);
        assert_eq!(
            violations(&shape, json!({"kind": "square", "side": "big"})),
            vec!["/side: expected integer, got string"]
        );
    }
}
