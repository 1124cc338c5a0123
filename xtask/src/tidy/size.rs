//! No Rust file is over [`BUDGET`] lines unless it says why at its top: a comment line
//! starting with `//! Size:` or `// Size:`, with the reason after it, among its first
//! [`REASON_WITHIN`] lines. A long file is usually several responsibilities that a newcomer
//! would rather find in files of their own; the reason is for the rare file that is one.

use super::Tree;

/// The most lines a Rust file may have without a written reason.
pub(super) const BUDGET: usize = 800;

/// How far from the top the `Size:` line may stand (a crate's attributes can come first).
const REASON_WITHIN: usize = 20;

pub(super) fn check(tree: &Tree) -> Vec<String> {
    tree.rust()
        .filter_map(|(file, text)| {
            let lines = text.lines().count();
            (lines > BUDGET && !has_reason(text)).then(|| {
                format!(
                    "{file}: {lines} lines, over the budget of {BUDGET}; fix: split it by responsibility, or give the reason it is one unit on a `//! Size: …` line among its first {REASON_WITHIN} lines"
                )
            })
        })
        .collect()
}

/// Whether one of the first lines is a `Size:` comment with a reason.
fn has_reason(text: &str) -> bool {
    text.lines().take(REASON_WITHIN).any(|line| {
        let line = line.trim_start();
        ["//! Size:", "// Size:"].into_iter().any(|marker| {
            line.strip_prefix(marker)
                .is_some_and(|reason| !reason.trim().is_empty())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn lines(top: &str, count: usize) -> String {
        let mut text = String::from(top);
        text.push_str(&"fn f() {}\n".repeat(count - top.lines().count()));
        text
    }

    #[test]
    fn a_long_file_needs_a_reason_at_its_top() {
        let at_budget = lines("//! Short enough.\n", BUDGET);
        let over = lines("//! A module.\n", BUDGET + 1);
        let reasoned = lines("//! A module.\n//!\n//! Size: one safety argument.\n", 900);
        let empty_reason = lines("//! Size:\n", 900);
        let reason_too_low = format!("{}// Size: late.\n", lines("", 30)) + &lines("", 900);
        let tree = Tree::of(&[
            ("a/at_budget.rs", &at_budget),
            ("a/over.rs", &over),
            ("a/reasoned.rs", &reasoned),
            ("a/empty_reason.rs", &empty_reason),
            ("a/reason_too_low.rs", &reason_too_low),
        ]);
        let fix = "fix: split it by responsibility, or give the reason it is one unit on a `//! Size: …` line among its first 20 lines";
        assert_eq!(
            check(&tree),
            vec![
                format!("a/empty_reason.rs: 900 lines, over the budget of 800; {fix}"),
                format!("a/over.rs: 801 lines, over the budget of 800; {fix}"),
                format!("a/reason_too_low.rs: 931 lines, over the budget of 800; {fix}"),
            ]
        );
    }
}
