//! The canonical values of the `bash` tool, as Rust types.
//!
//! [`BashOutput`] is what the `bash` body returns and what its output schema is generated
//! from ([`BashOutput::schema`]), so the schema a host publishes (an MCP server's
//! `outputSchema`) cannot drift from the value the tool builds. The model-visible text is
//! rendered from it ([`render_bash_output`](crate::tool::render_bash_output)), and the exit
//! facts a card needs travel from it as a typed [`BashExitMeta`].

use crate::shell::{Collected, ShellRunResult};
use dsh_tools::{SchemaError, ValueSchema};
use presenters::bash::BashExitMeta;
use schemars::JsonSchema;
use schemars::transform::Transform;
use serde::{Deserialize, Serialize};

/// The canonical value of a `bash` call: a background handle, or a foreground outcome.
///
/// On the wire it is an object tagged by `"kind"`: `{"kind": "background", "jobId": …}` or
/// `{"kind": "foreground", "exitCode": …, …}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum BashOutput {
    /// The command was started as a background job.
    Background(BackgroundStart),
    /// The command ran in the foreground and ended (boxed: it is ten times a start's size).
    Foreground(Box<ForegroundRun>),
}

impl BashOutput {
    /// The value's schema, generated from the two variants' types: a `oneOf` of closed objects
    /// whose first property is the `"kind"` tag serde writes, then each type's fields in their
    /// declared order (the order the model and an MCP client read them in).
    pub fn schema() -> Result<ValueSchema, SchemaError> {
        Ok(ValueSchema::one_of([
            tagged(
                "background",
                &ValueSchema::for_type_in_field_order::<BackgroundStart>()?,
            ),
            tagged(
                "foreground",
                &ValueSchema::for_type_in_field_order::<ForegroundRun>()?,
            ),
        ]))
    }

    /// The exit facts a card shows, for a foreground run; `None` for a background start.
    pub fn exit_meta(&self) -> Option<BashExitMeta> {
        match self {
            BashOutput::Background(_) => None,
            BashOutput::Foreground(run) => {
                Some(BashExitMeta::new(run.exit_code, run.signal.clone()))
            }
        }
    }
}

/// A closed object node: the `"kind": <tag>` property, then the properties of `fields` (a
/// closed object node) in their order.
fn tagged(tag: &str, fields: &ValueSchema) -> ValueSchema {
    let mut node =
        ValueSchema::closed_object().required("kind", ValueSchema::string().constant(tag));
    let Some(fields) = fields.as_object() else {
        return node;
    };
    for (name, property) in fields.properties() {
        node = if fields.is_required(name) {
            node.required(name, property.clone())
        } else {
            node.property(name, property.clone())
        };
    }
    node
}

/// Removes the descriptions `schemars` takes from doc comments: the value schemas are the
/// shapes alone, as they were when written by hand, so these docs stay Rust documentation.
pub(crate) fn without_descriptions(schema: &mut schemars::Schema) {
    schemars::transform::RecursiveTransform(|schema: &mut schemars::Schema| {
        schema.remove("description");
    })
    .transform(schema);
}

/// `T` or `null`, for an `Option` field that is always written (required, possibly `null`):
/// `schemars` would otherwise make a required `Option` non-nullable.
fn nullable<T: JsonSchema>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let inner = generator.subschema_for::<T>();
    schemars::json_schema!({"anyOf": [inner, {"type": "null"}]})
}

/// A background start: the job's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct BackgroundStart {
    /// The job's id (`bash-1`).
    pub job_id: String,
}

impl BackgroundStart {
    /// The start of the job `job_id`.
    pub fn new(job_id: impl Into<String>) -> BackgroundStart {
        BackgroundStart {
            job_id: job_id.into(),
        }
    }
}

/// How a foreground command ended, and what it printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct ForegroundRun {
    /// The exit code, when the shell exited (`null` when a signal ended it, or when nobody
    /// observed the end). Always present, so a reader need not guess what a missing key means.
    #[schemars(required, schema_with = "nullable::<i64>")]
    pub exit_code: Option<i64>,
    /// The terminating signal (`SIGKILL`), when a signal ended it. Always present.
    #[schemars(required, schema_with = "nullable::<String>")]
    pub signal: Option<String>,
    /// The timeout was the first cause to stop the command.
    pub timed_out: bool,
    /// The caller's cancellation was the first cause to stop the command.
    pub aborted: bool,
    /// The timeout that applied, in milliseconds.
    #[schemars(with = "i64")]
    pub timeout_ms: u64,
    /// Wall time from spawn to result, in milliseconds.
    #[schemars(with = "i64")]
    pub duration_ms: u64,
    /// Standard output.
    pub stdout: StreamOutput,
    /// Standard error.
    pub stderr: StreamOutput,
    /// The executor's notes for the model (a sandbox naming its policy), shown after the
    /// output; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl From<&ShellRunResult> for ForegroundRun {
    fn from(result: &ShellRunResult) -> ForegroundRun {
        ForegroundRun {
            exit_code: result.exit_code.map(i64::from),
            signal: result.signal.clone(),
            timed_out: result.timed_out,
            aborted: result.aborted,
            timeout_ms: millis(result.timeout),
            duration_ms: millis(result.duration),
            stdout: StreamOutput::from(&result.stdout),
            stderr: StreamOutput::from(&result.stderr),
            notes: result.notes.clone(),
        }
    }
}

/// One output stream of a foreground run: the visible window and where the rest is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct StreamOutput {
    /// The visible text: the whole stream, or its head and tail.
    pub text: String,
    /// Whether bytes were left out of `text`.
    pub truncated: bool,
    /// The stream's size in bytes.
    #[schemars(with = "i64")]
    pub total_bytes: u64,
    /// The bytes of the stream `text` shows.
    #[schemars(with = "i64")]
    pub shown_bytes: u64,
    /// The file holding the stream byte for byte, when it outgrew its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub spill_path: Option<String>,
    /// When the spill file stopped at its cap: the bytes it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub spill_limit_bytes: Option<u64>,
    /// Why there is no complete spill file although one was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub spill_error: Option<String>,
}

impl From<&Collected> for StreamOutput {
    fn from(collected: &Collected) -> StreamOutput {
        StreamOutput {
            text: collected.text.clone(),
            truncated: collected.truncated,
            total_bytes: collected.total_bytes,
            shown_bytes: collected.shown_bytes,
            spill_path: collected
                .spill_path
                .as_ref()
                .map(|path| path.display().to_string()),
            spill_limit_bytes: collected.spill_limit_bytes,
            spill_error: collected.spill_error.clone(),
        }
    }
}

/// Whole milliseconds, saturating (no timeout or run lasts 584 million years).
fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
