//! How a run ends: the program's error kinds and the stop reasons the host raises.

use serde::Serialize;

/// Why a program did not return a value. Serialised in `snake_case` as the `kind` of the
/// result's `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProgramErrorKind {
    /// The program does not parse; `line` and `column` say where.
    Syntax,
    /// The program threw and nothing caught it; `message` and `stack` say what. Whatever it
    /// threw (a proxy, an Error with getters that throw or never return), it is described
    /// without running any of the program's code.
    Exception,
    /// The program returned something JSON cannot hold (a function, a symbol, a cycle…), or a
    /// value nested deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH) levels.
    NotJson,
    /// The wall-time limit elapsed and the engine was interrupted.
    TimeLimit,
    /// The engine's memory limit was reached.
    MemoryLimit,
    /// The program tried more nested tool calls than the limit allows.
    NestedCallLimit,
    /// The caller cancelled the `run_code` call.
    Cancelled,
    /// The program awaited a promise that nothing could settle.
    Stalled,
    /// The engine itself failed (not the program's fault).
    Engine,
}

/// A program's failure, as the result's `error` carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct ProgramError {
    pub(crate) kind: ProgramErrorKind,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) column: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stack: Option<String>,
    /// For an uncaught `ToolCallError`: the tool that failed.
    #[serde(rename = "toolName", skip_serializing_if = "Option::is_none")]
    pub(crate) tool_name: Option<String>,
    /// For an uncaught `ToolCallError`: its failure code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<String>,
}

impl ProgramError {
    pub(crate) fn new(kind: ProgramErrorKind, message: impl Into<String>) -> ProgramError {
        ProgramError {
            kind,
            message: message.into(),
            name: None,
            line: None,
            column: None,
            stack: None,
            tool_name: None,
            code: None,
        }
    }
}

/// Why the host (or the engine's nested-call counter) stopped a run. Stored in an atomic
/// flag that the engine's interrupt handler polls, so it is a small number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopReason {
    TimeLimit,
    Cancelled,
    NestedCallLimit,
    MemoryLimit,
}

impl StopReason {
    pub(crate) fn flag(self) -> u8 {
        match self {
            StopReason::TimeLimit => 1,
            StopReason::Cancelled => 2,
            StopReason::NestedCallLimit => 3,
            StopReason::MemoryLimit => 4,
        }
    }

    pub(crate) fn from_flag(flag: u8) -> Option<StopReason> {
        match flag {
            1 => Some(StopReason::TimeLimit),
            2 => Some(StopReason::Cancelled),
            3 => Some(StopReason::NestedCallLimit),
            4 => Some(StopReason::MemoryLimit),
            _ => None,
        }
    }

    /// The error that ends the run; `amount` is the limit (milliseconds, bytes or calls).
    pub(crate) fn error(self, amount: usize) -> ProgramError {
        match self {
            StopReason::TimeLimit => ProgramError::new(
                ProgramErrorKind::TimeLimit,
                format!(
                    "the time limit of {amount} ms was reached; the engine was interrupted and nested calls in flight were cancelled"
                ),
            ),
            StopReason::Cancelled => ProgramError::new(
                ProgramErrorKind::Cancelled,
                "the call was cancelled; the engine was interrupted and nested calls in flight were cancelled",
            ),
            StopReason::NestedCallLimit => ProgramError::new(
                ProgramErrorKind::NestedCallLimit,
                format!("the limit of {amount} nested tool calls per run was reached"),
            ),
            StopReason::MemoryLimit => ProgramError::new(
                ProgramErrorKind::MemoryLimit,
                format!(
                    "the engine's memory limit of {} MiB was reached",
                    amount / (1024 * 1024)
                ),
            ),
        }
    }
}
