//! Values crossing between the program and its nested calls, converted directly instead of
//! through JSON text.
//!
//! A tool receives exactly what `JSON.parse(JSON.stringify(args))` would give, and the program
//! receives exactly what `JSON.parse` of the tool's value would give; only the text in between
//! is gone, which was most of what a nested call cost on the engine thread. Anything the direct
//! walk is not sure to convert as `JSON.stringify` would (a `toJSON` method, a boxed primitive, a
//! class instance, a proxy, a function or symbol to leave out, a very deep value) is handed to
//! `JSON.stringify` itself, so the meaning never depends on which way a value went.

use rquickjs::atom::PredefinedAtom;
use rquickjs::convert::FromAtom;
use rquickjs::object::Property;
use rquickjs::{Array, Atom, Ctx, Object, Type, Value};
use serde_json::{Map, Number};

/// How deep the direct walk goes before it hands the value to `JSON.stringify` (which also
/// finds cycles).
const MAX_DEPTH: usize = 64;

/// The largest integer a double holds exactly (2^53): `JSON.stringify` prints any integral
/// number up to it as the same plain digits.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The JSON value `JSON.parse(JSON.stringify(value))` would give, or why there is none (the
/// message of what `JSON.stringify` threw, a BigInt or a cycle, or that it gave nothing, for a
/// function, a symbol or `undefined`). A thrown exception is cleared.
pub(crate) fn to_json<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> Result<serde_json::Value, String> {
    let text = match walk(&value, 0) {
        Ok(Some(json)) => return Ok(json),
        Ok(None) => ctx.json_stringify(value),
        // A getter threw on the way; JSON.stringify would have thrown the same.
        Err(error) => Err(error),
    };
    match text {
        Ok(Some(text)) => {
            let text = text.to_string().map_err(|e| e.to_string())?;
            // JSON.stringify writes a lone surrogate as an escape serde_json does not take.
            serde_json::from_str(&text).map_err(|e| e.to_string())
        }
        Ok(None) => Err(String::from(
            "JSON has nothing for them (a function, a symbol or undefined)",
        )),
        Err(rquickjs::Error::Exception) => Err(thrown(ctx)),
        Err(error) => Err(error.to_string()),
    }
}

/// The message of the exception pending in `ctx`, which is cleared.
fn thrown(ctx: &Ctx<'_>) -> String {
    let exception = ctx.catch();
    match exception.as_exception() {
        Some(error) => error.message().unwrap_or_default(),
        None => String::from("a value was thrown"),
    }
}

/// The direct conversion: `Ok(None)` when the value needs `JSON.stringify`.
fn walk(value: &Value<'_>, depth: usize) -> rquickjs::Result<Option<serde_json::Value>> {
    Ok(Some(match value.type_of() {
        Type::Null => serde_json::Value::Null,
        Type::Bool => serde_json::Value::Bool(value.as_bool().unwrap_or_default()),
        Type::Int => serde_json::Value::from(value.as_int().unwrap_or_default()),
        Type::Float => number(value.as_float().unwrap_or(f64::NAN)),
        Type::String => match value.as_string().map(rquickjs::String::to_string) {
            Some(Ok(text)) => serde_json::Value::String(text),
            _ => return Ok(None),
        },
        Type::Array if depth < MAX_DEPTH => {
            let Some(object) = value.as_object() else {
                return Ok(None);
            };
            if has_to_json(object)? {
                return Ok(None);
            }
            let length: Value<'_> = object.get(PredefinedAtom::Length)?;
            let Some(length) = length.as_int().and_then(|n| usize::try_from(n).ok()) else {
                return Ok(None);
            };
            let Some(array) = value.as_array() else {
                return Ok(None);
            };
            let mut items = Vec::with_capacity(length);
            for index in 0..length {
                let item: Value<'_> = array.get(index)?;
                // In an array, what JSON cannot hold becomes null.
                if item.is_undefined() {
                    items.push(serde_json::Value::Null);
                    continue;
                }
                match walk(&item, depth + 1)? {
                    Some(json) => items.push(json),
                    None => return Ok(None),
                }
            }
            serde_json::Value::Array(items)
        }
        Type::Object if depth < MAX_DEPTH => {
            let Some(object) = value.as_object() else {
                return Ok(None);
            };
            if !plain(object) || has_to_json(object)? {
                return Ok(None);
            }
            let mut map = Map::new();
            for entry in object.props::<Key, Value<'_>>() {
                let (Key(key), item) = entry?;
                // In an object, what JSON cannot hold is left out.
                if item.is_undefined() {
                    continue;
                }
                match walk(&item, depth + 1)? {
                    Some(json) => map.insert(key, json),
                    None => return Ok(None),
                };
            }
            serde_json::Value::Object(map)
        }
        _ => return Ok(None),
    }))
}

/// An object made by a literal or `Object.create(null)` and the like: its prototype is
/// `Object.prototype` or nothing, so `JSON.stringify` writes its own enumerable properties.
/// A class instance, a boxed primitive, a `Map`, an error and every other kind has a prototype
/// with a prototype of its own.
fn plain(object: &Object<'_>) -> bool {
    object
        .get_prototype()
        .is_none_or(|prototype| prototype.get_prototype().is_none())
}

fn has_to_json(object: &Object<'_>) -> rquickjs::Result<bool> {
    let method: Value<'_> = object.get(PredefinedAtom::ToJSON)?;
    Ok(!method.is_undefined())
}

/// A property key as a Rust string; a key that is not valid UTF-8 (a lone surrogate) is
/// written by `JSON.stringify` as an escape, so such an object is left to it.
struct Key(String);

impl<'js> FromAtom<'js> for Key {
    fn from_atom(atom: Atom<'js>) -> rquickjs::Result<Key> {
        atom.to_string().map(Key)
    }
}

/// A number as `JSON.parse(JSON.stringify(n))` gives it: not finite is null, an integral
/// number is an integer as long as JSON text of it would be read as one.
fn number(n: f64) -> serde_json::Value {
    if !n.is_finite() {
        return serde_json::Value::Null;
    }
    if n.fract() == 0.0 {
        if n.abs() <= EXACT_INTEGER {
            // Exact: |n| ≤ 2^53, and -0 is written as 0.
            #[allow(clippy::cast_possible_truncation)]
            return serde_json::Value::from(n as i64);
        }
        // Printed as its shortest digits, padded with zeros, and read back the same way.
        if let Ok(number) = n.to_string().parse::<Number>() {
            return serde_json::Value::Number(number);
        }
    }
    Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// The JavaScript value `JSON.parse` would make of `json`'s text: plain objects and arrays
/// whose properties are all defined as data properties, whatever setters the program put on
/// the prototypes.
pub(crate) fn to_js<'js>(ctx: &Ctx<'js>, json: &serde_json::Value) -> rquickjs::Result<Value<'js>> {
    build(ctx, json, 0)
}

/// How deep a value handed to the program may be; the engine's own `JSON.parse` stops at its
/// stack limit, this walk before the thread's.
const MAX_BUILD_DEPTH: usize = 1000;

fn build<'js>(
    ctx: &Ctx<'js>,
    json: &serde_json::Value,
    depth: usize,
) -> rquickjs::Result<Value<'js>> {
    if depth > MAX_BUILD_DEPTH {
        return Err(rquickjs::Error::new_into_js_message(
            "value",
            "JSON",
            format!("nested more than {MAX_BUILD_DEPTH} levels deep"),
        ));
    }
    Ok(match json {
        serde_json::Value::Null => Value::new_null(ctx.clone()),
        serde_json::Value::Bool(b) => Value::new_bool(ctx.clone(), *b),
        serde_json::Value::Number(n) => match n.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(small) => Value::new_int(ctx.clone(), small),
            // Every JSON number has a nearest double, as JSON.parse reads it.
            None => Value::new_number(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(text) => {
            rquickjs::String::from_str(ctx.clone(), text)?.into_value()
        }
        serde_json::Value::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (index, item) in items.iter().enumerate() {
                array
                    .as_object()
                    .prop(array_index(index)?, data(build(ctx, item, depth + 1)?))?;
            }
            array.into_value()
        }
        serde_json::Value::Object(map) => {
            let object = Object::new(ctx.clone())?;
            for (key, item) in map {
                object.prop(key.as_str(), data(build(ctx, item, depth + 1)?))?;
            }
            object.into_value()
        }
    })
}

fn array_index(index: usize) -> rquickjs::Result<u32> {
    u32::try_from(index).map_err(|_| {
        rquickjs::Error::new_into_js_message("array", "Array", "longer than an array can be")
    })
}

/// A writable, enumerable, configurable data property, as `JSON.parse` defines them.
fn data(value: Value<'_>) -> Property<Value<'_>> {
    Property::from(value).writable().enumerable().configurable()
}
