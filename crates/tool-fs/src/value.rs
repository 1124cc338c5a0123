//! The canonical values of the five tools, as Rust types: what the bodies return, what the
//! output schemas are generated from ([`ValueSchema::for_type_in_field_order`]) and what Code
//! Mode's `tools.grep(...)` gets as data. The model's text is rendered from them separately
//! (`render`).

use crate::schema::{nullable, without_descriptions};
use crate::visible::InvisibleCounts;
use dsh_tools::card::FileDiff;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A page of a file's lines (`read`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct ReadValue {
    /// The file, absolute.
    pub path: String,
    /// The 1-based number of the first line asked for.
    #[schemars(with = "i64")]
    pub offset: u64,
    /// The lines shown, each without its line ending.
    pub lines: Vec<ReadLine>,
    /// The file's line count.
    #[schemars(with = "i64")]
    pub total_lines: u64,
    /// The `offset` that continues the read, when lines follow the ones shown.
    #[schemars(required, schema_with = "nullable::<i64>")]
    pub next_offset: Option<u64>,
    /// Whether the page stopped at the byte cap before its line limit.
    pub byte_cap_reached: bool,
    /// Look-alike characters in the lines shown.
    pub invisible: InvisibleCounts,
    /// Lines shown that end in CRLF.
    #[schemars(with = "i64")]
    pub crlf_lines: u64,
}

/// One line of a read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct ReadLine {
    /// The 1-based line number.
    #[schemars(with = "i64")]
    pub number: u64,
    /// The line's text (its first characters, when cut).
    pub text: String,
    /// When the line was cut: its length in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub cut_from_chars: Option<u64>,
}

/// A change a `write` or `edit` made, as its diff card shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct FileChange {
    /// The file, absolute.
    pub path: String,
    /// The text before (`null` for a new file): the whole file, or the changed lines.
    #[schemars(required, schema_with = "nullable::<String>")]
    pub old_text: Option<String>,
    /// The text after: the whole file, or the changed lines.
    pub new_text: String,
    /// The 1-based line the texts start at (1 when whole).
    #[schemars(with = "i64")]
    pub first_line: u64,
    /// Whether the texts are the whole file.
    pub whole: bool,
}

impl FileChange {
    /// The card vocabulary's diff of this change.
    pub fn to_file_diff(&self) -> FileDiff {
        FileDiff {
            path: self.path.clone(),
            old_text: self.old_text.clone(),
            new_text: self.new_text.clone(),
        }
    }
}

/// What a `write` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct WriteValue {
    /// The file, absolute.
    pub path: String,
    /// Whether the file was created (it did not exist).
    pub created: bool,
    /// The bytes written.
    #[schemars(with = "i64")]
    pub bytes: u64,
    /// The lines written.
    #[schemars(with = "i64")]
    pub lines: u64,
    /// The change, for the diff card.
    pub change: FileChange,
}

/// What an `edit` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct EditValue {
    /// The file, absolute.
    pub path: String,
    /// How many occurrences were replaced.
    #[schemars(with = "i64")]
    pub replacements: u64,
    /// The 1-based lines (in the new file) where the replacements start.
    #[schemars(with = "Vec<i64>")]
    pub lines: Vec<u64>,
    /// Whether `old_string` and `new_string` were matched with the file's CRLF line endings.
    pub crlf_adapted: bool,
    /// The change, for the diff card.
    pub change: FileChange,
}

/// The files a `glob` matched, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct GlobValue {
    /// The directory searched, absolute.
    pub path: String,
    /// The paths shown, absolute, newest first.
    pub paths: Vec<String>,
    /// How many files matched.
    #[schemars(with = "i64")]
    pub total: u64,
    /// Whether `paths` holds fewer than `total`.
    pub truncated: bool,
    /// The spill file with the complete list, when truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub spill_path: Option<String>,
    /// Why the complete list was not saved, when truncated and it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub spill_error: Option<String>,
}

/// The lines a `grep` matched, grouped by file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct GrepValue {
    /// The directory or file searched, absolute.
    pub path: String,
    /// The files with shown matches.
    pub files: Vec<GrepFile>,
    /// How many lines matched in all.
    #[schemars(with = "i64")]
    pub total: u64,
    /// Whether `files` holds fewer matches than `total`.
    pub truncated: bool,
    /// The spill file with the complete list, when truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub spill_path: Option<String>,
    /// Why the complete list was not saved, when truncated and it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub spill_error: Option<String>,
}

/// One file's matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct GrepFile {
    /// The file, absolute.
    pub path: String,
    /// Its matching lines, in order.
    pub matches: Vec<GrepMatch>,
}

/// One matching line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = without_descriptions)]
#[non_exhaustive]
pub struct GrepMatch {
    /// The 1-based line number.
    #[schemars(with = "i64")]
    pub line_number: u64,
    /// The line, without its ending (cut at the line limit).
    pub line: String,
}
