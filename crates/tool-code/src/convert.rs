//! Values crossing between the program and the host.
//!
//! A tool receives exactly what `JSON.parse(JSON.stringify(args))` would give, and the host
//! receives the program's returned value the same way. Plain data (most values) is read
//! straight from the engine's objects ([`crate::plain`]); anything else goes through the
//! engine's own `JSON.stringify`, called through its C interface, never through the program's
//! `JSON` global (which the program may have replaced): it honours every rule of JSON's
//! (`toJSON`, getters, boxed primitives, what is left out) and counts against the engine's
//! memory limit, and the text is read by serde_json. The way back needs no text: a tool's value
//! is built as the objects `JSON.parse` would make.
//!
//! Both ways a value may nest at most [`MAX_VALUE_DEPTH`] levels ([`crate::shape`]).

use crate::MAX_VALUE_DEPTH;
use crate::plain::{self, PlainClasses};
use crate::shape::{self, Finding, Rules};
use rquickjs::object::Property;
use rquickjs::{Array, Ctx, Object, Value};

/// Why a value was not turned into JSON.
#[derive(Debug)]
pub(crate) enum NotJson {
    /// JSON cannot hold it, for this reason (a BigInt, a cycle, a getter or `toJSON` that
    /// threw, a bare function): a call is refused and the program can catch that.
    Refused(String),
    /// It nests more than [`MAX_VALUE_DEPTH`] levels.
    TooDeep,
    /// A returned value holds something JSON cannot (`what`, at `path`).
    Holds { what: &'static str, path: String },
    /// The engine was interrupted (the time limit or cancellation) while it converted them:
    /// the exception is thrown again, and the run ends as it would anywhere in the program.
    Stopping(rquickjs::Error),
    /// The engine's memory ran out while it converted them: the exception is thrown again, and
    /// the run must end at the memory limit.
    OutOfMemory(rquickjs::Error),
}

/// The JSON value `JSON.parse(JSON.stringify(args))` would give a tool.
pub(crate) fn arguments_to_json<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    args: Value<'js>,
) -> Result<serde_json::Value, NotJson> {
    if let Some(json) = plain_read(ctx, classes, &args) {
        return Ok(json);
    }
    looked(ctx, classes, &args, Rules::Arguments)?;
    stringified(ctx, args)
}

/// The program's returned value as JSON: what `JSON.parse(JSON.stringify(value))` would give
/// (`null` for `undefined`), refused when anything in it is not JSON.
pub(crate) fn returned_to_json<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    value: Value<'js>,
) -> Result<serde_json::Value, NotJson> {
    if value.is_undefined() {
        return Ok(serde_json::Value::Null);
    }
    looked(ctx, classes, &value, Rules::Returned)?;
    if let Some(json) = plain_read(ctx, classes, &value) {
        return Ok(json);
    }
    stringified(ctx, value)
}

/// What a plain read makes of `value`, if it is plain data.
fn plain_read<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    value: &Value<'js>,
) -> Option<serde_json::Value> {
    match plain::read(ctx, classes, value) {
        Ok(json) => json,
        // The read failed inside the engine (out of memory). It runs no JavaScript, so the
        // error is no interrupt: it is cleared, and `JSON.stringify` decides, as it would have
        // without the read.
        Err(_) => {
            drop(ctx.catch());
            None
        }
    }
}

/// Looks at `value` under `rules` ([`crate::shape`]).
fn looked<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    value: &Value<'js>,
    rules: Rules,
) -> Result<(), NotJson> {
    match shape::look(ctx, classes, value, rules) {
        Ok(None) => Ok(()),
        Ok(Some(Finding::TooDeep)) => Err(NotJson::TooDeep),
        Ok(Some(Finding::NotJson { what, path })) => Err(NotJson::Holds { what, path }),
        Err(error) => Err(triage(ctx, error)),
    }
}

/// What the engine's own `JSON.stringify` makes of `value`, read back by serde_json.
fn stringified<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> Result<serde_json::Value, NotJson> {
    let text = match ctx.json_stringify(value) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(NotJson::Refused(String::from(
                "JSON has nothing for it (a function, a symbol or undefined)",
            )));
        }
        Err(error) => return Err(triage(ctx, error)),
    };
    let text = text.to_string().map_err(|error| triage(ctx, error))?;
    // JSON.stringify escapes a lone surrogate, which serde_json does not take; serde_json
    // stops at its recursion limit of 128, above this one.
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        if e.to_string().contains("recursion limit") {
            NotJson::TooDeep
        } else {
            NotJson::Refused(e.to_string())
        }
    })?;
    // What getters, `toJSON` and proxies made was not looked at before.
    if shape::json_too_deep(&json) {
        return Err(NotJson::TooDeep);
    }
    Ok(json)
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
    // QuickJS's words for running out of its stack, which a conversion does only for a value
    // far deeper than any look could have let through, or for code that recursed.
    if reason.contains("call stack size exceeded") {
        return NotJson::Refused(format!(
            "the engine's stack ran out converting it: it nests far more than {MAX_VALUE_DEPTH} levels deep, or a getter or `toJSON` recursed without end"
        ));
    }
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

/// `depth` is how many arrays and objects hold `json`. A tool's value deeper than the limit
/// never gets here ([`crate::nested`]); the check keeps the walk within the thread's stack
/// whatever it is given.
fn build<'js>(
    ctx: &Ctx<'js>,
    json: &serde_json::Value,
    depth: usize,
) -> rquickjs::Result<Value<'js>> {
    if depth >= MAX_VALUE_DEPTH && (json.is_array() || json.is_object()) {
        return Err(rquickjs::Error::new_into_js_message(
            "value",
            "JSON",
            shape::too_deep_text(),
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
