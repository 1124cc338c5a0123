//! Failure codes and the error types of the tool layer.

use crate::schema::{SchemaCompileError, SchemaError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The closed set of failure codes an error [`ToolResult`](crate::ToolResult) carries.
///
/// Domain failures are not here on purpose: a command that exits 9 is a successful call whose
/// value says so; the model decides what that means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureCode {
    /// The arguments were not JSON, broke the parameter schema, or broke a rule the tool checks
    /// by hand.
    InvalidArgs,
    /// The tool (or a post-execute hook) produced a value its output schema rejects.
    InvalidToolOutput,
    /// No tool of that name is visible to the caller.
    UnknownTool,
    /// A policy hook, guard or approval denied the call, or a hook failed closed.
    Denied,
    /// The tool body returned an error (an infrastructure failure such as a spawn error).
    ToolError,
    /// The tool body, or one of its pure callbacks, panicked; the panic was contained.
    ToolPanic,
    /// The caller cancelled before the body started; the body never ran.
    AbortedBeforeDispatch,
    /// The caller cancelled while the body ran; the body was still awaited to completion.
    Aborted,
    /// The definition's timeout elapsed; the body observed its signal and was awaited.
    Timeout,
}

impl FailureCode {
    /// Every code, in documentation order.
    pub const ALL: [FailureCode; 9] = [
        FailureCode::InvalidArgs,
        FailureCode::InvalidToolOutput,
        FailureCode::UnknownTool,
        FailureCode::Denied,
        FailureCode::ToolError,
        FailureCode::ToolPanic,
        FailureCode::AbortedBeforeDispatch,
        FailureCode::Aborted,
        FailureCode::Timeout,
    ];

    /// The wire spelling, e.g. `INVALID_ARGS`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::InvalidArgs => "INVALID_ARGS",
            FailureCode::InvalidToolOutput => "INVALID_TOOL_OUTPUT",
            FailureCode::UnknownTool => "UNKNOWN_TOOL",
            FailureCode::Denied => "DENIED",
            FailureCode::ToolError => "TOOL_ERROR",
            FailureCode::ToolPanic => "TOOL_PANIC",
            FailureCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            FailureCode::Aborted => "ABORTED",
            FailureCode::Timeout => "TIMEOUT",
        }
    }

    /// One line saying when the code is produced (the documentation's wording).
    pub fn meaning(self) -> &'static str {
        match self {
            FailureCode::InvalidArgs => {
                "arguments are not JSON, break the parameter schema, or break a rule the tool checks by hand"
            }
            FailureCode::InvalidToolOutput => {
                "the body or a post-execute hook produced a value the output schema rejects"
            }
            FailureCode::UnknownTool => "no tool of that name is visible to the calling agent",
            FailureCode::Denied => {
                "a pre-execute listener, guard or approval denied the call, or a policy hook failed closed"
            }
            FailureCode::ToolError => {
                "the body returned an error (infrastructure failure; domain failures are values)"
            }
            FailureCode::ToolPanic => {
                "the body or one of the tool's callbacks panicked; the registry contained it"
            }
            FailureCode::AbortedBeforeDispatch => {
                "the caller's signal fired before the body started; the body never ran"
            }
            FailureCode::Aborted => {
                "the caller's signal fired while the body ran; its future was still awaited"
            }
            FailureCode::Timeout => {
                "the definition's timeout elapsed; the body saw its signal fire and was awaited"
            }
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The durable error part of a failed result: a message and its code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolFailure {
    /// What went wrong, in words the model can act on.
    pub message: String,
    /// The failure class.
    pub code: FailureCode,
}

/// What a tool body returns when it cannot produce its value.
///
/// Use [`ToolError::invalid_args`] for rules the schema cannot express (non-empty, positive,
/// cross-field): the registry reports them as `INVALID_ARGS`, like a schema violation. Every
/// other error is an infrastructure failure (`TOOL_ERROR`). Domain failures are not errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// A hand-checked argument rule failed.
    #[error("{0}")]
    InvalidArgs(String),
    /// The tool could not do its work.
    #[error("{message}")]
    Failed {
        /// The message the model sees.
        message: String,
        /// The underlying error, for logs.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The Tokio runtime running the call lacks drivers the tool needs
    /// ([`runtime::require`](crate::runtime::require)); the message names them and the builder
    /// calls that add them.
    #[error("{}", crate::runtime::driver::missing_drivers_message(.missing))]
    MissingRuntimeDrivers {
        /// The missing drivers, in [`RuntimeDriver::ALL`](crate::runtime::RuntimeDriver::ALL)
        /// order.
        missing: Vec<crate::runtime::driver::RuntimeDriver>,
    },
}

impl ToolError {
    /// A hand-checked argument rule failed (reported as `INVALID_ARGS`).
    pub fn invalid_args(message: impl Into<String>) -> ToolError {
        ToolError::InvalidArgs(message.into())
    }

    /// The tool could not do its work (reported as `TOOL_ERROR`).
    pub fn failed(message: impl Into<String>) -> ToolError {
        ToolError::Failed {
            message: message.into(),
            source: None,
        }
    }

    /// Wraps an underlying error; its display text becomes the message.
    pub fn from_error(error: impl std::error::Error + Send + Sync + 'static) -> ToolError {
        ToolError::Failed {
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }

    /// The failure code this error maps to.
    pub fn code(&self) -> FailureCode {
        match self {
            ToolError::InvalidArgs(_) => FailureCode::InvalidArgs,
            ToolError::Failed { .. } | ToolError::MissingRuntimeDrivers { .. } => {
                FailureCode::ToolError
            }
        }
    }
}

impl From<std::io::Error> for ToolError {
    fn from(error: std::io::Error) -> ToolError {
        ToolError::from_error(error)
    }
}

/// Why a definition could not be built or registered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The name breaks `^[A-Za-z0-9_-]{1,64}$`.
    #[error("invalid tool name {name:?}: names must match ^[A-Za-z0-9_-]{{1,64}}$")]
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// The name is reserved for the Code Mode transport.
    #[error("tool name `{name}` is reserved for the Code Mode transport")]
    ReservedName {
        /// The refused name.
        name: String,
    },
    /// Another tool of that name is registered in the same layer.
    #[error(
        "a tool named `{name}` is already registered in this layer; dispose it before registering a replacement"
    )]
    Duplicate {
        /// The conflicting name.
        name: String,
    },
    /// A schema is outside the subset.
    #[error("tool `{name}`: {which} schema: {source}")]
    Schema {
        /// The tool.
        name: String,
        /// `parameters` or `output`.
        which: &'static str,
        /// The schema problems.
        #[source]
        source: SchemaError,
    },
    /// A raw JSON Schema outside the subset does not compile (the validator's message).
    #[error("tool `{name}`: {which} schema does not compile: {source}")]
    SchemaCompile {
        /// The tool.
        name: String,
        /// `parameters` or `output`.
        which: &'static str,
        /// The validator's complaint.
        #[source]
        source: SchemaCompileError,
    },
    /// The parameter schema's root is not an object.
    #[error("tool `{name}`: the parameter schema must have an object root")]
    ParametersNotObject {
        /// The tool.
        name: String,
    },
    /// A required part of the definition was not given.
    #[error("tool `{name}`: the definition has no {missing}")]
    Incomplete {
        /// The tool.
        name: String,
        /// What is missing (`output`, `execute`).
        missing: &'static str,
    },
    /// The description is empty or only whitespace: the model would not know when to call
    /// the tool.
    #[error(
        "tool `{name}`: the description is empty; say what the tool does and when to use it, in the words users say"
    )]
    EmptyDescription {
        /// The tool.
        name: String,
    },
    /// The timeout is zero.
    #[error("tool `{name}`: timeout must be positive")]
    InvalidTimeout {
        /// The tool.
        name: String,
    },
    /// The scope was disposed.
    #[error(transparent)]
    Scope(#[from] ScopeError),
}

/// Why an effect could not be created on a scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// The scope was disposed; it can create no more effects.
    #[error("inactive scope `{scope}`: it was disposed and can create no effects")]
    Inactive {
        /// The scope's name.
        scope: String,
    },
    /// The operation is only available on another kind of scope.
    #[error("{operation} is only available on {expected}")]
    WrongScope {
        /// What was attempted.
        operation: &'static str,
        /// The kind of scope that supports it.
        expected: &'static str,
    },
    /// An agent scope for this session already exists.
    #[error("an agent scope for session `{session}` already exists")]
    AgentScopeExists {
        /// The session.
        session: String,
    },
}

/// Why a restriction was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestrictError {
    /// Neither `allow` nor `deny` was given, or a list was empty.
    #[error("a restriction needs a non-empty `allow` or `deny` list")]
    Empty,
    /// A listed name is not a tool the scope inherits.
    #[error("restriction names unknown tools: {}", .names.join(", "))]
    UnknownNames {
        /// The unknown names.
        names: Vec<String>,
    },
    /// The scope cannot create effects.
    #[error(transparent)]
    Scope(#[from] ScopeError),
}

/// Why a plugin could not be loaded or reloaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin's `apply` failed; everything it had created was disposed.
    #[error("plugin `{plugin}` failed to apply: {source}")]
    Apply {
        /// The plugin.
        plugin: String,
        /// The failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The plugin's `apply` panicked; everything it had created was disposed.
    #[error("plugin `{plugin}` panicked while applying: {message}")]
    Panicked {
        /// The plugin.
        plugin: String,
        /// The panic message.
        message: String,
    },
    /// The parent scope cannot create effects.
    #[error(transparent)]
    Scope(#[from] ScopeError),
}

impl PluginError {
    /// Wraps an `apply` failure.
    pub fn apply(
        plugin: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> PluginError {
        PluginError::Apply {
            plugin: plugin.into(),
            source: source.into(),
        }
    }
}

/// The text of a panic payload, for messages.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("non-string panic payload")
    }
}
