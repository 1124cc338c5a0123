//! Declared field order for schemas derived from Rust types.
//!
//! `schemars` builds its schema in a `serde_json::Value`, whose object keys are sorted unless
//! `serde_json`'s `preserve_order` is on, and that feature would change the user's own code (it
//! is unified across their dependency graph). The declared order is still known to serde: a
//! derived `Deserialize` passes its struct's field names, in declaration order, to
//! `deserialize_struct`. [`declared_orders`] drives the type's `Deserialize` with a deserializer
//! that records those lists and answers every field with a placeholder, descending into nested
//! structs (directly, through `Option`, newtypes and the items of sequences). Enums are answered
//! with their first variant so the walk goes on past them.
//!
//! What it cannot reach keeps `schemars`' alphabetical order: fields of structs inside maps and
//! enum variants, flattened structs (serde reads them as maps), and the nested structs after a
//! field whose `Deserialize` the placeholders do not satisfy (it ends the walk; the lists found
//! before it still apply).

use super::{SchemaKind, ValueSchema};
use serde::de::value::Error;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use std::cell::RefCell;

/// The path segment of a sequence's items.
const ITEMS: &str = "[]";

/// A struct's declared field names, and where it sits (property names from the root, and
/// [`ITEMS`] for a sequence's items).
type Declared = (Vec<String>, &'static [&'static str]);

/// The declared field lists `T`'s `Deserialize` reveals, by path.
fn declared_orders<T: DeserializeOwned>() -> Vec<Declared> {
    let found = RefCell::new(Vec::new());
    // The walk ends in an error whenever a placeholder does not satisfy a type; what it
    // recorded up to there is still right.
    let _ = T::deserialize(Recorder {
        path: Vec::new(),
        found: &found,
    });
    found.into_inner()
}

/// Puts every reachable object node's properties (and its `required` list) in the order the
/// Rust type declares them; properties serde does not name keep their place after the others.
pub(super) fn apply_declared_order<T: DeserializeOwned>(schema: &mut ValueSchema) {
    for (path, fields) in declared_orders::<T>() {
        reorder_at(schema, &path, fields);
    }
}

/// Moves the tag of each `oneOf` branch (a property with a `const`, as internally tagged enums
/// have) before the variant's fields, where serde writes it. Serde reads those enums through a
/// buffer, so their field lists cannot be recorded; the fields stay in `schemars`' order.
pub(super) fn tags_first(schema: &mut ValueSchema) {
    match &mut schema.kind {
        SchemaKind::OneOf(branches) => {
            for branch in branches {
                if let SchemaKind::Object(object) = &mut branch.kind {
                    object.properties.sort_by_key(|(_, property)| {
                        !matches!(
                            property.kind,
                            SchemaKind::Scalar {
                                constant: Some(_),
                                ..
                            }
                        )
                    });
                }
                tags_first(branch);
            }
        }
        SchemaKind::Object(object) => {
            for (_, property) in &mut object.properties {
                tags_first(property);
            }
        }
        SchemaKind::Array { items: Some(items) } => tags_first(items),
        _ => {}
    }
}

fn reorder_at(schema: &mut ValueSchema, path: &[String], fields: &[&str]) {
    match &mut schema.kind {
        SchemaKind::OneOf(branches) => {
            for branch in branches {
                reorder_at(branch, path, fields);
            }
        }
        SchemaKind::Array { items: Some(items) } => {
            if let Some((first, rest)) = path.split_first()
                && first == ITEMS
            {
                reorder_at(items, rest, fields);
            }
        }
        SchemaKind::Object(object) => match path.split_first() {
            None => {
                let rank = |name: &str| fields.iter().position(|f| *f == name);
                object
                    .properties
                    .sort_by_key(|(name, _)| rank(name).unwrap_or(usize::MAX));
                object
                    .required
                    .sort_by_key(|name| rank(name).unwrap_or(usize::MAX));
            }
            Some((first, rest)) => {
                if let Some((_, property)) = object.properties.iter_mut().find(|(k, _)| k == first)
                {
                    reorder_at(property, rest, fields);
                }
            }
        },
        _ => {}
    }
}

/// A deserializer that records struct field lists and answers with placeholders.
struct Recorder<'a> {
    path: Vec<String>,
    found: &'a RefCell<Vec<Declared>>,
}

impl<'de> de::Deserializer<'de> for Recorder<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(false)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i8(0)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i16(0)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i32(0)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(0)
    }

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i128(0)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u8(0)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u16(0)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u32(0)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(0)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u128(0)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f32(0.0)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(0.0)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_char(' ')
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_string(String::new())
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bytes(&[])
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_byte_buf(Vec::new())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut path = self.path;
        path.push(ITEMS.to_owned());
        visitor.visit_seq(Items {
            path,
            left: 1,
            found: self.found,
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        // A tuple's positions have schemas of their own; none of them is `ITEMS`.
        let mut path = self.path;
        path.push(String::from("()"));
        visitor.visit_seq(Items {
            path,
            left: len,
            found: self.found,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(de::value::MapDeserializer::new(
            std::iter::empty::<((), ())>(),
        ))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.found.borrow_mut().push((self.path.clone(), fields));
        visitor.visit_map(Fields {
            path: self.path,
            fields: fields.iter(),
            current: None,
            found: self.found,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let Some(first) = variants.first() else {
            return Err(de::Error::custom("an enum without variants"));
        };
        visitor.visit_enum(Variant {
            name: first,
            found: self.found,
        })
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// A struct's fields, each answered by a [`Recorder`] one level deeper.
struct Fields<'a> {
    path: Vec<String>,
    fields: std::slice::Iter<'static, &'static str>,
    current: Option<&'static str>,
    found: &'a RefCell<Vec<Declared>>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(field) = self.fields.next() else {
            return Ok(None);
        };
        self.current = Some(field);
        seed.deserialize(field.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let mut path = self.path.clone();
        path.extend(self.current.map(str::to_owned));
        seed.deserialize(Recorder {
            path,
            found: self.found,
        })
    }
}

/// A sequence of `left` placeholder items, each a [`Recorder`] at `path`.
struct Items<'a> {
    path: Vec<String>,
    left: usize,
    found: &'a RefCell<Vec<Declared>>,
}

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(Recorder {
            path: self.path.clone(),
            found: self.found,
        })
        .map(Some)
    }
}

/// An enum's first variant. Its content is answered with placeholders; where it sits in the
/// schema (a `oneOf` branch, an object keyed by the variant) is not tracked, so a struct
/// variant's field list is recorded under a path no schema node has.
struct Variant<'a> {
    name: &'static str,
    found: &'a RefCell<Vec<Declared>>,
}

impl Variant<'_> {
    fn content(&self) -> Recorder<'_> {
        Recorder {
            path: vec![String::from("<variant>")],
            found: self.found,
        }
    }
}

impl<'de, 'a> EnumAccess<'de> for Variant<'a> {
    type Error = Error;
    type Variant = Variant<'a>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Variant<'a>), Error> {
        let name = seed.deserialize(self.name.into_deserializer())?;
        Ok((name, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self.content())
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self.content(), len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_struct(self.content(), "", fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        zeta: u8,
        alpha: String,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    enum Mode {
        Slow { b: u8, a: u8 },
        Fast,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        command: String,
        timeout_ms: Option<u64>,
        mode: Mode,
        background: bool,
        list: Vec<Inner>,
        inner: Inner,
        maybe: Option<Inner>,
        any: serde_json::Value,
        after: f64,
    }

    fn names(schema: &ValueSchema) -> Vec<&str> {
        schema
            .as_object()
            .unwrap()
            .properties()
            .map(|(k, _)| k)
            .collect()
    }

    #[test]
    fn derived_schemas_follow_the_declared_field_order() {
        let mut schema = ValueSchema::for_type::<Outer>().unwrap();
        assert_eq!(
            names(&schema),
            [
                "after",
                "any",
                "background",
                "command",
                "inner",
                "list",
                "maybe",
                "mode",
                "timeout_ms"
            ],
            "schemars sorts the properties"
        );
        apply_declared_order::<Outer>(&mut schema);
        assert_eq!(
            names(&schema),
            [
                "command",
                "timeout_ms",
                "mode",
                "background",
                "list",
                "inner",
                "maybe",
                "any",
                "after"
            ]
        );
        let object = schema.as_object().unwrap();
        assert_eq!(
            object.required(),
            [
                "command",
                "mode",
                "background",
                "list",
                "inner",
                "any",
                "after"
            ]
        );
        assert_eq!(names(object.property("inner").unwrap()), ["zeta", "alpha"]);
        let SchemaKind::Array { items: Some(items) } = object.property("list").unwrap().kind()
        else {
            panic!("a Vec is an array with items");
        };
        assert_eq!(names(items), ["zeta", "alpha"]);
        let SchemaKind::OneOf(branches) = object.property("maybe").unwrap().kind() else {
            panic!("an optional struct is a oneOf with null");
        };
        assert_eq!(names(&branches[0]), ["zeta", "alpha"]);
    }
}
