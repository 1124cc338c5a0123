//! The property of `edit`: it changes exactly the replaced bytes, whatever the line endings,
//! final newline or characters around them.

use crate::support::{Policy, fixture, read_string};
use proptest::prelude::*;
use serde_json::json;

fn text() -> impl Strategy<Value = String> {
    "[ab\n\r\t é日\u{a0}\u{200b}]{0,40}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn an_edit_changes_exactly_the_replaced_bytes(
        prefix in text(),
        old in "[ab\r\n\t é日\u{a0}x]{1,12}",
        new in text(),
        suffix in text(),
    ) {
        let content = format!("{prefix}{old}{suffix}");
        // Exactly one occurrence, overlapping ones counted (`  ` occurs twice in `   `).
        let occurrences = (0..content.len())
            .filter(|&i| content.is_char_boundary(i) && content[i..].starts_with(old.as_str()))
            .count();
        prop_assume!(occurrences == 1);
        prop_assume!(old != new);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let written = runtime.block_on(async {
            let f = fixture(Policy::Roots);
            let path = f.path("p.txt");
            std::fs::write(&path, &content).unwrap();
            f.ok("read", json!({"file_path": "p.txt", "limit": 100000})).await;
            f.ok("edit", json!({"file_path": "p.txt", "old_string": old, "new_string": new})).await;
            read_string(&path)
        });
        prop_assert_eq!(written, format!("{prefix}{new}{suffix}"));
    }
}
