//! The strict projection (OpenAI/DeepSeek strict function calling) and its inverse on values.

use super::{SchemaKind, ValueSchema, validate};
use crate::json::{JsonObject, JsonValue};

fn object(entries: impl IntoIterator<Item = (&'static str, JsonValue)>) -> JsonValue {
    JsonValue::Object(entries.into_iter().collect())
}

fn string(text: &str) -> JsonValue {
    JsonValue::from(text)
}

pub(super) fn project(schema: &ValueSchema) -> JsonValue {
    let mut out = match &schema.kind {
        SchemaKind::Object(object_schema) => {
            let properties: JsonObject = object_schema
                .properties
                .iter()
                .map(|(name, property)| {
                    let projected = project(property);
                    let projected = if object_schema.is_required(name) || property.accepts_null() {
                        projected
                    } else {
                        with_null(property, projected)
                    };
                    (name.clone(), projected)
                })
                .collect();
            let required: Vec<JsonValue> = object_schema
                .properties
                .iter()
                .map(|(k, _)| JsonValue::String(k.clone()))
                .collect();
            object([
                ("type", string("object")),
                ("properties", JsonValue::Object(properties)),
                ("required", JsonValue::Array(required)),
                ("additionalProperties", JsonValue::Bool(false)),
            ])
        }
        SchemaKind::Array { items } => match items {
            Some(items) => object([("type", string("array")), ("items", project(items))]),
            None => object([("type", string("array"))]),
        },
        SchemaKind::OneOf(branches) => object([(
            "anyOf",
            JsonValue::Array(branches.iter().map(project).collect()),
        )]),
        SchemaKind::Scalar { .. } | SchemaKind::Json => schema.to_json(),
    };
    if let (JsonValue::Object(map), Some(description)) = (&mut out, &schema.annotations.description)
    {
        map.insert("description", description.as_str());
    }
    out
}

/// Widens a projected node to also accept `null`: scalar types gain `"null"` in a type array
/// (and in their `enum`), other nodes become `anyOf` with a `null` branch.
fn with_null(original: &ValueSchema, mut projected: JsonValue) -> JsonValue {
    if let (SchemaKind::Scalar { ty, .. }, JsonValue::Object(map)) =
        (&original.kind, &mut projected)
    {
        map.insert(
            "type",
            JsonValue::Array(vec![string(ty.as_str()), string("null")]),
        );
        if let Some(JsonValue::Array(allowed)) = map.get_mut("enum") {
            allowed.push(JsonValue::Null);
        }
        if let Some(constant) = map.remove("const") {
            map.insert("enum", JsonValue::Array(vec![constant, JsonValue::Null]));
        }
        return projected;
    }
    let description = match &mut projected {
        JsonValue::Object(map) => map.remove("description"),
        _ => None,
    };
    let mut out = object([(
        "anyOf",
        JsonValue::Array(vec![projected, object([("type", string("null"))])]),
    )]);
    if let (JsonValue::Object(map), Some(description)) = (&mut out, description) {
        map.insert("description", description);
    }
    out
}

pub(super) fn strip_nulls(schema: &ValueSchema, value: &JsonValue) -> JsonValue {
    match (&schema.kind, value) {
        (SchemaKind::Object(object), JsonValue::Object(map)) => JsonValue::Object(
            map.iter()
                .filter_map(|(key, item)| match object.property(key) {
                    Some(property) => {
                        if item.is_null() && !object.is_required(key) && !property.accepts_null() {
                            None
                        } else {
                            Some((key.clone(), strip_nulls(property, item)))
                        }
                    }
                    None => Some((key.clone(), item.clone())),
                })
                .collect(),
        ),
        (SchemaKind::Array { items: Some(items) }, JsonValue::Array(list)) => {
            JsonValue::Array(list.iter().map(|item| strip_nulls(items, item)).collect())
        }
        (SchemaKind::OneOf(branches), _) => {
            let candidates: Vec<JsonValue> = branches
                .iter()
                .map(|branch| strip_nulls(branch, value))
                .filter(|candidate| {
                    branches
                        .iter()
                        .filter(|b| validate(b, candidate).is_ok())
                        .count()
                        == 1
                })
                .collect();
            match candidates.as_slice() {
                [only] => only.clone(),
                _ => value.clone(),
            }
        }
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_nulls_strip_back_to_the_original_shape() {
        let schema = ValueSchema::closed_object()
            .required("command", ValueSchema::string())
            .property("timeout_ms", ValueSchema::integer())
            .property(
                "inner",
                ValueSchema::closed_object().property("x", ValueSchema::boolean()),
            );
        let strict_call =
            JsonValue::from(json!({"command": "ls", "timeout_ms": null, "inner": {"x": null}}));
        let stripped = strip_nulls(&schema, &strict_call);
        assert_eq!(stripped, json!({"command": "ls", "inner": {}}));
        assert!(validate(&schema, &stripped).is_ok());
    }
}
