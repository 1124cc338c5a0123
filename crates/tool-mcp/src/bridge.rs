//! An MCP tool as a raw dsh-tools definition: its name, schemas, policy and result value.

use dsh_tools::ContentBlock;
use serde_json::{Map, Value, json};

/// The prefix of every MCP tool's registered name: `mcp__<server>__<tool>`.
pub const TOOL_PREFIX: &str = "mcp__";

/// The registered name of `tool` of `server`: `mcp__<server>__<tool>`, with every character
/// outside `[A-Za-z0-9_-]` replaced by `_`. `None` when it would be longer than 64 characters.
pub fn tool_name(server: &str, tool: &str) -> Option<String> {
    let clean = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let name = format!("{TOOL_PREFIX}{}__{}", clean(server), clean(tool));
    (name.len() <= 64).then_some(name)
}

/// The schema of the value a tool without an output schema returns (and of a result the tool
/// marked `isError`): the text of its content blocks, its images, and whether the tool
/// reported a failure.
pub fn content_value_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "images": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "mimeType": {"type": "string"},
                        "data": {"type": "string"}
                    },
                    "required": ["mimeType", "data"],
                    "additionalProperties": false
                }
            },
            "isError": {"type": "boolean"}
        },
        "required": ["text", "isError"],
        "additionalProperties": false
    })
}

/// The output schema registered for a tool: its own output schema, or a reported failure; or,
/// without one, the content value.
///
/// The declared schema moves down to `anyOf/0`, so its references into itself (`#/$defs/…`,
/// `#/definitions/…`, `#/properties/…`, `#`) are moved with it, unless it is a resource of its
/// own (`$id`, against which they resolve already); its `$schema` stays the document's dialect.
pub(crate) fn output_schema(declared: Option<&Value>) -> Value {
    let Some(declared) = declared else {
        return content_value_schema();
    };
    let mut failure = content_value_schema();
    if let Some(properties) = failure.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert("isError".into(), json!({"const": true}));
    }
    let mut declared = declared.clone();
    let mut wrapper = Map::new();
    if let Value::Object(root) = &declared {
        if let Some(dialect) = root.get("$schema") {
            wrapper.insert("$schema".into(), dialect.clone());
        }
        if !root.contains_key("$id") {
            rebase_refs(&mut declared, DECLARED_PLACE);
        }
    }
    wrapper.insert("anyOf".into(), json!([declared, failure]));
    Value::Object(wrapper)
}

/// Where [`output_schema`] puts the declared schema, as a JSON pointer.
const DECLARED_PLACE: &str = "/anyOf/0";

/// Keywords whose values are data, not schemas: a `$ref` key in them is not a reference.
const DATA_KEYWORDS: &[&str] = &["const", "enum", "default", "examples"];

/// Keywords whose values map names (not keywords) to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// Prefixes the local JSON-pointer references (`#`, `#/…`) of `schema` and its subschemas with
/// `place`, where the schema now sits in the document. Anchors (`#name`) and other documents'
/// references are left as they are.
fn rebase_refs(schema: &mut Value, place: &str) {
    match schema {
        Value::Object(object) => {
            for (keyword, value) in object.iter_mut() {
                match (keyword.as_str(), value) {
                    ("$ref", Value::String(reference))
                        if reference == "#" || reference.starts_with("#/") =>
                    {
                        reference.insert_str(1, place);
                    }
                    (keyword, _) if DATA_KEYWORDS.contains(&keyword) => {}
                    (keyword, Value::Object(map)) if SCHEMA_MAPS.contains(&keyword) => {
                        for subschema in map.values_mut() {
                            rebase_refs(subschema, place);
                        }
                    }
                    (_, value) => rebase_refs(value, place),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                rebase_refs(item, place);
            }
        }
        _ => {}
    }
}

/// What a `tools/call` result is in dsh-tools terms.
#[derive(Debug, PartialEq)]
pub(crate) enum CallOutcome {
    /// The canonical value.
    Value(Value),
    /// The result breaks the protocol; the message says how.
    Malformed(String),
}

/// Turns a `tools/call` result (its JSON) into the canonical value: `structuredContent` when
/// the tool declares an output schema (the registry validates it), else the content value.
/// `isError` is a domain failure: a value with `isError: true`.
pub(crate) fn call_outcome(result: &Value, has_output_schema: bool) -> CallOutcome {
    let Some(object) = result.as_object() else {
        return CallOutcome::Malformed(String::from("the result is not an object"));
    };
    let is_error = match object.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            return CallOutcome::Malformed(format!("`isError` is {other}, not a boolean"));
        }
    };
    if has_output_schema && !is_error {
        return match object.get("structuredContent") {
            Some(structured) => CallOutcome::Value(structured.clone()),
            None => CallOutcome::Malformed(String::from(
                "the tool declares an output schema but its result has no structuredContent",
            )),
        };
    }
    let blocks = match object.get("content") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(blocks)) => blocks,
        Some(_) => return CallOutcome::Malformed(String::from("`content` is not an array")),
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => texts.push(field("text").to_owned()),
            "image" => {
                let mut image = Map::new();
                image.insert("mimeType".into(), field("mimeType").into());
                image.insert("data".into(), field("data").into());
                images.push(Value::Object(image));
            }
            "audio" => texts.push(format!(
                "[audio: {}, {} base64 characters]",
                field("mimeType"),
                field("data").len()
            )),
            "resource_link" => {
                texts.push(format!("[resource: {} {}]", field("uri"), field("name")))
            }
            "resource" => {
                let resource = block.get("resource");
                let text = resource.and_then(|r| r.get("text")).and_then(Value::as_str);
                let uri = resource
                    .and_then(|r| r.get("uri"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                texts.push(match text {
                    Some(text) => text.to_owned(),
                    None => format!("[resource: {uri}]"),
                });
            }
            other => {
                return CallOutcome::Malformed(format!("unknown content block type {other:?}"));
            }
        }
    }
    let mut value = Map::new();
    value.insert("text".into(), texts.join("\n").into());
    if !images.is_empty() {
        value.insert("images".into(), Value::Array(images));
    }
    value.insert("isError".into(), is_error.into());
    CallOutcome::Value(Value::Object(value))
}

/// Whether a value is the content value (not a tool's structured content).
fn is_content_value(value: &Value, has_output_schema: bool) -> bool {
    let shaped = value.get("text").is_some_and(Value::is_string)
        && value.get("isError").is_some_and(Value::is_boolean);
    shaped && (!has_output_schema || value.get("isError") == Some(&Value::Bool(true)))
}

/// What the model reads: the content value's text (images named, a reported failure said), or
/// the structured content as compact JSON.
pub(crate) fn render(value: &Value, has_output_schema: bool) -> Vec<ContentBlock> {
    if !is_content_value(value, has_output_schema) {
        return vec![ContentBlock::text(value.to_string())];
    }
    let text = value.get("text").and_then(Value::as_str).unwrap_or("");
    let failed = value.get("isError") == Some(&Value::Bool(true));
    let mut blocks = vec![ContentBlock::text(if failed {
        format!("The tool reported an error: {text}")
    } else {
        text.to_owned()
    })];
    if let Some(images) = value.get("images").and_then(Value::as_array) {
        for image in images {
            let mime = image.get("mimeType").and_then(Value::as_str).unwrap_or("");
            let size = image
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, str::len);
            blocks.push(ContentBlock::text(format!(
                "[image: {mime}, {size} base64 characters]"
            )));
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_are_prefixed_cleaned_and_bounded() {
        assert_eq!(
            tool_name("fs", "read_file").as_deref(),
            Some("mcp__fs__read_file")
        );
        assert_eq!(
            tool_name("my.server", "get thing").as_deref(),
            Some("mcp__my_server__get_thing")
        );
        assert_eq!(tool_name("s", &"x".repeat(60)), None);
    }

    #[test]
    fn content_blocks_become_text_and_images() {
        let result = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "text", "text": "two"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}}
        ]});
        let value = json!({
            "text": "one\ntwo\nbody",
            "images": [{"mimeType": "image/png", "data": "AAAA"}],
            "isError": false
        });
        assert_eq!(
            call_outcome(&result, false),
            CallOutcome::Value(value.clone())
        );
        assert_eq!(
            render(&value, false),
            vec![
                ContentBlock::text("one\ntwo\nbody"),
                ContentBlock::text("[image: image/png, 4 base64 characters]")
            ]
        );
    }

    #[test]
    fn structured_content_is_the_value_and_is_error_is_a_domain_failure() {
        let result = json!({"content": [{"type": "text", "text": "{\"n\":1}"}], "structuredContent": {"n": 1}});
        assert_eq!(
            call_outcome(&result, true),
            CallOutcome::Value(json!({"n": 1}))
        );
        assert_eq!(
            render(&json!({"n": 1}), true),
            vec![ContentBlock::text("{\"n\":1}")]
        );
        let failed =
            json!({"content": [{"type": "text", "text": "no such city"}], "isError": true});
        let value = json!({"text": "no such city", "isError": true});
        assert_eq!(
            call_outcome(&failed, true),
            CallOutcome::Value(value.clone())
        );
        assert_eq!(
            render(&value, true),
            vec![ContentBlock::text(
                "The tool reported an error: no such city"
            )]
        );
    }

    #[test]
    fn a_declared_output_schema_keeps_its_dialect_and_its_references_follow_it() {
        let declared = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"n": {"type": "integer"}, "node": {"items": {"$ref": "#"}}},
            "properties": {
                "a": {"$ref": "#/definitions/n"},
                "b": {"$ref": "#/properties/a"},
                "const": {"$ref": "#/definitions/n", "default": {"$ref": "#/data"}},
                "c": {"anyOf": [{"$ref": "#/definitions/node"}, {"$ref": "#anchor"}]}
            }
        });
        let registered = output_schema(Some(&declared));
        assert_eq!(
            registered["$schema"],
            json!("http://json-schema.org/draft-07/schema#")
        );
        assert_eq!(
            registered["anyOf"][0],
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "definitions": {
                    "n": {"type": "integer"},
                    "node": {"items": {"$ref": "#/anyOf/0"}}
                },
                "properties": {
                    "a": {"$ref": "#/anyOf/0/definitions/n"},
                    "b": {"$ref": "#/anyOf/0/properties/a"},
                    "const": {"$ref": "#/anyOf/0/definitions/n", "default": {"$ref": "#/data"}},
                    "c": {"anyOf": [{"$ref": "#/anyOf/0/definitions/node"}, {"$ref": "#anchor"}]}
                }
            })
        );
        // A schema with an `$id` is a resource of its own: its references resolve against it.
        let resource = json!({"$id": "urn:x", "properties": {"a": {"$ref": "#/$defs/n"}}});
        assert_eq!(output_schema(Some(&resource))["anyOf"][0], resource);
    }

    #[test]
    fn protocol_breaks_are_malformed() {
        for (result, has_schema, message) in [
            (json!([]), false, "the result is not an object"),
            (
                json!({"content": []}),
                true,
                "the tool declares an output schema but its result has no structuredContent",
            ),
            (json!({"content": {}}), false, "`content` is not an array"),
            (
                json!({"isError": "yes"}),
                false,
                "`isError` is \"yes\", not a boolean",
            ),
        ] {
            assert_eq!(
                call_outcome(&result, has_schema),
                CallOutcome::Malformed(message.into())
            );
        }
    }
}
