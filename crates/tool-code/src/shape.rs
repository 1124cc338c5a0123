//! The shape of a value the host is about to convert, seen without running any of the
//! program's code: how deep it nests (a value deeper than [`MAX_VALUE_DEPTH`] is refused both
//! ways, [`crate::convert`]) and, for a returned value, whatever in it JSON cannot hold (a
//! function, a symbol, a BigInt, a `Map`, a `Set`, a promise, a cycle), which `JSON.stringify`
//! would silently drop or refuse without saying where.
//!
//! The look goes through own enumerable data properties only, read through their descriptors:
//! no getter, `toJSON` or proxy trap runs, so a hostile value can neither stall it nor change
//! under it. What lies behind a getter, a `toJSON` or a proxy is left to the conversion, whose
//! result is checked again. Each object is looked into once, however often the value shares
//! it, so the look is linear in the engine's heap, which the memory limit bounds.

use crate::MAX_VALUE_DEPTH;
use crate::plain::{self, Own, PlainClasses, PropertyNames};
use rquickjs::{Ctx, Object, Value, qjs};
use std::collections::HashMap;

/// Which rules a look applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rules {
    /// A nested call's arguments: only the depth. What JSON cannot hold is left out or refused
    /// by `JSON.stringify`'s own rules, as a tool receives `JSON.parse(JSON.stringify(args))`.
    Arguments,
    /// The program's returned value: the depth, and nothing JSON cannot hold, anywhere.
    Returned,
}

/// What a look found wrong with a value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Finding {
    /// It nests more than [`MAX_VALUE_DEPTH`] levels.
    TooDeep,
    /// It holds `what` (`a function`, `a cycle`…) at `path` (`$.list.0`).
    NotJson { what: &'static str, path: String },
}

/// Looks at `value` under `rules`. An error is the engine's (out of memory), with its
/// exception pending.
pub(crate) fn look<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    value: &Value<'js>,
    rules: Rules,
) -> rquickjs::Result<Option<Finding>> {
    let mut walk = Walk {
        ctx,
        classes,
        rules,
        heights: HashMap::new(),
        ancestors: Vec::new(),
    };
    Ok(walk.visit(value, 0)?.err().map(Found::finish))
}

/// A finding on its way up, with the keys from it to the top, innermost first.
struct Found {
    what: Option<&'static str>,
    keys: Vec<String>,
}

impl Found {
    fn too_deep() -> Found {
        Found {
            what: None,
            keys: Vec::new(),
        }
    }

    fn holds(what: &'static str) -> Found {
        Found {
            what: Some(what),
            keys: Vec::new(),
        }
    }

    fn finish(self) -> Finding {
        match self.what {
            None => Finding::TooDeep,
            Some(what) => {
                let mut path = String::from("$");
                for key in self.keys.iter().rev() {
                    path.push('.');
                    path.push_str(key);
                }
                Finding::NotJson { what, path }
            }
        }
    }
}

struct Walk<'a, 'js> {
    ctx: &'a Ctx<'js>,
    classes: PlainClasses,
    rules: Rules,
    /// The objects already looked into, with how many levels each nests (itself included).
    heights: HashMap<Value<'js>, usize>,
    /// The objects being looked into, outermost first, for cycles.
    ancestors: Vec<Value<'js>>,
}

impl<'js> Walk<'_, 'js> {
    /// Looks at `value`, inside `level` objects; how many levels it nests (0 for a scalar).
    fn visit(
        &mut self,
        value: &Value<'js>,
        level: usize,
    ) -> rquickjs::Result<Result<usize, Found>> {
        let returned = self.rules == Rules::Returned;
        if value.is_function() {
            return Ok(if returned {
                Err(Found::holds("a function"))
            } else {
                Ok(0)
            });
        }
        if returned && value.is_symbol() {
            return Ok(Err(Found::holds("a symbol")));
        }
        if returned && value.is_big_int() {
            return Ok(Err(Found::holds("a BigInt")));
        }
        let Some(object) = value.as_object() else {
            return Ok(Ok(0));
        };
        // Looking into a proxy runs its traps; the conversion's result is checked instead.
        if value.is_proxy() {
            return Ok(Ok(0));
        }
        if level >= MAX_VALUE_DEPTH {
            return Ok(Err(Found::too_deep()));
        }
        if let Some(&height) = self.heights.get(value) {
            return Ok(if level + height > MAX_VALUE_DEPTH {
                Err(Found::too_deep())
            } else {
                Ok(height)
            });
        }
        // `JSON.stringify` replaces an object that has a `toJSON` by what it returns.
        if has_to_json(self.ctx, object)? {
            return Ok(Ok(0));
        }
        if self.ancestors.contains(value) {
            // `JSON.stringify` refuses a cycle in arguments, and says so.
            return Ok(if returned {
                Err(Found::holds("a cycle"))
            } else {
                Ok(0)
            });
        }
        if returned {
            let class = plain::class_id(value);
            if class == self.classes.map {
                return Ok(Err(Found::holds("a Map")));
            }
            if class == self.classes.set {
                return Ok(Err(Found::holds("a Set")));
            }
            if value.is_promise() {
                return Ok(Err(Found::holds("a Promise")));
            }
        }
        let names = PropertyNames::enumerable_strings(self.ctx, object)?;
        self.ancestors.push(value.clone());
        let mut height = 0;
        for &atom in names.atoms() {
            let Own::Data(item) = plain::own_data(self.ctx, object, atom)? else {
                continue;
            };
            match self.visit(&item, level + 1) {
                Ok(Ok(inner)) => height = height.max(inner),
                Ok(Err(mut found)) => {
                    if found.what.is_some() {
                        found.keys.push(key_text(self.ctx, atom));
                    }
                    self.ancestors.pop();
                    return Ok(Err(found));
                }
                Err(error) => {
                    self.ancestors.pop();
                    return Err(error);
                }
            }
        }
        self.ancestors.pop();
        let height = height + 1;
        self.heights.insert(value.clone(), height);
        Ok(Ok(height))
    }
}

/// Whether `object` or a prototype above it has a `toJSON` (or may have: a proxy up the chain
/// is not asked), found without running any code.
fn has_to_json<'js>(ctx: &Ctx<'js>, object: &Object<'js>) -> rquickjs::Result<bool> {
    let mut current = object.clone();
    loop {
        if current.as_value().is_proxy() {
            return Ok(true);
        }
        match plain::own_data(ctx, &current, qjs::JS_ATOM_toJSON as qjs::JSAtom)? {
            Own::Data(value) if value.is_function() => return Ok(true),
            Own::Data(_) => return Ok(false),
            Own::Accessor => return Ok(true),
            Own::Absent => match current.get_prototype() {
                Some(prototype) => current = prototype,
                None => return Ok(false),
            },
        }
    }
}

/// A property key's text, for a path.
fn key_text(ctx: &Ctx<'_>, atom: qjs::JSAtom) -> String {
    plain::atom_string(ctx, atom)
        .ok()
        .and_then(|key| key.as_string().and_then(|key| key.to_string().ok()))
        .unwrap_or_else(|| String::from("?"))
}

/// Whether a JSON value nests more than [`MAX_VALUE_DEPTH`] levels (`{}` and `[]` are one).
/// Walked without recursion: a tool may hand over a value of any depth.
pub(crate) fn json_too_deep(value: &serde_json::Value) -> bool {
    let mut stack: Vec<(&serde_json::Value, usize)> = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let items: Box<dyn Iterator<Item = &serde_json::Value>> = match value {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if level >= MAX_VALUE_DEPTH {
            return true;
        }
        stack.extend(items.map(|item| (item, level + 1)));
    }
    false
}

/// The end of a message that refuses a value for its depth.
pub(crate) fn too_deep_text() -> String {
    format!("nested more than {MAX_VALUE_DEPTH} levels deep (the limit for values in Code Mode)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> serde_json::Value {
        let mut value = json!([]);
        for _ in 1..levels {
            value = json!([value]);
        }
        value
    }

    #[test]
    fn a_json_value_may_nest_up_to_the_limit() {
        assert!(!json_too_deep(&json!(1)));
        assert!(!json_too_deep(&json!({"a": [1, {"b": []}]})));
        assert!(!json_too_deep(&nested(MAX_VALUE_DEPTH)));
        assert!(json_too_deep(&nested(MAX_VALUE_DEPTH + 1)));
        assert!(json_too_deep(
            &json!({"wide": [1, 2, nested(MAX_VALUE_DEPTH)]})
        ));
    }
}
