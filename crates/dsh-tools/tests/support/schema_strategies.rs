//! Generators of (schema, value) pairs over the whole value-schema subset, shared by the
//! differential test against `jsonschema` and the validator's own unit tests. Included with
//! `#[path]`; the including module provides `ValueSchema`, `SchemaKind`, `JsonValue` and
//! `validate`.
//!
//! Values are `serde_json::Value`s, which the `jsonschema` oracle reads; numbers that need every
//! digit are covered by the lossless unit tests, since `serde_json` (and so the oracle) holds
//! them as `f64`.

use super::{JsonValue, SchemaKind, ValueSchema, validate};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: [&str; 4] = ["a", "b", "c", "kind"];

fn number_pool() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just("0"),
        Just("1"),
        Just("1.0"),
        Just("-2"),
        Just("1.5"),
        Just("0.1"),
        Just("1e2"),
        Just("18446744073709551617"),
        Just("-0.25"),
    ]
    .prop_map(|text| serde_json::from_str::<Value>(text).unwrap())
}

fn scalar_pool() -> impl Strategy<Value = Value> {
    prop_oneof![
        number_pool(),
        Just(json!("x")),
        Just(json!("y")),
        Just(json!("")),
        Just(json!(true)),
        Just(json!(false)),
        Just(Value::Null),
    ]
}

/// Any JSON value from small pools, so that random values often collide with schema literals.
fn any_value() -> impl Strategy<Value = Value> {
    scalar_pool().prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..4).prop_map(
                |pairs| Value::Object(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>()
                )
            ),
        ]
    })
}

fn scalar_schema() -> impl Strategy<Value = ValueSchema> {
    let base = prop_oneof![
        Just(ValueSchema::string()),
        Just(ValueSchema::number()),
        Just(ValueSchema::integer()),
        Just(ValueSchema::boolean()),
        Just(ValueSchema::null()),
    ];
    (base, prop::collection::vec(scalar_pool(), 1..4), 0..4u8).prop_map(
        |(schema, literals, mode)| {
            // Keep only literals of the node's type, as registration requires.
            let typed: Vec<Value> = literals
                .into_iter()
                .filter(|v| validate(&schema, &JsonValue::from(v)).is_ok())
                .collect();
            match (mode, typed.first().cloned()) {
                (1, Some(first)) => schema.constant(first),
                (2, Some(_)) => schema.allowed(typed),
                _ => schema,
            }
        },
    )
}

fn schema_strategy() -> impl Strategy<Value = ValueSchema> {
    let leaf = prop_oneof![
        4 => scalar_schema(),
        1 => Just(ValueSchema::json()),
        1 => Just(ValueSchema::any_array()),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(ValueSchema::array),
            (
                prop::collection::vec(
                    (
                        prop::sample::select(KEYS.to_vec()),
                        inner.clone(),
                        any::<bool>()
                    ),
                    0..4
                ),
                any::<bool>(),
            )
                .prop_map(|(props, open)| {
                    let mut object = if open {
                        ValueSchema::open_object()
                    } else {
                        ValueSchema::closed_object()
                    };
                    for (key, schema, required) in props {
                        object = if required {
                            object.required(key, schema)
                        } else {
                            object.property(key, schema)
                        };
                    }
                    object
                }),
            prop::collection::vec(inner, 2..4).prop_map(ValueSchema::one_of),
        ]
    })
}

/// A value aimed at the schema (often valid), or a random one.
fn value_for(schema: &ValueSchema) -> BoxedStrategy<Value> {
    let aimed: BoxedStrategy<Value> = match schema.kind() {
        SchemaKind::Scalar {
            allowed: Some(allowed),
            ..
        } => prop::sample::select(allowed.iter().map(JsonValue::to_value).collect::<Vec<_>>())
            .boxed(),
        SchemaKind::Scalar {
            constant: Some(constant),
            ..
        } => Just(constant.to_value()).boxed(),
        SchemaKind::Scalar { .. } | SchemaKind::Json => scalar_pool().boxed(),
        SchemaKind::Array { items } => match items {
            Some(items) => prop::collection::vec(value_for(items), 0..3)
                .prop_map(Value::Array)
                .boxed(),
            None => prop::collection::vec(any_value(), 0..3)
                .prop_map(Value::Array)
                .boxed(),
        },
        SchemaKind::Object(object) => {
            let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = object
                .properties()
                .map(|(name, property)| {
                    let name = name.to_owned();
                    let present = object.is_required(&name);
                    (
                        value_for(property),
                        prop::bool::weighted(if present { 0.95 } else { 0.5 }),
                    )
                        .prop_map(move |(v, keep)| keep.then(|| (name.clone(), v)))
                        .boxed()
                })
                .collect();
            let extra =
                prop::option::weighted(0.15, (prop::sample::select(KEYS.to_vec()), any_value()));
            (fields, extra)
                .prop_map(|(fields, extra)| {
                    let mut map = Map::new();
                    if let Some((k, v)) = extra {
                        map.insert(k.to_owned(), v);
                    }
                    for (k, v) in fields.into_iter().flatten() {
                        map.insert(k, v);
                    }
                    Value::Object(map)
                })
                .boxed()
        }
        SchemaKind::OneOf(branches) => {
            prop::strategy::Union::new(branches.iter().map(value_for).collect::<Vec<_>>()).boxed()
        }
        // `SchemaKind` is non-exhaustive outside the crate only.
        #[allow(unreachable_patterns)]
        _ => any_value().boxed(),
    };
    prop_oneof![4 => aimed, 1 => any_value()].boxed()
}

/// Registrable schemas, each with a value aimed at it (often valid) or a random one.
pub(super) fn pairs() -> impl Strategy<Value = (ValueSchema, Value)> {
    schema_strategy()
        .prop_filter("registrable schemas only", |s| s.check().is_ok())
        .prop_flat_map(|schema| (Just(schema.clone()), value_for(&schema)))
}
