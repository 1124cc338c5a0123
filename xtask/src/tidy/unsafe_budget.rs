//! Every crate under `crates/` states how much `unsafe` it holds, and says why, in its crate
//! docs: one line `//! Unsafe budget: N — reason` in `src/lib.rs` (or `src/main.rs` for a
//! binary). The rule counts the `unsafe` blocks, `unsafe fn`s, `unsafe impl`s and
//! `unsafe extern` blocks in the crate's `src/**`, outside comments, strings and character
//! literals, and reports a crate whose count differs from its budget or that states none. A
//! reviewer then sees from the crate docs where to look, and new `unsafe` cannot slip in
//! without the budget line in the same change.

use super::{Tree, parent};
use std::collections::BTreeMap;

/// The marker of the budget line, at the start of a crate-doc line.
const MARKER: &str = "//! Unsafe budget:";

/// The format named in every finding about the line itself.
const FORMAT: &str = "`//! Unsafe budget: N — reason` (e.g. `//! Unsafe budget: 0 — none.`)";

pub(super) fn check(tree: &Tree) -> Vec<String> {
    let mut findings = Vec::new();
    for (krate, root) in crate_roots(tree) {
        let text = tree.texts.get(&root).map_or("", String::as_str);
        let count: usize = tree
            .rust()
            .filter(|(file, _)| file.starts_with(&format!("crates/{krate}/src/")))
            .map(|(_, text)| count_unsafe(text))
            .sum();
        match budget(text) {
            Err(problem) => findings.push(format!(
                "{root}: crate `{krate}` {problem}; fix: state its budget on one crate-doc line {FORMAT} (it holds {count})"
            )),
            Ok(budget) if budget != count => findings.push(format!(
                "{root}: crate `{krate}` holds {count} `unsafe` (blocks, fns, impls, extern blocks) but its budget says {budget}; fix: remove the new `unsafe`, or change the budget line and its reason"
            )),
            Ok(_) => {}
        }
    }
    findings
}

/// Each crate directly under `crates/` and its root file: `src/lib.rs`, else `src/main.rs`.
fn crate_roots(tree: &Tree) -> BTreeMap<String, String> {
    let mut roots = BTreeMap::new();
    for (file, _) in tree.rust() {
        let Some(rest) = file.strip_prefix("crates/") else {
            continue;
        };
        let Some((krate, "src/lib.rs" | "src/main.rs")) = rest.split_once('/') else {
            continue;
        };
        let lib = format!("{}/lib.rs", parent(file));
        let root = if tree.texts.contains_key(&lib) {
            lib
        } else {
            file.to_owned()
        };
        roots.insert(krate.to_owned(), root);
    }
    roots
}

/// The budget a crate root states, or what is wrong with its line.
fn budget(root: &str) -> Result<usize, &'static str> {
    let mut lines = root
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix(MARKER));
    let Some(line) = lines.next() else {
        return Err("states no unsafe budget");
    };
    if lines.next().is_some() {
        return Err("states its unsafe budget more than once");
    }
    let line = line.trim();
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let Ok(budget) = line[..digits].parse::<usize>() else {
        return Err("has an unsafe budget line without a number");
    };
    let reason = line[digits..].trim_start();
    match reason
        .strip_prefix('—')
        .or_else(|| reason.strip_prefix("--"))
    {
        Some(reason) if !reason.trim().is_empty() => Ok(budget),
        _ => Err("has an unsafe budget line without `— reason` after the number"),
    }
}

/// The `unsafe` blocks, fns, impls and extern blocks in a Rust source text.
fn count_unsafe(text: &str) -> usize {
    let code = code_only(text);
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '{'))
        .flat_map(split_braces)
        .filter(|word| !word.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|pair| pair[0] == "unsafe" && matches!(pair[1], "{" | "fn" | "impl" | "extern"))
        .count()
}

/// A word with its braces as words of their own (`unsafe{` is `unsafe` then `{`).
fn split_braces(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = word;
    while let Some(at) = rest.find('{') {
        parts.push(&rest[..at]);
        parts.push("{");
        rest = &rest[at + 1..];
    }
    parts.push(rest);
    parts
}

/// `text` with comments, string and character literals blanked out (each replaced by a
/// space), lifetimes kept. Good enough for counting keywords: raw strings, byte strings and
/// nested block comments are understood; a macro's token tricks are not.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied();
    while i < chars.len() {
        let c = chars[i];
        let previous_is_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && at(i + 1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            out.push(' ');
            continue;
        }
        if c == '/' && at(i + 1) == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // A raw string: `r"…"`, `r#"…"#`, `br#"…"#`, `cr"…"`.
        if !previous_is_word && (c == 'r' || ((c == 'b' || c == 'c') && at(i + 1) == Some('r'))) {
            let start = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[start.min(chars.len())..]
                .iter()
                .take_while(|&&h| h == '#')
                .count();
            if at(start + hashes) == Some('"') {
                let closing: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body: String = chars[start + hashes + 1..].iter().collect();
                let length = body
                    .find(&closing)
                    .map_or(body.len(), |end| end + closing.len());
                i = start + hashes + 1 + body[..length].chars().count();
                out.push(' ');
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
            continue;
        }
        // A character literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`).
        if c == '\'' {
            if at(i + 1) == Some('\\') {
                // The quote, the backslash and the escaped character, then up to the close.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(' ');
                continue;
            }
            if at(i + 2) == Some('\'') {
                i += 3;
                out.push(' ');
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// A crate's `unsafe` in every form the rule counts, and in every place it must not.
    const COUNTED: &str = r####"
        unsafe fn raw() {}
        pub(crate) unsafe fn raw_too() {}
        unsafe impl Send for X {}
        unsafe extern "C" { fn f(); }
        fn g() { unsafe { raw() }; let x = unsafe{ 1 }; }
    "####;

    const NOT_COUNTED: &str = r####"
        // unsafe { in a comment }
        /* unsafe fn /* nested */ unsafe { */
        /// unsafe impl in a doc comment
        const A: &str = "unsafe { in a string \" unsafe fn }";
        const B: &str = r#"unsafe { in a raw string "# ;
        const C: &[u8] = br##"unsafe fn"##;
        const Q: char = '"'; const E: char = '\''; fn l<'a>(x: &'a str) -> &'a str { x }
        #[deny(unsafe_code)] fn not_unsafe_code() {}
        #[unsafe(no_mangle)] extern "C" fn attribute_is_not_a_block() {}
    "####;

    #[test]
    fn unsafe_is_counted_in_code_and_not_in_comments_strings_or_attributes() {
        assert_eq!(count_unsafe(COUNTED), 6);
        assert_eq!(count_unsafe(NOT_COUNTED), 0);
        assert_eq!(count_unsafe(&format!("{NOT_COUNTED}{COUNTED}")), 6);
    }

    #[test]
    fn the_budget_line_needs_a_number_and_a_reason() {
        assert_eq!(
            budget("//! A crate.\n//!\n//! Unsafe budget: 0 — none.\n"),
            Ok(0)
        );
        assert_eq!(
            budget("//! Unsafe budget: 12 -- the engine's C API.\n"),
            Ok(12)
        );
        assert_eq!(budget("//! A crate.\n"), Err("states no unsafe budget"));
        assert_eq!(
            budget("//! Unsafe budget: none\n"),
            Err("has an unsafe budget line without a number")
        );
        assert_eq!(
            budget("//! Unsafe budget: 2\n"),
            Err("has an unsafe budget line without `— reason` after the number")
        );
        assert_eq!(
            budget("//! Unsafe budget: 2 —  \n"),
            Err("has an unsafe budget line without `— reason` after the number")
        );
        assert_eq!(
            budget("//! Unsafe budget: 0 — a.\n//! Unsafe budget: 0 — b.\n"),
            Err("states its unsafe budget more than once")
        );
    }

    #[test]
    fn a_crate_over_or_under_its_budget_or_without_one_is_named() {
        let tree = Tree::of(&[
            (
                "crates/kept/src/lib.rs",
                "//! Unsafe budget: 1 — the C API.\nmod ffi;\n",
            ),
            ("crates/kept/src/ffi.rs", "fn f() { unsafe { g() } }\n"),
            ("crates/kept/tests/t.rs", "fn t() { unsafe { g() } }\n"),
            (
                "crates/grew/src/lib.rs",
                "//! Unsafe budget: 0 — none.\nmod a;\n",
            ),
            ("crates/grew/src/a.rs", "unsafe impl Send for X {}\n"),
            (
                "crates/shrank/src/main.rs",
                "//! Unsafe budget: 2 — two.\nfn main() {}\n",
            ),
            ("crates/silent/src/lib.rs", "//! A crate.\n"),
            (
                "crates/silent/src/main.rs",
                "//! Unsafe budget: 0 — the binary's line is not the crate's.\n",
            ),
            (
                "xtask/src/main.rs",
                "//! Not under crates/.\nfn f() { unsafe { g() } }\n",
            ),
        ]);
        let fix = "fix: remove the new `unsafe`, or change the budget line and its reason";
        assert_eq!(
            check(&tree),
            vec![
                format!(
                    "crates/grew/src/lib.rs: crate `grew` holds 1 `unsafe` (blocks, fns, impls, extern blocks) but its budget says 0; {fix}"
                ),
                format!(
                    "crates/shrank/src/main.rs: crate `shrank` holds 0 `unsafe` (blocks, fns, impls, extern blocks) but its budget says 2; {fix}"
                ),
                format!(
                    "crates/silent/src/lib.rs: crate `silent` states no unsafe budget; fix: state its budget on one crate-doc line {FORMAT} (it holds 0)"
                ),
            ]
        );
    }
}
