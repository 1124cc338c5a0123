//! The strict projection (OpenAI/DeepSeek strict function calling) and its inverse on values.

use super::{SchemaKind, ValueSchema, validate};
use serde_json::{Map, Value, json};

pub(super) fn project(schema: &ValueSchema) -> Value {
    let mut out = match &schema.kind {
        SchemaKind::Object(object) => {
            let properties: Map<String, Value> = object
                .properties
                .iter()
                .map(|(name, property)| {
                    let projected = project(property);
                    let projected = if object.is_required(name) || property.accepts_null() {
                        projected
                    } else {
                        with_null(property, projected)
                    };
                    (name.clone(), projected)
                })
                .collect();
            json!({
                "type": "object",
                "properties": properties,
                "required": object.properties.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
                "additionalProperties": false,
            })
        }
        SchemaKind::Array { items } => match items {
            Some(items) => json!({"type": "array", "items": project(items)}),
            None => json!({"type": "array"}),
        },
        SchemaKind::OneOf(branches) => {
            json!({"anyOf": branches.iter().map(project).collect::<Vec<_>>()})
        }
        SchemaKind::Scalar { .. } | SchemaKind::Json => schema.to_json(),
    };
    if let (Value::Object(map), Some(description)) = (&mut out, &schema.annotations.description) {
        map.insert("description".into(), Value::String(description.clone()));
    }
    out
}

/// Widens a projected node to also accept `null`: scalar types gain `"null"` in a type array
/// (and in their `enum`), other nodes become `anyOf` with a `null` branch.
fn with_null(original: &ValueSchema, mut projected: Value) -> Value {
    if let (SchemaKind::Scalar { ty, .. }, Value::Object(map)) = (&original.kind, &mut projected) {
        map.insert("type".into(), json!([ty.as_str(), "null"]));
        if let Some(Value::Array(allowed)) = map.get_mut("enum") {
            allowed.push(Value::Null);
        }
        if let Some(constant) = map.remove("const") {
            map.insert("enum".into(), json!([constant, null]));
        }
        return projected;
    }
    let description = match &mut projected {
        Value::Object(map) => map.remove("description"),
        _ => None,
    };
    let mut out = json!({"anyOf": [projected, {"type": "null"}]});
    if let (Value::Object(map), Some(description)) = (&mut out, description) {
        map.insert("description".into(), description);
    }
    out
}

pub(super) fn strip_nulls(schema: &ValueSchema, value: &Value) -> Value {
    match (&schema.kind, value) {
        (SchemaKind::Object(object), Value::Object(map)) => Value::Object(
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
        (SchemaKind::Array { items: Some(items) }, Value::Array(list)) => {
            Value::Array(list.iter().map(|item| strip_nulls(items, item)).collect())
        }
        (SchemaKind::OneOf(branches), _) => {
            let candidates: Vec<Value> = branches
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

    #[test]
    fn strict_nulls_strip_back_to_the_original_shape() {
        let schema = ValueSchema::closed_object()
            .required("command", ValueSchema::string())
            .property("timeout_ms", ValueSchema::integer())
            .property(
                "inner",
                ValueSchema::closed_object().property("x", ValueSchema::boolean()),
            );
        let strict_call = json!({"command": "ls", "timeout_ms": null, "inner": {"x": null}});
        let stripped = strip_nulls(&schema, &strict_call);
        assert_eq!(stripped, json!({"command": "ls", "inner": {}}));
        assert!(validate(&schema, &stripped).is_ok());
    }
}
