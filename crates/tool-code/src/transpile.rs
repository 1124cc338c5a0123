//! TypeScript to JavaScript: oxc parses the program (TypeScript is a superset of the
//! JavaScript a model writes), erases the types and prints plain JavaScript for QuickJS.

// A `ProgramError` is built at most once per run, so its size costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use crate::outcome::{ProgramError, ProgramErrorKind};
use oxc::allocator::Allocator;
use oxc::codegen::{Codegen, CodegenOptions};
use oxc::diagnostics::OxcDiagnostic;
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};
use std::path::{Path, PathBuf};

/// A program as the engine runs it.
#[derive(Debug)]
pub(crate) struct Transpiled {
    /// The program with its types erased.
    pub(crate) javascript: String,
    /// Where each piece of `javascript` came from in the program as written.
    pub(crate) positions: SourcePositions,
}

/// Maps positions in the generated JavaScript back to the program as written: erasing types
/// reprints the program, so its lines and columns move.
#[derive(Debug, Default)]
pub(crate) struct SourcePositions {
    /// `(generated line, generated column, original line, original column)`, all 0-based,
    /// sorted by generated position.
    tokens: Vec<(u32, u32, u32, u32)>,
}

impl SourcePositions {
    /// The program's 1-based line and column for a 1-based position in the generated
    /// JavaScript: from the nearest mapped piece at or before it on its line (or the first
    /// one after it), moved by the distance from that piece's start.
    pub(crate) fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let line = line.checked_sub(1)?;
        let column = column.saturating_sub(1);
        let after = self
            .tokens
            .partition_point(|token| (token.0, token.1) <= (line, column));
        let (_, start, original_line, original_column) = after
            .checked_sub(1)
            .and_then(|before| self.tokens.get(before))
            .filter(|token| token.0 == line)
            .or_else(|| self.tokens.get(after).filter(|token| token.0 == line))
            .copied()?;
        let moved = column.saturating_sub(start);
        Some((original_line + 1, original_column + moved + 1))
    }
}

/// Erases the type annotations of `source`, the body of an async function (top-level `await`
/// and `return` are allowed). A program that does not parse is a syntax error naming the line
/// and column (1-based, columns in characters) of the first problem.
pub(crate) fn to_javascript(source: &str) -> Result<Transpiled, ProgramError> {
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
    let options = CodegenOptions {
        source_map_path: Some(PathBuf::from("program.ts")),
        ..CodegenOptions::default()
    };
    let generated = Codegen::new().with_options(options).build(&program);
    let mut tokens: Vec<(u32, u32, u32, u32)> = generated
        .map
        .iter()
        .flat_map(|map| map.get_tokens())
        .map(|token| {
            (
                token.get_dst_line(),
                token.get_dst_col(),
                token.get_src_line(),
                token.get_src_col(),
            )
        })
        .collect();
    tokens.sort_unstable();
    Ok(Transpiled {
        javascript: generated.code,
        positions: SourcePositions { tokens },
    })
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
        assert_eq!(js.javascript, "const n = 1;\nreturn n;\n");
    }

    #[test]
    fn generated_positions_map_back_to_the_program_as_written() {
        let source =
            "interface A {\n  x: number;\n}\nconst a: A = { x: 1 };\n  throw new Error(\"at 5\");";
        let js = to_javascript(source).unwrap();
        assert_eq!(
            js.javascript,
            "const a = { x: 1 };\nthrow new Error(\"at 5\");\n"
        );
        // `const` and `throw` start their generated lines; `new` is 6 characters in.
        assert_eq!(js.positions.original(1, 1), Some((4, 1)));
        assert_eq!(js.positions.original(2, 1), Some((5, 3)));
        assert_eq!(js.positions.original(2, 7), Some((5, 9)));
        // A line the program does not reach.
        assert_eq!(js.positions.original(9, 1), None);
        assert_eq!(js.positions.original(0, 1), None);
    }
}
