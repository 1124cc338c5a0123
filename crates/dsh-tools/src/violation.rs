//! A problem at a place in a JSON value: what both the lossless JSON module (a typed value that
//! does not deserialise) and the schema module (a value or schema that breaks a rule) report.
//!
//! It sits beneath both so that neither imports the other; [`schema`](crate::schema) re-exports
//! it as [`schema::Violation`](crate::schema::Violation).

use std::fmt;

/// One validation problem: where (a JSON pointer into the validated value, or into the schema
/// for schema problems) and what.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Violation {
    /// RFC 6901 JSON pointer; `""` is the root.
    pub pointer: String,
    /// A plain message, e.g. `expected string, got number`.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(pointer: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}
