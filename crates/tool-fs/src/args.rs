//! The five tools' arguments, with the TypeScript harness's names: the types their parameter
//! schemas are derived from (each field's doc comment is what the model reads).

use schemars::JsonSchema;
use serde::Deserialize;

/// `read`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ReadArgs {
    /// The file to read; a relative path is resolved against the working directory.
    pub file_path: String,
    /// The 1-based line number to start reading from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub offset: Option<u64>,
    /// How many lines to read (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub limit: Option<u64>,
}

/// `write`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WriteArgs {
    /// The file to create or replace; a relative path is resolved against the working directory.
    pub file_path: String,
    /// The file's complete new content.
    pub content: String,
}

/// `edit`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EditArgs {
    /// The file to edit; a relative path is resolved against the working directory.
    pub file_path: String,
    /// The exact text to replace, as the file holds it (tabs, spaces and special characters included).
    pub old_string: String,
    /// The text to put in its place (must differ from old_string).
    pub new_string: String,
    /// Replace every occurrence of old_string (default false: it must occur exactly once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub replace_all: Option<bool>,
}

/// `glob`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GlobArgs {
    /// The glob pattern, e.g. "**/*.rs" or "src/**/*.ts"; a pattern without "/" matches file names at any depth.
    pub pattern: String,
    /// The directory to search (default: the working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub path: Option<String>,
}

/// `grep`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GrepArgs {
    /// The regular expression to search for (ripgrep syntax), e.g. "fn\\s+main".
    pub pattern: String,
    /// The directory or file to search (default: the working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub path: Option<String>,
    /// Only files matching this glob, e.g. "*.rs" or "*.{ts,tsx}".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub include: Option<String>,
}
