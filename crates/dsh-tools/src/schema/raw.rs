//! Raw JSON Schema acceptance: a raw schema enters the subset whole, or is refused with every
//! offending place listed.

use super::{Annotations, ObjectSchema, ScalarType, SchemaError, SchemaKind, ValueSchema};
use crate::json::pointer_push;
use crate::json::{JsonObject, JsonValue};
use crate::violation::Violation;

/// Nesting beyond this is refused rather than risking the stack on hostile input.
const MAX_DEPTH: usize = 128;

const ANNOTATIONS: [&str; 4] = ["description", "title", "default", "examples"];
const OBJECT_ONLY: [&str; 3] = ["properties", "required", "additionalProperties"];
/// The keywords holding subschemas that a node can leave unused: walked only for reporting.
const UNUSED_BELOW: [&str; 3] = ["properties", "items", "additionalProperties"];

/// Where a raw schema sits: a definition's parameters, or anywhere else.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Root {
    /// Any root; every object node declares `additionalProperties`.
    Value,
    /// An object root that may leave `additionalProperties` out (open by default).
    Parameters,
}

/// [`accept`] for a `serde_json::Value`, measured before it is converted: a schema node is two
/// JSON levels deep at most (`properties`, then the name), so anything deeper than twice
/// [`MAX_DEPTH`] would be refused by the walk anyway.
pub(super) fn accept_value(
    schema: &serde_json::Value,
    root: Root,
) -> Result<ValueSchema, SchemaError> {
    if crate::json::nests_deeper_than(schema, 2 * MAX_DEPTH + 2) {
        return Err(SchemaError {
            violations: vec![Violation::new(
                "",
                format!("schema nests deeper than {MAX_DEPTH} levels"),
            )],
        });
    }
    accept(&JsonValue::from(schema), root)
}

pub(super) fn accept(schema: &JsonValue, root: Root) -> Result<ValueSchema, SchemaError> {
    let mut walk = Walk {
        violations: Vec::new(),
    };
    let accepted = walk.node(schema, "", 0, root == Root::Parameters);
    if root == Root::Parameters
        && !matches!(
            accepted.as_ref().map(ValueSchema::kind),
            Some(SchemaKind::Object(_))
        )
        && walk.violations.is_empty()
    {
        walk.violations.push(Violation::new(
            "",
            "a parameter schema must have an object root (\"type\": \"object\")",
        ));
    }
    match accepted {
        Some(schema) if walk.violations.is_empty() => Ok(schema),
        _ => Err(SchemaError {
            violations: walk.violations,
        }),
    }
}

struct Walk {
    violations: Vec<Violation>,
}

impl Walk {
    fn fail(&mut self, pointer: &str, message: impl Into<String>) {
        self.violations.push(Violation::new(pointer, message));
    }

    /// Accepts one node. Returns `None` when the node itself is unusable; problems are always
    /// recorded in `self.violations`, and the walk continues into children so that every
    /// offending place is found in one pass.
    fn node(
        &mut self,
        schema: &JsonValue,
        at: &str,
        depth: usize,
        parameter_root: bool,
    ) -> Option<ValueSchema> {
        if depth > MAX_DEPTH {
            self.fail(at, format!("schema nests deeper than {MAX_DEPTH} levels"));
            return None;
        }
        let JsonValue::Object(node) = schema else {
            self.fail(at, "must be a schema object");
            return None;
        };

        let before = self.violations.len();
        for key in node.keys() {
            let known = matches!(key.as_str(), "type" | "oneOf" | "items" | "enum" | "const")
                || OBJECT_ONLY.contains(&key.as_str())
                || ANNOTATIONS.contains(&key.as_str());
            if !known {
                self.fail(
                    &pointer_push(at, key),
                    format!(
                        "keyword `{key}` is not supported (the subset is type, oneOf, properties, \
                         required, additionalProperties, items, enum, const and the annotations \
                         description, title, default, examples)"
                    ),
                );
            }
        }
        let annotations = self.annotations(node, at);

        let kind = match (node.get("type"), node.get("oneOf")) {
            (Some(ty), Some(_)) => {
                self.fail(at, "a node declares either `type` or `oneOf`, not both");
                // Both sides are still checked, so everything wrong below is listed now.
                self.typed(node, ty, at, depth, parameter_root);
                self.walk_unused(node, at, depth, &["oneOf"]);
                None
            }
            (None, None) => {
                for key in OBJECT_ONLY.iter().chain(&["items", "enum", "const"]) {
                    if node.contains_key(key) {
                        self.fail(
                            &pointer_push(at, key),
                            format!("`{key}` needs a `type` on the same node"),
                        );
                    }
                }
                self.walk_unused(node, at, depth, &UNUSED_BELOW);
                Some(SchemaKind::Json)
            }
            (None, Some(branches)) => self.one_of(node, branches, at, depth),
            (Some(ty), None) => self.typed(node, ty, at, depth, parameter_root),
        };

        match kind {
            Some(kind) if self.violations.len() == before => Some(ValueSchema {
                kind,
                annotations,
                misuse: None,
            }),
            _ => None,
        }
    }

    fn annotations(&mut self, node: &JsonObject, at: &str) -> Annotations {
        let mut text = |key: &str| match node.get(key) {
            None => None,
            Some(JsonValue::String(s)) => Some(s.clone()),
            Some(_) => {
                self.fail(&pointer_push(at, key), format!("`{key}` must be a string"));
                None
            }
        };
        Annotations {
            description: text("description"),
            title: text("title"),
            default: node.get("default").cloned(),
            examples: node.get("examples").cloned(),
        }
    }

    fn one_of(
        &mut self,
        node: &JsonObject,
        branches: &JsonValue,
        at: &str,
        depth: usize,
    ) -> Option<SchemaKind> {
        for key in OBJECT_ONLY.iter().chain(&["items", "enum", "const"]) {
            if node.contains_key(key) {
                self.fail(
                    &pointer_push(at, key),
                    format!("`{key}` is not supported beside `oneOf`; put it in the branches"),
                );
            }
        }
        self.walk_unused(node, at, depth, &UNUSED_BELOW);
        let here = pointer_push(at, "oneOf");
        let JsonValue::Array(list) = branches else {
            self.fail(&here, "`oneOf` must be an array of schemas");
            return None;
        };
        if list.len() < 2 {
            self.fail(&here, "`oneOf` needs at least two branches");
        }
        let accepted: Vec<Option<ValueSchema>> = list
            .iter()
            .enumerate()
            .map(|(i, branch)| self.node(branch, &format!("{here}/{i}"), depth + 1, false))
            .collect();
        accepted
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .map(SchemaKind::OneOf)
    }

    fn typed(
        &mut self,
        node: &JsonObject,
        ty: &JsonValue,
        at: &str,
        depth: usize,
        parameter_root: bool,
    ) -> Option<SchemaKind> {
        let type_at = pointer_push(at, "type");
        let name = match ty {
            JsonValue::String(name) => name.as_str(),
            JsonValue::Array(_) => {
                self.fail(
                    &type_at,
                    "type arrays are not supported; use `oneOf` (e.g. a type and `null`)",
                );
                self.walk_unused(node, at, depth, &UNUSED_BELOW);
                return None;
            }
            _ => {
                self.fail(&type_at, "`type` must be a string");
                self.walk_unused(node, at, depth, &UNUSED_BELOW);
                return None;
            }
        };
        match name {
            "object" => {
                self.reject_keys(node, at, &["items", "enum", "const"], "object");
                self.walk_unused(node, at, depth, &["items"]);
                self.object(node, at, depth, parameter_root)
            }
            "array" => {
                self.reject_keys(node, at, &OBJECT_ONLY, "array");
                self.reject_keys(node, at, &["enum", "const"], "array");
                self.walk_unused(node, at, depth, &["properties", "additionalProperties"]);
                let items = match node.get("items") {
                    None => None,
                    Some(items) => Some(Box::new(self.node(
                        items,
                        &pointer_push(at, "items"),
                        depth + 1,
                        false,
                    )?)),
                };
                Some(SchemaKind::Array { items })
            }
            other => {
                let Some(ty) = ScalarType::parse(other) else {
                    self.fail(
                        &type_at,
                        format!(
                            "unknown type `{other}` (expected object, array, string, number, \
                             integer, boolean or null)"
                        ),
                    );
                    self.walk_unused(node, at, depth, &UNUSED_BELOW);
                    return None;
                };
                self.reject_keys(node, at, &OBJECT_ONLY, other);
                self.reject_keys(node, at, &["items"], other);
                self.walk_unused(node, at, depth, &UNUSED_BELOW);
                self.scalar(node, ty, at)
            }
        }
    }

    /// Walks the subschemas of keywords the node cannot use (refused, or not applying to its
    /// type) only to report what is wrong inside them: a refused node does not hide the
    /// keywords below it. `additionalProperties` is walked only when it holds a schema; the
    /// subschemas of keywords outside the subset (`anyOf`, `$defs`, …) are not, since the whole
    /// keyword is already refused.
    fn walk_unused(&mut self, node: &JsonObject, at: &str, depth: usize, keys: &[&str]) {
        for key in keys {
            let Some(value) = node.get(key) else {
                continue;
            };
            let here = pointer_push(at, key);
            match (*key, value) {
                ("properties", JsonValue::Object(map)) => {
                    for (name, schema) in map {
                        self.node(schema, &pointer_push(&here, name), depth + 1, false);
                    }
                }
                ("oneOf", JsonValue::Array(branches)) => {
                    for (i, branch) in branches.iter().enumerate() {
                        self.node(branch, &format!("{here}/{i}"), depth + 1, false);
                    }
                }
                ("items" | "additionalProperties", JsonValue::Object(_)) => {
                    self.node(value, &here, depth + 1, false);
                }
                _ => {}
            }
        }
    }

    fn reject_keys(&mut self, node: &JsonObject, at: &str, keys: &[&str], ty: &str) {
        for key in keys {
            if node.contains_key(key) {
                self.fail(
                    &pointer_push(at, key),
                    format!("`{key}` does not apply to type `{ty}`"),
                );
            }
        }
    }

    fn scalar(&mut self, node: &JsonObject, ty: ScalarType, at: &str) -> Option<SchemaKind> {
        let allowed = match node.get("enum") {
            None => None,
            Some(JsonValue::Array(values)) if !values.is_empty() => {
                for (i, value) in values.iter().enumerate() {
                    if !ty.matches(value) {
                        self.fail(
                            &format!("{}/{i}", pointer_push(at, "enum")),
                            format!("enum value {value} is not of type {ty}"),
                        );
                    }
                }
                Some(values.clone())
            }
            Some(_) => {
                self.fail(
                    &pointer_push(at, "enum"),
                    "`enum` must be a non-empty array of values",
                );
                None
            }
        };
        let constant = match node.get("const") {
            None => None,
            Some(value) => {
                if !ty.matches(value) {
                    self.fail(
                        &pointer_push(at, "const"),
                        format!("const value {value} is not of type {ty}"),
                    );
                } else if let Some(allowed) = &allowed
                    && !allowed.iter().any(|a| crate::json::values_equal(a, value))
                {
                    self.fail(
                        &pointer_push(at, "const"),
                        "const value is not one of the `enum` values",
                    );
                }
                Some(value.clone())
            }
        };
        Some(SchemaKind::Scalar {
            ty,
            allowed,
            constant,
        })
    }

    fn object(
        &mut self,
        node: &JsonObject,
        at: &str,
        depth: usize,
        parameter_root: bool,
    ) -> Option<SchemaKind> {
        let mut properties = Vec::new();
        let mut complete = true;
        match node.get("properties") {
            None => {}
            Some(JsonValue::Object(map)) => {
                let here = pointer_push(at, "properties");
                for (name, schema) in map {
                    match self.node(schema, &pointer_push(&here, name), depth + 1, false) {
                        Some(schema) => properties.push((name.clone(), schema)),
                        None => complete = false,
                    }
                }
            }
            Some(_) => {
                self.fail(
                    &pointer_push(at, "properties"),
                    "`properties` must be an object of schemas",
                );
                complete = false;
            }
        }
        let mut required = Vec::new();
        match node.get("required") {
            None => {}
            Some(JsonValue::Array(names)) => {
                let here = pointer_push(at, "required");
                for (i, name) in names.iter().enumerate() {
                    match name {
                        JsonValue::String(name) => {
                            let declared = node
                                .get("properties")
                                .and_then(JsonValue::as_object)
                                .is_some_and(|p| p.contains_key(name));
                            if !declared {
                                self.fail(
                                    &format!("{here}/{i}"),
                                    format!(
                                        "required property `{name}` is not declared in `properties`"
                                    ),
                                );
                            } else if required.contains(name) {
                                self.fail(
                                    &format!("{here}/{i}"),
                                    format!("required property `{name}` is listed twice"),
                                );
                            } else {
                                required.push(name.clone());
                            }
                        }
                        _ => {
                            self.fail(&format!("{here}/{i}"), "`required` entries must be strings")
                        }
                    }
                }
            }
            Some(_) => self.fail(
                &pointer_push(at, "required"),
                "`required` must be an array of property names",
            ),
        }
        let additional_properties = match node.get("additionalProperties") {
            Some(JsonValue::Bool(open)) => *open,
            Some(_) => {
                self.fail(
                    &pointer_push(at, "additionalProperties"),
                    "`additionalProperties` must be `true` or `false` (schemas are not supported)",
                );
                self.walk_unused(node, at, depth, &["additionalProperties"]);
                true
            }
            None if parameter_root => true,
            None => {
                self.fail(
                    at,
                    "an object node must declare `additionalProperties: true` or `false`",
                );
                true
            }
        };
        // Keep declaration order for required names, matching the properties.
        required.sort_by_key(|name| properties.iter().position(|(k, _)| k == name));
        complete.then_some(SchemaKind::Object(ObjectSchema {
            properties,
            required,
            additional_properties,
            withheld: Vec::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use serde_json::{Map, Value};

    fn pointers(schema: Value) -> Vec<String> {
        ValueSchema::from_json(&schema)
            .unwrap_err()
            .violations
            .into_iter()
            .map(|v| v.pointer)
            .collect()
    }

    #[test]
    fn every_unsupported_keyword_is_listed() {
        // Parsed exactly, so the walk (and the report) follows the declared order.
        let schema = JsonValue::parse(
            r#"{
            "type": "object",
            "additionalProperties": false,
            "minProperties": 1,
            "properties": {
                "path": {"type": "string", "pattern": "^/"},
                "list": {
                    "type": "array",
                    "items": {"type": "object", "additionalProperties": true, "properties": {
                        "n": {"type": "integer", "minimum": 0}
                    }}
                }
            }
        }"#,
        )
        .unwrap();
        assert_eq!(
            ValueSchema::from_exact_json(&schema)
                .unwrap_err()
                .violations
                .into_iter()
                .map(|v| v.pointer)
                .collect::<Vec<_>>(),
            vec![
                "/minProperties",
                "/properties/path/pattern",
                "/properties/list/items/properties/n/minimum"
            ]
        );
    }

    /// The rendered violations of a schema parsed exactly (so the walk follows the written order).
    fn listed(text: &str) -> Vec<String> {
        ValueSchema::from_exact_json(&JsonValue::parse(text).unwrap())
            .unwrap_err()
            .violations
            .into_iter()
            .map(|v| v.to_string())
            .collect()
    }

    #[test]
    fn keywords_below_a_refused_node_are_listed_in_the_same_pass() {
        let unsupported = |pointer: &str, key: &str| {
            format!(
                "{pointer}: keyword `{key}` is not supported (the subset is type, oneOf, \
                 properties, required, additionalProperties, items, enum, const and the \
                 annotations description, title, default, examples)"
            )
        };
        let cases: Vec<(&str, &str, Vec<String>)> = vec![
            (
                "properties under a node without a type",
                r#"{"properties": {"a": {"type": "string", "pattern": "^x"}}}"#,
                vec![
                    "/properties: `properties` needs a `type` on the same node".into(),
                    unsupported("/properties/a/pattern", "pattern"),
                ],
            ),
            (
                "items under a node without a type",
                r#"{"items": {"type": "integer", "minimum": 0}}"#,
                vec![
                    "/items: `items` needs a `type` on the same node".into(),
                    unsupported("/items/minimum", "minimum"),
                ],
            ),
            (
                "the branches of a oneOf refused beside a type",
                r#"{"type": "string", "oneOf": [{"type": "string", "format": "uri"}, {"type": "null", "minimum": 1}]}"#,
                vec![
                    "(root): a node declares either `type` or `oneOf`, not both".into(),
                    unsupported("/oneOf/0/format", "format"),
                    unsupported("/oneOf/1/minimum", "minimum"),
                ],
            ),
            (
                "properties beside a oneOf",
                r#"{"oneOf": [{"type": "string"}, {"type": "null"}], "properties": {"a": {"type": "string", "maxLength": 3}}}"#,
                vec![
                    "/properties: `properties` is not supported beside `oneOf`; put it in the branches"
                        .into(),
                    unsupported("/properties/a/maxLength", "maxLength"),
                ],
            ),
            (
                "properties and items under a scalar type",
                r#"{"type": "string", "properties": {"a": {"type": "integer", "minimum": 0}}, "items": {"type": "string", "format": "date"}}"#,
                vec![
                    "/properties: `properties` does not apply to type `string`".into(),
                    "/items: `items` does not apply to type `string`".into(),
                    unsupported("/properties/a/minimum", "minimum"),
                    unsupported("/items/format", "format"),
                ],
            ),
            (
                "properties under an array and items under an object",
                r#"{"type": "array", "properties": {"a": {"type": "object", "additionalProperties": false, "minProperties": 1}}}"#,
                vec![
                    "/properties: `properties` does not apply to type `array`".into(),
                    unsupported("/properties/a/minProperties", "minProperties"),
                ],
            ),
            (
                "items under an object",
                r#"{"type": "object", "additionalProperties": true, "items": {"type": "string", "pattern": "x"}}"#,
                vec![
                    "/items: `items` does not apply to type `object`".into(),
                    unsupported("/items/pattern", "pattern"),
                ],
            ),
            (
                "keys under a type array",
                r#"{"type": ["object", "null"], "properties": {"a": {"type": "string", "format": "email"}}}"#,
                vec![
                    "/type: type arrays are not supported; use `oneOf` (e.g. a type and `null`)"
                        .into(),
                    unsupported("/properties/a/format", "format"),
                ],
            ),
            (
                "keys under an unknown type",
                r#"{"type": "date", "items": {"type": "string", "pattern": "x"}}"#,
                vec![
                    "/type: unknown type `date` (expected object, array, string, number, integer, boolean or null)"
                        .into(),
                    unsupported("/items/pattern", "pattern"),
                ],
            ),
            (
                "a schema-valued additionalProperties",
                r#"{"type": "object", "additionalProperties": {"type": "string", "pattern": "x"}}"#,
                vec![
                    "/additionalProperties: `additionalProperties` must be `true` or `false` (schemas are not supported)"
                        .into(),
                    unsupported("/additionalProperties/pattern", "pattern"),
                ],
            ),
        ];
        for (what, schema, expected) in cases {
            pretty_assertions::assert_eq!(listed(schema), expected, "{what}");
        }
    }

    #[test]
    fn malformed_nodes_are_refused() {
        let check = |schema: Value, pointer: &str| {
            let got = pointers(schema.clone());
            assert!(got.iter().any(|p| p == pointer), "{schema}: {got:?}");
        };
        check(json!({"type": ["string", "null"]}), "/type");
        check(json!({"type": "object", "properties": {}}), "");
        check(
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            "/additionalProperties",
        );
        check(
            json!({"type": "object", "additionalProperties": true, "required": ["x"]}),
            "/required/0",
        );
        check(json!({"oneOf": [{"type": "string"}]}), "/oneOf");
        check(json!({"type": "string", "oneOf": []}), "");
        check(json!({"type": "integer", "enum": [1, 1.5]}), "/enum/1");
        check(json!({"type": "string", "const": 3}), "/const");
        check(
            json!({"type": "string", "enum": ["a"], "const": "b"}),
            "/const",
        );
        check(json!({"type": "array", "enum": [[1]]}), "/enum");
        check(json!({"items": {"type": "string"}}), "/items");
        check(json!({"type": "string", "description": 3}), "/description");
        check(json!({"type": "date"}), "/type");
        check(json!(true), "");
        check(json!({"$ref": "#/$defs/x"}), "/$ref");
        check(json!({"type": "string", "format": "uri"}), "/format");
        check(
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
            "/anyOf",
        );
    }

    #[test]
    fn parameter_roots_may_leave_openness_out() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let accepted = ValueSchema::parameters_from_json(&schema).unwrap();
        assert!(accepted.as_object().unwrap().additional_properties());
        assert!(ValueSchema::parameters_from_json(&json!({"type": "string"})).is_err());
        let nested = json!({"type": "object", "properties": {"a": {"type": "object"}}});
        assert_eq!(
            ValueSchema::parameters_from_json(&nested)
                .unwrap_err()
                .pointers(),
            vec!["/properties/a"]
        );
    }

    #[test]
    fn deep_schemas_are_refused_without_overflow() {
        // Built by hand: `json!` would re-serialise the growing value at every level.
        let mut schema = json!({"type": "string"});
        for _ in 0..10_000 {
            let mut map = Map::new();
            map.insert("type".into(), json!("array"));
            map.insert("items".into(), schema);
            schema = Value::Object(map);
        }
        let err = ValueSchema::from_json(&schema).unwrap_err();
        assert!(err.to_string().contains("deeper than"), "{err}");
        // Dropping a 10 000-deep value recursively would itself overflow; unnest by hand.
        let mut cur = schema;
        while let Value::Object(mut map) = cur {
            cur = map.remove("items").unwrap_or(Value::Null);
        }
    }
}
