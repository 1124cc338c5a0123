//! The value schemas' shared transforms: shapes only, and nullable required fields.

use schemars::JsonSchema;
use schemars::transform::Transform;

/// Removes the descriptions `schemars` takes from doc comments: the value schemas are the
/// shapes alone (as `tool-bash`'s are), so these docs stay Rust documentation.
pub(crate) fn without_descriptions(schema: &mut schemars::Schema) {
    schemars::transform::RecursiveTransform(|schema: &mut schemars::Schema| {
        schema.remove("description");
    })
    .transform(schema);
}

/// `T` or `null`, for an `Option` field that is always written.
pub(crate) fn nullable<T: JsonSchema>(
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    let inner = generator.subschema_for::<T>();
    schemars::json_schema!({"anyOf": [inner, {"type": "null"}]})
}
