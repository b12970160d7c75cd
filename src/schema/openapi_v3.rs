//! OpenAPI v3 (as kube-apiserver serves it at `/openapi/v3/<group-version>`, and as it builds it
//! for CRDs) to merge schema, following kube-openapi's `ToSchemaFromOpenAPI`: `allOf: [{$ref}]`
//! fields, field-level `x-kubernetes-map-type` overrides, defaults, preserve-unknown-fields.

use super::model::{
    Atom, DEDUCED_TYPE, ElementRelationship, List, MapType, Scalar, Schema, SchemaError,
    StructField, TypeDef, TypeRef, UNTYPED_ATOMIC_TYPE, common_types,
};
use super::openapi_v2::gvk_list;
use crate::value::{Map, Str, Value};

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";

/// Converts one OpenAPI v3 document (its `components.schemas`).
pub fn from_value(doc: &Value) -> Result<Schema, SchemaError> {
    let schemas = doc
        .get_path(&["components", "schemas"])
        .and_then(Value::as_map)
        .ok_or_else(|| SchemaError("OpenAPI v3 document has no `components.schemas`".into()))?;
    from_models(schemas, false)
}

/// Converts several OpenAPI v3 documents into one schema (later documents win on name clashes).
pub fn from_documents(docs: &[Value]) -> Result<Schema, SchemaError> {
    let mut merged = Map::new();
    for d in docs {
        let schemas = d
            .get_path(&["components", "schemas"])
            .and_then(Value::as_map)
            .ok_or_else(|| SchemaError("OpenAPI v3 document has no `components.schemas`".into()))?;
        for (k, v) in schemas.iter() {
            merged.insert(k.clone(), v.clone());
        }
    }
    from_models(&merged, false)
}

/// Converts named OpenAPI v3 schemas (`ToSchemaFromOpenAPI`).
pub fn from_models(models: &Map, preserve_unknown_fields: bool) -> Result<Schema, SchemaError> {
    let mut c = Converter { errors: Vec::new() };
    let mut types = Vec::new();
    let mut gvks = Vec::new();
    for (name, spec) in models.iter() {
        let Some(m) = spec.as_map() else {
            return Err(SchemaError(format!("{name}: schema must be an object")));
        };
        if m.get("$ref")
            .is_some_and(|r| !r.as_str().unwrap_or("").is_empty())
        {
            continue;
        }
        // As kube-openapi's `ToSchemaFromOpenAPI` does: a Quantity is an untyped scalar, a
        // RawExtension (a ControllerRevision's `data`, a device configuration's
        // `parameters`) is `__untyped_atomic_`: a scalar, list or map, replaced whole.
        let atom = if name == QUANTITY {
            Atom::scalar(Scalar::Untyped)
        } else if name == RAW_EXTENSION {
            common_types().swap_remove(0).atom
        } else {
            c.visit(m, name, preserve_unknown_fields)
        };
        if !atom.is_empty() {
            types.push(TypeDef {
                name: name.clone(),
                atom,
            });
        }
        for gvk in gvk_list(spec) {
            gvks.push((gvk, name.clone()));
        }
    }
    if !c.errors.is_empty() {
        return Err(SchemaError(c.errors.join("\n")));
    }
    types.extend(common_types());
    let mut s = Schema::new(types);
    for (gvk, name) in gvks {
        s.add_gvk(gvk, &name);
    }
    Ok(s)
}

struct Converter {
    errors: Vec<String>,
}

pub(super) fn map_relationship(m: &Map) -> Result<Option<ElementRelationship>, String> {
    match m.get("x-kubernetes-map-type") {
        None => Ok(None),
        Some(Value::String(s)) if s == "atomic" => Ok(Some(ElementRelationship::Atomic)),
        Some(Value::String(s)) if s == "granular" => Ok(Some(ElementRelationship::Separable)),
        Some(other) => Err(format!("unknown map type {}", show(other))),
    }
}

fn show(v: &Value) -> String {
    crate::value::json::to_string(v, crate::value::json::Style::PLAIN)
}

/// The list's relationship and keys, plus a conversion error (reported, not fatal to the value).
pub(super) fn list_relationship(m: &Map) -> (ElementRelationship, Vec<Str>, Option<String>) {
    use ElementRelationship::*;
    if let Some(lt) = m.get("x-kubernetes-list-type") {
        return match lt.as_str() {
            Some("atomic") => (Atomic, vec![], None),
            Some("set") => (Associative, vec![], None),
            Some("map") => match m.get("x-kubernetes-list-map-keys") {
                None => (Associative, vec![], Some("missing map keys".into())),
                Some(Value::List(keys)) => (
                    Associative,
                    keys.iter()
                        .filter_map(|k| k.as_str().map(Str::from))
                        .collect(),
                    None,
                ),
                Some(other) => (
                    Associative,
                    vec![],
                    Some(format!("uninterpreted map keys: {}", show(other))),
                ),
            },
            _ => (
                Atomic,
                vec![],
                Some(format!("unknown list type {}", show(lt))),
            ),
        };
    }
    if let Some(ps) = m.get("x-kubernetes-patch-strategy") {
        return match ps.as_str() {
            Some("merge" | "merge,retainKeys") => match m.get("x-kubernetes-patch-merge-key") {
                Some(Value::String(k)) => (Associative, vec![k.clone()], None),
                Some(other) => (
                    Associative,
                    vec![],
                    Some(format!("uninterpreted merge key: {}", show(other))),
                ),
                None => (Associative, vec![], None),
            },
            Some("retainKeys") => (Atomic, vec![], None),
            _ => (
                Atomic,
                vec![],
                Some(format!("unknown patch strategy {}", show(ps))),
            ),
        };
    }
    (Atomic, vec![], None)
}

fn ref_name(m: &Map) -> Option<&str> {
    let r = match m.get("$ref").and_then(Value::as_str) {
        Some(r) if !r.is_empty() => r,
        _ => match m.get("allOf") {
            Some(Value::List(l)) if l.len() == 1 => {
                l[0].str_at(&["$ref"]).filter(|r| !r.is_empty())?
            }
            _ => return None,
        },
    };
    let n = r.rsplit('/').next().unwrap_or(r);
    (!n.is_empty()).then_some(n)
}

impl Converter {
    fn report(&mut self, at: &str, msg: String) {
        self.errors.push(format!("{at}: {msg}"));
    }

    fn visit(&mut self, m: &Map, at: &str, puf: bool) -> Atom {
        let puf = puf || m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        let typ = match m.get("type") {
            Some(Value::String(s)) => s.as_str(),
            Some(Value::List(l)) => l.first().and_then(Value::as_str).unwrap_or(""),
            _ => "",
        };
        match typ {
            "" => Atom {
                scalar: Some(Scalar::Untyped),
                list: Some(Box::new(self.list(m, at, puf))),
                map: Some(Box::new(self.object(m, at, puf))),
            },
            "object" => Atom {
                map: Some(Box::new(self.object(m, at, puf))),
                ..Atom::default()
            },
            "array" => Atom {
                list: Some(Box::new(self.list(m, at, puf))),
                ..Atom::default()
            },
            "integer" | "number" => Atom::scalar(Scalar::Numeric),
            "boolean" => Atom::scalar(Scalar::Boolean),
            "string" => Atom::scalar(
                match m.get("format").and_then(Value::as_str).unwrap_or("") {
                    "" | "byte" => Scalar::String,
                    _ => Scalar::Untyped,
                },
            ),
            other => {
                self.report(at, format!("unrecognized type: '{other}'"));
                Atom::scalar(Scalar::Untyped)
            }
        }
    }

    fn make_ref(&mut self, s: &Value, at: &str, puf: bool) -> TypeRef {
        let Some(m) = s.as_map() else {
            // `true`/`false` schemas are not structural; treat as "anything".
            return TypeRef::named(DEDUCED_TYPE);
        };
        if let Some(n) = ref_name(m) {
            let mut tr = TypeRef::named(n);
            match map_relationship(m) {
                Ok(Some(er)) => tr.element_relationship = Some(er),
                Ok(None) => {}
                Err(e) => self.report(at, e),
            }
            return tr;
        }
        TypeRef::inline(self.visit(m, &format!("inlined in {at}"), puf))
    }

    fn object(&mut self, m: &Map, at: &str, puf: bool) -> MapType {
        let props = m.get("properties").and_then(Value::as_map);
        let mut fields = Vec::new();
        if let Some(props) = props {
            for (name, member) in props.iter() {
                fields.push(StructField {
                    name: name.clone(),
                    ty: self.make_ref(member, at, puf),
                    default: member
                        .get_path(&["default"])
                        .filter(|d| !d.is_null())
                        .cloned(),
                });
            }
        }
        let no_props = props.is_none_or(|p| p.is_empty());
        let elem = match m.get("additionalProperties") {
            None | Some(Value::Null) => {
                if puf || no_props {
                    TypeRef::named(DEDUCED_TYPE)
                } else {
                    TypeRef::EMPTY
                }
            }
            Some(Value::Bool(true)) => TypeRef::named(DEDUCED_TYPE),
            Some(Value::Bool(false)) => TypeRef::EMPTY,
            Some(s) => self.make_ref(s, at, puf),
        };
        let er = match map_relationship(m) {
            Ok(er) => er.unwrap_or_default(),
            Err(e) => {
                self.report(at, e);
                ElementRelationship::default()
            }
        };
        MapType::new(fields, elem, er)
    }

    fn list(&mut self, m: &Map, at: &str, puf: bool) -> List {
        let (er, keys, problem) = list_relationship(m);
        if let Some(e) = problem {
            self.report(at, e);
        }
        let typed = !matches!(m.get("type"), None | Some(Value::Null))
            && m.get("type").and_then(Value::as_str) != Some("");
        let elem = match m.get("items") {
            Some(items @ Value::Map(_)) => self.make_ref(items, at, puf),
            Some(Value::List(l)) if l.len() == 1 => self.make_ref(&l[0], at, puf),
            Some(_) => {
                self.report(
                    at,
                    "structural schema arrays must have exactly one member subtype".into(),
                );
                TypeRef::named(DEDUCED_TYPE)
            }
            None => {
                if typed {
                    self.report(at, "`items` must be specified on arrays".into());
                }
                TypeRef::named(UNTYPED_ATOMIC_TYPE)
            }
        };
        List {
            element_type: elem,
            element_relationship: er,
            keys,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    #[test]
    fn allof_refs_overrides_and_defaults() {
        let doc = json::parse(
            br##"{"components":{"schemas":{
              "x.Spec":{"type":"object","properties":{
                 "ref":{"allOf":[{"$ref":"#/components/schemas/x.Obj"}],"x-kubernetes-map-type":"atomic","default":{}},
                 "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["port","protocol"],
                          "items":{"$ref":"#/components/schemas/x.Port"}},
                 "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true,
                         "properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}},
                 "ios":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]}
              }},
              "x.Obj":{"type":"object","properties":{"name":{"type":"string"}}},
              "x.Port":{"type":"object","properties":{"port":{"type":"integer"},"protocol":{"type":"string","default":"TCP"}}}
            }}}"##,
        )
        .unwrap();
        let s = from_value(&doc).unwrap();
        let spec = s.find_named("x.Spec").unwrap().atom.map.as_ref().unwrap();
        let r = s.resolve(&spec.find_field("ref").unwrap().ty).unwrap();
        assert_eq!(r.map_er(), ElementRelationship::Atomic);
        let port = s.find_named("x.Port").unwrap().atom.map.as_ref().unwrap();
        assert!(port.find_field("protocol").unwrap().default.is_some());
        let free = &spec.find_field("free").unwrap().ty.inlined;
        let fm = free.map.as_ref().unwrap();
        assert_eq!(fm.element_type.name(), Some(DEDUCED_TYPE));
        // preserve-unknown-fields is inherited by descendants
        let a = fm.find_field("a").unwrap().ty.inlined.map.as_ref().unwrap();
        assert_eq!(a.element_type.name(), Some(DEDUCED_TYPE));
        let ios = &spec.find_field("ios").unwrap().ty.inlined;
        assert_eq!(ios.scalar, Some(Scalar::Untyped));
    }

    #[test]
    fn a_raw_extension_is_untyped_atomic_and_a_quantity_an_untyped_scalar() {
        let doc = json::parse(
            br##"{"components":{"schemas":{
              "io.k8s.apimachinery.pkg.runtime.RawExtension":{"type":"object"},
              "io.k8s.apimachinery.pkg.api.resource.Quantity":{"type":"string"}
            }}}"##,
        )
        .unwrap();
        let s = from_value(&doc).unwrap();
        let raw = &s.find_named(RAW_EXTENSION).unwrap().atom;
        assert_eq!(raw.scalar, Some(Scalar::Untyped));
        assert_eq!(
            raw.map.as_ref().unwrap().element_relationship,
            ElementRelationship::Atomic
        );
        assert_eq!(
            raw.list.as_ref().unwrap().element_relationship,
            ElementRelationship::Atomic
        );
        let q = &s.find_named(QUANTITY).unwrap().atom;
        assert_eq!((q.scalar, q.map.is_none()), (Some(Scalar::Untyped), true));
    }
}
