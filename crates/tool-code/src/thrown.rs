//! A thrown value, described without running any of the program's code.
//!
//! A program may throw anything: an Error whose `name` or `message` is a getter that never
//! returns, a proxy whose every trap throws, an object whose `toString` loops. Describing it
//! must neither stall nor fail, so the host reads only data properties, through their
//! descriptors and up the prototype chain as far as it holds no proxy, and describes a value
//! that is not an Error by its kind, or as JSON when it is plain data.

use crate::outcome::{ProgramError, ProgramErrorKind};
use crate::plain::{self, Own, PlainClasses, PropertyNames};
use rquickjs::convert::Coerced;
use rquickjs::function::This;
use rquickjs::{Ctx, FromJs, Function, Object, Value, qjs};

/// What the host reads thrown values with, taken before the program ran.
#[derive(Debug)]
pub(crate) struct ThrownReader<'js> {
    classes: PlainClasses,
    /// The engine's own getter of `Error.prototype.stack`, which returns the stack the engine
    /// recorded for an Error and runs nothing else; `None` before the prelude is installed.
    error_stack: Option<Function<'js>>,
}

impl<'js> ThrownReader<'js> {
    pub(crate) fn new(classes: PlainClasses, error_stack: Option<Function<'js>>) -> Self {
        ThrownReader {
            classes,
            error_stack,
        }
    }

    pub(crate) fn classes(&self) -> PlainClasses {
        self.classes
    }

    /// The failure of a program that threw `thrown`.
    pub(crate) fn describe(&self, ctx: &Ctx<'js>, thrown: &Value<'js>) -> ProgramError {
        describe(ctx, self, thrown)
    }

    /// The stack the engine recorded for `error`, unless the program set one of its own.
    fn stack(&self, ctx: &Ctx<'js>, error: &Object<'js>) -> rquickjs::Result<Option<String>> {
        if let Own::Data(stack) = plain::own_data(ctx, error, qjs::JS_ATOM_stack as qjs::JSAtom)? {
            return Ok(string_of(&stack));
        }
        let Some(getter) = &self.error_stack else {
            return Ok(None);
        };
        let stack: Value<'js> = getter.call((This(error.clone()),))?;
        Ok(string_of(&stack))
    }
}

fn describe<'js>(ctx: &Ctx<'js>, reader: &ThrownReader<'js>, thrown: &Value<'js>) -> ProgramError {
    let classes = reader.classes;
    match error_fields(ctx, reader, thrown) {
        Ok(Some(error)) => error,
        Ok(None) => ProgramError::new(
            ProgramErrorKind::Exception,
            format!(
                "the program threw a value that is not an Error: {}",
                not_an_error(ctx, classes, thrown)
            ),
        ),
        // Reading descriptors runs no code; it fails only when the engine's memory is full.
        Err(_) => {
            drop(ctx.catch());
            ProgramError::new(
                ProgramErrorKind::Exception,
                "the program threw an Error that could not be read: out of memory",
            )
        }
    }
}

/// The fields of an Error (`None` for any other value, a proxy of an Error included).
fn error_fields<'js>(
    ctx: &Ctx<'js>,
    reader: &ThrownReader<'js>,
    thrown: &Value<'js>,
) -> rquickjs::Result<Option<ProgramError>> {
    if !thrown.is_error() || thrown.is_proxy() {
        return Ok(None);
    }
    let Some(error) = thrown.as_object() else {
        return Ok(None);
    };
    let message = data_string(ctx, error, qjs::JS_ATOM_message as qjs::JSAtom)?;
    let mut failure = ProgramError::new(ProgramErrorKind::Exception, message.unwrap_or_default());
    failure.name = data_string(ctx, error, qjs::JS_ATOM_name as qjs::JSAtom)?;
    failure.stack = reader.stack(ctx, error)?;
    if failure.name.as_deref() == Some("ToolCallError") {
        for (key, value) in own_strings(ctx, error)? {
            match key.as_str() {
                "toolName" => failure.tool_name = Some(value),
                "code" => failure.code = Some(value),
                _ => {}
            }
        }
    }
    Ok(Some(failure))
}

/// The string property `atom` of `object` as a data property, its own or a prototype's; `None`
/// when it is not a string, is a getter (which is not called), or lies beyond a proxy.
fn data_string<'js>(
    ctx: &Ctx<'js>,
    object: &Object<'js>,
    atom: qjs::JSAtom,
) -> rquickjs::Result<Option<String>> {
    let mut current = object.clone();
    loop {
        if current.as_value().is_proxy() {
            return Ok(None);
        }
        match plain::own_data(ctx, &current, atom)? {
            Own::Data(value) => return Ok(string_of(&value)),
            Own::Accessor => return Ok(None),
            Own::Absent => match current.get_prototype() {
                Some(prototype) => current = prototype,
                None => return Ok(None),
            },
        }
    }
}

/// The own enumerable data properties of `object` (not a proxy) whose values are strings.
fn own_strings<'js>(
    ctx: &Ctx<'js>,
    object: &Object<'js>,
) -> rquickjs::Result<Vec<(String, String)>> {
    let names = PropertyNames::enumerable_strings(ctx, object)?;
    let mut strings = Vec::new();
    for &atom in names.atoms() {
        let Some(key) = string_of(&plain::atom_string(ctx, atom)?) else {
            continue;
        };
        if let Own::Data(value) = plain::own_data(ctx, object, atom)?
            && let Some(value) = string_of(&value)
        {
            strings.push((key, value));
        }
    }
    Ok(strings)
}

fn string_of(value: &Value<'_>) -> Option<String> {
    value.as_string().and_then(|text| text.to_string().ok())
}

/// A thrown value that is not an Error, in words: its text when it is a primitive or plain
/// data, its kind otherwise.
fn not_an_error<'js>(ctx: &Ctx<'js>, classes: PlainClasses, thrown: &Value<'js>) -> String {
    if let Some(text) = string_of(thrown) {
        return text;
    }
    if thrown.is_undefined() {
        return String::from("undefined");
    }
    if thrown.is_symbol() {
        return String::from("a symbol");
    }
    if thrown.is_big_int() {
        return String::from("a BigInt");
    }
    if thrown.is_proxy() {
        return String::from("a Proxy");
    }
    if thrown.is_function() {
        return String::from("a function");
    }
    if thrown.is_object() {
        return match plain::read(ctx, classes, thrown) {
            Ok(Some(json)) => json.to_string(),
            Ok(None) => String::from("an object that is not plain data"),
            Err(_) => {
                drop(ctx.catch());
                String::from("an object that could not be read")
            }
        };
    }
    // A number, a boolean or null: their text needs no code of the program's.
    Coerced::<String>::from_js(ctx, thrown.clone())
        .map(|text| text.0)
        .unwrap_or_else(|_| {
            drop(ctx.catch());
            String::from("(unprintable)")
        })
}
