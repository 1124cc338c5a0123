//! The value-schema subset: one schema language for tool arguments and tool outputs.
//!
//! A [`ValueSchema`] is a node of a deliberately small JSON Schema subset (`docs/subsystems/tools.md`):
//! scalar types with typed `enum`/`const`, arrays with optional `items`, objects whose
//! `additionalProperties` is always explicit, the author-only `json` node (any value), and
//! exact-one `oneOf`. Everything it declares is enforced by [`validate`]; nothing outside it can
//! be declared, so a model never sees a constraint that nobody checks.
//!
//! Three ways to author one, one runtime form:
//! - from Rust types: [`ValueSchema::for_type`] normalises `schemars` output;
//! - with the builder DSL: [`ValueSchema::string`], [`ValueSchema::closed_object`], …;
//! - from raw JSON Schema: [`ValueSchema::from_json`], which rejects every unsupported keyword
//!   and lists all offending JSON pointers.

mod compiled;
mod normalize;
mod order;
mod raw;
mod strict;
mod validate;

pub use crate::violation::Violation;
pub use compiled::{CompileOptions, CompiledSchema, SchemaCompileError};
pub(crate) use raw::Root;
pub use validate::validate;
pub(crate) use validate::{accepts_value, validate_value};

use crate::json::{JsonObject, JsonValue};
use serde_json::Value;
use std::fmt;

/// A node of the value-schema subset, with its annotations.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSchema {
    kind: SchemaKind,
    annotations: Annotations,
    /// A builder call that does not apply to this node (e.g. a property on a string), kept so
    /// [`ValueSchema::check`] can report it instead of the declaration vanishing silently.
    misuse: Option<&'static str>,
}

/// What a schema node constrains.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SchemaKind {
    /// A scalar of one type, optionally limited to listed values.
    Scalar {
        /// The scalar type.
        ty: ScalarType,
        /// `enum`: the allowed values (each of type `ty`).
        allowed: Option<Vec<JsonValue>>,
        /// `const`: the single allowed value (of type `ty`).
        constant: Option<JsonValue>,
    },
    /// An array; `items` absent means any JSON item.
    Array {
        /// The schema every item must match.
        items: Option<Box<ValueSchema>>,
    },
    /// An object with declared properties and an explicit openness.
    Object(ObjectSchema),
    /// Any JSON value (compiles to the annotation-only schema).
    Json,
    /// Exactly one of at least two branches must match.
    OneOf(Vec<ValueSchema>),
}

/// The scalar JSON types of the subset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// A JSON string.
    String,
    /// Any JSON number.
    Number,
    /// A JSON number without a fractional part (`1.0` counts).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// `null`.
    Null,
}

impl ScalarType {
    /// The JSON Schema `type` keyword for this scalar.
    pub fn as_str(self) -> &'static str {
        match self {
            ScalarType::String => "string",
            ScalarType::Number => "number",
            ScalarType::Integer => "integer",
            ScalarType::Boolean => "boolean",
            ScalarType::Null => "null",
        }
    }

    fn parse(name: &str) -> Option<ScalarType> {
        Some(match name {
            "string" => ScalarType::String,
            "number" => ScalarType::Number,
            "integer" => ScalarType::Integer,
            "boolean" => ScalarType::Boolean,
            "null" => ScalarType::Null,
            _ => return None,
        })
    }

    /// Whether a value is of this scalar type.
    pub fn matches(self, value: &JsonValue) -> bool {
        match (self, value) {
            (ScalarType::String, JsonValue::String(_)) => true,
            (ScalarType::Number, JsonValue::Number(_)) => true,
            (ScalarType::Integer, JsonValue::Number(n)) => crate::json::is_integer(n),
            (ScalarType::Boolean, JsonValue::Bool(_)) => true,
            (ScalarType::Null, JsonValue::Null) => true,
            _ => false,
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object node: declared properties (in declaration order), the required subset, and
/// whether undeclared keys are allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectSchema {
    properties: Vec<(String, ValueSchema)>,
    required: Vec<String>,
    additional_properties: bool,
    /// Keys refused with a reason of their own ([`ValueSchema::withhold`]); never sent.
    withheld: Vec<(String, String)>,
}

impl ObjectSchema {
    /// The declared properties in declaration order.
    pub fn properties(&self) -> impl Iterator<Item = (&str, &ValueSchema)> {
        self.properties.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The schema of one declared property.
    pub fn property(&self, name: &str) -> Option<&ValueSchema> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// Whether a declared property is required.
    pub fn is_required(&self, name: &str) -> bool {
        self.required.iter().any(|r| r == name)
    }

    /// The required property names, in declaration order.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    /// Whether undeclared keys are allowed (`additionalProperties`).
    pub fn additional_properties(&self) -> bool {
        self.additional_properties
    }

    /// Why an undeclared key is refused, when [`ValueSchema::withhold`] gave a reason.
    pub fn withheld(&self, name: &str) -> Option<&str> {
        self.withheld
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, why)| why.as_str())
    }
}

/// The annotations the subset carries through without validating.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    /// `description`: what the model reads.
    pub description: Option<String>,
    /// `title`.
    pub title: Option<String>,
    /// `default`.
    pub default: Option<JsonValue>,
    /// `examples`.
    pub examples: Option<JsonValue>,
}

/// Why a schema is outside the subset: every offending place, by JSON pointer into the schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("schema is outside the supported subset: {}", join_violations(.violations))]
pub struct SchemaError {
    /// Each problem, in walk order.
    pub violations: Vec<Violation>,
}

fn join_violations(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl SchemaError {
    /// The JSON pointers of every violation.
    pub fn pointers(&self) -> Vec<&str> {
        self.violations.iter().map(|v| v.pointer.as_str()).collect()
    }
}

// ----- Builder DSL -------------------------------------------------------------------------

impl ValueSchema {
    fn node(kind: SchemaKind) -> ValueSchema {
        ValueSchema {
            kind,
            annotations: Annotations::default(),
            misuse: None,
        }
    }

    fn scalar(ty: ScalarType) -> ValueSchema {
        ValueSchema::node(SchemaKind::Scalar {
            ty,
            allowed: None,
            constant: None,
        })
    }

    /// A string node.
    pub fn string() -> ValueSchema {
        ValueSchema::scalar(ScalarType::String)
    }

    /// A number node (any JSON number).
    pub fn number() -> ValueSchema {
        ValueSchema::scalar(ScalarType::Number)
    }

    /// An integer node (a number without a fractional part).
    pub fn integer() -> ValueSchema {
        ValueSchema::scalar(ScalarType::Integer)
    }

    /// A boolean node.
    pub fn boolean() -> ValueSchema {
        ValueSchema::scalar(ScalarType::Boolean)
    }

    /// The `null` node.
    pub fn null() -> ValueSchema {
        ValueSchema::scalar(ScalarType::Null)
    }

    /// Any JSON value (compiles to the annotation-only schema).
    pub fn json() -> ValueSchema {
        ValueSchema::node(SchemaKind::Json)
    }

    /// An array whose items all match `items`.
    pub fn array(items: ValueSchema) -> ValueSchema {
        ValueSchema::node(SchemaKind::Array {
            items: Some(Box::new(items)),
        })
    }

    /// An array of any JSON items.
    pub fn any_array() -> ValueSchema {
        ValueSchema::node(SchemaKind::Array { items: None })
    }

    /// An object that rejects undeclared keys (`additionalProperties: false`).
    pub fn closed_object() -> ValueSchema {
        ValueSchema::object_with(false)
    }

    /// An object that accepts undeclared keys (`additionalProperties: true`).
    pub fn open_object() -> ValueSchema {
        ValueSchema::object_with(true)
    }

    fn object_with(additional_properties: bool) -> ValueSchema {
        ValueSchema::node(SchemaKind::Object(ObjectSchema {
            properties: Vec::new(),
            required: Vec::new(),
            additional_properties,
            withheld: Vec::new(),
        }))
    }

    /// Exactly one of the branches must match. Fewer than two branches is refused when the
    /// schema is checked (at registration, or by [`ValueSchema::check`]).
    pub fn one_of(branches: impl IntoIterator<Item = ValueSchema>) -> ValueSchema {
        ValueSchema::node(SchemaKind::OneOf(branches.into_iter().collect()))
    }

    /// `schema` or `null`, as a `oneOf`.
    pub fn nullable(schema: ValueSchema) -> ValueSchema {
        ValueSchema::one_of([schema, ValueSchema::null()])
    }

    /// Adds an optional property to an object node. On any other node this records a problem
    /// that [`ValueSchema::check`] reports.
    pub fn property(self, name: impl Into<String>, schema: ValueSchema) -> ValueSchema {
        self.add_property(name.into(), schema, false)
    }

    /// Adds a required property to an object node.
    pub fn required(self, name: impl Into<String>, schema: ValueSchema) -> ValueSchema {
        self.add_property(name.into(), schema, true)
    }

    fn add_property(mut self, name: String, schema: ValueSchema, required: bool) -> ValueSchema {
        match &mut self.kind {
            SchemaKind::Object(object) => {
                object.properties.retain(|(k, _)| *k != name);
                object.required.retain(|k| *k != name);
                if required {
                    object.required.push(name.clone());
                }
                object.properties.push((name, schema));
                self
            }
            _ => {
                self.misuse = Some("`property`/`required` apply only to object nodes");
                self
            }
        }
    }

    /// Refuses `name` on a closed object with `why` instead of the generic "unknown property":
    /// for a property the tool offers only in some configurations (a background switch where
    /// background jobs are off), so the model reads what to do instead. The reason is not part
    /// of the schema the model receives ([`ValueSchema::to_json`] leaves it out); a declared
    /// property of the same name wins. On any other node this records a problem that
    /// [`ValueSchema::check`] reports.
    pub fn withhold(mut self, name: impl Into<String>, why: impl Into<String>) -> ValueSchema {
        match &mut self.kind {
            SchemaKind::Object(object) if !object.additional_properties => {
                let name = name.into();
                object.withheld.retain(|(k, _)| *k != name);
                object.withheld.push((name, why.into()));
            }
            _ => self.misuse = Some("`withhold` applies only to closed object nodes"),
        }
        self
    }

    /// Limits a scalar node to the listed values (`enum`).
    pub fn allowed(mut self, values: impl IntoIterator<Item = impl Into<Value>>) -> ValueSchema {
        let list: Vec<JsonValue> = values
            .into_iter()
            .map(|value| JsonValue::from(value.into()))
            .collect();
        match &mut self.kind {
            SchemaKind::Scalar { allowed, .. } => *allowed = Some(list),
            _ => self.misuse = Some("`allowed` (enum) applies only to scalar nodes"),
        }
        self
    }

    /// Limits a scalar node to one value (`const`).
    pub fn constant(mut self, value: impl Into<Value>) -> ValueSchema {
        let value = JsonValue::from(value.into());
        match &mut self.kind {
            SchemaKind::Scalar { constant, .. } => *constant = Some(value),
            _ => self.misuse = Some("`constant` (const) applies only to scalar nodes"),
        }
        self
    }

    /// Sets the `description` the model reads.
    pub fn description(mut self, text: impl Into<String>) -> ValueSchema {
        self.annotations.description = Some(text.into());
        self
    }

    /// Sets the `title` annotation.
    pub fn title(mut self, text: impl Into<String>) -> ValueSchema {
        self.annotations.title = Some(text.into());
        self
    }

    /// Sets the `default` annotation (documentation only; nothing fills it in).
    pub fn default_value(mut self, value: impl Into<Value>) -> ValueSchema {
        self.annotations.default = Some(JsonValue::from(value.into()));
        self
    }

    /// Sets the `examples` annotation.
    pub fn examples(mut self, values: impl IntoIterator<Item = impl Into<Value>>) -> ValueSchema {
        self.annotations.examples = Some(JsonValue::Array(
            values
                .into_iter()
                .map(|value| JsonValue::from(value.into()))
                .collect(),
        ));
        self
    }

    /// What this node constrains.
    pub fn kind(&self) -> &SchemaKind {
        &self.kind
    }

    /// This node's annotations.
    pub fn annotations(&self) -> &Annotations {
        &self.annotations
    }

    /// The object node, when this is one.
    pub fn as_object(&self) -> Option<&ObjectSchema> {
        match &self.kind {
            SchemaKind::Object(object) => Some(object),
            _ => None,
        }
    }

    /// Whether `null` is valid for this node.
    pub fn accepts_null(&self) -> bool {
        validate(self, &JsonValue::Null).is_ok()
    }

    /// Checks that a schema built with the DSL is inside the subset (the same rules a raw schema
    /// meets): typed `enum`/`const`, `required` naming declared properties, two or more `oneOf`
    /// branches. Registration runs this; call it to fail earlier.
    pub fn check(&self) -> Result<(), SchemaError> {
        let mut violations = Vec::new();
        self.collect_misuse("", &mut violations);
        if let Err(err) = ValueSchema::from_exact_json(&self.to_json()) {
            violations.extend(err.violations);
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaError { violations })
        }
    }

    fn collect_misuse(&self, pointer: &str, out: &mut Vec<Violation>) {
        if let Some(message) = self.misuse {
            out.push(Violation::new(pointer, message));
        }
        match &self.kind {
            SchemaKind::Array { items: Some(items) } => {
                items.collect_misuse(&format!("{pointer}/items"), out);
            }
            SchemaKind::Object(object) => {
                for (name, schema) in &object.properties {
                    let at = crate::json::pointer_push(&format!("{pointer}/properties"), name);
                    schema.collect_misuse(&at, out);
                }
            }
            SchemaKind::OneOf(branches) => {
                for (i, branch) in branches.iter().enumerate() {
                    branch.collect_misuse(&format!("{pointer}/oneOf/{i}"), out);
                }
            }
            _ => {}
        }
    }

    /// The JSON Schema (draft 2020-12) form: exactly what a model request carries.
    pub fn to_json(&self) -> JsonValue {
        let mut out = JsonObject::new();
        let a = &self.annotations;
        if let Some(title) = &a.title {
            out.insert("title", title.as_str());
        }
        if let Some(description) = &a.description {
            out.insert("description", description.as_str());
        }
        match &self.kind {
            SchemaKind::Scalar {
                ty,
                allowed,
                constant,
            } => {
                out.insert("type", ty.as_str());
                if let Some(allowed) = allowed {
                    out.insert("enum", allowed.clone());
                }
                if let Some(constant) = constant {
                    out.insert("const", constant.clone());
                }
            }
            SchemaKind::Array { items } => {
                out.insert("type", "array");
                if let Some(items) = items {
                    out.insert("items", items.to_json());
                }
            }
            SchemaKind::Object(object) => {
                out.insert("type", "object");
                let properties: JsonObject = object
                    .properties
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect();
                out.insert("properties", properties);
                if !object.required.is_empty() {
                    let required: Vec<JsonValue> = object
                        .required
                        .iter()
                        .cloned()
                        .map(JsonValue::String)
                        .collect();
                    out.insert("required", required);
                }
                out.insert("additionalProperties", object.additional_properties);
            }
            SchemaKind::Json => {}
            SchemaKind::OneOf(branches) => {
                let branches: Vec<JsonValue> = branches.iter().map(ValueSchema::to_json).collect();
                out.insert("oneOf", branches);
            }
        }
        if let Some(default) = &a.default {
            out.insert("default", default.clone());
        }
        if let Some(examples) = &a.examples {
            out.insert("examples", examples.clone());
        }
        JsonValue::Object(out)
    }

    /// The OpenAI/DeepSeek "strict" projection for providers that offer strict function
    /// calling: every object closed, every property listed in `required`, optional properties
    /// as a union with `null`, and `oneOf` spelled `anyOf` (strict mode has no `oneOf`; the
    /// branches the subset allows never overlap on a valid value, so the meaning is kept).
    ///
    /// A host that uses it should treat a `null` for an originally optional property as absent
    /// ([`strip_strict_nulls`] does that) before executing the call.
    pub fn to_strict_json(&self) -> JsonValue {
        strict::project(self)
    }

    /// Normalises the `schemars` schema of a Rust type into the subset (`docs/subsystems/tools.md`):
    /// `$ref`s are inlined (recursive types are refused), nullable unions become `oneOf`, unit
    /// enums become string `enum`s, `deny_unknown_fields` closes an object and its absence
    /// opens it, doc comments become descriptions, and integer-width `format`s and bounds that
    /// serde enforces anyway are dropped.
    ///
    /// Properties come in `schemars`' order, which is alphabetical, except that the tag of an
    /// internally tagged enum's variant comes first (see
    /// [`ValueSchema::for_type_in_field_order`] for the declared order).
    pub fn for_type<T: schemars::JsonSchema>() -> Result<ValueSchema, SchemaError> {
        let mut schema = normalize::for_type::<T>()?;
        order::tags_first(&mut schema);
        Ok(schema)
    }

    /// [`ValueSchema::for_type`] with object properties in the order the Rust type declares
    /// them, read from its `Deserialize` implementation. Typed tools' parameters are built this
    /// way. Structs inside arrays, maps, enums and `#[serde(flatten)]` keep the alphabetical
    /// order (`docs/design/lossless-json.md`).
    pub fn for_type_in_field_order<T>() -> Result<ValueSchema, SchemaError>
    where
        T: schemars::JsonSchema + serde::de::DeserializeOwned,
    {
        let mut schema = normalize::for_type::<T>()?;
        order::apply_declared_order::<T>(&mut schema);
        order::tags_first(&mut schema);
        Ok(schema)
    }

    /// Accepts a raw JSON Schema if it is inside the subset. Every unsupported keyword or
    /// malformed node is reported, each with its JSON pointer in the schema.
    ///
    /// An object node must declare `additionalProperties` as `true` or `false`; use
    /// [`ValueSchema::parameters_from_json`] for a parameter root, which may leave it out.
    ///
    /// A `serde_json::Value` has sorted its object keys; to keep the declared property order,
    /// parse the schema's text with [`JsonValue::parse`] and use
    /// [`ValueSchema::from_exact_json`].
    pub fn from_json(schema: &Value) -> Result<ValueSchema, SchemaError> {
        raw::accept_value(schema, raw::Root::Value)
    }

    /// [`ValueSchema::from_json`] for a schema held losslessly: property order and numbers
    /// (`enum`, `const`) are kept as written.
    pub fn from_exact_json(schema: &JsonValue) -> Result<ValueSchema, SchemaError> {
        raw::accept(schema, raw::Root::Value)
    }

    /// Accepts a raw parameter schema: an object root that may omit `additionalProperties`
    /// (the parameter root is open to undeclared keys unless the author closes it). Nested
    /// object nodes must still declare it.
    pub fn parameters_from_json(schema: &Value) -> Result<ValueSchema, SchemaError> {
        raw::accept_value(schema, raw::Root::Parameters)
    }

    /// [`ValueSchema::parameters_from_json`] for a schema held losslessly (declared property
    /// order kept).
    pub fn parameters_from_exact_json(schema: &JsonValue) -> Result<ValueSchema, SchemaError> {
        raw::accept(schema, raw::Root::Parameters)
    }
}

/// Removes properties whose value is `null` where the original (non-strict) schema does not
/// accept `null` for them, turning a strict-mode call back into one the original schema
/// validates. Recurses through declared object properties, array items and the one `oneOf`
/// branch that matches after stripping.
pub fn strip_strict_nulls(schema: &ValueSchema, value: &JsonValue) -> JsonValue {
    strict::strip_nulls(schema, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builder_compiles_to_the_declared_json() {
        let schema = ValueSchema::closed_object()
            .required("command", ValueSchema::string().description("What to run"))
            .property("timeout_ms", ValueSchema::integer())
            .property("mode", ValueSchema::string().allowed(["a", "b"]));
        assert_eq!(
            schema.to_json(),
            json!({
                "type": "object",
                "properties": {
                    "command": {"description": "What to run", "type": "string"},
                    "timeout_ms": {"type": "integer"},
                    "mode": {"type": "string", "enum": ["a", "b"]}
                },
                "required": ["command"],
                "additionalProperties": false
            })
        );
        schema.check().unwrap();
    }

    #[test]
    fn builder_mistakes_are_reported_by_check() {
        let bad_enum = ValueSchema::integer().allowed(["x"]);
        assert!(bad_enum.check().is_err());
        let one_branch = ValueSchema::one_of([ValueSchema::string()]);
        assert!(one_branch.check().is_err());
        let property_on_string = ValueSchema::string().property("x", ValueSchema::string());
        assert!(property_on_string.check().is_err());
        let enum_on_array = ValueSchema::any_array().allowed([1]);
        assert!(enum_on_array.check().is_err());
    }

    #[test]
    fn json_node_is_annotation_only() {
        assert_eq!(
            ValueSchema::json().description("anything").to_json(),
            json!({"description": "anything"})
        );
    }

    #[test]
    fn json_form_round_trips_through_raw_acceptance() {
        let schema = ValueSchema::one_of([
            ValueSchema::closed_object().required("kind", ValueSchema::string().constant("a")),
            ValueSchema::array(ValueSchema::number()).title("numbers"),
        ])
        .default_value(json!(null))
        .examples([json!([1])]);
        assert_eq!(
            ValueSchema::from_exact_json(&schema.to_json()).unwrap(),
            schema
        );
    }
}
