//! The model-facing contract of the built-in tools (`bash`, `job_output`, `job_list`,
//! `job_kill`): every argument error is `INVALID_ARGS` and names the field it is about as a JSON
//! pointer, whatever the fault (wrong type, negative, huge, string-number, null, unknown field,
//! missing, empty), and every description says when to use the tool in the words users say.
//!
//! The arguments are given as the model's raw text, so numbers such as `1e300` and
//! `18446744073709551616` reach the tools exactly as a model would send them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use dsh_tools::jobs::{JobRuntime, JobsConfig};
use dsh_tools::{FailureCode, ToolCall, ToolRegistry};
use pretty_assertions::assert_eq;
use std::time::Duration;

/// The registries under test: background jobs enabled (all four tools) and disabled (`bash`
/// alone, which then refuses `run_in_background`).
struct Registries {
    with_jobs: ToolRegistry,
    without_jobs: ToolRegistry,
    // Kept alive for the registry's job tools.
    _jobs: JobRuntime,
}

fn registries() -> Registries {
    let jobs = JobRuntime::new(JobsConfig::default());
    let executor = support::executor(Duration::from_millis(200));
    Registries {
        with_jobs: support::bash_registry(executor.clone(), Some(&jobs)),
        without_jobs: support::bash_registry(executor, None),
        _jobs: jobs,
    }
}

/// Runs one call with raw argument text and says how its outcome differs from the expected
/// code and pointer, or `None` when it matches. The pointer must open the message (after the
/// pipeline's `invalid arguments: `) so the model reads first which field is wrong; `""` is
/// the root, shown as `(root)`.
async fn check(
    registry: &ToolRegistry,
    tool: &str,
    args: &str,
    expected_code: FailureCode,
    expected_pointer: &str,
) -> Option<String> {
    let result = registry
        .execute(ToolCall::new("c1", tool, args.to_owned()))
        .await;
    let Some(error) = result.error else {
        return Some(format!("{tool} {args}: succeeded"));
    };
    let shown = if expected_pointer.is_empty() {
        "(root)"
    } else {
        expected_pointer
    };
    let prefix = format!("invalid arguments: {shown}: ");
    (error.code != expected_code || !error.message.starts_with(&prefix)).then(|| {
        format!(
            "{tool} {args}: expected {expected_code} starting {prefix:?}, got {} {:?}",
            error.code, error.message
        )
    })
}

/// The faults every integer field is tried with.
const BAD_INTEGERS: [&str; 9] = [
    "-1",
    "1e300",
    "18446744073709551616",
    "\"100\"",
    "null",
    "1.5",
    "true",
    "[]",
    "{}",
];

/// The faults every string field is tried with.
const BAD_STRINGS: [&str; 5] = ["5", "null", "true", "[]", "{}"];

/// The faults every boolean field is tried with.
const BAD_BOOLEANS: [&str; 5] = ["\"true\"", "1", "null", "[]", "{}"];

#[tokio::test]
async fn every_argument_error_of_every_built_in_tool_names_its_field() {
    let r = registries();
    let invalid = FailureCode::InvalidArgs;
    // (registry, tool, arguments, pointer)
    let mut cases: Vec<(&ToolRegistry, &str, String, &str)> = Vec::new();

    // ----- bash ------------------------------------------------------------------------------
    let base = r#""command": "true", "description": "Do nothing""#;
    for bad in BAD_STRINGS {
        cases.push((
            &r.with_jobs,
            "bash",
            format!(r#"{{"command": {bad}, "description": "Do nothing"}}"#),
            "/command",
        ));
        cases.push((
            &r.with_jobs,
            "bash",
            format!(r#"{{"command": "true", "description": {bad}}}"#),
            "/description",
        ));
        cases.push((
            &r.with_jobs,
            "bash",
            format!(r#"{{{base}, "workdir": {bad}}}"#),
            "/workdir",
        ));
    }
    for bad in BAD_INTEGERS.into_iter().chain(["0"]) {
        for registry in [&r.with_jobs, &r.without_jobs] {
            cases.push((
                registry,
                "bash",
                format!(r#"{{{base}, "timeout_ms": {bad}}}"#),
                "/timeout_ms",
            ));
        }
    }
    for bad in BAD_BOOLEANS {
        cases.push((
            &r.with_jobs,
            "bash",
            format!(r#"{{{base}, "run_in_background": {bad}}}"#),
            "/run_in_background",
        ));
    }
    for (field, text) in [
        ("/command", r#"{"description": "Do nothing"}"#.to_owned()),
        (
            "/command",
            r#"{"command": "  ", "description": "Blank"}"#.to_owned(),
        ),
        ("/description", r#"{"command": "true"}"#.to_owned()),
        (
            "/description",
            r#"{"command": "true", "description": " "}"#.to_owned(),
        ),
        ("/extra", format!(r#"{{{base}, "extra": 1}}"#)),
        ("/cwd", format!(r#"{{{base}, "cwd": "/"}}"#)),
        ("", "[]".to_owned()),
        ("", "null".to_owned()),
        ("", "\"ls\"".to_owned()),
    ] {
        for registry in [&r.with_jobs, &r.without_jobs] {
            cases.push((registry, "bash", text.clone(), field));
        }
    }
    // Without jobs the switch is refused even when it asks for the foreground.
    for value in ["true", "false"] {
        cases.push((
            &r.without_jobs,
            "bash",
            format!(r#"{{{base}, "run_in_background": {value}}}"#),
            "/run_in_background",
        ));
    }

    // ----- job_output ------------------------------------------------------------------------
    for bad in BAD_STRINGS.into_iter().chain([r#""""#, r#""  ""#]) {
        cases.push((
            &r.with_jobs,
            "job_output",
            format!(r#"{{"job_id": {bad}}}"#),
            "/job_id",
        ));
    }
    for bad in BAD_INTEGERS {
        for wait in ["true", "false"] {
            cases.push((
                &r.with_jobs,
                "job_output",
                format!(r#"{{"job_id": "bash-1", "wait": {wait}, "timeout_ms": {bad}}}"#),
                "/timeout_ms",
            ));
        }
    }
    cases.push((
        &r.with_jobs,
        "job_output",
        r#"{"job_id": "bash-1", "wait": true, "timeout_ms": 0}"#.to_owned(),
        "/timeout_ms",
    ));
    for bad in BAD_BOOLEANS {
        cases.push((
            &r.with_jobs,
            "job_output",
            format!(r#"{{"job_id": "bash-1", "wait": {bad}}}"#),
            "/wait",
        ));
    }
    for (field, text) in [
        ("/job_id", r#"{}"#),
        ("/job_id", r#"{"wait": true}"#),
        ("/extra", r#"{"job_id": "bash-1", "extra": 1}"#),
        ("", "[]"),
        ("", "null"),
    ] {
        cases.push((&r.with_jobs, "job_output", text.to_owned(), field));
    }

    // ----- job_list --------------------------------------------------------------------------
    for (field, text) in [
        ("/extra", r#"{"extra": 1}"#),
        ("/job_id", r#"{"job_id": "bash-1"}"#),
        ("", "[]"),
        ("", "null"),
        ("", "5"),
    ] {
        cases.push((&r.with_jobs, "job_list", text.to_owned(), field));
    }

    // ----- job_kill --------------------------------------------------------------------------
    for bad in BAD_STRINGS.into_iter().chain([r#""""#, r#""  ""#]) {
        cases.push((
            &r.with_jobs,
            "job_kill",
            format!(r#"{{"job_id": {bad}}}"#),
            "/job_id",
        ));
    }
    for (field, text) in [
        ("/job_id", r#"{}"#),
        ("/extra", r#"{"job_id": "bash-1", "extra": 1}"#),
        ("", "[]"),
        ("", "null"),
    ] {
        cases.push((&r.with_jobs, "job_kill", text.to_owned(), field));
    }

    let mut mismatches = Vec::new();
    for (registry, tool, args, pointer) in &cases {
        if let Some(mismatch) = check(registry, tool, args, invalid, pointer).await {
            mismatches.push(mismatch);
        }
    }
    assert_eq!(mismatches, Vec::<String>::new(), "of {} cases", cases.len());
}

/// The numbers a model gets wrong most, with the whole message it reads back: the field
/// first, then what is wrong with the value.
#[tokio::test]
async fn timeout_errors_say_which_number_does_not_fit() {
    let r = registries();
    let mut messages = Vec::new();
    for bad in [
        "-1",
        "1e300",
        "18446744073709551616",
        "\"100\"",
        "1.5",
        "1000.5",
    ] {
        for (tool, args) in timeout_calls(bad) {
            let result = r.with_jobs.execute(ToolCall::new("c1", tool, args)).await;
            messages.push(result.error.map(|e| e.message).unwrap_or_default());
        }
    }
    let expected: Vec<String> = [
        "-1 is out of range for this field",
        "1e300 is out of range for this field",
        "18446744073709551616 is out of range for this field",
        "expected integer, got string",
        "expected a whole number, got 1.5",
        "expected a whole number, got 1000.5",
    ]
    .iter()
    .flat_map(|what| {
        let message = format!("invalid arguments: /timeout_ms: {what}");
        [message.clone(), message]
    })
    .collect();
    assert_eq!(messages, expected);
}

/// A call of `bash` and one of `job_output` (of the job `bash-1`), each with `timeout_ms`
/// written as `number`.
fn timeout_calls(number: &str) -> [(&'static str, String); 2] {
    [
        (
            "bash",
            format!(
                r#"{{"command": "true", "description": "Do nothing", "timeout_ms": {number}}}"#
            ),
        ),
        (
            "job_output",
            format!(r#"{{"job_id": "bash-1", "wait": true, "timeout_ms": {number}}}"#),
        ),
    ]
}

/// A whole number is an integer however it is written (`1000.0`, `1e3`), as JSON Schema says:
/// the timeouts of `bash` and `job_output` take it from the model's text and from an in-process
/// caller's value, where such a number is a float (the agent loop and the MCP server pass one).
#[tokio::test]
async fn a_whole_number_written_as_a_float_is_a_valid_timeout() {
    let r = registries();
    let started = r
        .with_jobs
        .execute(ToolCall::new(
            "c0",
            "bash",
            r#"{"command": "true", "description": "Do nothing", "run_in_background": true}"#,
        ))
        .await;
    assert_eq!(started.error.map(|e| e.message), None);
    let mut outcomes = Vec::new();
    for spelling in ["1000.0", "1e3", "1E3", "1000.000", "10000e-1", "0.1e4"] {
        for (tool, args) in timeout_calls(spelling) {
            let value: serde_json::Value = serde_json::from_str(&args).unwrap();
            for (form, call) in [
                ("text", ToolCall::new("c1", tool, args.clone())),
                ("value", ToolCall::new("c1", tool, value)),
            ] {
                let result = r.with_jobs.execute(call).await;
                outcomes.push((
                    format!("{tool} {spelling} as {form}"),
                    result.error.map(|e| e.message),
                ));
            }
        }
    }
    let expected: Vec<(String, Option<String>)> = outcomes
        .iter()
        .map(|(case, _)| (case.clone(), None))
        .collect();
    assert_eq!(outcomes, expected);
}

/// Each built-in tool's description says when to use it in the words users say, in English and
/// in Chinese, as `bash`'s does.
#[tokio::test]
async fn every_built_in_description_names_what_users_say_in_english_and_chinese() {
    let r = registries();
    let phrases: Vec<(String, Vec<&str>)> = r
        .with_jobs
        .schemas(None)
        .into_iter()
        .map(|schema| {
            let wanted: &[&str] = match schema.name.as_str() {
                "bash" => &["\"run the tests\"", "\"运行命令\""],
                "job_output" => &["\"check the server log\"", "\"查看后台输出\""],
                "job_list" => &["\"what's still running?\"", "\"查看后台任务\""],
                "job_kill" => &["\"stop the server\"", "\"停止任务\""],
                other => panic!("an unexpected built-in tool `{other}`"),
            };
            let missing = wanted
                .iter()
                .copied()
                .filter(|phrase| !schema.description.contains(phrase))
                .collect();
            (schema.name, missing)
        })
        .collect();
    assert_eq!(
        phrases,
        ["bash", "job_kill", "job_list", "job_output"].map(|name| (name.to_owned(), Vec::new()))
    );
}

/// The registry validates `bash` like any tool, and the messages that say what to do are kept:
/// a background switch where jobs are off, blank fields, a justification without `sandbox`.
#[tokio::test]
async fn bash_argument_errors_say_what_to_do() {
    let r = registries();
    let mut messages = Vec::new();
    for (registry, args) in [
        (
            &r.without_jobs,
            r#"{"command": "true", "description": "Do nothing", "run_in_background": true}"#,
        ),
        (&r.with_jobs, r#"{"command": " ", "description": "Blank"}"#),
        (&r.with_jobs, r#"{"command": "true", "description": ""}"#),
        (
            &r.with_jobs,
            r#"{"command": "true", "description": "Do nothing", "timeout_ms": 0}"#,
        ),
        (
            &r.with_jobs,
            r#"{"command": "true", "description": "Do nothing", "extra": 1}"#,
        ),
    ] {
        let result = registry.execute(ToolCall::new("c1", "bash", args)).await;
        messages.push(result.error.map(|e| e.message).unwrap_or_default());
    }
    assert_eq!(
        messages,
        [
            "invalid arguments: /run_in_background: background jobs are not enabled here; remove `run_in_background` and run the command in the foreground",
            "invalid arguments: /command: must not be empty",
            "invalid arguments: /description: must not be empty (say in 5-10 words what the command does)",
            "invalid arguments: /timeout_ms: must be a positive number of milliseconds",
            "invalid arguments: /extra: unknown property (this object accepts only its declared properties)",
        ]
    );
}
