//! Tool definitions: the typed [`Tool`] trait, the runtime [`ToolDefinition`] and its builder.

use crate::call::{ParsedArguments, ToolExecution, ToolResult};
use crate::card::{ToolCallView, ToolResultView};
use crate::content::{ContentBlock, ToolResultRecord};
use crate::error::{RegistrationError, ToolError, panic_message};
use crate::exec::ExecContext;
use crate::json::JsonValue;
use crate::schema::{CompileOptions, CompiledSchema, Root, ValueSchema};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

/// The name reserved for the Code Mode transport.
pub const RESERVED_TOOL_NAME: &str = "run_code";

/// The model-facing part of a definition: exactly what a model request carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSchema {
    /// The tool's name.
    pub name: String,
    /// What the model reads to decide when to call it.
    pub description: String,
    /// The JSON Schema of the arguments (an object), with its properties in declared order; a
    /// raw definition's schema exactly as declared.
    pub parameters: JsonValue,
}

/// Renders the canonical value as model-visible content: `render(args, value)`. Pure. It gets
/// the parsed arguments in all their forms, so a typed tool reads its `Args` from the text and
/// the arguments' `Value` is built only for a renderer that asks for it.
pub(crate) type RenderFn = Arc<dyn Fn(&ParsedArguments, &Value) -> Vec<ContentBlock> + Send + Sync>;
/// Projects replayable UI facts: `presentation_meta(args, value)`. Pure.
pub(crate) type PresentationMetaFn =
    Arc<dyn Fn(&ParsedArguments, &Value) -> Option<Value> + Send + Sync>;
/// A body: `execute(exec)`, returning the canonical value. It reads its arguments from the
/// context, so a typed body, which deserialises them from the text, never makes the
/// arguments' `Value` built.
pub(crate) type BodyFn =
    Arc<dyn Fn(ExecContext) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;
/// Replaces final content: `finalize_content(exec, result)`. Synchronous and total.
pub(crate) type FinalizeContentFn =
    Arc<dyn Fn(&ToolExecution, &ToolResult) -> Option<Vec<ContentBlock>> + Send + Sync>;
/// Whether a call may overlap its siblings.
pub(crate) type ConcurrencyFn = Arc<dyn Fn(&Value) -> bool + Send + Sync>;
/// The pending card of a call.
pub(crate) type PresentCallFn = Arc<dyn Fn(&Value) -> Option<ToolCallView> + Send + Sync>;
/// The completed card of a call.
pub(crate) type PresentResultFn =
    Arc<dyn Fn(&Value, &ToolResultRecord) -> Option<ToolResultView> + Send + Sync>;

/// The mandatory output declaration: the canonical value's schema and its projections.
#[derive(Clone)]
pub struct ToolOutput {
    pub(crate) schema: CompiledSchema,
    pub(crate) render: RenderFn,
    pub(crate) presentation_meta: Option<PresentationMetaFn>,
}

impl ToolOutput {
    /// An output declaration. The schema's root may be an object, array, scalar or null.
    pub fn new(
        schema: ValueSchema,
        render: impl Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync + 'static,
    ) -> ToolOutput {
        ToolOutput::compiled(CompiledSchema::from(schema), render)
    }

    /// An output declaration with a compiled schema: a raw JSON Schema of any draft
    /// ([`CompiledSchema::compile`]). The builder's
    /// [`raw_output`](ToolDefinitionBuilder::raw_output) compiles one for you.
    pub fn compiled(
        schema: CompiledSchema,
        render: impl Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync + 'static,
    ) -> ToolOutput {
        ToolOutput {
            schema,
            render: value_render(render),
            presentation_meta: None,
        }
    }

    /// Adds the replayable presentation projection (computed for top-level calls only and
    /// persisted on `tool/result`); `None` records no meta for that value.
    pub fn with_presentation_meta(
        mut self,
        meta: impl Fn(&Value, &Value) -> Option<Value> + Send + Sync + 'static,
    ) -> ToolOutput {
        self.presentation_meta = Some(Arc::new(move |args: &ParsedArguments, value: &Value| {
            meta(args.value(), value)
        }));
        self
    }

    /// The canonical value's schema: as declared ([`CompiledSchema::json`], what an MCP
    /// server publishes as `outputSchema`), and as a subset node when it is one.
    pub fn schema(&self) -> &CompiledSchema {
        &self.schema
    }
}

/// A renderer over the arguments' `Value` (builder and raw definitions), as a [`RenderFn`].
fn value_render(
    render: impl Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync + 'static,
) -> RenderFn {
    Arc::new(move |args: &ParsedArguments, value: &Value| render(args.value(), value))
}

impl fmt::Debug for ToolOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolOutput")
            .field("schema", &self.schema)
            .field("presentation_meta", &self.presentation_meta.is_some())
            .finish_non_exhaustive()
    }
}

/// Whether the registry validates arguments before the body runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgsValidation {
    /// Arguments are validated against the parameter schema (the default for every kind of
    /// definition).
    Validated,
    /// The body validates its own input ([`ToolDefinitionBuilder::args_validation`] opts a
    /// builder definition out; [`CompiledSchema::validate`] is there for it).
    Unvalidated,
}

/// A registered tool: its model-facing schema, output declaration, body and optional
/// callbacks. Immutable once built; the registry borrows it as an `Arc`.
#[derive(Clone)]
pub struct ToolDefinition {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: CompiledSchema,
    pub(crate) args_validation: ArgsValidation,
    pub(crate) output: ToolOutput,
    pub(crate) body: BodyFn,
    pub(crate) finalize_content: Option<FinalizeContentFn>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) concurrency: Option<ConcurrencyFn>,
    pub(crate) present_call: Option<PresentCallFn>,
    pub(crate) present_result: Option<PresentResultFn>,
    /// Whether this is the Code Mode transport, the one definition that may take the reserved
    /// name ([`ToolDefinitionBuilder::code_mode_transport`]).
    pub(crate) code_mode_transport: bool,
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("args_validation", &self.args_validation)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ToolDefinition {
    /// Starts a definition without Rust types (builder DSL or raw JSON Schema).
    pub fn builder(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            name: name.into(),
            description: description.into(),
            parameters: Parameters::Default,
            args_validation: ArgsValidation::Validated,
            compile_options: CompileOptions::default(),
            output: None,
            body: None,
            finalize_content: None,
            timeout: None,
            concurrency: None,
            present_call: None,
            present_result: None,
            code_mode_transport: false,
        }
    }

    /// Builds the definition of a typed [`Tool`]: schemas come from its `Args` and `Output`
    /// types through the `schemars` normaliser.
    pub fn from_tool<T: Tool>(tool: T) -> Result<ToolDefinition, RegistrationError> {
        typed::definition(tool)
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The parameter schema: as declared ([`CompiledSchema::json`], what the model receives),
    /// and as a subset node ([`CompiledSchema::as_subset`]) for typed and DSL tools and for a
    /// raw schema inside the subset.
    pub fn parameters(&self) -> &CompiledSchema {
        &self.parameters
    }

    /// The output declaration.
    pub fn output(&self) -> &ToolOutput {
        &self.output
    }

    /// Whether arguments are validated before the body.
    pub fn args_validation(&self) -> ArgsValidation {
        self.args_validation
    }

    /// The timeout, when declared.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The model-facing schema (a deep copy).
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.json().clone(),
        }
    }

    /// Whether a call with these arguments may overlap its siblings. Only an exact `true`
    /// counts; invalid arguments, a missing classifier and a panic are all exclusive.
    pub fn is_concurrency_safe(&self, args: &Value) -> bool {
        let Some(classify) = &self.concurrency else {
            return false;
        };
        if self.args_validation == ArgsValidation::Validated && !self.parameters.accepts_value(args)
        {
            return false;
        }
        catch_unwind(AssertUnwindSafe(|| classify(args))).unwrap_or(false)
    }

    /// The pending card, or `None` (generic fallback) when the tool has no presenter, the
    /// arguments are malformed, or the presenter panics.
    pub fn present_call(&self, args: &Value) -> Option<ToolCallView> {
        let present = self.present_call.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| present(args)))
            .ok()
            .flatten()
    }

    /// The completed card, or `None` (generic fallback), under the same soft rules.
    pub fn present_result(
        &self,
        args: &Value,
        record: &ToolResultRecord,
    ) -> Option<ToolResultView> {
        let present = self.present_result.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| present(args, record)))
            .ok()
            .flatten()
    }

    /// Checks the registration rules that do not depend on a registry: the name, the
    /// description, the schemas, the timeout. Every way of building a definition (typed,
    /// builder DSL, raw) ends here.
    pub(crate) fn check(&self) -> Result<(), RegistrationError> {
        check_name(&self.name, self.code_mode_transport)?;
        if self.description.trim().is_empty() {
            return Err(RegistrationError::EmptyDescription {
                name: self.name.clone(),
            });
        }
        if !self.parameters.has_object_root() {
            return Err(RegistrationError::ParametersNotObject {
                name: self.name.clone(),
            });
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(RegistrationError::InvalidTimeout {
                name: self.name.clone(),
            });
        }
        Ok(())
    }
}

/// Checks a tool name; `transport` lets the Code Mode transport take the reserved name.
fn check_name(name: &str, transport: bool) -> Result<(), RegistrationError> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(RegistrationError::InvalidName {
            name: name.to_owned(),
        });
    }
    if name == RESERVED_TOOL_NAME && !transport {
        return Err(RegistrationError::ReservedName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

enum Parameters {
    Default,
    Validated(Box<ValueSchema>),
    Raw(Value),
    RawExact(JsonValue),
}

/// An output declaration whose raw schema is compiled when the definition is built.
enum OutputDeclaration {
    Ready(Box<ToolOutput>),
    Raw(Value, RenderFn),
    RawExact(JsonValue, RenderFn),
}

/// Builds a [`ToolDefinition`] without Rust types.
///
/// Parameters come from the builder DSL ([`parameters`](Self::parameters)), which stays inside
/// the subset, or as a raw JSON Schema ([`raw_parameters`](Self::raw_parameters)), the form
/// MCP-sourced and dynamic tools carry: any JSON Schema of draft 2020-12 or draft-07, compiled
/// once when the definition is built ([`CompiledSchema`]). Either way the registry validates
/// the arguments before the body runs, unless
/// [`args_validation`](Self::args_validation) hands that to the body.
#[must_use]
pub struct ToolDefinitionBuilder {
    name: String,
    description: String,
    parameters: Parameters,
    args_validation: ArgsValidation,
    compile_options: CompileOptions,
    output: Option<OutputDeclaration>,
    body: Option<BodyFn>,
    finalize_content: Option<FinalizeContentFn>,
    timeout: Option<Duration>,
    concurrency: Option<ConcurrencyFn>,
    present_call: Option<PresentCallFn>,
    present_result: Option<PresentResultFn>,
    code_mode_transport: bool,
}

impl fmt::Debug for ToolDefinitionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinitionBuilder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ToolDefinitionBuilder {
    /// Validated parameters from the builder DSL (the root must be an object node).
    pub fn parameters(mut self, schema: ValueSchema) -> Self {
        self.parameters = Parameters::Validated(Box::new(schema));
        self
    }

    /// Raw JSON Schema parameters: any JSON Schema of draft 2020-12 or draft-07 whose root is
    /// `"type": "object"` ([`CompiledSchema`]). The model receives it as declared; the registry
    /// validates each call's arguments against it. A schema that does not compile fails
    /// [`build`](Self::build) with [`RegistrationError::SchemaCompile`].
    ///
    /// A `serde_json::Value` has sorted its keys, so the model sees the properties in
    /// alphabetical order; [`raw_parameters_exact`](Self::raw_parameters_exact) keeps the
    /// declared order.
    pub fn raw_parameters(mut self, schema: Value) -> Self {
        self.parameters = Parameters::Raw(schema);
        self
    }

    /// Raw JSON Schema parameters held exactly (parse the schema's text with
    /// [`JsonValue::parse`], or build it with [`ValueSchema::to_json`]): the model sees the
    /// schema byte for byte as declared, properties in the declared order.
    pub fn raw_parameters_exact(mut self, schema: JsonValue) -> Self {
        self.parameters = Parameters::RawExact(schema);
        self
    }

    /// Whether the registry validates arguments before the body runs (the default,
    /// [`ArgsValidation::Validated`]). [`ArgsValidation::Unvalidated`] hands every argument
    /// check to the body, for a tool that words its own messages.
    pub fn args_validation(mut self, validation: ArgsValidation) -> Self {
        self.args_validation = validation;
        self
    }

    /// How the raw schemas of this definition are compiled (for example, whether `format` is
    /// asserted; by default it is not).
    pub fn compile_options(mut self, options: CompileOptions) -> Self {
        self.compile_options = options;
        self
    }

    /// The mandatory output declaration.
    pub fn output(mut self, output: ToolOutput) -> Self {
        self.output = Some(OutputDeclaration::Ready(Box::new(output)));
        self
    }

    /// The mandatory output declaration from a raw JSON Schema of any draft (`{}` accepts any
    /// value, for a tool that declares no output schema). The registry checks each canonical
    /// value against it, as it does for typed tools.
    pub fn raw_output(
        mut self,
        schema: Value,
        render: impl Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync + 'static,
    ) -> Self {
        self.output = Some(OutputDeclaration::Raw(schema, value_render(render)));
        self
    }

    /// [`raw_output`](Self::raw_output) for a schema held exactly (declared order kept).
    pub fn raw_output_exact(
        mut self,
        schema: JsonValue,
        render: impl Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync + 'static,
    ) -> Self {
        self.output = Some(OutputDeclaration::RawExact(schema, value_render(render)));
        self
    }

    /// The body: receives the frozen arguments and the runtime context, returns the canonical
    /// value.
    pub fn execute<F, Fut>(mut self, body: F) -> Self
    where
        F: Fn(Arc<Value>, ExecContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.body = Some(Arc::new(move |exec: ExecContext| {
            Box::pin(body(Arc::clone(exec.args()), exec))
        }));
        self
    }

    /// Replaces final content once per outcome (failures included). Must not panic; a panic is
    /// contained and the content kept.
    pub fn finalize_content(
        mut self,
        finalize: impl Fn(&ToolExecution, &ToolResult) -> Option<Vec<ContentBlock>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.finalize_content = Some(Arc::new(finalize));
        self
    }

    /// A positive cooperative timeout, enforced by an execute-stage wrapper; never sent to the
    /// model.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Classifies calls that may overlap their siblings (only an exact `true` counts).
    pub fn concurrency_safe(
        mut self,
        classify: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.concurrency = Some(Arc::new(classify));
        self
    }

    /// The pending card. Must return `None` for arguments it cannot read.
    pub fn present_call(
        mut self,
        present: impl Fn(&Value) -> Option<ToolCallView> + Send + Sync + 'static,
    ) -> Self {
        self.present_call = Some(Arc::new(present));
        self
    }

    /// The completed card. Must return `None` for arguments or records it cannot read.
    pub fn present_result(
        mut self,
        present: impl Fn(&Value, &ToolResultRecord) -> Option<ToolResultView> + Send + Sync + 'static,
    ) -> Self {
        self.present_result = Some(Arc::new(present));
        self
    }

    /// Marks the definition as the Code Mode transport, the tool that runs a model's program
    /// (the `tool-code` crate's `run_code`). Only such a definition may take the reserved name
    /// [`RESERVED_TOOL_NAME`]; ordinary tools never need this.
    pub fn code_mode_transport(mut self) -> Self {
        self.code_mode_transport = true;
        self
    }

    /// Finishes the definition, checking the name, the schemas and the timeout.
    pub fn build(self) -> Result<ToolDefinition, RegistrationError> {
        let name = self.name;
        let schema_error = |which, source| RegistrationError::Schema {
            name: name.clone(),
            which,
            source,
        };
        let compile_error = |which, source| RegistrationError::SchemaCompile {
            name: name.clone(),
            which,
            source,
        };
        let options = self.compile_options;
        let parameters = match self.parameters {
            Parameters::Default => CompiledSchema::from(ValueSchema::open_object()),
            Parameters::Validated(schema) => {
                schema.check().map_err(|e| schema_error("parameters", e))?;
                CompiledSchema::from(*schema)
            }
            Parameters::Raw(raw) => {
                CompiledSchema::compile_value_as(&raw, Root::Parameters, options)
                    .map_err(|e| compile_error("parameters", e))?
            }
            Parameters::RawExact(raw) => {
                CompiledSchema::compile_as(&raw, Root::Parameters, options)
                    .map_err(|e| compile_error("parameters", e))?
            }
        };
        let output = match self.output {
            None => {
                return Err(RegistrationError::Incomplete {
                    name,
                    missing: "output",
                });
            }
            Some(OutputDeclaration::Ready(output)) => *output,
            Some(OutputDeclaration::Raw(schema, render)) => ToolOutput {
                schema: CompiledSchema::compile_value_as(&schema, Root::Value, options)
                    .map_err(|e| compile_error("output", e))?,
                render,
                presentation_meta: None,
            },
            Some(OutputDeclaration::RawExact(schema, render)) => ToolOutput {
                schema: CompiledSchema::compile_as(&schema, Root::Value, options)
                    .map_err(|e| compile_error("output", e))?,
                render,
                presentation_meta: None,
            },
        };
        if let Some(schema) = output.schema.as_subset() {
            schema.check().map_err(|e| schema_error("output", e))?;
        }
        let Some(body) = self.body else {
            return Err(RegistrationError::Incomplete {
                name,
                missing: "execute",
            });
        };
        let definition = ToolDefinition {
            name,
            description: self.description,
            parameters,
            args_validation: self.args_validation,
            output,
            body,
            finalize_content: self.finalize_content,
            timeout: self.timeout,
            concurrency: self.concurrency,
            present_call: self.present_call,
            present_result: self.present_result,
            code_mode_transport: self.code_mode_transport,
        };
        definition.check()?;
        Ok(definition)
    }
}

/// A typed tool: arguments and output are Rust types whose schemas come from `schemars`.
///
/// The registry validates the arguments against the derived schema before `execute`, then
/// deserialises them into [`Tool::Args`]; the output is serialised, validated against the
/// derived output schema, frozen and rendered.
///
/// Rendering and presentation work on the types too: `render`, `presentation_meta`,
/// `present_call` and `present_result` receive the arguments as [`Tool::Args`] and the value as
/// [`Tool::Output`], read back from the frozen JSON (a hook may have replaced the value, so it
/// is read, not remembered). That reading is soft: a value that does not read as
/// [`Tool::Output`] is rendered generically (a string as its text, anything else as compact
/// JSON) and gets no meta, and malformed or older logged arguments give `None` (the generic
/// card) without calling the presenters, so an old or damaged log never panics a host.
pub trait Tool: Send + Sync + 'static {
    /// The arguments; `#[serde(deny_unknown_fields)]` closes the parameter root.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    /// The canonical output value. It is serialised once and read back for rendering, so it
    /// round-trips through serde.
    type Output: Serialize + DeserializeOwned + JsonSchema + Send + 'static;

    /// The tool's name (`^[A-Za-z0-9_-]{1,64}$`, not `run_code`).
    fn name(&self) -> &str;

    /// What the model reads to decide when to call it: write what users actually say.
    fn description(&self) -> &str;

    /// Runs one accepted call. Return [`ToolError::invalid_args`] for rules the schema cannot
    /// express; report domain failures in the value, not as errors. Honour `exec.signal()`.
    fn execute(
        &self,
        args: Self::Args,
        exec: ExecContext,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// Renders the canonical value (with the call's arguments) as model-visible content.
    fn render(&self, args: &Self::Args, value: &Self::Output) -> Vec<ContentBlock>;

    /// Replayable UI facts for top-level calls, persisted on `tool/result` (and read back by
    /// [`present_result`](Tool::present_result) from the record's `meta`).
    fn presentation_meta(&self, _args: &Self::Args, _value: &Self::Output) -> Option<Value> {
        None
    }

    /// Replaces the final content once per outcome, failures included.
    fn finalize_content(
        &self,
        _exec: &ToolExecution,
        _result: &ToolResult,
    ) -> Option<Vec<ContentBlock>> {
        None
    }

    /// A cooperative timeout, enforced by an execute-stage wrapper.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether this call may overlap its siblings.
    fn is_concurrency_safe(&self, _args: &Self::Args) -> bool {
        false
    }

    /// The pending card.
    fn present_call(&self, _args: &Self::Args) -> Option<ToolCallView> {
        None
    }

    /// The completed card. It gets the record a log keeps (content, error, presentation meta),
    /// not the value: a replayed session has no value, and the card must come out the same
    /// live and on replay. Facts the card needs beyond the content belong in
    /// [`presentation_meta`](Tool::presentation_meta).
    fn present_result(
        &self,
        _args: &Self::Args,
        _record: &ToolResultRecord,
    ) -> Option<ToolResultView> {
        None
    }
}

mod typed {
    use super::*;

    /// Soft path: validated and deserialised arguments, or `None`.
    fn soft_args<T: Tool>(schema: &ValueSchema, args: &Value) -> Option<T::Args> {
        if !crate::schema::accepts_value(schema, args) {
            return None;
        }
        crate::json::from_value(args).ok()
    }

    /// The accepted arguments, read back as [`Tool::Args`] for the renderer: from the text
    /// when there is one (exact integers, and no `Value` built), else from the value an
    /// in-process caller passed. `None` when they do not read (the generic rendering follows).
    fn typed_args<T: Tool>(args: &ParsedArguments) -> Option<T::Args> {
        match args.text() {
            Some(text) => crate::json::from_str_located(text).ok(),
            None => crate::json::from_value(args.value()).ok(),
        }
    }

    /// The frozen value, read back as [`Tool::Output`]; `None` when it does not read (a hook
    /// replaced it with a value the schema accepts but the type does not).
    fn typed_value<T: Tool>(value: &Value) -> Option<T::Output> {
        match crate::json::from_value(value) {
            Ok(typed) => Some(typed),
            Err(error) => {
                tracing::debug!(%error, "a tool's value does not read as its output type");
                None
            }
        }
    }

    pub(super) fn definition<T: Tool>(tool: T) -> Result<ToolDefinition, RegistrationError> {
        let name = tool.name().to_owned();
        let schema_error = |which, source| RegistrationError::Schema {
            name: name.clone(),
            which,
            source,
        };
        let parameters = ValueSchema::for_type_in_field_order::<T::Args>()
            .map_err(|e| schema_error("parameters", e))?;
        let output_schema =
            ValueSchema::for_type::<T::Output>().map_err(|e| schema_error("output", e))?;
        let tool = Arc::new(tool);

        let render_tool = Arc::clone(&tool);
        let meta_tool = Arc::clone(&tool);
        let output = ToolOutput {
            schema: CompiledSchema::from(output_schema),
            render: Arc::new(move |args: &ParsedArguments, value: &Value| {
                match (typed_args::<T>(args), typed_value::<T>(value)) {
                    (Some(args), Some(typed)) => render_tool.render(&args, &typed),
                    _ => crate::__private::render_value(value),
                }
            }),
            presentation_meta: Some(Arc::new(move |args: &ParsedArguments, value: &Value| {
                let (args, value) = (typed_args::<T>(args)?, typed_value::<T>(value)?);
                meta_tool.presentation_meta(&args, &value)
            })),
        };

        let body_tool = Arc::clone(&tool);
        let body: BodyFn = Arc::new(move |exec: ExecContext| {
            let tool = Arc::clone(&body_tool);
            Box::pin(async move {
                // From the text when there is one: serde reads integer fields from the digits
                // exactly, which the rounded `Value` cannot give.
                let typed: T::Args = exec
                    .typed_args()
                    .map_err(|e| ToolError::invalid_args(e.to_string()))?;
                let output = tool.execute(typed, exec).await?;
                serde_json::to_value(output)
                    .map_err(|e| ToolError::failed(format!("output could not be serialised: {e}")))
            })
        });

        let finalize_tool = Arc::clone(&tool);
        let concurrency_tool = Arc::clone(&tool);
        let concurrency_schema = parameters.clone();
        let call_tool = Arc::clone(&tool);
        let call_schema = parameters.clone();
        let result_tool = Arc::clone(&tool);
        let result_schema = parameters.clone();

        let definition = ToolDefinition {
            name: name.clone(),
            description: tool.description().to_owned(),
            parameters: CompiledSchema::from(parameters),
            args_validation: ArgsValidation::Validated,
            output,
            body,
            finalize_content: Some(Arc::new(move |exec, result| {
                finalize_tool.finalize_content(exec, result)
            })),
            timeout: tool.timeout(),
            concurrency: Some(Arc::new(move |args| {
                soft_args::<T>(&concurrency_schema, args)
                    .is_some_and(|a| concurrency_tool.is_concurrency_safe(&a))
            })),
            present_call: Some(Arc::new(move |args| {
                soft_args::<T>(&call_schema, args).and_then(|a| call_tool.present_call(&a))
            })),
            present_result: Some(Arc::new(move |args, record| {
                soft_args::<T>(&result_schema, args)
                    .and_then(|a| result_tool.present_result(&a, record))
            })),
            code_mode_transport: false,
        };
        definition.check()?;
        Ok(definition)
    }
}

/// Runs a pure callback, turning a panic into an error message.
pub(crate) fn contain<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| format!("{what} panicked: {}", panic_message(payload.as_ref())))
}
