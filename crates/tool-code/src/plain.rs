//! Arguments that are plain data, read straight from the engine's objects.
//!
//! Most calls pass a small literal (`{ command: "ls" }`). For those, the value
//! `JSON.parse(JSON.stringify(args))` gives can be read without making any text: only plain
//! objects and arrays (told apart by QuickJS's class id, as `JSON.stringify` tells them, never
//! by prototype), only own data properties, read through their descriptors so that no getter
//! runs, and only where nothing on the prototype chain has a `toJSON`. Nothing the program
//! wrote runs during the read, so it has no side effect; it allocates only within fixed
//! budgets. Anything else (a getter, a `toJSON`, a proxy, a boxed primitive, a hole, a cycle,
//! a BigInt, a function, a lone surrogate, a large value) is left to the engine's own
//! `JSON.stringify` ([`crate::convert`]), which gives the exact result or the exact refusal.

use rquickjs::qjs;
use rquickjs::{Array, Ctx, Object, Value};
use serde_json::{Map, Number};
use std::ptr;

/// Values a read may visit (every item and property, and every prototype it looks through)
/// before giving up: what it builds in Rust is bounded by this and [`MAX_BYTES`].
const MAX_NODES: usize = 8192;
/// Bytes of strings and keys a read may copy before giving up.
const MAX_BYTES: usize = 256 * 1024;
/// How deep a read may go before giving up.
const MAX_DEPTH: usize = 64;
/// Integers up to this magnitude are exact doubles, printed by `JSON.stringify` digit for digit.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The class ids of plain objects and arrays in one runtime, and of the collections a returned
/// value must not hold ([`crate::shape`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainClasses {
    object: qjs::JSClassID,
    array: qjs::JSClassID,
    pub(crate) map: qjs::JSClassID,
    pub(crate) set: qjs::JSClassID,
}

impl PlainClasses {
    /// Reads them off a fresh `{}`, `[]`, `Map` and `Set`: the engine's own enumeration is not
    /// public. Called before the program runs, while `Map` and `Set` are still the engine's.
    pub(crate) fn of(ctx: &Ctx<'_>) -> rquickjs::Result<PlainClasses> {
        let object = Object::new(ctx.clone())?;
        let array = Array::new(ctx.clone())?;
        let collections: Array<'_> = ctx.eval("[new Map(), new Set()]")?;
        let map: Value<'_> = collections.get(0)?;
        let set: Value<'_> = collections.get(1)?;
        Ok(PlainClasses {
            object: class_id(object.as_value()),
            array: class_id(array.as_value()),
            map: class_id(&map),
            set: class_id(&set),
        })
    }
}

/// The JSON value of `value` when it is plain data; `Ok(None)` when the engine's
/// `JSON.stringify` must decide. An error is the engine's (most likely out of memory), with
/// its exception pending.
pub(crate) fn read<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    value: &Value<'js>,
) -> rquickjs::Result<Option<serde_json::Value>> {
    let mut reader = Reader {
        ctx,
        classes,
        nodes: 0,
        bytes: 0,
        ancestors: Vec::new(),
    };
    Ok(match reader.value(value)? {
        Read::Json(json) => Some(json),
        Read::Nothing | Read::Decline => None,
    })
}

/// What a read made of one value.
enum Read {
    Json(serde_json::Value),
    /// `JSON.stringify` leaves the value out (`undefined`, a symbol): a property is dropped, an
    /// array item becomes `null`.
    Nothing,
    /// Not plain data: the engine decides.
    Decline,
}

/// Turns `Read::Decline` into an early return.
macro_rules! plain {
    ($read:expr) => {
        match $read {
            Some(value) => value,
            None => return Ok(Read::Decline),
        }
    };
}

struct Reader<'a, 'js> {
    ctx: &'a Ctx<'js>,
    classes: PlainClasses,
    nodes: usize,
    bytes: usize,
    /// The objects being read, for cycles: `JSON.stringify` refuses them, so the engine must.
    ancestors: Vec<Value<'js>>,
}

impl<'js> Reader<'_, 'js> {
    fn value(&mut self, value: &Value<'js>) -> rquickjs::Result<Read> {
        plain!(self.spend_nodes(1));
        if let Some(object) = value.as_object() {
            return self.object(object);
        }
        if let Some(int) = value.as_int() {
            return Ok(Read::Json(serde_json::Value::from(int)));
        }
        if let Some(float) = value.as_float() {
            return Ok(plain!(number(float).map(Read::Json)));
        }
        if let Some(bool) = value.as_bool() {
            return Ok(Read::Json(serde_json::Value::Bool(bool)));
        }
        if value.is_null() {
            return Ok(Read::Json(serde_json::Value::Null));
        }
        if let Some(string) = value.as_string() {
            let text = plain!(self.text(string)?);
            return Ok(Read::Json(serde_json::Value::String(text)));
        }
        if value.is_undefined() || value.is_symbol() {
            return Ok(Read::Nothing);
        }
        // A BigInt (refused), or a value kind this reader does not know.
        Ok(Read::Decline)
    }

    fn object(&mut self, object: &Object<'js>) -> rquickjs::Result<Read> {
        if self.ancestors.len() >= MAX_DEPTH
            || self.ancestors.iter().any(|seen| seen == object.as_value())
            || !self.plain_chain(object)?
        {
            return Ok(Read::Decline);
        }
        let is_array = class_id(object.as_value()) == self.classes.array;
        self.ancestors.push(object.as_value().clone());
        let read = if is_array {
            self.array_items(object)
        } else {
            self.object_entries(object)
        };
        self.ancestors.pop();
        read
    }

    /// Whether `object` and every prototype above it is a plain object or array (so that
    /// looking runs no proxy trap and no other class's rules apply) with no own `toJSON`.
    fn plain_chain(&mut self, object: &Object<'js>) -> rquickjs::Result<bool> {
        let mut current = object.clone();
        loop {
            let class = class_id(current.as_value());
            if class != self.classes.object && class != self.classes.array {
                return Ok(false);
            }
            if has_own(self.ctx, &current, qjs::JS_ATOM_toJSON as qjs::JSAtom)? {
                return Ok(false);
            }
            match current.get_prototype() {
                Some(prototype) => {
                    if self.spend_nodes(1).is_none() {
                        return Ok(false);
                    }
                    current = prototype;
                }
                None => return Ok(true),
            }
        }
    }

    fn object_entries(&mut self, object: &Object<'js>) -> rquickjs::Result<Read> {
        let names = PropertyNames::enumerable_strings(self.ctx, object)?;
        plain!(self.nodes_left(names.length as usize));
        let mut map = Map::new();
        for &atom in names.atoms() {
            let key = plain!(self.key(atom)?);
            let item = match own_data(self.ctx, object, atom)? {
                Own::Data(item) => item,
                Own::Absent | Own::Accessor => return Ok(Read::Decline),
            };
            match self.value(&item)? {
                Read::Json(json) => {
                    map.insert(key, json);
                }
                Read::Nothing => {}
                Read::Decline => return Ok(Read::Decline),
            }
        }
        Ok(Read::Json(serde_json::Value::Object(map)))
    }

    fn array_items(&mut self, array: &Object<'js>) -> rquickjs::Result<Read> {
        let length = match own_data(self.ctx, array, qjs::JS_ATOM_length as qjs::JSAtom)? {
            Own::Data(length) => plain!(array_length(&length)),
            Own::Absent | Own::Accessor => return Ok(Read::Decline),
        };
        plain!(self.nodes_left(length as usize));
        let mut items = Vec::with_capacity(length as usize);
        for index in 0..length {
            let atom = IndexAtom::new(self.ctx, index);
            // A hole reads through the prototypes, where anything may be.
            let item = match own_data(self.ctx, array, atom.0)? {
                Own::Data(item) => item,
                Own::Absent | Own::Accessor => return Ok(Read::Decline),
            };
            match self.value(&item)? {
                Read::Json(json) => items.push(json),
                Read::Nothing => items.push(serde_json::Value::Null),
                Read::Decline => return Ok(Read::Decline),
            }
        }
        Ok(Read::Json(serde_json::Value::Array(items)))
    }

    fn spend_nodes(&mut self, nodes: usize) -> Option<()> {
        self.nodes = self.nodes.saturating_add(nodes);
        (self.nodes <= MAX_NODES).then_some(())
    }

    /// Whether `nodes` more values fit in the budget, checked before a list is read.
    fn nodes_left(&self, nodes: usize) -> Option<()> {
        (nodes <= MAX_NODES.saturating_sub(self.nodes)).then_some(())
    }

    /// A string's text, within the byte budget; `None` when it is over the budget or not
    /// UTF-8 (a lone surrogate, which the engine's text escapes and JSON readers differ on).
    /// Its length is checked before anything is copied: its UTF-8 is at least as many bytes
    /// as it has UTF-16 units.
    fn text(&mut self, string: &rquickjs::String<'js>) -> rquickjs::Result<Option<String>> {
        if string_units(self.ctx, string)? > MAX_BYTES.saturating_sub(self.bytes) {
            return Ok(None);
        }
        let Ok(text) = string.to_string() else {
            return if self.ctx.has_exception() {
                Err(rquickjs::Error::Exception)
            } else {
                Ok(None)
            };
        };
        self.bytes = self.bytes.saturating_add(text.len());
        Ok((self.bytes <= MAX_BYTES).then_some(text))
    }

    /// A property key's text, as [`Reader::text`] reads it; a key may hold a NUL.
    fn key(&mut self, atom: qjs::JSAtom) -> rquickjs::Result<Option<String>> {
        let key = atom_string(self.ctx, atom)?;
        match key.as_string() {
            Some(string) => self.text(string),
            None => Ok(None),
        }
    }
}

/// A number as `JSON.parse(JSON.stringify(x))` reads it back: not finite becomes `null`;
/// `None` for integers beyond the exact doubles, which `JSON.stringify` prints rounded.
fn number(float: f64) -> Option<serde_json::Value> {
    if !float.is_finite() {
        return Some(serde_json::Value::Null);
    }
    if float.fract() == 0.0 {
        // -0 is printed as 0.
        return (float.abs() < EXACT_INTEGER).then(|| serde_json::Value::from(float as i64));
    }
    Number::from_f64(float).map(serde_json::Value::Number)
}

/// An array's `length`, a whole number below 2^32.
fn array_length(length: &Value<'_>) -> Option<u32> {
    if let Some(int) = length.as_int() {
        return u32::try_from(int).ok();
    }
    let float = length.as_float()?;
    (float >= 0.0 && float.fract() == 0.0 && float < 4_294_967_296.0).then_some(float as u32)
}

/// An own property as a read sees it.
pub(crate) enum Own<'js> {
    Absent,
    Data(Value<'js>),
    Accessor,
}

/// QuickJS's class id of an object (0 for any other value).
pub(crate) fn class_id(value: &Value<'_>) -> qjs::JSClassID {
    // SAFETY: `value` is a live value of this runtime, held by `Value` for the call;
    // `JS_GetClassID` only reads the class id from an object's header and reads nothing of
    // any other value.
    #[allow(unsafe_code)]
    unsafe {
        qjs::JS_GetClassID(value.as_raw())
    }
}

/// Whether `object`, a plain object or array (the caller checked its class), has an own
/// property `atom`. Runs no code of the program's: only proxies and other exotic classes have
/// hooks there, and lazily made built-in properties are not made by this look.
fn has_own<'js>(ctx: &Ctx<'js>, object: &Object<'js>, atom: qjs::JSAtom) -> rquickjs::Result<bool> {
    // SAFETY: the context and the object are live and of the same runtime; with no descriptor
    // to fill, `JS_GetOwnProperty` writes nothing and hands back no value to free.
    #[allow(unsafe_code)]
    let found = unsafe {
        qjs::JS_GetOwnProperty(
            ctx.as_raw().as_ptr(),
            ptr::null_mut(),
            object.as_raw(),
            atom,
        )
    };
    if found < 0 {
        return Err(rquickjs::Error::Exception);
    }
    Ok(found > 0)
}

/// `object`'s own property `atom` through its descriptor, so that a getter is seen and never
/// called. `object` is not a proxy (the caller checked its class): only a proxy runs the
/// program's code when asked for a descriptor.
pub(crate) fn own_data<'js>(
    ctx: &Ctx<'js>,
    object: &Object<'js>,
    atom: qjs::JSAtom,
) -> rquickjs::Result<Own<'js>> {
    let mut descriptor = qjs::JSPropertyDescriptor {
        flags: 0,
        value: qjs::JS_UNDEFINED,
        getter: qjs::JS_UNDEFINED,
        setter: qjs::JS_UNDEFINED,
    };
    // SAFETY: the context and the object are live and of the same runtime. For an object that
    // is not a proxy, `JS_GetOwnProperty` either fails (-1, an exception pending), finds nothing (0,
    // the descriptor untouched), or sets all four fields (1), each of the three values owned
    // by us; they start as `undefined`, which needs no freeing, so taking all three below is
    // right in every case.
    #[allow(unsafe_code)]
    let found = unsafe {
        qjs::JS_GetOwnProperty(
            ctx.as_raw().as_ptr(),
            &mut descriptor,
            object.as_raw(),
            atom,
        )
    };
    // SAFETY: each value is owned (see above) and of this runtime; `Value` frees it once.
    #[allow(unsafe_code)]
    let (value, getter, setter) = unsafe {
        (
            Value::from_raw(ctx.clone(), descriptor.value),
            Value::from_raw(ctx.clone(), descriptor.getter),
            Value::from_raw(ctx.clone(), descriptor.setter),
        )
    };
    drop((getter, setter));
    if found < 0 {
        return Err(rquickjs::Error::Exception);
    }
    if found == 0 {
        return Ok(Own::Absent);
    }
    if descriptor.flags & qjs::JS_PROP_GETSET as i32 != 0 {
        return Ok(Own::Accessor);
    }
    Ok(Own::Data(value))
}

/// A property key as a JavaScript string (shared with the atom, not copied).
pub(crate) fn atom_string<'js>(ctx: &Ctx<'js>, atom: qjs::JSAtom) -> rquickjs::Result<Value<'js>> {
    // SAFETY: the context is live and `atom` is held by the caller's property list;
    // `JS_AtomToString` hands back an owned value (or an exception), which `Value` frees.
    #[allow(unsafe_code)]
    let key = unsafe {
        Value::from_raw(
            ctx.clone(),
            qjs::JS_AtomToString(ctx.as_raw().as_ptr(), atom),
        )
    };
    if key.is_exception() {
        return Err(rquickjs::Error::Exception);
    }
    Ok(key)
}

/// A string's length in UTF-16 units, read without copying it.
fn string_units<'js>(ctx: &Ctx<'js>, string: &rquickjs::String<'js>) -> rquickjs::Result<usize> {
    // SAFETY: the context and the string are live and of the same runtime. For a string (flat
    // or rope), QuickJS answers `length` from the string's header with an integer: it runs no
    // code and allocates nothing; the value is owned, and `Value` frees it.
    #[allow(unsafe_code)]
    let length = unsafe {
        Value::from_raw(
            ctx.clone(),
            qjs::JS_GetProperty(
                ctx.as_raw().as_ptr(),
                string.as_value().as_raw(),
                qjs::JS_ATOM_length as qjs::JSAtom,
            ),
        )
    };
    match length
        .as_int()
        .and_then(|units| usize::try_from(units).ok())
    {
        Some(units) => Ok(units),
        None if length.is_exception() => Err(rquickjs::Error::Exception),
        None => Ok(usize::MAX),
    }
}

/// The enumerable own string keys of an object that is not a proxy, in `JSON.stringify`'s
/// order (integer keys ascending, then the others as they were made).
pub(crate) struct PropertyNames<'a, 'js> {
    ctx: &'a Ctx<'js>,
    table: *mut qjs::JSPropertyEnum,
    length: u32,
}

impl<'a, 'js> PropertyNames<'a, 'js> {
    pub(crate) fn enumerable_strings(
        ctx: &'a Ctx<'js>,
        object: &Object<'js>,
    ) -> rquickjs::Result<PropertyNames<'a, 'js>> {
        let mut table: *mut qjs::JSPropertyEnum = ptr::null_mut();
        let mut length: u32 = 0;
        let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as i32;
        // SAFETY: the context and the object are live and of the same runtime; on success the
        // table (with `length` owned atoms) is ours until `Drop` frees it, on failure nothing
        // is allocated and an exception is pending.
        #[allow(unsafe_code)]
        let status = unsafe {
            qjs::JS_GetOwnPropertyNames(
                ctx.as_raw().as_ptr(),
                &mut table,
                &mut length,
                object.as_raw(),
                flags,
            )
        };
        if status < 0 {
            return Err(rquickjs::Error::Exception);
        }
        Ok(PropertyNames { ctx, table, length })
    }

    pub(crate) fn atoms(&self) -> impl Iterator<Item = &qjs::JSAtom> {
        let entries: &[qjs::JSPropertyEnum] = if self.table.is_null() {
            &[]
        } else {
            // SAFETY: the table holds `length` initialised entries until `Drop`.
            #[allow(unsafe_code)]
            unsafe {
                std::slice::from_raw_parts(self.table, self.length as usize)
            }
        };
        entries.iter().map(|entry| &entry.atom)
    }
}

impl Drop for PropertyNames<'_, '_> {
    fn drop(&mut self) {
        if !self.table.is_null() {
            // SAFETY: the table and its atoms came from `JS_GetOwnPropertyNames` on this
            // context and are freed once, here.
            #[allow(unsafe_code)]
            unsafe {
                qjs::JS_FreePropertyEnum(self.ctx.as_raw().as_ptr(), self.table, self.length);
            }
        }
    }
}

/// The atom of an array index, freed when dropped.
struct IndexAtom<'a, 'js>(qjs::JSAtom, &'a Ctx<'js>);

impl<'a, 'js> IndexAtom<'a, 'js> {
    fn new(ctx: &'a Ctx<'js>, index: u32) -> IndexAtom<'a, 'js> {
        // SAFETY: the context is live. Indices below 2^31 are tagged atoms and allocate
        // nothing; above, QuickJS makes (or finds) a string atom, freed on drop.
        #[allow(unsafe_code)]
        let atom = unsafe { qjs::JS_NewAtomUInt32(ctx.as_raw().as_ptr(), index) };
        IndexAtom(atom, ctx)
    }
}

impl Drop for IndexAtom<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the atom is ours (made in `new`) and freed once, here.
        #[allow(unsafe_code)]
        unsafe {
            qjs::JS_FreeAtom(self.1.as_raw().as_ptr(), self.0);
        }
    }
}

#[cfg(test)]
mod equivalence;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rquickjs::{Context, Runtime};

    /// Runs `check` in a fresh full context with the plain classes of its runtime.
    fn with_engine(check: impl FnOnce(&Ctx<'_>, PlainClasses)) {
        let runtime = Runtime::new().unwrap();
        let context = Context::full(&runtime).unwrap();
        context.with(|ctx| {
            let classes = PlainClasses::of(&ctx).unwrap();
            check(&ctx, classes);
        });
    }

    fn eval<'js>(ctx: &Ctx<'js>, source: &str) -> Value<'js> {
        ctx.eval(format!("({source})"))
            .unwrap_or_else(|e| panic!("{source}: {e}"))
    }

    /// What the engine's own `JSON.stringify`, read by serde_json, makes of `value`.
    fn stringified<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> serde_json::Value {
        let text = ctx.json_stringify(value.clone()).unwrap().unwrap();
        serde_json::from_str(&text.to_string().unwrap()).unwrap()
    }

    #[test]
    fn plain_data_is_read_as_json_stringify_then_parse_would_make_it() {
        with_engine(|ctx, classes| {
            for source in [
                r#"{ a: 1, b: [1, 2.5, -3, -0, 0.1, 1e-7, 5e-324, 2 ** -1074] }"#,
                r#"[2 ** 31, -(2 ** 31) - 1, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 51 + 0.5, 2 ** 52 + 0.5]"#,
                r#"[NaN, Infinity, -Infinity, null, true, false, "", "é😀\u0000\n\""]"#,
                r#"{ u: undefined, s: Symbol("x"), keep: [undefined, Symbol("y"), 4] }"#,
                r#"{ 2: "b", 1: "a", z: 0, 10: "c", "": 1, "with space": 2 }"#,
                r#"Object.assign(Object.create(null), { n: null, list: [[[]]] })"#,
                r#"new (class Point { constructor() { this.x = 1; this.y = [2]; } })()"#,
                r#"JSON.parse('{"__proto__": {"x": 1}, "b": 2}')"#,
                r#"Object.defineProperty({ shown: 1 }, "hidden", { value: 1, enumerable: false })"#,
                r#"{ [Symbol("k")]: 1, shown: 2 }"#,
                r#"Object.assign([1, 2], { extra: 3 })"#,
                r#"Object.freeze({ frozen: Object.seal([1]) })"#,
                r#"(() => { const a = [1]; a.length = 3; a.fill(0); return a; })()"#,
                r#"(() => { const shared = { s: 1 }; return [shared, { again: shared }]; })()"#,
                r#"{ "a\u0000b": "a\u0000b" }"#,
                r#"Array.from({ length: 4000 }, (_, i) => i)"#,
                r#"Object.fromEntries(Array.from({ length: 4000 }, (_, i) => ["k" + i, i]))"#,
                r#"["é".repeat(80 * 1024), "k".repeat(10 * 1024)]"#,
                r#"(() => { let d = 0; for (let i = 0; i < 64; i++) d = [d]; return d; })()"#,
                r#"[]"#,
                r#"7"#,
                r#""text""#,
            ] {
                let value = eval(ctx, source);
                let read = read(ctx, classes, &value).unwrap();
                assert_eq!(read, Some(stringified(ctx, &value)), "{source}");
            }
            // The cases above mean what they say.
            let zero = read(ctx, classes, &eval(ctx, "-0")).unwrap().unwrap();
            assert_eq!(zero.as_u64(), Some(0));
            let key = read(ctx, classes, &eval(ctx, r#"{ "a\u0000b": 1 }"#)).unwrap();
            assert_eq!(key, Some(serde_json::json!({"a\u{0}b": 1})));
        });
    }

    #[test]
    fn values_the_engine_must_decide_on_are_declined_without_running_code() {
        with_engine(|ctx, classes| {
            let _: () = ctx
                .eval("globalThis.hits = 0; globalThis.hit = () => { hits += 1; return 1; };")
                .unwrap();
            for source in [
                r#"{ get g() { return hit(); } }"#,
                r#"{ nested: [{ get g() { return hit(); } }] }"#,
                r#"Object.defineProperty([0], 0, { get: hit, enumerable: true })"#,
                r#"{ toJSON: hit }"#,
                r#"{ inner: { toJSON: hit } }"#,
                r#"Object.create({ toJSON: hit })"#,
                r#"new Proxy({ p: 1 }, { get: hit, ownKeys: hit, getOwnPropertyDescriptor: hit })"#,
                r#"Object.create(new Proxy({}, { get: hit, getPrototypeOf: hit }))"#,
                r#"[new Proxy([1], { get: hit })]"#,
                r#"new Number(3)"#,
                r#"Object.setPrototypeOf(new String("s"), null)"#,
                r#"[new Boolean(false)]"#,
                r#"JSON.rawJSON("12345678901234567890")"#,
                r#"{ map: new Map([[1, 2]]) }"#,
                r#"new Error("e")"#,
                r#"new Date(0)"#,
                r#"new Uint8Array([1])"#,
                r#"hit"#,
                r#"{ f: hit }"#,
                r#"[hit]"#,
                r#"{ n: 1n }"#,
                r#"(() => { const c = { }; c.self = c; return c; })()"#,
                r#"(() => { const c = []; c.push([c]); return c; })()"#,
                r#"[, 1]"#,
                r#"[2 ** 53]"#,
                r#"[-(2 ** 63)]"#,
                r#"[1e21]"#,
                r#"[1.7976931348623157e308]"#,
                r#"["\ud800"]"#,
                r#"{ "\udc00": 1 }"#,
                r#"(() => { let d = 0; for (let i = 0; i < 65; i++) d = [d]; return d; })()"#,
                r#"Array.from({ length: 9000 }, (_, i) => i)"#,
                r#"Array.from({ length: 9 }, () => Array.from({ length: 500 }, () => ({ a: 1 })))"#,
                r#"["x".repeat(300 * 1024)]"#,
                r#"{ ["k".repeat(300 * 1024)]: 1 }"#,
                r#"Array.from({ length: 3 }, () => "é".repeat(100 * 1024))"#,
                r#"(() => { const row = Array.from({ length: 4000 }, () => 0); return [row, row, row]; })()"#,
                r#"(() => { const row = Array.from({ length: 100 }, () => 0); return Array.from({ length: 100 }, () => row); })()"#,
                r#"Object.fromEntries(Array.from({ length: 9000 }, (_, i) => ["k" + i, i]))"#,
                r#"undefined"#,
                r#"Symbol("top")"#,
            ] {
                let value = eval(ctx, source);
                let read = read(ctx, classes, &value).unwrap();
                assert!(read.is_none(), "read: {source}");
                assert!(!ctx.has_exception(), "{source}");
            }
            let hits: i32 = ctx.eval("hits").unwrap();
            assert_eq!(hits, 0, "a declined read ran the program's code");
        });
    }

    #[test]
    fn running_out_of_memory_during_a_read_is_the_engines_error() {
        let runtime = Runtime::new().unwrap();
        let context = Context::full(&runtime).unwrap();
        // Within the read's budgets, but its UTF-8 copy does not fit in what is left.
        let _: () = context
            .with(|ctx| ctx.eval(r#"globalThis.big = ["é".repeat(100 * 1024)];"#))
            .unwrap();
        let used = usize::try_from(runtime.memory_usage().malloc_size).unwrap();
        runtime.set_memory_limit(used + 64 * 1024);
        context.with(|ctx| {
            let classes = PlainClasses::of(&ctx).unwrap();
            let value = eval(&ctx, "big");
            let read = read(&ctx, classes, &value);
            assert!(matches!(read, Err(rquickjs::Error::Exception)), "{read:?}");
            let thrown = ctx.catch();
            let message = thrown.as_exception().and_then(|e| e.message());
            assert_eq!(message.as_deref(), Some("out of memory"));
        });
        runtime.set_memory_limit(0);
        context.with(|ctx| {
            let classes = PlainClasses::of(&ctx).unwrap();
            let read = read(&ctx, classes, &eval(&ctx, "big"));
            assert!(matches!(read, Ok(Some(_))), "{read:?}");
        });
    }

    #[test]
    fn a_to_json_anywhere_up_the_prototypes_is_seen() {
        with_engine(|ctx, classes| {
            for (setup, source) in [
                ("Object.prototype.toJSON = () => 1;", "{ a: 1 }"),
                ("Array.prototype.toJSON = () => 1;", "[1]"),
                ("Object.prototype.toJSON = () => 1;", "[1]"),
            ] {
                let _: () = ctx.eval(setup).unwrap();
                let value = eval(ctx, source);
                assert_eq!(
                    read(ctx, classes, &value).unwrap(),
                    None,
                    "{setup} {source}"
                );
                let _: () = ctx
                    .eval("delete Object.prototype.toJSON; delete Array.prototype.toJSON;")
                    .unwrap();
                let value = eval(ctx, source);
                assert!(read(ctx, classes, &value).unwrap().is_some(), "{source}");
            }
        });
    }

    #[test]
    fn numbers_keep_their_value_and_kind() {
        assert_eq!(number(-0.0), Some(serde_json::json!(0)));
        assert_eq!(number(-5.0), Some(serde_json::json!(-5)));
        assert_eq!(
            number(2f64.powi(52)),
            Some(serde_json::json!(4_503_599_627_370_496_u64))
        );
        assert_eq!(
            number(EXACT_INTEGER - 1.0).unwrap().as_u64(),
            Some(9_007_199_254_740_991)
        );
        assert_eq!(number(EXACT_INTEGER), None);
        assert_eq!(number(-EXACT_INTEGER), None);
        assert_eq!(number(0.5), Some(serde_json::json!(0.5)));
        assert_eq!(number(f64::NAN), Some(serde_json::Value::Null));
        assert_eq!(number(f64::NEG_INFINITY), Some(serde_json::Value::Null));
    }

    #[test]
    fn an_array_length_is_a_whole_number_below_two_to_the_32() {
        with_engine(|ctx, _| {
            let int = |n| array_length(&Value::new_int(ctx.clone(), n));
            let float = |x| array_length(&Value::new_float(ctx.clone(), x));
            assert_eq!((int(0), int(3), int(-1)), (Some(0), Some(3), None));
            assert_eq!(float(4_294_967_295.0), Some(4_294_967_295));
            assert_eq!(
                (float(4_294_967_296.0), float(2.5), float(-1.0)),
                (None, None, None)
            );
            assert_eq!(array_length(&Value::new_null(ctx.clone())), None);
        });
    }
}
