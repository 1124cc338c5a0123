//! How a run ends when the program's value or exception is hostile: each outcome keeps its
//! true kind, the host reads the program's value itself (never through the program's globals,
//! which it may have replaced), and one depth limit holds for values going into the program and
//! coming out of it.

use super::{error_of, run, value};
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tool_code::{CodeModeLimits, MAX_VALUE_DEPTH, register_run_code};

/// A registry with `run_code` and three tools: `same` answers with its arguments, `give` with
/// `given` (after a short wait when its arguments ask for one), and `fail` always fails.
fn registry(given: Value) -> ToolRegistry {
    use dsh_tools::{ToolDefinition, ToolError, ToolOutput, ValueSchema};
    let registry = ToolRegistry::new();
    let no_cards = || ToolOutput::new(ValueSchema::open_object(), |_, _| Vec::new());
    let tools = [
        ToolDefinition::builder("same", "Answer with the arguments.")
            .output(no_cards())
            .execute(|args, _| async move { Ok((*args).clone()) })
            .build(),
        ToolDefinition::builder("give", "Answer with a fixed value.")
            .output(no_cards())
            .execute(move |args, _| {
                let given = given.clone();
                async move {
                    if args["wait"] == json!(true) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Ok(given)
                }
            })
            .build(),
        ToolDefinition::builder("fail", "Always fail.")
            .output(no_cards())
            .execute(|_, _| async { Err(ToolError::failed("no")) })
            .build(),
    ];
    for tool in tools {
        registry.register(tool.unwrap()).unwrap();
    }
    register_run_code(&registry, CodeModeLimits::default()).unwrap();
    registry
}

/// `{"a": {"a": … {}}}`: `levels` objects, each inside the one before.
fn nested(levels: usize) -> Value {
    let mut value = json!({});
    for _ in 1..levels {
        value = json!({ "a": value });
    }
    value
}

/// The JavaScript that makes [`nested`]`(levels)` as `v`.
fn nested_js(levels: usize) -> String {
    format!("let v = {{}}; for (let i = 1; i < {levels}; i++) v = {{ a: v }};")
}

#[tokio::test]
async fn a_thrown_value_is_an_exception_described_without_running_the_programs_code() {
    let registry = registry(json!({}));
    let not_an_error = |what: &str| json!({"kind": "exception", "message": format!("the program threw a value that is not an Error: {what}")});
    let cases = [
        (
            "throw new Proxy({}, { get() { throw 1; } });",
            not_an_error("a Proxy"),
        ),
        (
            "throw new Proxy(new Error('inner'), { get() { for (;;) {} }, getPrototypeOf() { for (;;) {} } });",
            not_an_error("a Proxy"),
        ),
        (
            "throw { toString() { throw 1; }, valueOf() { for (;;) {} }, toJSON() { for (;;) {} } };",
            not_an_error("an object that is not plain data"),
        ),
        ("throw () => 1;", not_an_error("a function")),
        (
            "throw { code: 7, list: [1, 'two'] };",
            not_an_error(r#"{"code":7,"list":[1,"two"]}"#),
        ),
        ("throw 42;", not_an_error("42")),
        ("throw 'plain text';", not_an_error("plain text")),
        ("throw undefined;", not_an_error("undefined")),
        ("throw Symbol('s');", not_an_error("a symbol")),
        ("throw 10n;", not_an_error("a BigInt")),
        // Its getters are not run: the name is not known, and the message is the one it was made with.
        (
            "const e = new Error('kept'); Object.defineProperty(e, 'name', { get() { for (;;) {} } }); throw e;",
            json!({"kind": "exception", "message": "kept"}),
        ),
        (
            "class Loop extends Error { get name() { for (;;) {} } get message() { throw 1; } }\nthrow new Loop();",
            json!({"kind": "exception", "message": ""}),
        ),
        (
            "const e = new Error('behind a proxy'); Object.setPrototypeOf(e, new Proxy(Error.prototype, { get() { for (;;) {} }, getOwnPropertyDescriptor() { for (;;) {} }, getPrototypeOf() { for (;;) {} } })); throw e;",
            json!({"kind": "exception", "message": "behind a proxy"}),
        ),
        (
            "throw new RangeError('out of range');",
            json!({"kind": "exception", "name": "RangeError", "message": "out of range"}),
        ),
    ];
    for (program, expected) in cases {
        let started = Instant::now();
        let result = run(&registry, json!({"code": program, "timeout_ms": 5000})).await;
        let mut error = error_of(&result);
        // The frames are QuickJS's; where they point is checked elsewhere.
        if let Some(error) = error.as_object_mut() {
            error.remove("line");
            error.remove("column");
        }
        assert_eq!(error, expected, "{program}");
        assert!(started.elapsed() < Duration::from_secs(5), "{program}");
    }
}

#[tokio::test]
async fn a_return_value_nested_beyond_the_limit_is_not_json_naming_the_limit() {
    let registry = registry(json!({}));
    let too_deep = format!(
        "the program returned a value nested more than {MAX_VALUE_DEPTH} levels deep (the limit for values in Code Mode)"
    );
    for program in [
        "let v = []; for (let i = 0; i < 100000; i++) v = [v]; return v;",
        "let v = {}; for (let i = 0; i < 100000; i++) v = { a: v }; return { list: [v] };",
    ] {
        let started = Instant::now();
        let result = run(&registry, json!({"code": program, "timeout_ms": 20000})).await;
        assert_eq!(
            error_of(&result),
            json!({"kind": "not_json", "message": too_deep}),
            "{program}"
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{program}");
    }
    // Depth the host only sees by running the program's getters: the engine's own conversion
    // runs out of stack, and the message still names the limit.
    let program = "let v = 0; for (let i = 0; i < 100000; i++) { const inner = v; v = { get a() { return inner; } }; } return v;";
    let error = error_of(&run(&registry, json!({"code": program, "timeout_ms": 20000})).await);
    assert_eq!(error["kind"], json!("not_json"), "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{MAX_VALUE_DEPTH} levels")),
        "{message}"
    );
}

/// A value at the depth limit passes both ways, one level more is refused both ways, naming
/// the limit: as the program's returned value, as a nested call's arguments, and as a tool's
/// value handed to the program (at once and after a wait).
#[tokio::test]
async fn one_depth_limit_holds_for_values_into_and_out_of_the_program() {
    let returned_too_deep = format!(
        "the program returned a value nested more than {MAX_VALUE_DEPTH} levels deep (the limit for values in Code Mode)"
    );
    let arguments_too_deep = format!(
        "the arguments are not JSON: nested more than {MAX_VALUE_DEPTH} levels deep (the limit for values in Code Mode)"
    );
    let value_too_deep = format!(
        "the tool's value is nested more than {MAX_VALUE_DEPTH} levels deep (the limit for values in Code Mode)"
    );
    for levels in [MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1, 200] {
        let within = levels <= MAX_VALUE_DEPTH;
        let registry = registry(nested(levels));
        let make = nested_js(levels);

        // Out: the returned value.
        let result = run(&registry, json!({"code": format!("{make} return v;")})).await;
        let expected = if within {
            json!({"value": nested(levels), "error": null})
        } else {
            json!({"value": null, "error": {"kind": "not_json", "message": returned_too_deep}})
        };
        let got = value(&result);
        assert_eq!(
            json!({"value": got["value"], "error": got["error"]}),
            expected,
            "returned, {levels} levels"
        );

        // Out: a nested call's arguments.
        let program = format!(
            "{make} try {{ return await tools.same(v); }} catch (e) {{ return [e.code, e.message]; }}"
        );
        let got = value(&run(&registry, json!({"code": program})).await);
        if within {
            assert_eq!(got["value"], nested(levels), "arguments, {levels} levels");
            assert_eq!(got["calls"][0]["arguments"], nested(levels));
        } else {
            assert_eq!(
                got["value"],
                json!(["INVALID_ARGS", arguments_too_deep]),
                "arguments, {levels} levels"
            );
            assert_eq!(got["calls"], json!([]));
        }

        // In: a tool's value, handed over at once and after a wait.
        for wait in [false, true] {
            let program = format!(
                "try {{ return await tools.give({{ wait: {wait} }}); }} catch (e) {{ return [e.code, e.message]; }}"
            );
            let got = value(&run(&registry, json!({"code": program})).await);
            if within {
                assert_eq!(got["value"], nested(levels), "tool value, {levels} levels");
                assert_eq!(got["calls"][0]["value"], nested(levels));
            } else {
                assert_eq!(
                    got["value"],
                    json!(["INVALID_TOOL_OUTPUT", value_too_deep]),
                    "tool value, {levels} levels"
                );
                assert_eq!(
                    got["calls"],
                    json!([{
                        "tool": "give",
                        "arguments": {"wait": wait},
                        "ok": false,
                        "error": {"name": "ToolCallError", "toolName": "give", "code": "INVALID_TOOL_OUTPUT", "message": value_too_deep},
                    }])
                );
            }
            // What a run holds can be written and read back by serde_json (whose recursion
            // limit is 128) with room for the envelopes that carry it, a session log line's.
            let envelope = json!({"record": {"event": {"result": {"value": got}}}});
            let text = serde_json::to_string(&envelope).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), envelope);
        }
    }
}

#[tokio::test]
async fn a_program_that_replaces_json_and_the_prototypes_still_has_its_value_read() {
    let registry = registry(json!({"given": [1, {"x": true}]}));
    // Everything the host could have reached through the program's globals is replaced, then
    // nested calls settle (at once, after a wait, and failing) and the program returns.
    let program = r#"
const broken = () => { throw new Error("sabotaged"); };
JSON.stringify = broken;
JSON.parse = () => 5;
globalThis.JSON = { stringify: () => 7, parse: () => 7 };
Object.keys = broken;
Object.entries = broken;
Object.freeze = broken;
Object.create = broken;
for (const name of ["map", "forEach", "join", "push", "filter", "reduce"]) Array.prototype[name] = broken;
for (const name of ["get", "set", "has", "delete"]) Map.prototype[name] = broken;
for (const name of ["add", "has", "delete"]) Set.prototype[name] = broken;
Promise.prototype.then = broken;
Promise.resolve = broken;
Promise.reject = broken;
globalThis.String = broken;
globalThis.Error = broken;
Function.prototype.call = broken;
Function.prototype.apply = broken;
const atOnce = await tools.give({});
const later = await tools.give({ wait: true });
let failed;
try { await tools.fail({}); } catch (e) { failed = [e.name, e.code, e.message]; }
console.log("logged", { still: "readable" });
return { list: [1, "two", { three: 3 }], atOnce, later, failed };
"#;
    let got = value(&run(&registry, json!({"code": program})).await);
    assert_eq!(got["error"], Value::Null);
    assert_eq!(
        got["value"],
        json!({
            "list": [1, "two", {"three": 3}],
            "atOnce": {"given": [1, {"x": true}]},
            "later": {"given": [1, {"x": true}]},
            "failed": ["ToolCallError", "TOOL_ERROR", "no"],
        })
    );
    assert_eq!(got["logs"], json!([r#"logged {"still":"readable"}"#]));
}

#[tokio::test]
async fn a_returned_value_is_what_json_stringify_makes_of_it_or_a_not_json_error() {
    let registry = registry(json!({}));
    let cannot_encode = |why: &str| json!({"kind": "not_json", "message": format!("the program returned a value JSON cannot encode ({why})")});
    for (program, expected) in [
        (
            "return { get a() { return 1; }, b: { toJSON() { return 'B'; } }, c: new Proxy({ p: 1 }, {}) };",
            Ok(json!({"a": 1, "b": "B", "c": {"p": 1}})),
        ),
        (
            "return { get a() { throw new Error('no reading'); } };",
            Err(cannot_encode("no reading")),
        ),
        (
            "Object.prototype.toJSON = () => { throw new Error('never'); }; return { a: 1 };",
            Err(cannot_encode("never")),
        ),
        (
            "return new Proxy({}, { ownKeys() { throw new Error('trap'); } });",
            Err(cannot_encode("trap")),
        ),
        (
            "return { ok: 1, later: async () => 2 };",
            Err(
                json!({"kind": "not_json", "message": "the program returned a function at $.later, which is not JSON"}),
            ),
        ),
        (
            "const c = { list: [] }; c.list.push(c); return c;",
            Err(
                json!({"kind": "not_json", "message": "the program returned a cycle at $.list.0, which is not JSON"}),
            ),
        ),
        (
            "return [new Map()];",
            Err(
                json!({"kind": "not_json", "message": "the program returned a Map at $.0, which is not JSON"}),
            ),
        ),
        ("return;", Ok(Value::Null)),
    ] {
        let got = value(&run(&registry, json!({"code": program})).await);
        let outcome = match got["error"].clone() {
            Value::Null => Ok(got["value"].clone()),
            mut error => {
                error.as_object_mut().unwrap().remove("stack");
                Err(error)
            }
        };
        assert_eq!(outcome, expected, "{program}");
    }
}
