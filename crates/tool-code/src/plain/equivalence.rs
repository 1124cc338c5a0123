//! The property that earns the plain read its `unsafe`: over generated JavaScript values, what
//! [`read`] makes of a value is exactly what the engine's own `JSON.stringify`, read back by
//! serde_json, makes of it (the path [`crate::convert`] takes when the read declines), and
//! plain data is never declined.
//!
//! A value is generated as a tree, written out as JavaScript source and evaluated, so the
//! engine builds it the way a program would: nested objects and arrays, strings with escapes,
//! NULs and lone surrogates, keys that look like indices, `__proto__` keys (the prototype,
//! then own properties of that name), repeated keys,
//! every kind of number (−0, NaN, the infinities, the largest exact integers and just past
//! them, subnormals, huge exponents), `undefined` and symbols as members, holes, and a few
//! values that are not plain data (getters, `toJSON`, boxed primitives, dates, maps, BigInts).

use super::{PlainClasses, read};
use proptest::prelude::*;
use rquickjs::{Context, Ctx, Runtime, Value};
use std::fmt::Write as _;

/// A JavaScript value, as source text will make it.
#[derive(Clone, Debug)]
enum Js {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    /// UTF-16 code units, any of them (a lone surrogate among them).
    String(Vec<u16>),
    Symbol,
    Array(Vec<Item>),
    Object(Vec<(Vec<u16>, Js)>),
    /// Something JSON reads by its own rules, which the plain read must leave to the engine.
    Special(&'static str),
}

/// An array slot: a value or a hole (`[, 1]`).
#[derive(Clone, Debug)]
enum Item {
    Value(Js),
    Hole,
}

/// Values `JSON.stringify` treats by rules of its own (and the program could have written).
const SPECIALS: &[&str] = &[
    "{ get g() { return 1; } }",
    "{ toJSON() { return [1]; } }",
    "new Number(3)",
    "new String(\"s\")",
    "new Boolean(false)",
    "new Date(0)",
    "new Map([[1, 2]])",
    "Object.create({ toJSON() { return 2; } })",
    "new Proxy({ p: 1 }, {})",
    "1n",
    "() => 1",
    "JSON.rawJSON(\"12345678901234567890\")",
];

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<i32>().prop_map(f64::from),
        any::<f64>(),
        (-(1i64 << 54)..(1i64 << 54)).prop_map(|n| n as f64),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9_007_199_254_740_991.0,
            -9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            2f64.powi(31),
            -(2f64.powi(31)) - 1.0,
            4_503_599_627_370_496.5,
            0.1,
            1e-7,
            1e21,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
        ]),
    ]
}

fn units() -> impl Strategy<Value = Vec<u16>> {
    let unit = prop_oneof![
        4 => 0x20u16..0x7f,
        1 => prop::sample::select(vec![0u16, 0x08, 0x09, 0x0a, 0x0d, 0x1f, 0x22, 0x5c, 0x7f, 0x2028]),
        1 => 0x80u16..0xd800,
        1 => 0xd800u16..0xe000,
        1 => 0xe000u16..=0xffff,
    ];
    // A well-formed pair now and then, beside the lone surrogates above.
    let piece = prop_oneof![
        6 => unit.prop_map(|u| vec![u]),
        1 => (0xd800u16..0xdc00, 0xdc00u16..0xe000).prop_map(|(h, l)| vec![h, l]),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

fn key() -> impl Strategy<Value = Vec<u16>> {
    prop_oneof![
        4 => units(),
        2 => (0u32..20).prop_map(|n| n.to_string().encode_utf16().collect()),
        1 => prop::sample::select(vec!["__proto__", "toString", "length", "4294967295", "-1", "01"])
            .prop_map(|k| k.encode_utf16().collect()),
    ]
}

fn js() -> impl Strategy<Value = Js> {
    let leaf = prop_oneof![
        1 => Just(Js::Undefined),
        1 => Just(Js::Null),
        1 => any::<bool>().prop_map(Js::Bool),
        4 => number().prop_map(Js::Number),
        4 => units().prop_map(Js::String),
        1 => Just(Js::Symbol),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let item = prop_oneof![
            8 => inner.clone().prop_map(Item::Value),
            1 => Just(Item::Hole),
        ];
        prop_oneof![
            3 => prop::collection::vec(item, 0..6).prop_map(Js::Array),
            3 => prop::collection::vec((key(), inner), 0..6).prop_map(Js::Object),
            1 => prop::sample::select(SPECIALS).prop_map(Js::Special),
        ]
    })
}

impl Js {
    /// The value as JavaScript source.
    fn source(&self, out: &mut String) {
        match self {
            Js::Undefined => out.push_str("undefined"),
            Js::Null => out.push_str("null"),
            Js::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Js::Number(n) if n.is_nan() => out.push_str("NaN"),
            Js::Number(n) if n.is_infinite() => {
                out.push_str(if *n > 0.0 { "Infinity" } else { "-Infinity" });
            }
            // Rust prints the shortest text that reads back as the same double; `-0.0` keeps
            // its sign.
            Js::Number(n) => write!(out, "({n:?})").unwrap_or_default(),
            Js::String(units) => string(units, out),
            Js::Symbol => out.push_str("Symbol(\"s\")"),
            Js::Array(items) => {
                out.push('[');
                for item in items {
                    if let Item::Value(value) = item {
                        value.source(out);
                    }
                    out.push(',');
                }
                out.push(']');
            }
            Js::Object(entries) => {
                out.push('{');
                let proto: Vec<u16> = "__proto__".encode_utf16().collect();
                let mut proto_set = false;
                for (key, value) in entries {
                    // A literal may set the prototype once (twice is a syntax error); after
                    // that, `["__proto__"]` makes an own property of that name.
                    if *key == proto && std::mem::replace(&mut proto_set, true) {
                        out.push('[');
                        string(key, out);
                        out.push(']');
                    } else {
                        string(key, out);
                    }
                    out.push(':');
                    value.source(out);
                    out.push(',');
                }
                out.push('}');
            }
            Js::Special(source) => write!(out, "({source})").unwrap_or_default(),
        }
    }

    /// Whether the value is plain data the read must take: no hole, special value, string
    /// with a lone surrogate, or integral number beyond the exact doubles anywhere in it.
    fn is_plain(&self) -> bool {
        match self {
            Js::Undefined | Js::Null | Js::Bool(_) | Js::Symbol => true,
            Js::Number(n) => !n.is_finite() || n.fract() != 0.0 || n.abs() < 2f64.powi(53),
            Js::String(units) => well_formed(units),
            Js::Array(items) => items.iter().all(|item| match item {
                Item::Value(value) => value.is_plain(),
                Item::Hole => false,
            }),
            // A `__proto__` key sets the prototype, to an object or array the read looks
            // through (plain when it is), or, for a primitive, does nothing.
            Js::Object(entries) => entries
                .iter()
                .all(|(key, value)| well_formed(key) && value.is_plain()),
            Js::Special(_) => false,
        }
    }
}

fn well_formed(units: &[u16]) -> bool {
    char::decode_utf16(units.iter().copied()).all(|c| c.is_ok())
}

/// A string literal holding exactly `units`, each written as a `\u` escape or as itself.
fn string(units: &[u16], out: &mut String) {
    out.push('"');
    for &unit in units {
        match unit {
            0x20..=0x7e if unit != u16::from(b'"') && unit != u16::from(b'\\') => {
                out.push(char::from(unit as u8));
            }
            0x0a => out.push_str("\\n"),
            0x22 => out.push_str("\\\""),
            0x5c => out.push_str("\\\\"),
            _ => write!(out, "\\u{unit:04x}").unwrap_or_default(),
        }
    }
    out.push('"');
}

/// What the engine's `JSON.stringify`, read by serde_json, makes of `value`: `None` when it
/// gives nothing, throws, or writes text serde_json refuses (an escaped lone surrogate).
fn stringified<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> Option<serde_json::Value> {
    let text = match ctx.json_stringify(value.clone()) {
        Ok(text) => text?.to_string().ok()?,
        Err(_) => {
            drop(ctx.catch());
            return None;
        }
    };
    serde_json::from_str(&text).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_plain_read_equals_the_engines_json_stringify(value in js()) {
        let mut source = String::from("(");
        value.source(&mut source);
        source.push(')');
        let runtime = Runtime::new().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let context = Context::full(&runtime).map_err(|e| TestCaseError::fail(e.to_string()))?;
        context.with(|ctx| {
            let classes = PlainClasses::of(&ctx).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let evaluated: Value<'_> = ctx
                .eval(source.as_str())
                .map_err(|e| TestCaseError::fail(format!("{source}: {e}")))?;
            let plain = read(&ctx, classes, &evaluated)
                .map_err(|e| TestCaseError::fail(format!("{source}: {e}")))?;
            prop_assert!(!ctx.has_exception(), "{}", source);
            let engine = stringified(&ctx, &evaluated);
            match plain {
                Some(json) => prop_assert_eq!(Some(json), engine, "{}", source),
                // `undefined` and a symbol alone have no JSON: nothing to read.
                None => prop_assert!(
                    !value.is_plain() || matches!(value, Js::Undefined | Js::Symbol),
                    "plain data declined: {}",
                    source
                ),
            }
            Ok(())
        })?;
    }
}

#[test]
fn the_generated_source_means_what_the_tree_says() {
    let mut source = String::new();
    let value = Js::Array(vec![
        Item::Value(Js::Number(-0.0)),
        Item::Hole,
        Item::Value(Js::String(vec![0x22, 0x5c, 0x0a, 0xd800, 0x41])),
        Item::Value(Js::Object(vec![(vec![0x31], Js::Number(f64::NAN))])),
    ]);
    value.source(&mut source);
    assert_eq!(source, r#"[(-0.0),,"\"\\\n\ud800A",{"1":NaN,},]"#);
    let runtime = Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let context = Context::full(&runtime).unwrap_or_else(|e| panic!("{e}"));
    context.with(|ctx| {
        let length: i32 = ctx
            .eval(format!("({source}).length"))
            .unwrap_or_else(|e| panic!("{e}"));
        let negative_zero: bool = ctx
            .eval(format!("Object.is(({source})[0], -0)"))
            .unwrap_or_else(|e| panic!("{e}"));
        let units: i32 = ctx
            .eval(format!("({source})[2].length"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((length, negative_zero, units), (4, true, 5));
    });
}
