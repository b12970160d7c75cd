//! The built-in schemas, compiled: each bundled Kubernetes version's converted schema and
//! formats, encoded with `postcard` and shipped inside the binary, so a command reads them in a
//! few milliseconds instead of decompressing, parsing and converting the OpenAPI document and
//! the smd overlay (about 50 ms, every process that checks a built-in kind).
//!
//! The encoding is canonical (maps are written sorted), so the bytes of a bundle are a function
//! of its sources alone. `builtin`'s tests convert the sources again and require the shipped
//! bytes to equal the fresh ones; `FIELDGUARD_REGENERATE_SCHEMAS=1 cargo test
//! compiled_schemas_match_their_sources` rewrites them after the sources change.

use super::formats::Formats;
use super::model::{Gvk, Schema, SchemaError, TypeDef};
use crate::value::{Map, Str, Value};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;

/// What is written: the types in schema order, the kinds sorted, the formats.
#[cfg(test)]
#[derive(Serialize)]
struct Writing<'a> {
    types: &'a [TypeDef],
    gvks: Vec<(&'a Gvk, &'a str)>,
    formats: &'a Formats,
}

/// What is read back (the same layout, owned).
#[derive(Deserialize)]
struct Reading {
    types: Vec<TypeDef>,
    gvks: Vec<(Gvk, Str)>,
    formats: Formats,
}

/// The canonical encoding of a schema and its formats (the tests write it; processes read it).
#[cfg(test)]
pub fn encode(schema: &Schema, formats: &Formats) -> Result<Vec<u8>, SchemaError> {
    let mut gvks: Vec<(&Gvk, &str)> = schema.gvks().collect();
    gvks.sort();
    postcard::to_allocvec(&Writing {
        types: schema.types(),
        gvks,
        formats,
    })
    .map_err(|e| SchemaError(format!("encoding a compiled schema: {e}")))
}

/// A schema and its formats from [`encode`]'s bytes (indexed and linked as [`Schema::new`]
/// does).
pub fn decode(bytes: &[u8]) -> Result<(Schema, Formats), SchemaError> {
    let r: Reading = postcard::from_bytes(bytes)
        .map_err(|e| SchemaError(format!("corrupt compiled schema: {e}")))?;
    let mut schema = Schema::new(r.types);
    for (gvk, name) in r.gvks {
        schema.add_gvk(gvk, &name);
    }
    Ok((schema, r.formats))
}

/// Serializes a map in key order (the encoding stays a function of the content).
pub(super) fn sorted<K, V, H, S>(map: &HashMap<K, V, H>, s: S) -> Result<S::Ok, S::Error>
where
    K: Ord + Serialize,
    V: Serialize,
    S: Serializer,
{
    let mut entries: Vec<(&K, &V)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    s.collect_map(entries)
}

/// [`sorted`] for an optional map.
pub(super) fn sorted_optional<K, V, H, S>(
    map: &Option<HashMap<K, V, H>>,
    s: S,
) -> Result<S::Ok, S::Error>
where
    K: Ord + Serialize,
    V: Serialize,
    S: Serializer,
{
    struct Sorted<'a, K, V, H>(&'a HashMap<K, V, H>);
    impl<K: Ord + Serialize, V: Serialize, H> Serialize for Sorted<'_, K, V, H> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            sorted(self.0, s)
        }
    }
    map.as_ref().map(Sorted).serialize(s)
}

/// A value as the compiled schema holds it (a field default): exact, integers stay integers.
#[derive(Serialize, Deserialize)]
enum Wire {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(Str),
    List(Vec<Wire>),
    Map(Vec<(Str, Wire)>),
}

impl Wire {
    fn of(v: &Value) -> Wire {
        match v {
            Value::Null => Wire::Null,
            Value::Bool(b) => Wire::Bool(*b),
            Value::Int(i) => Wire::Int(*i),
            Value::Float(f) => Wire::Float(*f),
            Value::String(s) => Wire::String(s.clone()),
            Value::List(l) => Wire::List(l.iter().map(Wire::of).collect()),
            Value::Map(m) => Wire::Map(m.iter().map(|(k, v)| (k.clone(), Wire::of(v))).collect()),
        }
    }

    fn value(self) -> Value {
        match self {
            Wire::Null => Value::Null,
            Wire::Bool(b) => Value::Bool(b),
            Wire::Int(i) => Value::Int(i),
            Wire::Float(f) => Value::Float(f),
            Wire::String(s) => Value::String(s),
            Wire::List(l) => Value::List(l.into_iter().map(Wire::value).collect()),
            Wire::Map(m) => Value::Map(m.into_iter().map(|(k, v)| (k, v.value())).collect::<Map>()),
        }
    }
}

/// Serde for `StructField::default`.
pub(super) mod optional_value {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().map(Wire::of).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Ok(Option::<Wire>::deserialize(d)?.map(Wire::value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Atom, ElementRelationship, List, MapType, Scalar, StructField, TypeRef};

    fn sample() -> Schema {
        let mut key_default = Map::new();
        key_default.insert("port", Value::Int(80));
        key_default.insert("ratio", Value::Float(1.0));
        let mut s = Schema::new(vec![
            TypeDef {
                name: "item".into(),
                atom: Atom {
                    map: Some(Box::new(MapType::new(
                        vec![
                            StructField {
                                name: "name".into(),
                                ty: TypeRef::inline(Atom::scalar(Scalar::String)),
                                default: None,
                            },
                            StructField {
                                name: "protocol".into(),
                                ty: TypeRef::inline(Atom::scalar(Scalar::String)),
                                default: Some(Value::String("TCP".into())),
                            },
                            StructField {
                                name: "extra".into(),
                                ty: TypeRef::named("item"),
                                default: Some(Value::Map(key_default)),
                            },
                        ],
                        TypeRef::EMPTY,
                        ElementRelationship::Separable,
                    ))),
                    ..Atom::default()
                },
            },
            TypeDef {
                name: "top".into(),
                atom: Atom {
                    list: Some(Box::new(List {
                        element_type: TypeRef::named("item"),
                        element_relationship: ElementRelationship::Associative,
                        keys: vec!["name".into(), "protocol".into()],
                    })),
                    ..Atom::default()
                },
            },
        ]);
        s.add_gvk(Gvk::new("g", "v1", "Top"), "top");
        s.add_gvk(Gvk::new("", "v1", "Item"), "item");
        s
    }

    #[test]
    fn a_schema_reads_back_linked_and_encodes_to_the_same_bytes() {
        let s = sample();
        let bytes = encode(&s, &Formats::default()).unwrap();
        let (back, _) = decode(&bytes).unwrap();
        assert_eq!(encode(&back, &Formats::default()).unwrap(), bytes);
        assert_eq!(back.type_for(&Gvk::new("g", "v1", "Top")), Some("top"));
        // References are linked again: the list's element resolves to the map type.
        let top = back.type_ref("top");
        let list = back.resolve(&top).unwrap().list.unwrap();
        let item = back.resolve(&list.element_type).unwrap().map.unwrap();
        assert_eq!(list.keys, ["name", "protocol"]);
        let protocol = item.find_field("protocol").unwrap();
        assert!(matches!(&protocol.default, Some(Value::String(s)) if s == "TCP"));
        // Defaults keep integers and floats apart.
        let extra = item.find_field("extra").unwrap().default.as_ref().unwrap();
        assert!(matches!(extra.get_path(&["port"]), Some(Value::Int(80))));
        assert!(matches!(extra.get_path(&["ratio"]), Some(Value::Float(f)) if *f == 1.0));
    }

    #[test]
    fn kinds_are_written_in_order_whatever_the_map_holds() {
        let a = sample();
        let mut b = Schema::new(a.types().to_vec());
        b.add_gvk(Gvk::new("", "v1", "Item"), "item");
        b.add_gvk(Gvk::new("g", "v1", "Top"), "top");
        let f = Formats::default();
        assert_eq!(encode(&a, &f).unwrap(), encode(&b, &f).unwrap());
    }

    #[test]
    fn corrupt_bytes_are_an_error() {
        let bytes = encode(&sample(), &Formats::default()).unwrap();
        assert!(decode(&bytes[..bytes.len() / 2]).is_err());
        assert!(decode(&[0xff; 16]).is_err());
    }
}
