//! `render_text`: a snapshot of every card kind, totality over arbitrary cards, and no terminal
//! control character from a card's text ever reaching the output.

use crate::support;

use dsh_tools::ToolResultView;
use dsh_tools::card::{FileDiff, TerminalResultView};
use presenters::text::render_file_diff;
use presenters::{render_call_text, render_result_text, render_text};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::Value;
use support::{
    HOSTILE, any_call_view, any_result_view, call_fixtures, is_terminal_control, result_fixtures,
};

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

/// `value` with `extra` appended to every string in it except the tags that pick the card
/// variant (`card`, `shape`, `kind`).
fn append_to_strings(value: &mut Value, extra: &str) {
    match value {
        Value::String(text) => text.push_str(extra),
        Value::Array(items) => items.iter_mut().for_each(|v| append_to_strings(v, extra)),
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                if !matches!(key.as_str(), "card" | "shape" | "kind") {
                    append_to_strings(field, extra);
                }
            }
        }
        _ => {}
    }
}

fn controls_in(text: &str) -> Vec<char> {
    text.chars().filter(|c| is_terminal_control(*c)).collect()
}

#[test]
fn hostile_sequences_in_any_field_of_any_card_are_shown_escaped() {
    for (raw, escaped) in HOSTILE {
        let mut rendered = Vec::new();
        for (name, card) in call_fixtures() {
            let mut json = serde_json::to_value(&card).unwrap();
            append_to_strings(&mut json, raw);
            let card: dsh_tools::ToolCallView = serde_json::from_value(json).unwrap();
            rendered.push((name, render_text(&card)));
        }
        for (name, card) in result_fixtures() {
            let mut json = serde_json::to_value(&card).unwrap();
            append_to_strings(&mut json, raw);
            let card: ToolResultView = serde_json::from_value(json).unwrap();
            rendered.push((name, render_text(&card)));
        }
        for (name, text) in rendered {
            assert_eq!(
                controls_in(&text),
                Vec::<char>::new(),
                "{name} with {raw:?}"
            );
            assert!(
                text.contains(escaped),
                "{name} does not show {raw:?} as {escaped:?}:\n{text}"
            );
        }
    }
}

#[test]
fn a_console_block_of_hostile_output_reads_as_escapes() {
    let output: String = HOSTILE.iter().map(|(raw, _)| format!("{raw}\n")).collect();
    let card = ToolResultView::Terminal(TerminalResultView {
        title: Some("cat \u{202e}txt.exe".into()),
        output: Some(format!("{output}tab\tand\r\nline\n")),
        exit_code: Some(1),
        signal: None,
    });
    let mut expected = String::from("$ cat \\u{202e}txt.exe\n");
    for (_, escaped) in HOSTILE {
        expected.push_str(escaped);
        expected.push('\n');
    }
    expected.push_str("tab\tand\\x0d\nline\n[exit code: 1]");
    assert_eq!(render_result_text(&card), expected);
}

#[test]
fn the_acp_projection_keeps_the_text_as_it_is() {
    let output: String = HOSTILE.iter().map(|(raw, _)| *raw).collect();
    let card = ToolResultView::Terminal(TerminalResultView {
        output: Some(output.clone()),
        ..TerminalResultView::default()
    });
    let update = presenters::acp::tool_call_update("call-1", &card, false);
    let text = update["content"][0]["content"]["text"].as_str().unwrap();
    assert_eq!(text, format!("```console\n{output}\n```"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn rendering_is_total(call in any_call_view(), result in any_result_view()) {
        let _ = render_call_text(&call);
        let _ = render_result_text(&result);
    }

    #[test]
    fn rendered_text_never_carries_a_terminal_control(
        call in any_call_view(),
        result in any_result_view(),
    ) {
        let call_text = render_call_text(&call);
        let result_text = render_result_text(&result);
        prop_assert_eq!(controls_in(&call_text), Vec::<char>::new(), "{}", call_text);
        prop_assert_eq!(controls_in(&result_text), Vec::<char>::new(), "{}", result_text);
    }
}
