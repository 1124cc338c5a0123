//! TypeScript to JavaScript: oxc parses the program (TypeScript is a superset of the
//! JavaScript a model writes), erases the types and prints plain JavaScript for QuickJS.

// A `ProgramError` is built at most once per run, so its size costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use crate::outcome::{ProgramError, ProgramErrorKind};
use oxc::allocator::Allocator;
use oxc::codegen::Codegen;
use oxc::diagnostics::OxcDiagnostic;
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};
use std::path::Path;

/// Erases the type annotations of `source`, the body of an async function (top-level `await`
/// and `return` are allowed). A program that does not parse is a syntax error naming the line
/// and column (1-based, columns in characters) of the first problem.
pub(crate) fn to_javascript(source: &str) -> Result<String, ProgramError> {
    let allocator = Allocator::default();
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(&allocator, source, SourceType::ts())
        .with_options(options)
        .parse();
    if let Some(error) = parsed.diagnostics.errors().next() {
        return Err(syntax_error(source, error));
    }
    let mut program = parsed.program;
    let semantic = SemanticBuilder::new()
        .with_check_syntax_error(true)
        .build(&program);
    if let Some(error) = semantic.diagnostics.errors().next() {
        return Err(syntax_error(source, error));
    }
    let scoping = semantic.semantic.into_scoping();
    let transformed = Transformer::new(
        &allocator,
        Path::new("program.ts"),
        &TransformOptions::default(),
    )
    .build_with_scoping(scoping, &mut program);
    if let Some(error) = transformed.diagnostics.errors().next() {
        return Err(syntax_error(source, error));
    }
    Ok(Codegen::new().build(&program).code)
}

fn syntax_error(source: &str, diagnostic: &OxcDiagnostic) -> ProgramError {
    let offset = diagnostic
        .labels
        .first()
        .map_or(0, |label| label.offset() as usize);
    let (line, column) = position(source, offset);
    let mut message = diagnostic.message.to_string();
    if let Some(help) = &diagnostic.help {
        message.push_str(&format!(" ({help})"));
    }
    let mut error = ProgramError::new(
        ProgramErrorKind::Syntax,
        format!("{message} at line {line}, column {column}"),
    );
    error.name = Some(String::from("SyntaxError"));
    error.line = Some(line);
    error.column = Some(column);
    error
}

/// The 1-based line and column (in characters) of a byte offset.
fn position(source: &str, offset: usize) -> (u32, u32) {
    let mut end = offset.min(source.len());
    while end > 0 && !source.is_char_boundary(end) {
        end -= 1;
    }
    let before = &source[..end];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, last)| last)
        .chars()
        .count()
        + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn positions_count_lines_and_characters() {
        assert_eq!(position("ab\ncdé\nx", 0), (1, 1));
        assert_eq!(position("ab\ncdé\nx", 4), (2, 2));
        assert_eq!(position("ab\ncdé\nx", 8), (3, 1));
    }

    #[test]
    fn types_are_erased_and_top_level_return_kept() {
        let js = to_javascript("const n: number = 1;\nreturn n as number;").unwrap();
        assert_eq!(js, "const n = 1;\nreturn n;\n");
    }
}
