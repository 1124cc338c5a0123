//! `run_code` end to end: programs that call real tools through the registry, each limit,
//! cancellation, TypeScript, and the failures a model must be told about precisely. The
//! crate's one integration-test binary: `outcomes` and `values` are parts of the above, and
//! `abandoned` is a call its host drops without cancelling it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod abandoned;
#[path = "../../../dsh-tools/tests/support/npm.rs"]
mod npm;
mod outcomes;
#[path = "../../../tool-bash/tests/support/mod.rs"]
mod support;
#[path = "../../../dsh-tools/tests/support/typescript.rs"]
mod typescript;
mod values;

use agent_loop::{Agent, SessionEvent};
use dsh_tools::{ToolCall, ToolRegistry, ToolResult};
use mock_adapter::{MockAdapter, Response, ScriptedCall, Step};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tool_code::{CodeModeLimits, register_run_code};

/// A registry with `bash` (a short kill grace period) and then `run_code`.
fn registry(limits: CodeModeLimits) -> ToolRegistry {
    let registry = support::bash_registry(support::executor(Duration::from_millis(200)), None);
    register_run_code(&registry, limits).unwrap();
    registry
}

async fn run(registry: &ToolRegistry, args: Value) -> ToolResult {
    registry
        .execute(ToolCall::new("c1", "run_code", args))
        .await
}

/// The canonical value of a successful `run_code` call.
fn value(result: &ToolResult) -> Value {
    assert!(
        !result.is_error,
        "run_code failed: {}",
        dsh_tools::content_text(&result.content)
    );
    result.value.as_deref().cloned().unwrap()
}

/// The canonical value's `error`, with the stack left out (its text is QuickJS's).
fn error_of(result: &ToolResult) -> Value {
    let mut error = value(result)["error"].clone();
    if let Some(object) = error.as_object_mut() {
        object.remove("stack");
    }
    error
}

#[tokio::test]
async fn a_scripted_session_runs_two_bash_commands_and_combines_them() {
    let registry = registry(CodeModeLimits::default());
    let values = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&values);
    registry
        .global_scope()
        .on_result(move |exec, result| {
            sink.lock()
                .unwrap()
                .push((exec.call_id().to_owned(), result.value.clone()));
        })
        .unwrap();
    let program = r#"
const first = await tools.bash({ command: "echo alpha", description: "first word" });
const second = await tools.bash({ command: "echo beta", description: "second word" });
console.log("exit codes", first.exitCode, second.exitCode);
return {
  combined: first.stdout.text.trim() + " " + second.stdout.text.trim(),
  exitCodes: [first.exitCode, second.exitCode],
};
"#;
    let mock = MockAdapter::new([
        Step::from(Response::calls([ScriptedCall::json(
            "c1",
            "run_code",
            json!({"code": program}),
        )])),
        Response::text("done").into(),
    ]);
    let events = Arc::new(Mutex::new(Vec::new()));
    let event_sink = Arc::clone(&events);
    let agent = Agent::builder(registry.clone(), Arc::new(mock.clone()))
        .session_id("s1")
        .subscriber(move |record| event_sink.lock().unwrap().push(record.event.clone()))
        .build()
        .unwrap();
    agent.run("combine two commands").await.unwrap();
    agent.dispose().await;

    // The session shows one call and one result: nested calls make no events and no cards.
    let events = events.lock().unwrap().clone();
    let tool_events: Vec<(String, String)> = events
        .iter()
        .filter_map(|event| match event {
            SessionEvent::ToolCall { call_id, name, .. } => {
                Some((format!("call {call_id}"), name.clone()))
            }
            SessionEvent::ToolResult {
                call_id,
                name,
                is_error,
                content,
                meta,
                ..
            } => {
                assert!(!is_error, "{}", dsh_tools::content_text(content));
                assert_eq!(*meta, None);
                Some((format!("result {call_id}"), name.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        tool_events,
        vec![
            ("call c1".to_owned(), "run_code".to_owned()),
            ("result c1".to_owned(), "run_code".to_owned()),
        ]
    );
    let text = events
        .iter()
        .find_map(|event| match event {
            SessionEvent::ToolResult { content, .. } => Some(dsh_tools::content_text(content)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        text,
        "Returned:\n{\n  \"combined\": \"alpha beta\",\n  \"exitCodes\": [\n    0,\n    0\n  ]\n}\nLogs:\nexit codes 0 0\nTool calls (2): bash ×2"
    );

    // The nested calls ran through the pipeline (`c1:code:<n>`), and the run's value records
    // them with their arguments and outcomes.
    let values = values.lock().unwrap().clone();
    let ids: Vec<&str> = values.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec!["c1:code:1", "c1:code:2", "c1"]);
    let run_value = values[2].1.as_deref().cloned().unwrap();
    assert_eq!(
        run_value["value"],
        json!({"combined": "alpha beta", "exitCodes": [0, 0]})
    );
    assert_eq!(run_value["error"], Value::Null);
    assert_eq!(run_value["logs"], json!(["exit codes 0 0"]));
    let calls = run_value["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["tool"], json!("bash"));
    assert_eq!(
        calls[0]["arguments"],
        json!({"command": "echo alpha", "description": "first word"})
    );
    assert_eq!(calls[0]["ok"], json!(true));
    assert_eq!(calls[0]["value"]["stdout"]["text"], json!("alpha\n"));
    assert_eq!(calls[1]["value"]["stdout"]["text"], json!("beta\n"));
}

#[tokio::test]
async fn a_guard_denies_a_nested_call_and_the_program_catches_it() {
    let registry = registry(CodeModeLimits::default());
    registry
        .global_scope()
        .guard(|exec| {
            let command = exec
                .args()
                .and_then(|args| args["command"].as_str().map(str::to_owned))
                .unwrap_or_default();
            command
                .contains("rm ")
                .then(|| String::from("deleting files is not allowed"))
        })
        .unwrap();
    let program = r#"
try {
  await tools.bash({ command: "rm -rf /tmp/nothing-here", description: "delete" });
  return "not denied";
} catch (error) {
  return {
    isToolCallError: error instanceof ToolCallError,
    name: error.name,
    toolName: error.toolName,
    code: error.code,
    message: error.message,
  };
}
"#;
    let result = run(&registry, json!({"code": program})).await;
    let value = value(&result);
    assert_eq!(
        value["value"],
        json!({
            "isToolCallError": true,
            "name": "ToolCallError",
            "toolName": "bash",
            "code": "DENIED",
            "message": "deleting files is not allowed",
        })
    );
    assert_eq!(value["calls"][0]["ok"], json!(false));
    assert_eq!(
        value["calls"][0]["error"],
        json!({"name": "ToolCallError", "toolName": "bash", "code": "DENIED", "message": "deleting files is not allowed"})
    );
}

#[tokio::test]
async fn an_uncaught_tool_call_error_says_which_tool_failed() {
    let registry = registry(CodeModeLimits::default());
    let result = run(&registry, json!({"code": "await tools.bash({});"})).await;
    let error = error_of(&result);
    assert_eq!(error["kind"], json!("exception"));
    assert_eq!(error["name"], json!("ToolCallError"));
    assert_eq!(error["toolName"], json!("bash"));
    assert_eq!(error["code"], json!("INVALID_ARGS"));
}

#[tokio::test]
async fn an_infinite_loop_is_ended_by_the_time_limit() {
    let registry = registry(CodeModeLimits::default());
    let started = Instant::now();
    let result = run(
        &registry,
        json!({"code": "let n = 0; while (true) { n++; }", "timeout_ms": 300}),
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(
        error_of(&result),
        json!({
            "kind": "time_limit",
            "message": "the time limit of 300 ms was reached; the engine was interrupted and nested calls in flight were cancelled",
        })
    );
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert!(
        dsh_tools::content_text(&result.content).starts_with("The program failed (time_limit)")
    );
}

#[tokio::test]
async fn a_memory_bomb_is_ended_by_the_memory_limit() {
    let mut limits = CodeModeLimits::default();
    limits.memory_bytes = 16 * 1024 * 1024;
    let registry = registry(limits);
    let program = r#"
const hoard = [];
while (true) { hoard.push(new Array(100000).fill(hoard.length)); }
"#;
    let result = run(&registry, json!({"code": program})).await;
    assert_eq!(
        error_of(&result),
        json!({"kind": "memory_limit", "message": "the engine's memory limit of 16 MiB was reached"})
    );
}

#[tokio::test]
async fn the_nested_call_limit_ends_the_run() {
    let mut limits = CodeModeLimits::default();
    limits.nested_calls = 3;
    let registry = registry(limits);
    let program = r#"
for (let i = 0; i < 10; i++) {
  await tools.bash({ command: "true", description: "nothing" });
}
return "finished";
"#;
    let result = run(&registry, json!({"code": program})).await;
    assert_eq!(
        error_of(&result),
        json!({"kind": "nested_call_limit", "message": "the limit of 3 nested tool calls per run was reached"})
    );
    assert_eq!(value(&result)["calls"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn console_output_keeps_its_head_and_tail_with_a_note() {
    let mut limits = CodeModeLimits::default();
    limits.log_bytes = 40;
    let registry = registry(limits);
    let program = "for (let i = 0; i < 100; i++) console.log('line', i); return 1;";
    let value = value(&run(&registry, json!({"code": program})).await);
    assert_eq!(value["value"], json!(1));
    // 20 bytes for each end: three 6-byte lines fit at the head, two 7-byte lines at the tail.
    assert_eq!(value["omitted_log_lines"], json!(95));
    assert_eq!(
        value["logs"],
        json!([
            "line 0",
            "line 1",
            "line 2",
            "[… 95 lines (658 bytes) of console output omitted; the first and last lines are kept …]",
            "line 98",
            "line 99",
        ])
    );
}

/// A program whose one `bash` call never ends on its own: its shell writes its process group to
/// `pid_file`, leaves a `sleep` in the background and waits on another.
fn waiting_bash_program(pid_file: &std::path::Path) -> String {
    format!(
        "await tools.bash({{ command: {}, description: \"wait\" }}); return 'too late';",
        json!(format!(
            "sleep 1000 & echo $$ > {}; sleep 1000",
            pid_file.display()
        ))
    )
}

#[tokio::test]
async fn cancelling_mid_run_interrupts_the_engine_and_kills_the_nested_command() {
    let registry = registry(CodeModeLimits::default());
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pgid");
    let program = waiting_bash_program(&pid_file);
    let signal = tokio_util_token();
    let call =
        ToolCall::new("c1", "run_code", json!({"code": program})).with_signal(signal.clone());
    let running = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.execute(call).await })
    };
    let pgid = support::read_pgid(&pid_file).await;
    assert!(!support::live_group_members(pgid).is_empty());
    let cancelled_at = Instant::now();
    signal.cancel();
    let result = running.await.unwrap();
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(5),
        "cancellation took {:?}",
        cancelled_at.elapsed()
    );
    assert!(result.is_error);
    assert_eq!(result.error.unwrap().code, dsh_tools::FailureCode::Aborted);
    // The result comes only after the nested command's whole process group is gone.
    assert_eq!(support::live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn the_time_limit_also_kills_a_nested_command_in_flight() {
    let registry = registry(CodeModeLimits::default());
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pgid");
    let program = waiting_bash_program(&pid_file);
    let running = {
        let registry = registry.clone();
        tokio::spawn(
            async move { run(&registry, json!({"code": program, "timeout_ms": 2000})).await },
        )
    };
    let pgid = support::read_pgid(&pid_file).await;
    let result = running.await.unwrap();
    assert_eq!(error_of(&result)["kind"], json!("time_limit"));
    let value = value(&result);
    assert_eq!(value["calls"][0]["ok"], json!(false));
    assert_eq!(value["calls"][0]["error"]["code"], json!("ABORTED"));
    // The run ends only after the nested command's whole process group is gone.
    assert_eq!(support::live_group_members(pgid), Vec::<i32>::new());
}

fn tokio_util_token() -> tokio_util::sync::CancellationToken {
    tokio_util::sync::CancellationToken::new()
}

/// A TypeScript program with interfaces and generics; the same text is type-checked against
/// the SDK declarations below.
const TYPED_PROGRAM: &str = r#"
interface Word {
  text: string;
  length: number;
}
function pick<T, K extends keyof T>(items: T[], key: K): T[K][] {
  return items.map((item) => item[key]);
}
const output = await tools.bash({ command: "printf 'one two three'", description: "words" });
if (output.kind !== "foreground") throw new Error("expected a foreground result");
const words: Word[] = output.stdout.text.split(" ").map((text: string): Word => ({ text, length: text.length }));
return { lengths: pick<Word, "length">(words, "length"), first: words[0]!.text as string };
"#;

#[tokio::test]
async fn a_typescript_program_with_interfaces_and_generics_runs() {
    let registry = registry(CodeModeLimits::default());
    let value = value(&run(&registry, json!({"code": TYPED_PROGRAM})).await);
    assert_eq!(value["error"], Value::Null);
    assert_eq!(
        value["value"],
        json!({"lengths": [3, 3, 5], "first": "one"})
    );
}

#[test]
fn the_sdk_declarations_and_a_program_type_check_together() {
    let registry = registry(CodeModeLimits::default());
    let sdk = registry.code_mode_sdk(None);
    assert!(!sdk.contains("run_code"), "{sdk}");
    let dir = tempfile::tempdir().unwrap();
    let check = |program: &str| {
        std::fs::write(dir.path().join("sdk.d.ts"), &sdk).unwrap();
        // A program is the body of an async function.
        std::fs::write(
            dir.path().join("program.ts"),
            format!("async function program() {{\n{program}\n}}\nvoid program;\n"),
        )
        .unwrap();
        typescript::check(&[&dir.path().join("sdk.d.ts"), &dir.path().join("program.ts")])
    };
    let (ok, log) = check(TYPED_PROGRAM);
    assert!(ok, "the program did not type-check:\n{log}\n{sdk}");
    // The compiler really checks: a misspelt field of the bash value fails.
    let (ok, _) = check(&TYPED_PROGRAM.replace("output.stdout.text", "output.stdout.txt"));
    assert!(!ok, "a wrong field type-checked");
    // And the error's code is one of the declared codes.
    let (ok, log) = check(
        "try { await tools.bash({ command: 'x', description: 'y' }); } catch (e) { if (e instanceof ToolCallError) { const c: \"DENIED\" | string = e.code; void c; } }",
    );
    assert!(ok, "{log}");
}

#[tokio::test]
async fn a_syntax_error_names_its_line_and_column() {
    let registry = registry(CodeModeLimits::default());
    let result = run(
        &registry,
        json!({"code": "const a = 1;\nconst b = (2 + ;\nreturn a;"}),
    )
    .await;
    let error = error_of(&result);
    assert_eq!(error["kind"], json!("syntax"));
    assert_eq!(error["name"], json!("SyntaxError"));
    assert_eq!(
        (error["line"].clone(), error["column"].clone()),
        (json!(2), json!(16))
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .ends_with("at line 2, column 16"),
        "{error}"
    );
}

#[tokio::test]
async fn returning_a_function_is_an_error_that_says_it_is_not_json() {
    let registry = registry(CodeModeLimits::default());
    for (program, message) in [
        (
            "return () => 1;",
            "the program returned a function at $, which is not JSON",
        ),
        (
            "return { ok: 1, later: async () => 2 };",
            "the program returned a function at $.later, which is not JSON",
        ),
    ] {
        let result = run(&registry, json!({"code": program})).await;
        assert_eq!(
            error_of(&result),
            json!({"kind": "not_json", "message": message}),
            "{program}"
        );
    }
}

#[tokio::test]
async fn an_uncaught_exception_carries_its_message_and_stack() {
    let registry = registry(CodeModeLimits::default());
    let program = "function inner() { throw new TypeError('bad input'); }\ninner();";
    let value = value(&run(&registry, json!({"code": program})).await);
    let error = &value["error"];
    assert_eq!(error["kind"], json!("exception"));
    assert_eq!(error["name"], json!("TypeError"));
    assert_eq!(error["message"], json!("bad input"));
    assert!(
        error["stack"].as_str().unwrap().contains("inner"),
        "{error}"
    );
}

#[tokio::test]
async fn the_program_has_no_clock_and_cannot_call_run_code() {
    let registry = registry(CodeModeLimits::default());
    let program = r#"
return {
  date: typeof Date,
  performance: typeof performance,
  runCode: typeof tools.run_code,
  bash: typeof tools.bash,
};
"#;
    let value = value(&run(&registry, json!({"code": program})).await);
    assert_eq!(
        value["value"],
        json!({"date": "undefined", "performance": "undefined", "runCode": "undefined", "bash": "function"})
    );
}

#[test]
fn the_description_carries_the_sdk_declarations() {
    let registry = registry(CodeModeLimits::default());
    let description = registry
        .get("run_code", None)
        .unwrap()
        .description()
        .to_owned();
    let sdk = registry.code_mode_sdk(None);
    assert!(
        description.ends_with(&format!("```ts\n{sdk}```")),
        "{description}"
    );
    assert!(sdk.contains("declare const tools"), "{sdk}");
    assert!(sdk.contains("  bash: {"), "{sdk}");
}

#[tokio::test]
async fn a_program_waiting_on_nothing_is_told_so_at_once() {
    let registry = registry(CodeModeLimits::default());
    let result = run(&registry, json!({"code": "await new Promise(() => {});"})).await;
    assert_eq!(error_of(&result)["kind"], json!("stalled"));
}

#[test]
fn run_code_does_not_keep_its_registry_alive() {
    let registry = ToolRegistry::new();
    let marker = Arc::new(());
    let held = Arc::clone(&marker);
    registry
        .register(
            dsh_tools::ToolDefinition::builder("holder", "Holds a resource.")
                .output(dsh_tools::ToolOutput::new(
                    dsh_tools::ValueSchema::null(),
                    |_, _| Vec::new(),
                ))
                .execute(move |_, _| {
                    let _resource = Arc::clone(&held);
                    async { Ok(Value::Null) }
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    register_run_code(&registry, CodeModeLimits::default()).unwrap();
    drop(registry);
    // The registry, and with it every tool and what the tools own, is gone.
    assert_eq!(Arc::strong_count(&marker), 1);
}

/// A registry with `run_code` and a `later` tool that answers after a timer and a task of its
/// own: a nested call that cannot settle at once, so the engine must be woken for it.
fn registry_with_a_waiting_tool() -> ToolRegistry {
    use dsh_tools::{ToolDefinition, ToolOutput, ValueSchema};
    let registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("later", "Echo `n` after a short wait.")
                .output(ToolOutput::new(ValueSchema::open_object(), |_, _| {
                    Vec::new()
                }))
                .execute(|args, _| async move {
                    let n = args["n"].as_i64().unwrap_or(-1);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let doubled = tokio::spawn(async move { n * 2 }).await.unwrap();
                    Ok(json!({"n": n, "doubled": doubled}))
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    register_run_code(&registry, CodeModeLimits::default()).unwrap();
    registry
}

const WAITING_PROGRAM: &str = r#"
const results = await Promise.all([1, 2, 3].map((n) => tools.later({ n })));
return results.map((r) => r.doubled);
"#;

/// The calls `WAITING_PROGRAM` records.
fn waiting_calls() -> Value {
    json!([1, 2, 3]
        .iter()
        .map(|n| json!({"tool": "later", "arguments": {"n": n}, "ok": true, "value": {"n": n, "doubled": n * 2}}))
        .collect::<Vec<_>>())
}

/// Runs `WAITING_PROGRAM` and checks its value and its recorded calls.
async fn three_waiting_calls_settle() {
    let result = run(
        &registry_with_a_waiting_tool(),
        json!({"code": WAITING_PROGRAM}),
    )
    .await;
    let value = value(&result);
    assert_eq!(value["value"], json!([2, 4, 6]));
    assert_eq!(value["calls"], waiting_calls());
}

#[tokio::test]
async fn nested_calls_that_wait_settle_on_a_single_threaded_runtime() {
    three_waiting_calls_settle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_calls_that_wait_settle_on_a_multi_threaded_runtime() {
    three_waiting_calls_settle().await;
}

#[tokio::test]
async fn an_exception_names_its_place_in_the_program_as_written() {
    let registry = registry(CodeModeLimits::default());
    // Erasing the interface moves every line up by three; the stack must not.
    let program = "interface Input {\n  x: number;\n}\nfunction inner(input: Input): number {\n  throw new TypeError('bad input ' + input.x);\n}\nawait Promise.resolve();\ninner({ x: 1 });";
    let value = value(&run(&registry, json!({"code": program})).await);
    let error = &value["error"];
    assert_eq!(error["message"], json!("bad input 1"));
    // QuickJS places a `throw new …` at the last expression it evaluated: `input.x`.
    assert_eq!((&error["line"], &error["column"]), (&json!(5), &json!(38)));
    assert_eq!(
        error["stack"],
        json!("    at inner (program:5:38)\n    at <anonymous> (program:8:1)\n")
    );
}
