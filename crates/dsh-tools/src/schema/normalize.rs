//! The `schemars` normaliser: a Rust type's generated JSON Schema, brought into the subset.
//!
//! Only rewrites that keep the meaning are done (inlining `$ref`s, spelling nullable unions as
//! `oneOf`, making object openness explicit, dropping integer-width `format`s and bounds that
//! serde enforces on deserialisation anyway). Anything else is left in place for raw acceptance
//! to refuse with its pointer, so an unenforced constraint never reaches a model silently.

use super::{SchemaError, ValueSchema, raw};
use crate::json::{Decimal, JsonValue, pointer_push};
use serde_json::{Map, Value, json};

/// Keywords that carry no validation meaning for us and are not part of the subset's
/// annotations. `format` is an annotation in draft 2020-12; the types that emit it (integers,
/// floats, addresses, UUIDs, dates) are enforced by serde when the arguments deserialise.
const DROPPED: [&str; 7] = [
    "$schema",
    "$comment",
    "$id",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
];

pub(super) fn for_type<T: schemars::JsonSchema>() -> Result<ValueSchema, SchemaError> {
    let generated = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    let mut root = generated.as_value().clone();
    let defs = match &mut root {
        Value::Object(map) => {
            // The root title is the Rust type's name: an implementation detail, not model text.
            map.remove("title");
            match map.remove("$defs") {
                Some(Value::Object(defs)) => defs,
                _ => Map::new(),
            }
        }
        _ => Map::new(),
    };
    let mut normalizer = Normalizer {
        defs,
        expanding: Vec::new(),
        problems: Vec::new(),
    };
    let normalized = normalizer.node(&root, "");
    if !normalizer.problems.is_empty() {
        return Err(SchemaError {
            violations: normalizer.problems,
        });
    }
    raw::accept(&JsonValue::from(&normalized), raw::Root::Value).map_err(|mut err| {
        for violation in &mut err.violations {
            violation.message = format!(
                "{} (in the schema derived from `{}`)",
                violation.message,
                std::any::type_name::<T>()
            );
        }
        err
    })
}

struct Normalizer {
    defs: Map<String, Value>,
    /// Definitions being inlined right now; meeting one again means the type is recursive.
    expanding: Vec<String>,
    problems: Vec<super::Violation>,
}

impl Normalizer {
    fn fail(&mut self, at: &str, message: impl Into<String>) {
        self.problems.push(super::Violation::new(at, message));
    }

    fn node(&mut self, schema: &Value, at: &str) -> Value {
        let map = match schema {
            Value::Bool(true) => return json!({}),
            Value::Bool(false) => {
                self.fail(
                    at,
                    "the `false` schema (no valid value) cannot be a tool schema",
                );
                return json!({});
            }
            Value::Object(map) => map,
            _ => {
                self.fail(at, "must be a schema object");
                return json!({});
            }
        };
        let mut map = map.clone();
        for key in DROPPED {
            if key != "format" {
                map.remove(key);
            }
        }

        if let Some(reference) = map.remove("$ref") {
            return self.reference(&reference, map, at);
        }
        if let Some(Value::Array(all)) = map.get("allOf")
            && all.len() == 1
        {
            // A single-element allOf is how some generators attach annotations to a reference.
            let inner = all[0].clone();
            map.remove("allOf");
            let inner = self.node(&inner, &pointer_push(at, "allOf"));
            return merge(inner, map);
        }

        self.drop_width_bounds(&mut map);
        map.remove("format");
        map.remove("uniqueItems");
        infer_scalar_type(&mut map);

        if let Some(Value::Array(types)) = map.get("type").cloned() {
            return self.type_union(&types, map, at);
        }
        if let Some(Value::Array(branches)) = map.get("anyOf").cloned() {
            return self.nullable_any_of(&branches, map, at);
        }
        if map.contains_key("oneOf")
            && (map.contains_key("properties")
                || map.get("type").and_then(Value::as_str) == Some("object"))
        {
            // `#[serde(flatten)]` of an enum: object keywords beside `oneOf` apply to every
            // branch (draft 2020-12 applies both), so they are distributed.
            let branches = map.remove("oneOf").unwrap_or(Value::Null);
            let annotations = take_annotations(&mut map);
            let shared = match self.node(&Value::Object(map), at) {
                Value::Object(shared) => shared,
                _ => Map::new(),
            };
            let alternatives = self.node(&json!({ "oneOf": branches }), at);
            return merge(combine(alternatives, shared), annotations);
        }
        if let Some(Value::Array(branches)) = map.get("oneOf").cloned() {
            let here = pointer_push(at, "oneOf");
            let mut normalized: Vec<Value> = branches
                .iter()
                .enumerate()
                .map(|(i, b)| self.node(b, &format!("{here}/{i}")))
                .collect();
            if normalized.len() == 1 {
                // A one-variant enum: the variant itself is the schema.
                map.remove("oneOf");
                return merge(normalized.remove(0), take_annotations(&mut map));
            }
            map.insert("oneOf".into(), Value::Array(normalized));
        }
        if let Some(items) = map.get("items").cloned() {
            let items = self.node(&items, &pointer_push(at, "items"));
            map.insert("items".into(), items);
        }
        if map.get("type").and_then(Value::as_str) == Some("object") {
            self.object(&mut map, at);
        }
        Value::Object(map)
    }

    fn reference(&mut self, reference: &Value, siblings: Map<String, Value>, at: &str) -> Value {
        if reference.as_str() == Some("#") {
            self.fail(
                at,
                "the type refers to itself; recursive types cannot be expressed in the schema \
                 subset (use `serde_json::Value` for the recursive part)",
            );
            return json!({});
        }
        let name = reference
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .map(str::to_owned);
        let Some(name) = name else {
            self.fail(
                &pointer_push(at, "$ref"),
                format!("unsupported reference {reference}"),
            );
            return json!({});
        };
        if self.expanding.contains(&name) {
            self.fail(
                at,
                format!(
                    "type `{name}` is recursive; recursive types cannot be expressed in the \
                     schema subset (use `serde_json::Value` for the recursive part)"
                ),
            );
            return json!({});
        }
        let Some(definition) = self.defs.get(&name).cloned() else {
            self.fail(at, format!("reference to unknown definition `{name}`"));
            return json!({});
        };
        self.expanding.push(name);
        let inlined = self.node(&definition, at);
        self.expanding.pop();
        let siblings = match self.node(&Value::Object(siblings), at) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        combine(inlined, siblings)
    }

    /// `"type": [T, "null"]` (and wider unions) become a `oneOf` of single-type nodes.
    fn type_union(&mut self, types: &[Value], mut map: Map<String, Value>, at: &str) -> Value {
        map.remove("type");
        let annotations = take_annotations(&mut map);
        let allowed = map.remove("enum");
        let branches: Vec<Value> = types
            .iter()
            .map(|ty| {
                let mut branch = map.clone();
                branch.insert("type".into(), ty.clone());
                if let Some(Value::Array(values)) = &allowed {
                    let kept: Vec<Value> = values
                        .iter()
                        .filter(|v| {
                            super::ScalarType::parse(ty.as_str().unwrap_or(""))
                                .is_some_and(|t| t.matches(&JsonValue::from(*v)))
                        })
                        .cloned()
                        .collect();
                    if ty != "null" && !kept.is_empty() {
                        branch.insert("enum".into(), Value::Array(kept));
                    }
                }
                if ty == "null" {
                    return json!({"type": "null"});
                }
                self.node(&Value::Object(branch), at)
            })
            .collect();
        if let [only] = branches.as_slice() {
            return merge(only.clone(), annotations);
        }
        let mut out = annotations;
        out.insert("oneOf".into(), Value::Array(branches));
        Value::Object(out)
    }

    /// `anyOf: [X, {"type": "null"}]` (schemars' `Option<Struct>`) becomes `oneOf`; any other
    /// `anyOf` (untagged enums) cannot be expressed with exactly-one semantics and is refused.
    fn nullable_any_of(
        &mut self,
        branches: &[Value],
        mut map: Map<String, Value>,
        at: &str,
    ) -> Value {
        map.remove("anyOf");
        let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
        let others: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
        if branches.len() != 2 || others.len() != 1 {
            self.fail(
                &pointer_push(at, "anyOf"),
                "`anyOf` (e.g. an untagged enum) is not supported: its branches may overlap; \
                 use an externally or internally tagged enum",
            );
            return json!({});
        }
        let inner = self.node(others[0], &pointer_push(at, "anyOf"));
        let annotations = take_annotations(&mut map);
        let inner_schema = ValueSchema::from_json(&inner).ok();
        if inner_schema.is_some_and(|s| s.accepts_null()) {
            return merge(inner, annotations);
        }
        let mut out = annotations;
        out.insert("oneOf".into(), json!([inner, {"type": "null"}]));
        Value::Object(out)
    }

    fn object(&mut self, map: &mut Map<String, Value>, at: &str) {
        if let Some(Value::Object(properties)) = map.get("properties").cloned() {
            let here = pointer_push(at, "properties");
            let normalized: Map<String, Value> = properties
                .iter()
                .map(|(k, v)| (k.clone(), self.node(v, &pointer_push(&here, k))))
                .collect();
            map.insert("properties".into(), Value::Object(normalized));
        }
        // Serde ignores unknown fields unless `deny_unknown_fields` (which schemars renders as
        // `additionalProperties: false`). A map type's value schema is enforced by serde too.
        match map.get("additionalProperties") {
            Some(Value::Bool(_)) => {}
            _ => {
                map.insert("additionalProperties".into(), Value::Bool(true));
            }
        }
    }

    /// Removes `minimum`/`maximum` that merely restate the integer width named by `format`.
    fn drop_width_bounds(&mut self, map: &mut Map<String, Value>) {
        let Some(format) = map.get("format").and_then(Value::as_str) else {
            return;
        };
        let (min, max): (&str, Option<&str>) = match format {
            "uint8" => ("0", Some("255")),
            "uint16" => ("0", Some("65535")),
            "uint32" => ("0", Some("4294967295")),
            "uint64" | "uint" | "uint128" => ("0", None),
            "int8" => ("-128", Some("127")),
            "int16" => ("-32768", Some("32767")),
            "int32" => ("-2147483648", Some("2147483647")),
            _ => return,
        };
        let matches = |value: Option<&Value>, bound: &str| {
            let bound = Decimal::parse(bound);
            value
                .and_then(|v| v.as_number())
                .and_then(|n| Decimal::parse(&n.to_string()))
                .is_some_and(|d| Some(d) == bound)
        };
        if matches(map.get("minimum"), min) {
            map.remove("minimum");
        }
        if let Some(max) = max
            && matches(map.get("maximum"), max)
        {
            map.remove("maximum");
        }
    }
}

/// Gives a typeless `const`/`enum` node (schemars' documented unit variants) the scalar type
/// its values share.
fn infer_scalar_type(map: &mut Map<String, Value>) {
    if map.contains_key("type") || map.contains_key("oneOf") || map.contains_key("anyOf") {
        return;
    }
    let mut values: Vec<&Value> = Vec::new();
    if let Some(constant) = map.get("const") {
        values.push(constant);
    }
    if let Some(Value::Array(list)) = map.get("enum") {
        values.extend(list);
    }
    let Some(first) = values.first() else {
        return;
    };
    let ty = match first {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        Value::Number(_) => "number",
        _ => return,
    };
    let same = values.iter().all(|v| {
        matches!(
            (ty, v),
            ("string", Value::String(_))
                | ("boolean", Value::Bool(_))
                | ("null", Value::Null)
                | ("number", Value::Number(_))
        )
    });
    if same {
        map.insert("type".into(), Value::String(ty.into()));
    }
}

fn take_annotations(map: &mut Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["title", "description", "default", "examples"] {
        if let Some(value) = map.remove(key) {
            out.insert(key.into(), value);
        }
    }
    out
}

/// Combines a referenced schema with the keywords beside its `$ref` (draft 2020-12 applies
/// both). Annotation-only siblings (a field's doc comment) are overlaid; object siblings (the tag
/// property serde adds to a tagged newtype variant) are merged property by property, and
/// distributed over every branch when the referenced schema is a `oneOf`.
fn combine(base: Value, siblings: Map<String, Value>) -> Value {
    let constrains = siblings.contains_key("properties") || siblings.contains_key("required");
    if !constrains {
        return merge(base, siblings);
    }
    let Value::Object(mut base) = base else {
        return Value::Object(siblings);
    };
    let mut siblings = siblings;
    let annotations = take_annotations(&mut siblings);
    if let Some(Value::Array(branches)) = base.remove("oneOf") {
        let branches: Vec<Value> = branches
            .into_iter()
            .map(|branch| combine(branch, siblings.clone()))
            .collect();
        base.insert("oneOf".into(), Value::Array(branches));
        return merge(Value::Object(base), annotations);
    }
    let mut properties = match siblings.remove("properties") {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if let Some(Value::Object(own)) = base.remove("properties") {
        for (name, schema) in own {
            properties.entry(name).or_insert(schema);
        }
    }
    let mut required: Vec<Value> = match siblings.remove("required") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    if let Some(Value::Array(own)) = base.remove("required") {
        for name in own {
            if !required.contains(&name) {
                required.push(name);
            }
        }
    }
    let closed = [
        base.get("additionalProperties"),
        siblings.get("additionalProperties"),
    ]
    .contains(&Some(&Value::Bool(false)));
    base.insert("type".into(), Value::String("object".into()));
    base.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        base.insert("required".into(), Value::Array(required));
    }
    base.insert("additionalProperties".into(), Value::Bool(!closed));
    merge(Value::Object(base), annotations)
}

/// Overlays a node's own keys (usually annotations such as a field's doc comment) onto the
/// schema it refers to.
fn merge(base: Value, overlay: Map<String, Value>) -> Value {
    match base {
        Value::Object(mut map) => {
            for (k, v) in overlay {
                map.insert(k, v);
            }
            Value::Object(map)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::Deserialize;
    use std::collections::HashMap;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    /// A file location.
    struct Location {
        /// Path to the file.
        path: String,
        line: Option<u32>,
        column: u8,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
        Slow,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Shape {
        Circle { r: f64 },
        Square { side: u32 },
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    enum External {
        Plain,
        Named(String),
        Point { x: i32 },
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// Text to echo.
        text: String,
        note: Option<String>,
        locations: Vec<Location>,
        primary: Option<Location>,
        mode: Mode,
        shape: Shape,
        external: External,
        counts: HashMap<String, u32>,
        anything: Option<serde_json::Value>,
        #[serde(default)]
        flag: bool,
    }

    #[test]
    fn rust_types_normalise_into_the_subset() {
        // In the declared field order, as typed tools get it (`schema::order`).
        let schema = ValueSchema::for_type_in_field_order::<Args>().unwrap();
        insta::assert_snapshot!(
            "normalised_args",
            serde_json::to_string_pretty(&schema.to_json()).unwrap()
        );
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Tree {
        children: Vec<Tree>,
    }

    #[test]
    fn recursive_types_are_refused_clearly() {
        let err = ValueSchema::for_type::<Tree>().unwrap_err();
        assert!(err.to_string().contains("refers to itself"), "{err}");
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(untagged)]
    enum Loose {
        A(String),
        B(u32),
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct HasLoose {
        loose: Loose,
    }

    #[test]
    fn untagged_enums_are_refused_clearly() {
        let err = ValueSchema::for_type::<HasLoose>().unwrap_err();
        assert_eq!(err.pointers(), vec!["/properties/loose/anyOf"]);
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Bounded {
        #[schemars(range(min = 1))]
        count: u32,
        #[schemars(length(min = 1))]
        name: String,
    }

    #[test]
    fn author_bounds_serde_does_not_enforce_are_refused() {
        let err = ValueSchema::for_type::<Bounded>().unwrap_err();
        assert_eq!(
            err.pointers(),
            vec!["/properties/count/minimum", "/properties/name/minLength"]
        );
    }

    #[allow(dead_code)]
    #[derive(Deserialize, serde::Serialize, JsonSchema)]
    struct Circle {
        r: f64,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, serde::Serialize, JsonSchema)]
    #[serde(tag = "shape", rename_all = "snake_case")]
    enum Figure {
        Circle(Circle),
        Dot,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, serde::Serialize, JsonSchema)]
    struct Placed {
        id: u32,
        #[serde(flatten)]
        figure: Figure,
    }

    #[test]
    fn tagged_newtype_variants_and_flattened_enums_keep_every_field() {
        let schema = ValueSchema::for_type::<Placed>().unwrap();
        let check = |value: serde_json::Value, valid: bool| {
            assert_eq!(
                super::super::validate(&schema, &JsonValue::from(&value)).is_ok(),
                valid,
                "{value}"
            );
        };
        check(json!({"id": 1, "shape": "circle", "r": 2.5}), true);
        check(json!({"id": 1, "shape": "dot"}), true);
        check(json!({"id": 1, "shape": "circle"}), false);
        check(json!({"shape": "dot"}), false);
        check(json!({"id": 1, "shape": "square"}), false);
        let placed = Placed {
            id: 7,
            figure: Figure::Circle(Circle { r: 1.0 }),
        };
        check(serde_json::to_value(&placed).unwrap(), true);
    }

    #[test]
    fn scalar_and_unit_roots_are_supported() {
        assert_eq!(
            ValueSchema::for_type::<String>().unwrap(),
            ValueSchema::string()
        );
        assert_eq!(ValueSchema::for_type::<()>().unwrap(), ValueSchema::null());
        assert_eq!(
            ValueSchema::for_type::<serde_json::Value>().unwrap(),
            ValueSchema::json()
        );
        assert_eq!(
            ValueSchema::for_type::<Vec<u64>>().unwrap(),
            ValueSchema::array(ValueSchema::integer())
        );
    }
}
