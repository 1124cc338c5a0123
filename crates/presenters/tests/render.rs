//! `render_text`: a snapshot of every card kind, and totality over arbitrary cards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_tools::ToolResultView;
use dsh_tools::card::{FileDiff, TerminalResultView};
use presenters::text::render_file_diff;
use presenters::{render_call_text, render_result_text, render_text};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use support::{any_call_view, any_result_view, call_fixtures, result_fixtures};

#[test]
fn every_card_kind_renders_as_text() {
    for (name, card) in call_fixtures() {
        insta::assert_snapshot!(name, render_text(&card));
    }
    for (name, card) in result_fixtures() {
        insta::assert_snapshot!(name, render_text(&card));
    }
}

#[test]
fn terminal_results_fall_back_to_a_console_block() {
    let check = |card: TerminalResultView, expected: &str| {
        assert_eq!(
            render_result_text(&ToolResultView::Terminal(card)),
            expected
        );
    };
    check(
        TerminalResultView {
            title: Some("ls".into()),
            output: Some("a\nb\n".into()),
            exit_code: Some(0),
            signal: None,
        },
        "$ ls\na\nb",
    );
    check(
        TerminalResultView {
            title: Some("false".into()),
            exit_code: Some(1),
            ..TerminalResultView::default()
        },
        "$ false\n[exit code: 1]",
    );
    check(TerminalResultView::default(), "");
}

#[test]
fn diffs_render_as_unified_diffs() {
    let check = |path: &str, old: Option<&str>, new: &str, expected: &str| {
        let diff = FileDiff {
            path: path.into(),
            old_text: old.map(str::to_owned),
            new_text: new.into(),
        };
        assert_eq!(render_file_diff(&diff), expected);
    };
    check(
        "a.txt",
        Some("one\ntwo\n"),
        "one\n2\n",
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2",
    );
    check(
        "new.txt",
        None,
        "hi\n",
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi",
    );
    check("same.txt", Some("x\n"), "x\n", "same.txt: no changes");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn rendering_is_total(call in any_call_view(), result in any_result_view()) {
        let _ = render_call_text(&call);
        let _ = render_result_text(&result);
    }
}
