//! Values crossing between a program and its tools: arguments arrive as `JSON.stringify` and
//! `JSON.parse` would leave them, arguments JSON cannot hold reject the call unmade, and a
//! tool's value reaches the program as `JSON.parse` would make it.

use super::{run, value};
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::time::Duration;
use tool_code::{CodeModeLimits, register_run_code};

/// A registry with `run_code`, an `echo` tool that answers at once, and a `give` tool that
/// returns `value` (after a wait when its arguments ask for one).
fn registry_with_echo_and_give(value: Value) -> ToolRegistry {
    registry_with_echo_and_give_limited(value, CodeModeLimits::default())
}

/// [`registry_with_echo_and_give`] with `run_code`'s limits set.
fn registry_with_echo_and_give_limited(value: Value, limits: CodeModeLimits) -> ToolRegistry {
    use dsh_tools::{ToolDefinition, ToolOutput, ValueSchema};
    let registry = ToolRegistry::new();
    let no_cards = || ToolOutput::new(ValueSchema::open_object(), |_, _| Vec::new());
    registry
        .register(
            ToolDefinition::builder("echo", "Answer with the arguments.")
                .output(no_cards())
                .execute(|args, _| async move { Ok(json!({"got": *args})) })
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("give", "Answer with a fixed value.")
                .output(no_cards())
                .execute(move |args, _| {
                    let value = value.clone();
                    async move {
                        if args["wait"] == json!(true) {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Ok(value)
                    }
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    register_run_code(&registry, limits).unwrap();
    registry
}

#[tokio::test]
async fn arguments_reach_the_tool_as_json_stringify_and_parse_would_leave_them() {
    let registry = registry_with_echo_and_give(json!({}));
    // Every kind of value a program can pass, from the plain ones to those JSON.stringify
    // treats specially; the program returns what JSON.stringify and JSON.parse make of each.
    let program = r#"
class Point { constructor() { this.x = 1; this.y = 2; } }
let deep = { leaf: true };
for (let i = 0; i < 80; i++) deep = { next: deep, list: [i] };
const cases = [
  { a: 1, b: [1, 2.5, -3, -0, 0.1, 1e21, 2 ** 53, 2 ** 53 + 2, 2 ** 60, -(2 ** 63), NaN, Infinity, -Infinity] },
  { a: 1, b: [1, 2.5, -3, -0, 0.1, 2 ** 31, 2 ** 53 - 1, -(2 ** 53 - 1), 5e-324, NaN, -Infinity] },
  { text: "é😀\u0000\n\"", empty: "", key: { "": 1, "with space": 2, "a\u0000b": 3 } },
  { u: undefined, f: () => 1, s: Symbol("x"), keep: true },
  [undefined, () => 1, Symbol("y"), 4],
  new Point(),
  Object.assign(Object.create(null), { n: null }),
  Object.create(Object.assign(Object.create(null), { inherited: 1 })),
  { when: { toJSON: () => "then" }, day: { toJSON(key) { return "key " + key; } } },
  Object.create(Object.assign(Object.create(null), { toJSON: () => "inherited" })),
  { boxed: [new Number(3), new String("s"), new Boolean(false)] },
  { map: new Map([[1, 2]]), set: new Set([1]), bytes: new Uint8Array([1, 2]), error: new Error("e") },
  JSON.parse('{"__proto__": {"x": 1}, "b": 2}'),
  Object.defineProperty({ shown: 1 }, "hidden", { value: 1, enumerable: false }),
  { [Symbol("k")]: 1, shown: 2 },
  { get computed() { return 7; } },
  Object.assign([1, 2], { extra: 3 }),
  [, 1, , 2],
  { 2: "b", 1: "a", z: 0, 10: "c" },
  new Proxy({ p: 1 }, {}),
  new Proxy([1, 2], {}),
  Object.create(new Proxy({ p: 1 }, {})),
  Object.setPrototypeOf(new Boolean(true), null),
  { raw: JSON.rawJSON('"text"') },
  deep,
  null, 5, -7.25, "text", true, [],
];
for (const c of cases) await tools.echo(c).catch(() => null);
return cases.map((c) => JSON.parse(JSON.stringify(c)));
"#;
    let value = value(&run(&registry, json!({"code": program})).await);
    assert_eq!(value["error"], Value::Null);
    let expected = value["value"].as_array().unwrap();
    let calls = value["calls"].as_array().unwrap();
    assert_eq!(calls.len(), expected.len());
    for (call, expected) in calls.iter().zip(expected) {
        assert_eq!(&call["arguments"], expected);
    }
    // Spot checks of what the cases mean, in case JSON.stringify itself changed.
    assert_eq!(calls[0]["arguments"]["b"][3], json!(0));
    assert_eq!(
        calls[0]["arguments"]["b"][8],
        json!(1_152_921_504_606_847_000_u64)
    );
    assert_eq!(calls[3]["arguments"], json!({"keep": true}));
    assert_eq!(calls[4]["arguments"], json!([null, null, null, 4]));
    assert_eq!(
        calls[8]["arguments"],
        json!({"when": "then", "day": "key day"})
    );
    assert_eq!(calls[9]["arguments"], json!("inherited"));
    assert_eq!(calls[10]["arguments"], json!({"boxed": [3, "s", false]}));
    assert_eq!(
        calls[12]["arguments"],
        json!({"__proto__": {"x": 1}, "b": 2})
    );
    assert_eq!(calls[17]["arguments"], json!([null, 1, null, 2]));
    assert_eq!(calls[1]["arguments"]["b"][3], json!(0));
    assert_eq!(
        calls[1]["arguments"]["b"][6],
        json!(9_007_199_254_740_991_u64)
    );
    assert_eq!(calls[2]["arguments"]["key"]["a\u{0}b"], json!(3));
    assert_eq!(calls[22]["arguments"], json!(true));
    assert_eq!(calls[23]["arguments"], json!({"raw": "text"}));
}

#[tokio::test]
async fn the_programs_getters_and_to_json_run_once_per_call_as_json_stringify_runs_them() {
    let registry = registry_with_echo_and_give(json!({}));
    // Each looks plain at first sight; JSON.stringify runs the program's code for each, once.
    let program = r#"
let runs = 0;
const run = (value) => { runs += 1; return value; };
const cases = [
  () => ({ plain: 1, get counted() { return run("got"); } }),
  () => ({ list: [{ inner: Object.defineProperty({}, "g", { get: () => run(2), enumerable: true }) }] }),
  () => {
    // Index 5: JSON.stringify in QuickJS keeps its own stack in an array, at the low indices.
    Object.defineProperty(Array.prototype, 5, { get: () => run("from the prototype"), configurable: true });
    return { list: [0, 1, 2, 3, 4, , 6] };
  },
  () => {
    Array.prototype.toJSON = function () { return run("every array"); };
    return { list: [1] };
  },
  () => new Proxy({ p: 1 }, { get: (target, key) => (key === "toJSON" ? undefined : run(target[key])) }),
];
const seen = [];
for (const make of cases) {
  const args = make();
  const before = runs;
  const answer = await tools.echo(args);
  delete Array.prototype[5];
  delete Array.prototype.toJSON;
  seen.push([runs - before, answer.got]);
}
return seen;
"#;
    let value = value(&run(&registry, json!({"code": program})).await);
    assert_eq!(value["error"], Value::Null);
    assert_eq!(
        value["value"],
        json!([
            [1, {"plain": 1, "counted": "got"}],
            [1, {"list": [{"inner": {"g": 2}}]}],
            [1, {"list": [0, 1, 2, 3, 4, "from the prototype", 6]}],
            [1, {"list": "every array"}],
            [1, {"p": 1}],
        ])
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_reject_the_call_without_making_it() {
    let registry = registry_with_echo_and_give(json!({}));
    let program = r#"
const cyclic = { name: "loop" };
cyclic.self = cyclic;
const failures = [];
const lone = [{ text: "\ud800" }, { ["\udc00"]: 1 }];
for (const args of [{ n: 1n }, cyclic, () => 1, { get bad() { throw new Error("no getting"); } }, ...lone]) {
  try {
    await tools.echo(args);
    failures.push("made");
  } catch (error) {
    failures.push([error instanceof ToolCallError, error.toolName, error.code, error.message]);
  }
}
await tools.echo();
return failures;
"#;
    let value = value(&run(&registry, json!({"code": program})).await);
    let failures = value["value"].as_array().unwrap();
    assert_eq!(failures.len(), 6);
    for failure in failures {
        assert_eq!(
            failure.as_array().unwrap()[0..3],
            [json!(true), json!("echo"), json!("INVALID_ARGS")]
        );
        let message = failure[3].as_str().unwrap();
        assert!(
            message.starts_with("the arguments are not JSON: "),
            "{message}"
        );
    }
    assert!(failures[2][3].as_str().unwrap().contains("nothing"));
    assert!(failures[3][3].as_str().unwrap().ends_with("no getting"));
    // None of them was made; no arguments are `{}`.
    assert_eq!(
        value["calls"],
        json!([{"tool": "echo", "arguments": {}, "ok": true, "value": {"got": {}}}])
    );
}

#[tokio::test]
async fn values_reach_the_program_as_json_parse_would_make_them() {
    let given = json!({
        "__proto__": {"polluted": true},
        "trap": 1,
        "big": u64::MAX,
        "negative": -9_007_199_254_740_993_i64,
        "wide": 2_147_483_648_u64,
        "fraction": 0.1,
        "text": "é😀",
        "nested": [[{"a": null, "b": false}]],
        "0": "index-like",
        "negative_zero": -0.0,
    });
    let registry = registry_with_echo_and_give(given.clone());
    // A setter on Object.prototype must not see the value's properties (JSON.parse defines
    // them), and `__proto__` is an own property, not the prototype.
    let program = r#"
let trapped = false;
Object.defineProperty(Object.prototype, "trap", { set(v) { trapped = true; }, configurable: true });
const check = (v) => [
  Object.prototype.hasOwnProperty.call(v, "__proto__"),
  Object.getPrototypeOf(v) === Object.prototype,
  ({}).polluted === undefined && v.polluted === undefined,
  Object.prototype.hasOwnProperty.call(v, "trap") && v.trap === 1,
  v.big === 18446744073709551615 && v.negative === -9007199254740992 && v.wide === 2147483648,
  Array.isArray(v.nested[0]) && v.nested[0][0].a === null && v.text === "é😀" && v["0"] === "index-like",
  Object.is(v.negative_zero, -0),
];
const atOnce = await tools.give({});
const later = await tools.give({ wait: true });
delete Object.prototype.trap;
return { atOnce: check(atOnce), later: check(later), trapped, fraction: atOnce.fraction + later.fraction };
"#;
    let value = value(&run(&registry, json!({"code": program})).await);
    let all_true = json!([true, true, true, true, true, true, true]);
    assert_eq!(value["value"]["atOnce"], all_true);
    assert_eq!(value["value"]["later"], all_true);
    assert_eq!(value["value"]["trapped"], json!(false));
    assert_eq!(value["value"]["fraction"], json!(0.2));
    assert_eq!(value["calls"][0]["value"], given);
}

/// Converting arguments runs the program's own code (`toJSON`, getters) and can take the whole
/// engine's memory: the time limit and the memory limit must end the run there as anywhere
/// else, not become a refused call the program catches and goes on from.
#[tokio::test]
async fn the_limits_end_a_run_inside_the_conversion_of_arguments() {
    let registry = registry_with_echo_and_give(json!({}));
    // The interrupt lands in `toJSON`'s loop; if it were swallowed as a refused call, the next
    // turn of the outer loop would log.
    let spinning = r#"
for (let turn = 0; ; turn++) {
  if (turn > 0) console.log("went on after an interrupt");
  tools.echo({ toJSON() { for (;;) {} } }).catch(() => {});
}
"#;
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        run(&registry, json!({"code": spinning, "timeout_ms": 300})),
    )
    .await
    .expect("the time limit ended the run");
    assert_eq!(value(&result)["logs"], json!([]));
    assert_eq!(value(&result)["error"]["kind"], json!("time_limit"));

    let doubling = r#"
let shared = [0];
for (let i = 0; i < 40; i++) shared = [shared, shared];
try {
  await tools.echo({ shared });
} catch (error) {
  return "caught: " + error.message;
}
"#;
    let mut small = CodeModeLimits::default();
    small.memory_bytes = 4 * 1024 * 1024;
    let registry = registry_with_echo_and_give_limited(json!({}), small);
    let result = run(&registry, json!({"code": doubling})).await;
    assert_eq!(value(&result)["error"]["kind"], json!("memory_limit"));
    assert_eq!(value(&result)["calls"], json!([]));
}
