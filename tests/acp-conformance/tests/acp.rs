//! The ACP projection: a snapshot of every card kind, and every projection read back through
//! the official ACP schema types without losing title, kind, status, content, diffs or
//! locations.
//!
//! The schema types forgive a lot on purpose (an unknown kind becomes `other`, an invalid
//! content item is skipped), so "it deserialises" proves little; each test compares the
//! deserialised value with the one the card implies, field by field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

// The presenters' own test support: the card fixtures and generators this test projects.
#[path = "../../../crates/presenters/tests/support/mod.rs"]
mod support;

use agent_client_protocol_schema::v1 as schema;
use dsh_tools::card::{
    FileDiff, Location, SearchResultView, TerminalResultView, ToolKind, WebFetch, WebResultView,
};
use dsh_tools::{ToolCallView, ToolResultView};
use presenters::acp;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::Value;
use support::{any_call_view, any_result_view, call_fixtures, result_fixtures};

const ID: &str = "call-1";

fn expected_kind(kind: ToolKind) -> schema::ToolKind {
    match kind {
        ToolKind::Read => schema::ToolKind::Read,
        ToolKind::Edit => schema::ToolKind::Edit,
        ToolKind::Delete => schema::ToolKind::Delete,
        ToolKind::Move => schema::ToolKind::Move,
        ToolKind::Search => schema::ToolKind::Search,
        ToolKind::Execute => schema::ToolKind::Execute,
        ToolKind::Fetch => schema::ToolKind::Fetch,
        ToolKind::Other => schema::ToolKind::Other,
    }
}

fn text_item(text: &str) -> schema::ToolCallContent {
    schema::ToolCallContent::from(text.to_owned())
}

fn diff_item(diff: &FileDiff) -> schema::ToolCallContent {
    schema::Diff::new(&diff.path, diff.new_text.clone())
        .old_text(diff.old_text.clone())
        .into()
}

/// ACP lines are 32-bit; a larger line is left out rather than wrapped.
fn location(path: &str, line: Option<u64>) -> schema::ToolCallLocation {
    schema::ToolCallLocation::new(path).line(line.and_then(|l| u32::try_from(l).ok()))
}

fn locations(locations: &[Location]) -> Vec<schema::ToolCallLocation> {
    locations
        .iter()
        .map(|l| location(&l.path, l.line))
        .collect()
}

/// The `ToolCall` a pending card must project to.
fn expected_call(card: &ToolCallView) -> schema::ToolCall {
    let call = |title: &str| {
        schema::ToolCall::new(ID, title.to_owned()).status(schema::ToolCallStatus::Pending)
    };
    match card {
        ToolCallView::Generic(card) => call(&card.title)
            .kind(expected_kind(card.kind.unwrap_or(ToolKind::Other)))
            .content(card.content.iter().map(|t| text_item(t)).collect())
            .locations(locations(card.locations.as_deref().unwrap_or_default()))
            .raw_input(card.raw_input.clone().filter(|input| !input.is_null())),
        ToolCallView::Terminal(card) => call(&card.title)
            .kind(schema::ToolKind::Execute)
            .content(card.description.iter().map(|t| text_item(t)).collect()),
        ToolCallView::Diff(card) => {
            let followed = match &card.locations {
                Some(explicit) => locations(explicit),
                None => card.diffs.iter().map(|d| location(&d.path, None)).collect(),
            };
            call(&card.title)
                .kind(schema::ToolKind::Edit)
                .content(card.diffs.iter().map(diff_item).collect())
                .locations(followed)
        }
        other => panic!("no expectation for {other:?}"),
    }
}

/// Projects a pending card, reads it back with the schema crate and compares.
fn check_call(card: &ToolCallView) -> Value {
    let json = acp::tool_call(ID, card);
    let parsed: schema::ToolCall = dsh_tools::json::from_value(&json)
        .unwrap_or_else(|e| panic!("not an ACP ToolCall: {e}\n{json:#}"));
    assert_eq!(parsed, expected_call(card), "{json:#}");
    json
}

fn expected_title(card: &ToolResultView) -> Option<String> {
    match card {
        ToolResultView::Generic(card) => card.title.clone(),
        ToolResultView::Terminal(card) => card.title.clone(),
        ToolResultView::Diff(card) => card.title.clone(),
        ToolResultView::Search(SearchResultView::Matches(card)) => card.title.clone(),
        ToolResultView::Search(SearchResultView::Paths(card)) => card.title.clone(),
        ToolResultView::Read(card) => card.title.clone(),
        ToolResultView::Web(_) => None,
        other => panic!("no expectation for {other:?}"),
    }
}

/// A terminal card with nothing to show (no title, output or status) adds no content.
fn is_empty_terminal(card: &ToolResultView) -> bool {
    matches!(card, ToolResultView::Terminal(_)) && presenters::render_result_text(card).is_empty()
}

/// Projects a completed card, reads it back with the schema crate and compares.
fn check_update(card: &ToolResultView, failed: bool) -> Value {
    let json = acp::tool_call_update(ID, card, failed);
    let parsed: schema::ToolCallUpdate = dsh_tools::json::from_value(&json)
        .unwrap_or_else(|e| panic!("not an ACP ToolCallUpdate: {e}\n{json:#}"));
    // Rendered listings are pinned by the snapshots; here they must arrive whole, as the one
    // text item the projection wrote.
    let rendered = || {
        let text = json["content"][0]["content"]["text"].as_str().unwrap();
        assert!(!text.is_empty(), "{json:#}");
        Some(vec![text_item(text)])
    };
    let content = match card {
        ToolResultView::Generic(card) => card.content.as_deref().map(|t| vec![text_item(t)]),
        ToolResultView::Diff(card) => {
            Some(card.diffs.iter().map(diff_item).collect()).filter(|d: &Vec<_>| !d.is_empty())
        }
        card if is_empty_terminal(card) => None,
        _ => rendered(),
    };
    let followed = match card {
        ToolResultView::Read(card) => Some(vec![location(
            &card.path,
            card.lines.first().map(|l| l.number),
        )]),
        ToolResultView::Search(SearchResultView::Matches(card)) => Some(
            card.files
                .iter()
                .flat_map(|f| {
                    f.matches
                        .iter()
                        .map(|m| location(&f.path, Some(m.line_number)))
                })
                .collect(),
        )
        .filter(|l: &Vec<_>| !l.is_empty()),
        _ => None,
    };
    let status = if failed {
        schema::ToolCallStatus::Failed
    } else {
        schema::ToolCallStatus::Completed
    };
    let expected = schema::ToolCallUpdate::new(
        ID,
        schema::ToolCallUpdateFields::new()
            .status(status)
            .title(expected_title(card))
            .content(content)
            .locations(followed),
    );
    assert_eq!(parsed, expected, "{json:#}");
    json
}

/// serde_json's own printer, so the snapshots show the JSON an ACP client receives.
fn pretty(json: &Value) -> String {
    serde_json::to_string_pretty(json).unwrap()
}

#[test]
fn every_call_card_projects_onto_an_acp_tool_call() {
    for (name, card) in call_fixtures() {
        insta::assert_snapshot!(name, pretty(&check_call(&card)));
    }
}

#[test]
fn every_result_card_projects_onto_an_acp_tool_call_update() {
    for (name, card) in result_fixtures() {
        insta::assert_snapshot!(name, pretty(&check_update(&card, false)));
    }
}

#[test]
fn failed_results_are_marked_failed() {
    let (_, card) = result_fixtures().swap_remove(0);
    let update = check_update(&card, true);
    assert_eq!(update["status"], "failed");
}

#[test]
fn fences_outlast_backticks_in_the_output() {
    let card = ToolResultView::Terminal(TerminalResultView {
        title: Some("cat README.md".into()),
        output: Some("```sh\nls\n```".into()),
        exit_code: Some(0),
        signal: None,
    });
    let update = check_update(&card, false);
    assert_eq!(
        update["content"][0]["content"]["text"],
        "````console\n$ cat README.md\n```sh\nls\n```\n````"
    );
}

#[test]
fn web_results_keep_their_listing() {
    let card = ToolResultView::Web(WebResultView::Fetch(WebFetch {
        url: "https://example.com/".into(),
        status_code: 200,
        truncated: true,
    }));
    let update = check_update(&card, false);
    assert_eq!(
        update["content"][0]["content"]["text"],
        "Fetched https://example.com/ (HTTP 200)\n… body truncated"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_projection_reads_back_without_loss(
        call in any_call_view(),
        result in any_result_view(),
        failed in any::<bool>(),
    ) {
        check_call(&call);
        check_update(&result, failed);
    }
}
