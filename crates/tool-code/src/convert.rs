//! Values crossing between the program and its nested calls.
//!
//! A tool receives exactly what `JSON.parse(JSON.stringify(args))` would give. Plain data (most
//! arguments) is read straight from the engine's objects ([`crate::plain`]); anything else goes
//! through the engine's own `JSON.stringify`, which honours every rule of JSON's (`toJSON`,
//! getters, boxed primitives, what is left out) and counts against the engine's memory limit,
//! and the text is read by serde_json. The way back needs no text: a tool's value is built as
//! the objects `JSON.parse` would make.

use crate::plain::{self, PlainClasses};
use rquickjs::object::Property;
use rquickjs::{Array, Ctx, Object, Value};

/// Why a call's arguments were not turned into JSON.
#[derive(Debug)]
pub(crate) enum NotJson {
    /// JSON cannot hold them, for this reason (a BigInt, a cycle, a getter or `toJSON` that
    /// threw, a bare function): the call is refused and the program can catch that.
    Refused(String),
    /// The engine was interrupted (the time limit or cancellation) while it converted them:
    /// the exception is thrown again, and the run ends as it would anywhere in the program.
    Stopping(rquickjs::Error),
    /// The engine's memory ran out while it converted them: the exception is thrown again, and
    /// the run must end at the memory limit.
    OutOfMemory(rquickjs::Error),
}

/// The JSON value `JSON.parse(JSON.stringify(value))` would give.
pub(crate) fn to_json<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    value: Value<'js>,
) -> Result<serde_json::Value, NotJson> {
    match plain::read(ctx, classes, &value) {
        Ok(Some(json)) => return Ok(json),
        Ok(None) => {}
        // The read failed inside the engine (out of memory). It runs no JavaScript, so the
        // error is no interrupt: it is cleared, and `JSON.stringify` decides, as it would have
        // without the read.
        Err(_) => drop(ctx.catch()),
    }
    let text = match ctx.json_stringify(value) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(NotJson::Refused(String::from(
                "JSON has nothing for them (a function, a symbol or undefined)",
            )));
        }
        Err(error) => return Err(triage(ctx, error)),
    };
    let text = text.to_string().map_err(|error| triage(ctx, error))?;
    // JSON.stringify escapes a lone surrogate, which serde_json does not take.
    serde_json::from_str(&text).map_err(|e| NotJson::Refused(e.to_string()))
}

/// Sorts an engine error met while converting: what `JSON.stringify` threw for the value is a
/// refusal (the exception is cleared); an interrupt, running out of memory, or a failure of
/// the engine itself goes on.
fn triage<'js>(ctx: &Ctx<'js>, error: rquickjs::Error) -> NotJson {
    if !ctx.has_exception() {
        return NotJson::Stopping(error);
    }
    let thrown = ctx.catch();
    if thrown.is_uncatchable_error() {
        return NotJson::Stopping(ctx.throw(thrown));
    }
    if is_out_of_memory(&thrown) {
        return NotJson::OutOfMemory(ctx.throw(thrown));
    }
    let reason = match thrown.as_exception() {
        Some(exception) => exception.message().unwrap_or_default(),
        None => String::from("a value that is not an Error was thrown"),
    };
    NotJson::Refused(reason)
}

/// The engine's out-of-memory error.
fn is_out_of_memory(thrown: &Value<'_>) -> bool {
    thrown
        .as_exception()
        .and_then(|exception| exception.message())
        .is_some_and(|message| says_out_of_memory(&message))
}

/// Whether an engine error's message is QuickJS's for running out of memory (a failed
/// allocation, or the memory limit reached).
pub(crate) fn says_out_of_memory(message: &str) -> bool {
    message.contains("out of memory") || message.contains("Allocation")
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
            // Every JSON number has a nearest double, as JSON.parse reads it; a float stays a
            // float, so -0 keeps its sign.
            None => Value::new_float(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
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
