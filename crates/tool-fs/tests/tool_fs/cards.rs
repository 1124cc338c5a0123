//! The cards: read with its location, diff cards replayed from the meta alone (and their ACP
//! `diff` content), search cards with truncation and totals.

use crate::support::{Policy, fixture};
use dsh_tools::card::{FileDiff, SearchResultView};
use dsh_tools::{ToolResult, ToolResultRecord, ToolResultView};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// What a session log keeps of a result.
fn record(result: &ToolResult) -> ToolResultRecord {
    ToolResultRecord {
        content: result.content.clone(),
        is_error: result.is_error,
        error: result.error.clone(),
        meta: result.meta.clone(),
    }
}

#[tokio::test]
async fn a_new_file_replays_as_a_diff_with_null_old_text_and_becomes_acp_diff_content() {
    let f = fixture(Policy::Roots);
    let args = json!({"file_path": "n.txt", "content": "hello\n"});
    let result = f.call("write", args.clone()).await;
    let path = f.path("n.txt").display().to_string();
    // The file is gone: the card comes from the record alone.
    std::fs::remove_file(f.path("n.txt")).unwrap();
    let card = f
        .registry
        .present_result("write", &args, &record(&result), None);
    let ToolResultView::Diff(diff) = &card else {
        panic!("{card:?}")
    };
    assert_eq!(
        diff.diffs,
        vec![FileDiff {
            path: path.clone(),
            old_text: None,
            new_text: "hello\n".into()
        }]
    );
    let update = presenters::acp::tool_call_update("c1", &card, false);
    assert_eq!(
        update["content"],
        json!([{"type": "diff", "path": path, "oldText": null, "newText": "hello\n"}])
    );
    let call = f.registry.present_call("write", &args, None);
    let acp = presenters::acp::tool_call("c1", &call);
    assert_eq!(
        (acp["kind"].clone(), acp["locations"].clone()),
        (json!("edit"), json!([{"path": "n.txt"}]))
    );
}

#[tokio::test]
async fn an_edit_replays_its_old_and_new_text() {
    let f = fixture(Policy::Roots);
    f.put("e.txt", "one\ntwo\n");
    f.ok("read", json!({"file_path": "e.txt"})).await;
    let args = json!({"file_path": "e.txt", "old_string": "two", "new_string": "2"});
    let result = f.call("edit", args.clone()).await;
    std::fs::write(f.path("e.txt"), "overwritten").unwrap();
    let card = f
        .registry
        .present_result("edit", &args, &record(&result), None);
    let ToolResultView::Diff(diff) = &card else {
        panic!("{card:?}")
    };
    assert_eq!(diff.diffs[0].old_text.as_deref(), Some("one\ntwo\n"));
    assert_eq!(diff.diffs[0].new_text, "one\n2\n");
    let text = presenters::render_text(&card);
    assert!(text.contains("-two") && text.contains("+2"), "{text}");
    let call = f.registry.present_call("edit", &args, None);
    let acp = presenters::acp::tool_call("c1", &call);
    assert_eq!(acp["content"][0]["oldText"], "two");
}

#[tokio::test]
async fn a_read_card_carries_its_lines_and_location() {
    let f = fixture(Policy::Anywhere);
    f.put("r.rs", "a\nb\nc\n");
    let args = json!({"file_path": "r.rs", "offset": 2});
    let result = f.call("read", args.clone()).await;
    let card = f
        .registry
        .present_result("read", &args, &record(&result), None);
    let ToolResultView::Read(read) = &card else {
        panic!("{card:?}")
    };
    assert_eq!(read.offset, 1);
    assert_eq!(
        read.lines
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>(),
        vec!["b", "c"]
    );
    assert_eq!(read.lang.as_deref(), Some("rust"));
    let update = presenters::acp::tool_call_update("c1", &card, false);
    let path = f.path("r.rs").display().to_string();
    assert_eq!(update["locations"], json!([{"path": path, "line": 2}]));
    let call = presenters::acp::tool_call("c1", &f.registry.present_call("read", &args, None));
    assert_eq!(
        (call["kind"].clone(), call["locations"].clone()),
        (json!("read"), json!([{"path": "r.rs", "line": 2}]))
    );
}

#[tokio::test]
async fn search_cards_state_truncation_and_totals_and_grep_gives_acp_locations() {
    let f = fixture(Policy::Anywhere);
    for n in 0..3 {
        f.put(&format!("g{n}.txt"), "needle\n");
    }
    let args = json!({"pattern": "needle"});
    let result = f.call("grep", args.clone()).await;
    let card = f
        .registry
        .present_result("grep", &args, &record(&result), None);
    let ToolResultView::Search(SearchResultView::Matches(m)) = &card else {
        panic!("{card:?}")
    };
    assert_eq!((m.total, m.truncated, m.files.len()), (3, false, 3));
    let update = presenters::acp::tool_call_update("c1", &card, false);
    assert_eq!(update["locations"].as_array().unwrap().len(), 3);
    assert_eq!(update["locations"][0]["line"], 1);
    let glob_args = json!({"pattern": "*.txt"});
    let result = f.call("glob", glob_args.clone()).await;
    let card = f
        .registry
        .present_result("glob", &glob_args, &record(&result), None);
    let ToolResultView::Search(SearchResultView::Paths(p)) = &card else {
        panic!("{card:?}")
    };
    assert_eq!((p.total, p.truncated, p.paths.len()), (3, false, 3));
}

#[tokio::test]
async fn an_error_gets_the_generic_card_and_bad_arguments_the_fallback() {
    let f = fixture(Policy::Anywhere);
    let args = json!({"file_path": "missing.txt"});
    let result = f.call("read", args.clone()).await;
    let card = f
        .registry
        .present_result("read", &args, &record(&result), None);
    assert!(matches!(card, ToolResultView::Generic(_)), "{card:?}");
    let odd: Value = json!({"file_path": 3});
    assert!(matches!(
        f.registry.present_call("edit", &odd, None),
        dsh_tools::ToolCallView::Generic(_)
    ));
}
