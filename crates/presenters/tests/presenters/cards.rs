//! The presenter functions of the built-in tools: the cards they give for well-formed input,
//! and `None` (never a panic) for everything else.

use crate::support;

use dsh_tools::card::{
    GenericCallView, GenericResultView, TerminalCallView, TerminalResultView, ToolKind,
};
use dsh_tools::{ToolCallView, ToolResultRecord, ToolResultView};
use presenters::{ExitOutcome, acp, bash, job_kill, job_list, job_output, render_shell_output};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use support::{any_text, arbitrary_json, record};

type PresentCall = fn(&Value) -> Option<ToolCallView>;
type PresentResult = fn(&Value, &ToolResultRecord) -> Option<ToolResultView>;

/// The built-in presenters by tool name.
const TOOLS: &[(&str, PresentCall, PresentResult)] = &[
    ("bash", bash::present_call, bash::present_result),
    (
        "job_output",
        job_output::present_call,
        job_output::present_result,
    ),
    ("job_list", job_list::present_call, job_list::present_result),
    ("job_kill", job_kill::present_call, job_kill::present_result),
];

fn presenters_of(tool: &str) -> (PresentCall, PresentResult) {
    let (_, call, result) = TOOLS.iter().find(|(name, _, _)| *name == tool).unwrap();
    (*call, *result)
}

fn check_call(tool: &str, args: Value, expected: Option<ToolCallView>) {
    let (present_call, _) = presenters_of(tool);
    assert_eq!(present_call(&args), expected, "{tool} {args}");
}

fn check_result(
    tool: &str,
    args: Value,
    record: ToolResultRecord,
    expected: Option<ToolResultView>,
) {
    let (_, present_result) = presenters_of(tool);
    assert_eq!(present_result(&args, &record), expected, "{tool} {args}");
}

fn generic_call(title: &str, kind: ToolKind, raw_input: Option<Value>) -> ToolCallView {
    ToolCallView::Generic(GenericCallView {
        title: title.to_owned(),
        kind: Some(kind),
        raw_input,
        ..GenericCallView::default()
    })
}

fn generic_result(content: &str) -> ToolResultView {
    ToolResultView::Generic(GenericResultView {
        title: None,
        content: (!content.is_empty()).then(|| content.to_owned()),
    })
}

fn terminal_result(
    title: &str,
    output: Option<&str>,
    exit_code: Option<i64>,
    signal: Option<&str>,
) -> ToolResultView {
    ToolResultView::Terminal(TerminalResultView {
        title: Some(title.to_owned()),
        output: output.map(str::to_owned),
        exit_code,
        signal: signal.map(str::to_owned),
    })
}

#[test]
fn bash_call_cards() {
    check_call(
        "bash",
        json!({"command": "cargo test", "description": "Run the tests", "workdir": "crates/a", "timeout_ms": 60000}),
        Some(ToolCallView::Terminal(TerminalCallView {
            title: "cargo test".into(),
            description: Some("Run the tests".into()),
            cwd: Some("crates/a".into()),
        })),
    );
    check_call(
        "bash",
        json!({"command": "ls", "description": "", "run_in_background": false}),
        Some(ToolCallView::Terminal(TerminalCallView {
            title: "ls".into(),
            ..TerminalCallView::default()
        })),
    );
    let background = json!({"command": "npm run dev", "description": "Start the dev server", "run_in_background": true});
    check_call(
        "bash",
        background.clone(),
        Some(ToolCallView::Generic(GenericCallView {
            title: "npm run dev".into(),
            kind: Some(ToolKind::Execute),
            raw_input: Some(background),
            content: Some("Start the dev server".into()),
            locations: None,
        })),
    );
    // Any integer spelling is an integer; unknown keys are not the card's business.
    check_call(
        "bash",
        serde_json::from_str(r#"{"command": "ls", "description": "d", "timeout_ms": 3e4, "x": 1}"#)
            .unwrap(),
        Some(ToolCallView::Terminal(TerminalCallView {
            title: "ls".into(),
            description: Some("d".into()),
            cwd: None,
        })),
    );
    for malformed in [
        json!(null),
        json!("ls"),
        json!(["ls", "d"]),
        json!({}),
        json!({"command": "ls"}),
        json!({"command": "  ", "description": "d"}),
        json!({"command": 1, "description": "d"}),
        json!({"command": "ls", "description": 1}),
        json!({"command": "ls", "description": "d", "timeout_ms": 1.5}),
        json!({"command": "ls", "description": "d", "timeout_ms": "1"}),
        json!({"command": "ls", "description": "d", "workdir": 1}),
        json!({"command": "ls", "description": "d", "run_in_background": "yes"}),
    ] {
        check_call("bash", malformed, None);
    }
}

#[test]
fn bash_result_cards() {
    let args = json!({"command": "make", "description": "Build"});
    let check = |text: &str, is_error: bool, meta: Option<Value>, expected: ToolResultView| {
        check_result(
            "bash",
            args.clone(),
            record(text, is_error, meta),
            Some(expected),
        );
    };
    check(
        "built\n",
        false,
        None,
        terminal_result("make", Some("built\n"), Some(0), None),
    );
    check(
        "(no output)\n[exit code: 2]",
        false,
        None,
        terminal_result("make", None, Some(2), None),
    );
    check(
        "",
        false,
        None,
        terminal_result("make", None, Some(0), None),
    );
    check(
        &render_shell_output("", "", &[], Some(100), &ExitOutcome::killed("SIGKILL")),
        false,
        None,
        terminal_result(
            "make",
            Some("(no output)\n[timed out after 100ms]"),
            None,
            Some("SIGKILL"),
        ),
    );
    // Persisted exit facts win over the text, which cannot tell exit 0 from a marker-like line:
    // after a successful run that line is the command's own output and stays in the body.
    check(
        "ok\n[exit code: 3]",
        false,
        Some(json!({"exitCode": 0, "signal": null})),
        terminal_result("make", Some("ok\n[exit code: 3]"), Some(0), None),
    );
    // Exactly the marker the facts imply is removed, and only that one.
    check(
        "ok\n[exit code: 3]",
        false,
        Some(json!({"exitCode": 3, "signal": null})),
        terminal_result("make", Some("ok"), Some(3), None),
    );
    check(
        "[exit code: 3]\n[killed by signal: SIGTERM]",
        false,
        Some(json!({"exitCode": null, "signal": "SIGTERM"})),
        terminal_result("make", Some("[exit code: 3]"), None, Some("SIGTERM")),
    );
    check(
        "[killed by signal: SIGTERM]",
        false,
        Some(json!({"exitCode": null, "signal": "SIGTERM"})),
        terminal_result("make", None, None, Some("SIGTERM")),
    );
    // An outcome nobody observed wrote no marker: a marker-like last line is output.
    check(
        "ok\n[exit code: 3]",
        false,
        Some(json!({"exitCode": null, "signal": null})),
        terminal_result("make", Some("ok\n[exit code: 3]"), None, None),
    );
    // Meta without exit facts, or with malformed ones, is ignored.
    check(
        "ok\n[exit code: 3]",
        false,
        Some(json!({"other": 1})),
        terminal_result("make", Some("ok"), Some(3), None),
    );
    check(
        "ok\n[exit code: 3]",
        false,
        Some(json!({"exitCode": "three"})),
        terminal_result("make", Some("ok"), Some(3), None),
    );
    check(
        "ok\n[exit code: 3]",
        false,
        Some(json!([0, null])),
        terminal_result("make", Some("ok"), Some(3), None),
    );
    // Errors and background acknowledgements have no exit status: generic cards.
    check(
        "ABORTED: the call was cancelled",
        true,
        None,
        generic_result("ABORTED: the call was cancelled"),
    );
    // A background start is known from its arguments, not from what its text looks like.
    check_result(
        "bash",
        json!({"command": "make", "description": "Build", "run_in_background": true}),
        record(
            &presenters::markers::background_started("bash-4"),
            false,
            None,
        ),
        Some(generic_result("started background job bash-4")),
    );
    check(
        "started background job x\n",
        false,
        None,
        terminal_result("make", Some("started background job x\n"), Some(0), None),
    );
    check_result(
        "bash",
        json!({"command": ""}),
        record("x", false, None),
        None,
    );
}

#[test]
fn job_tool_cards() {
    let read = json!({"job_id": "bash-1", "wait": true, "timeout_ms": 1000});
    check_call(
        "job_output",
        read.clone(),
        Some(generic_call(
            "Read output of bash-1",
            ToolKind::Read,
            Some(read.clone()),
        )),
    );
    check_result(
        "job_output",
        read,
        record("line\n[status: running]", false, None),
        Some(generic_result("line\n[status: running]")),
    );
    check_call(
        "job_list",
        json!({}),
        Some(generic_call(
            "List background jobs",
            ToolKind::Read,
            Some(json!({})),
        )),
    );
    check_result(
        "job_list",
        json!({}),
        record("(no background jobs)", false, None),
        Some(generic_result("(no background jobs)")),
    );
    let kill = json!({"job_id": "bash-2", "reason": "stuck"});
    check_call(
        "job_kill",
        kill.clone(),
        Some(generic_call(
            "Stop bash-2",
            ToolKind::Execute,
            Some(kill.clone()),
        )),
    );
    check_result(
        "job_kill",
        kill,
        record("NOT_FOUND: no job bash-2", true, None),
        Some(generic_result("NOT_FOUND: no job bash-2")),
    );
    for (tool, malformed) in [
        ("job_output", json!({})),
        ("job_output", json!({"job_id": ""})),
        ("job_output", json!({"job_id": "bash-1", "wait": 1})),
        ("job_output", json!({"job_id": "bash-1", "timeout_ms": 0.5})),
        ("job_list", json!(null)),
        ("job_list", json!([])),
        ("job_kill", json!({"job_id": 3})),
        ("job_kill", json!(["bash-1"])),
    ] {
        check_call(tool, malformed.clone(), None);
        check_result(tool, malformed, record("x", false, None), None);
    }
}

/// Whether `value` is absent, null, or satisfies `ok`.
fn optional(args: &Value, key: &str, ok: impl Fn(&Value) -> bool) -> bool {
    args.get(key).is_none_or(|v| v.is_null() || ok(v))
}

fn non_blank(v: &Value) -> bool {
    v.as_str().is_some_and(|s| !s.trim().is_empty())
}

fn integer(v: &Value) -> bool {
    v.as_number()
        .is_some_and(|n| dsh_tools::json::is_integer(&n.into()))
}

/// A whole number `u64` holds: what `bash` reads for `timeout_ms` (`3e4` included).
fn whole_u64(v: &Value) -> bool {
    integer(v)
        && (v.as_u64().is_some()
            || v.as_f64()
                .is_some_and(|f| (0.0..18_446_744_073_709_551_616.0).contains(&f)))
}

/// The oracle: which arguments each presenter must accept.
fn well_formed(tool: &str, args: &Value) -> bool {
    if !args.is_object() {
        return false;
    }
    match tool {
        "bash" => {
            args.get("command").is_some_and(non_blank)
                && args.get("description").is_some_and(Value::is_string)
                && optional(args, "timeout_ms", whole_u64)
                && optional(args, "workdir", Value::is_string)
                && optional(args, "run_in_background", Value::is_boolean)
        }
        "job_output" => {
            args.get("job_id").is_some_and(non_blank)
                && optional(args, "wait", Value::is_boolean)
                && optional(args, "timeout_ms", integer)
        }
        "job_list" => true,
        "job_kill" => args.get("job_id").is_some_and(non_blank),
        _ => unreachable!(),
    }
}

/// Arguments close to the tools' shapes, so both sides of the oracle are exercised.
fn near_args() -> impl Strategy<Value = Value> {
    let field = |valid: BoxedStrategy<Value>| {
        prop_oneof![
            3 => valid.prop_map(Some),
            1 => Just(None),
            1 => arbitrary_json().prop_map(Some),
        ]
    };
    let text = || any_text().prop_map(Value::String).boxed();
    (
        field(prop_oneof!["[a-z ]{1,12}".prop_map(Value::String), text()].boxed()),
        field(text()),
        field(
            prop_oneof![
                any::<u32>().prop_map(|n| json!(n)),
                Just(json!(2.5)),
                Just(json!(-1)),
                Just(json!(-0.0)),
                Just(json!(3e4)),
                Just(json!(18_446_744_073_709_551_615_u64)),
                Just(json!(1.8446744073709552e19)),
            ]
            .boxed(),
        ),
        field(text()),
        field(any::<bool>().prop_map(Value::Bool).boxed()),
        field(prop_oneof!["bash-[0-9]{1,3}".prop_map(Value::String), text()].boxed()),
        field(any::<bool>().prop_map(Value::Bool).boxed()),
    )
        .prop_map(
            |(command, description, timeout_ms, workdir, background, job_id, wait)| {
                let mut args = serde_json::Map::new();
                for (key, value) in [
                    ("command", command),
                    ("description", description),
                    ("timeout_ms", timeout_ms),
                    ("workdir", workdir),
                    ("run_in_background", background),
                    ("job_id", job_id),
                    ("wait", wait),
                ] {
                    if let Some(value) = value {
                        args.insert(key.to_owned(), value);
                    }
                }
                Value::Object(args)
            },
        )
}

fn any_record() -> impl Strategy<Value = ToolResultRecord> {
    let meta = prop_oneof![
        Just(None),
        arbitrary_json().prop_map(Some),
        (prop::option::of(any::<i64>()), prop::option::of(any_text()))
            .prop_map(|(code, signal)| Some(json!({"exitCode": code, "signal": signal}))),
    ];
    (any_text(), any_text(), any::<bool>(), meta).prop_map(|(text, tail, is_error, meta)| {
        ToolResultRecord {
            content: vec![
                dsh_tools::ContentBlock::text(text),
                dsh_tools::ContentBlock::text(tail),
            ],
            is_error,
            error: None,
            meta,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn presenters_are_total_and_soft(
        args in prop_oneof![arbitrary_json(), near_args()],
        record in any_record(),
    ) {
        for (tool, present_call, present_result) in TOOLS {
            let expected = well_formed(tool, &args);
            let call = present_call(&args);
            let result = present_result(&args, &record);
            prop_assert_eq!(call.is_some(), expected, "{} call {}", tool, args);
            prop_assert_eq!(result.is_some(), expected, "{} result {}", tool, args);
            // Whatever a presenter returns renders, in both renderers.
            if let Some(call) = &call {
                let _ = presenters::render_text(call);
                let _ = acp::tool_call("c", call);
            }
            if let Some(result) = &result {
                let _ = presenters::render_text(result);
                let _ = acp::tool_call_update("c", result, record.is_error);
            }
        }
    }
}
