//! The `#[tool]` macro's compile errors, one file per kind of misuse under `tests/ui/`, each
//! with the compiler's output it must produce (`*.stderr`). After a deliberate change of a
//! message, regenerate them with `TRYBUILD=overwrite` and read the diff.

// The `#[tool]` macro is the default `macros` feature.
#![cfg(feature = "macros")]

#[test]
fn misuse_of_the_tool_macro_is_a_clear_compile_error() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
