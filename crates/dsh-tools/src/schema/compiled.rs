//! Schemas as declared, each with the validator compiled from it once: the subset's own for a
//! subset schema, `jsonschema`'s for any other JSON Schema a raw definition declares (with the
//! `jsonschema` feature; without it such a schema does not compile).

use super::raw::{self, Root};
use super::{SchemaError, ValueSchema, Violation, validate};
use crate::call::ParsedArguments;
use crate::json::JsonValue;
#[cfg(feature = "jsonschema")]
use crate::json::pointer_push;
use serde_json::Value;
use std::fmt;
#[cfg(feature = "jsonschema")]
use std::sync::Arc;

/// How a raw JSON Schema is compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Whether `format` is asserted (a string that is not an `email` fails). Off by default:
    /// JSON Schema 2020-12 makes `format` an annotation, and servers declare formats their
    /// own code does not check either. Applies to schemas outside the subset (the subset has
    /// no `format`).
    pub assert_formats: bool,
}

impl CompileOptions {
    /// The defaults: formats are annotations.
    pub fn new() -> CompileOptions {
        CompileOptions::default()
    }

    /// Sets [`CompileOptions::assert_formats`].
    pub fn assert_formats(mut self, assert: bool) -> CompileOptions {
        self.assert_formats = assert;
        self
    }
}

/// Why a raw JSON Schema could not be compiled: the validator's own message, or, in a build
/// without the `jsonschema` feature, why the schema is outside the subset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct SchemaCompileError {
    /// What the validator said (an unknown `$schema`, a keyword of the wrong type, a `$ref`
    /// that does not resolve, …), or that the schema needs the `jsonschema` feature.
    pub message: String,
    /// Set when the schema is outside the subset and this build has no full validator (the
    /// `jsonschema` feature is off): the subset's reasons, each with its JSON pointer. Turning
    /// the feature on, or declaring the schema inside the subset, makes it compile.
    pub outside_subset: Option<SchemaError>,
}

impl SchemaCompileError {
    fn new(message: impl Into<String>) -> SchemaCompileError {
        SchemaCompileError {
            message: message.into(),
            outside_subset: None,
        }
    }

    /// The error of a schema outside the subset in a build without the `jsonschema` feature.
    #[cfg(not(feature = "jsonschema"))]
    fn outside_subset(reasons: SchemaError) -> SchemaCompileError {
        SchemaCompileError {
            message: format!(
                "the schema is outside the subset dsh-tools validates by itself ({reasons}), and \
                 this build has no full JSON Schema validator: enable dsh-tools' `jsonschema` \
                 feature (a default one), or declare the schema inside the subset"
            ),
            outside_subset: Some(reasons),
        }
    }
}

/// A schema exactly as declared, with the validator compiled from it once.
///
/// A schema inside the subset (every typed and DSL schema, and a raw one the subset accepts) is
/// checked by the subset's own validator, which judges numbers digit for digit, and has a
/// strict projection. Any other JSON Schema (draft 2020-12, or draft-07 when its `$schema`
/// says so; `$ref` into `$defs`/`definitions`, `anyOf`, `format`, `minimum`, type arrays, …)
/// is compiled by `jsonschema` (with the `jsonschema` feature, a default one; without it such
/// a schema is a [`SchemaCompileError`] whose [`outside_subset`](SchemaCompileError::outside_subset)
/// gives the subset's reasons, never a panic): references are resolved inside the schema only (nothing is
/// fetched), and `format` is an annotation unless [`CompileOptions::assert_formats`] is set.
///
/// `jsonschema` judges a `serde_json::Value`, so for those schemas numbers are judged as the
/// nearest `f64` (integers exactly within `u64`/`i64`): `1.00000000000000000001` passes a
/// `"maximum": 1`, and a number beyond `f64`'s range (`1e400`) is refused outright as one that
/// cannot be judged. The tool still receives the exact text and value.
#[derive(Clone)]
pub struct CompiledSchema {
    declared: JsonValue,
    check: Check,
}

// One per declared schema, held for the definition's life: its size does not matter, and the
// subset node stays inline on the typed tools' validation path.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Check {
    Subset(ValueSchema),
    #[cfg(feature = "jsonschema")]
    Full(Arc<jsonschema::Validator>),
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("declared", &self.declared.to_string())
            .field("subset", &matches!(self.check, Check::Subset(_)))
            .finish()
    }
}

impl From<ValueSchema> for CompiledSchema {
    /// A subset schema; it is declared as its [`ValueSchema::to_json`] form.
    fn from(schema: ValueSchema) -> CompiledSchema {
        CompiledSchema {
            declared: schema.to_json(),
            check: Check::Subset(schema),
        }
    }
}

impl CompiledSchema {
    /// Compiles any JSON Schema with the default options: the subset's validator when the
    /// subset accepts it, `jsonschema` otherwise.
    pub fn compile(schema: &JsonValue) -> Result<CompiledSchema, SchemaCompileError> {
        CompiledSchema::compile_with(schema, CompileOptions::default())
    }

    /// [`CompiledSchema::compile`] with options.
    pub fn compile_with(
        schema: &JsonValue,
        options: CompileOptions,
    ) -> Result<CompiledSchema, SchemaCompileError> {
        CompiledSchema::compile_as(schema, Root::Value, options)
    }

    pub(crate) fn compile_as(
        schema: &JsonValue,
        root: Root,
        options: CompileOptions,
    ) -> Result<CompiledSchema, SchemaCompileError> {
        let reasons = match raw::accept(schema, root) {
            Ok(subset) => {
                return Ok(CompiledSchema {
                    declared: schema.clone(),
                    check: Check::Subset(subset),
                });
            }
            Err(reasons) => reasons,
        };
        CompiledSchema::compile_full(schema, reasons, options)
    }

    /// A schema outside the subset, compiled by `jsonschema`.
    #[cfg(feature = "jsonschema")]
    fn compile_full(
        schema: &JsonValue,
        _outside_subset: SchemaError,
        options: CompileOptions,
    ) -> Result<CompiledSchema, SchemaCompileError> {
        let validator = jsonschema::options()
            .should_validate_formats(options.assert_formats)
            .build(&schema.to_value())
            .map_err(|error| SchemaCompileError::new(error.to_string()))?;
        Ok(CompiledSchema {
            declared: schema.clone(),
            check: Check::Full(Arc::new(validator)),
        })
    }

    /// A schema outside the subset, in a build without a full validator: refused.
    #[cfg(not(feature = "jsonschema"))]
    fn compile_full(
        _schema: &JsonValue,
        outside_subset: SchemaError,
        _options: CompileOptions,
    ) -> Result<CompiledSchema, SchemaCompileError> {
        Err(SchemaCompileError::outside_subset(outside_subset))
    }

    /// [`CompiledSchema::compile_as`] for a `serde_json::Value`, whose depth is measured before
    /// it is converted (the conversion recurses).
    pub(crate) fn compile_value_as(
        schema: &Value,
        root: Root,
        options: CompileOptions,
    ) -> Result<CompiledSchema, SchemaCompileError> {
        if crate::json::nests_deeper_than(schema, crate::json::MAX_DEPTH) {
            return Err(SchemaCompileError::new(format!(
                "the schema nests deeper than {} levels",
                crate::json::MAX_DEPTH
            )));
        }
        CompiledSchema::compile_as(&JsonValue::from(schema), root, options)
    }

    /// The schema exactly as declared: what the model receives (outside strict mode).
    pub fn json(&self) -> &JsonValue {
        &self.declared
    }

    /// The schema as a subset node, when it is inside the subset (always for typed and DSL
    /// tools).
    pub fn as_subset(&self) -> Option<&ValueSchema> {
        match &self.check {
            Check::Subset(schema) => Some(schema),
            #[cfg(feature = "jsonschema")]
            Check::Full(_) => None,
        }
    }

    /// The strict projection ([`ValueSchema::to_strict_json`]) of a subset schema. `None` for
    /// a schema outside the subset: strict function calling accepts only a fragment of JSON
    /// Schema, so such a schema is sent as declared, without `strict`.
    pub fn to_strict_json(&self) -> Option<JsonValue> {
        self.as_subset().map(ValueSchema::to_strict_json)
    }

    /// Whether the declared root is an object schema (`"type": "object"`), as a parameter
    /// schema must be.
    pub(crate) fn has_object_root(&self) -> bool {
        match &self.check {
            Check::Subset(schema) => schema.as_object().is_some(),
            #[cfg(feature = "jsonschema")]
            Check::Full(_) => {
                self.declared.get("type").and_then(JsonValue::as_str) == Some("object")
            }
        }
    }

    /// Validates a value, reporting every violation with its JSON pointer.
    pub fn validate(&self, value: &JsonValue) -> Result<(), Vec<Violation>> {
        match &self.check {
            Check::Subset(schema) => validate(schema, value),
            #[cfg(feature = "jsonschema")]
            Check::Full(validator) => {
                beyond_f64(value)?;
                full(validator, &value.to_value())
            }
        }
    }

    /// Validates a call's arguments: the exact form for the subset, the `serde_json::Value`
    /// the call already holds for `jsonschema` (no conversion on either path).
    pub(crate) fn validate_args(&self, args: &ParsedArguments) -> Result<(), Vec<Violation>> {
        match &self.check {
            Check::Subset(schema) => validate(schema, args.exact()),
            #[cfg(feature = "jsonschema")]
            Check::Full(validator) => {
                beyond_f64(args.exact())?;
                full(validator, args.value())
            }
        }
    }

    /// Validates a `serde_json::Value` (a body's canonical value, logged arguments).
    pub(crate) fn validate_value(&self, value: &Value) -> Result<(), Vec<Violation>> {
        match &self.check {
            // A subset schema that accepts any value needs no conversion to check.
            Check::Subset(schema) if matches!(schema.kind(), super::SchemaKind::Json) => Ok(()),
            Check::Subset(schema) => super::validate_value(schema, value),
            #[cfg(feature = "jsonschema")]
            Check::Full(validator) => full(validator, value),
        }
    }

    /// Whether a `serde_json::Value` is valid, without diagnostics.
    pub(crate) fn accepts_value(&self, value: &Value) -> bool {
        match &self.check {
            Check::Subset(schema) => super::accepts_value(schema, value),
            #[cfg(feature = "jsonschema")]
            Check::Full(validator) => validator.is_valid(value),
        }
    }
}

/// Every violation `jsonschema` finds, in our shape: the instance's JSON pointer and the
/// validator's message.
#[cfg(feature = "jsonschema")]
fn full(validator: &jsonschema::Validator, value: &Value) -> Result<(), Vec<Violation>> {
    if validator.is_valid(value) {
        return Ok(());
    }
    let violations: Vec<Violation> = validator
        .iter_errors(value)
        .map(|error| Violation::new(error.instance_path().as_str(), error.to_string()))
        .collect();
    if violations.is_empty() {
        Err(vec![Violation::new(
            "",
            "the value does not match the schema",
        )])
    } else {
        Err(violations)
    }
}

/// Refuses numbers a `serde_json::Value` cannot hold (beyond `f64`'s range): the lossy view
/// turns them into strings, which `jsonschema` would judge as strings.
#[cfg(feature = "jsonschema")]
fn beyond_f64(value: &JsonValue) -> Result<(), Vec<Violation>> {
    fn walk(value: &JsonValue, at: &str, out: &mut Vec<Violation>) {
        match value {
            JsonValue::Number(number) if number.to_number().is_none() => out.push(Violation::new(
                at,
                format!(
                    "the number {number} is beyond the range this schema's validator can judge \
                     (about ±1.8e308)"
                ),
            )),
            JsonValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{at}/{i}"), out);
                }
            }
            JsonValue::Object(object) => {
                for (key, item) in object.iter() {
                    walk(item, &pointer_push(at, key), out);
                }
            }
            _ => {}
        }
    }
    fn any(value: &JsonValue) -> bool {
        match value {
            JsonValue::Number(number) => number.to_number().is_none(),
            JsonValue::Array(items) => items.iter().any(any),
            JsonValue::Object(object) => object.iter().any(|(_, item)| any(item)),
            _ => false,
        }
    }
    // Pointers are built only when there is something to report.
    if !any(value) {
        return Ok(());
    }
    let mut out = Vec::new();
    walk(value, "", &mut out);
    if out.is_empty() { Ok(()) } else { Err(out) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::{ContentBlock, ToolDefinition};
    use serde_json::json;

    /// A parameter schema outside the subset (`minimum`): validated by `jsonschema` with the
    /// feature, refused at registration with the subset's reasons without it, never a panic.
    #[test]
    fn a_schema_outside_the_subset_compiles_only_with_the_jsonschema_feature() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1}},
            "required": ["n"],
            "additionalProperties": false
        });
        let built = ToolDefinition::builder("count", "Count to n.")
            .raw_parameters(schema.clone())
            .raw_output(json!({}), |_, value| {
                vec![ContentBlock::text(value.to_string())]
            })
            .execute(|args, _| async move { Ok((*args).clone()) })
            .build();
        let compiled = CompiledSchema::compile(&JsonValue::from(&schema));
        #[cfg(feature = "jsonschema")]
        {
            assert!(built.is_ok());
            let compiled = compiled.unwrap();
            assert!(compiled.as_subset().is_none());
            let violations = compiled
                .validate(&JsonValue::from(&json!({"n": 0})))
                .unwrap_err();
            assert_eq!(violations[0].pointer, "/n");
        }
        #[cfg(not(feature = "jsonschema"))]
        {
            let error = compiled.unwrap_err();
            let reasons = error.outside_subset.clone().expect("the subset's reasons");
            assert_eq!(reasons.pointers(), vec!["/properties/n/minimum"]);
            assert!(
                error
                    .message
                    .contains("enable dsh-tools' `jsonschema` feature")
            );
            match built {
                Err(crate::RegistrationError::SchemaCompile {
                    name,
                    which,
                    source,
                }) => {
                    assert_eq!((name.as_str(), which), ("count", "parameters"));
                    assert_eq!(source, error);
                }
                other => panic!("expected a SchemaCompile error, got {other:?}"),
            }
        }
    }
}
