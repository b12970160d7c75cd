//! Kubernetes OpenAPI v2 (`swagger.json`) to merge schema, the way kube-apiserver's
//! `util/proto` models and `schemaconv` convert it (the conversion the reference oracle uses).

use super::model::{
    Atom, DEDUCED_TYPE, ElementRelationship, Gvk, List, MapType, Scalar, Schema, SchemaError,
    StructField, TypeDef, TypeRef, UNTYPED_ATOMIC_TYPE, common_types, deduced_atom,
};
use super::openapi_v3::{list_relationship, map_relationship};
use crate::value::{Map, Str, Value};
use std::collections::HashSet;

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const DEF_PREFIX: &str = "#/definitions/";

/// Converts a parsed OpenAPI v2 document. Type names are the definition names.
pub fn from_value(doc: &Value) -> Result<Schema, SchemaError> {
    let defs = doc
        .get_path(&["definitions"])
        .and_then(Value::as_map)
        .ok_or_else(|| SchemaError("OpenAPI v2 document has no `definitions`".into()))?;
    let names: HashSet<&str> = defs.keys().map(|k| k.as_str()).collect();
    let mut sorted: Vec<(&Str, &Value)> = defs.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));

    let mut c = Converter {
        names: &names,
        errors: Vec::new(),
    };
    let mut types = Vec::new();
    let mut gvks = Vec::new();
    for (name, def) in sorted {
        let model = c.parse(def, name)?;
        let mut atom = Atom::default();
        c.visit(&model, &mut atom, name, false);
        if !atom.is_empty() {
            types.push(TypeDef {
                name: name.clone(),
                atom,
            });
        }
        for gvk in gvk_list(def) {
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

/// Reads `x-kubernetes-group-version-kind` of a definition.
pub fn gvk_list(def: &Value) -> Vec<Gvk> {
    let mut out = Vec::new();
    if let Some(Value::List(items)) = def.get_path(&["x-kubernetes-group-version-kind"]) {
        for item in items {
            if let (Some(g), Some(v), Some(k)) = (
                item.str_at(&["group"]),
                item.str_at(&["version"]),
                item.str_at(&["kind"]),
            ) {
                if !k.is_empty() {
                    out.push(Gvk::new(g, v, k));
                }
            }
        }
    }
    out
}

/// The `util/proto` model of a schema.
enum Model<'a> {
    Ref(&'a str, &'a Map),
    Kind(&'a Map, Vec<(&'a Str, Model<'a>)>),
    Map(&'a Map, Box<Model<'a>>),
    Array(&'a Map, Box<Model<'a>>),
    Primitive(&'a Map, &'a str, &'a str),
    Arbitrary(&'a Map),
}

struct Converter<'n> {
    names: &'n HashSet<&'n str>,
    errors: Vec<String>,
}

fn types_of(m: &Map) -> Vec<&str> {
    match m.get("type") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::List(l)) => l.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

impl<'n> Converter<'n> {
    fn parse<'a>(&self, v: &'a Value, path: &str) -> Result<Model<'a>, SchemaError> {
        let err = |m: &str| Err(SchemaError(format!("SchemaError({path}): {m}")));
        let Some(m) = v.as_map() else {
            return err("schema must be an object");
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            if m.get("properties")
                .and_then(Value::as_map)
                .is_some_and(|p| !p.is_empty())
            {
                return err("unallowed embedded type definition");
            }
            if !types_of(m).is_empty() {
                return err("definition reference can't have a type");
            }
            let Some(target) = r.strip_prefix(DEF_PREFIX) else {
                return err(&format!("unallowed reference to non-definition {r:?}"));
            };
            if !self.names.contains(target) {
                return err(&format!("unknown model in reference: {target:?}"));
            }
            return Ok(Model::Ref(target, m));
        }
        let types = types_of(m);
        let props = m.get("properties").and_then(Value::as_map);
        match types.as_slice() {
            [] => match props {
                Some(p) => self.kind(m, p, path),
                None => Ok(Model::Arbitrary(m)),
            },
            ["object"] => match props {
                Some(p) => self.kind(m, p, path),
                None => {
                    let sub = match m.get("additionalProperties") {
                        Some(ap @ Value::Map(_)) => self.parse(ap, path)?,
                        _ => Model::Arbitrary(m),
                    };
                    Ok(Model::Map(m, Box::new(sub)))
                }
            },
            ["array"] => {
                let items = match m.get("items") {
                    Some(i @ Value::Map(_)) => i,
                    Some(Value::List(l)) if l.len() == 1 => &l[0],
                    _ => return err("array should have exactly one sub-item"),
                };
                Ok(Model::Array(m, Box::new(self.parse(items, path)?)))
            }
            [t] => match *t {
                "string" | "number" | "integer" | "boolean" => {
                    let format = m.get("format").and_then(Value::as_str).unwrap_or("");
                    Ok(Model::Primitive(m, t, format))
                }
                other => err(&format!("Unknown primitive type: {other:?}")),
            },
            _ => err("definitions with multiple types aren't supported"),
        }
    }

    fn kind<'a>(&self, m: &'a Map, props: &'a Map, path: &str) -> Result<Model<'a>, SchemaError> {
        let mut fields = Vec::with_capacity(props.len());
        for (name, p) in props.iter() {
            fields.push((name, self.parse(p, &format!("{path}.{name}"))?));
        }
        Ok(Model::Kind(m, fields))
    }

    fn report(&mut self, at: &str, msg: String) {
        self.errors.push(format!("{at}: {msg}"));
    }

    fn map_type_ext(&mut self, m: &Map, at: &str) -> Option<ElementRelationship> {
        map_relationship(m).unwrap_or_else(|e| {
            self.report(at, e);
            None
        })
    }

    /// schemaconv's visitor: fills `atom` for `model`.
    fn visit(&mut self, model: &Model, atom: &mut Atom, at: &str, puf: bool) {
        match model {
            Model::Ref(..) => {}
            Model::Kind(m, fields) => {
                let puf = puf
                    || m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
                let mut out = Vec::with_capacity(fields.len());
                for (name, member) in fields {
                    let ty = self.make_ref(member, at, puf);
                    out.push(StructField {
                        name: (*name).clone(),
                        ty,
                        default: model_default(member),
                    });
                }
                let elem = if puf {
                    TypeRef::named(DEDUCED_TYPE)
                } else {
                    TypeRef::EMPTY
                };
                let er = self.map_type_ext(m, at).unwrap_or_default();
                atom.map = Some(Box::new(MapType::new(out, elem, er)));
            }
            Model::Map(m, sub) => {
                let elem = self.make_ref(sub, at, puf);
                let er = self.map_type_ext(m, at).unwrap_or_default();
                atom.map = Some(Box::new(MapType::new(vec![], elem, er)));
            }
            Model::Array(m, sub) => {
                let elem = self.make_ref(sub, at, puf);
                let (er, keys) = self.list_ext(m, at);
                atom.list = Some(Box::new(List {
                    element_type: elem,
                    element_relationship: er,
                    keys,
                }));
            }
            Model::Primitive(_, t, format) => {
                atom.scalar = Some(if at == QUANTITY {
                    Scalar::Untyped
                } else {
                    match (*t, *format) {
                        ("integer" | "number", _) => Scalar::Numeric,
                        ("string", "" | "byte") => Scalar::String,
                        ("string", _) => Scalar::Untyped,
                        ("boolean", _) => Scalar::Boolean,
                        _ => Scalar::Untyped,
                    }
                });
            }
            Model::Arbitrary(_) => *atom = deduced_atom(),
        }
    }

    fn make_ref(&mut self, model: &Model, at: &str, puf: bool) -> TypeRef {
        if let Model::Ref(target, _) = model {
            if *target == RAW_EXTENSION {
                return TypeRef::named(UNTYPED_ATOMIC_TYPE);
            }
            let n = target.rsplit('/').next().unwrap_or(target);
            return TypeRef::named(n);
        }
        let mut inlined = Atom::default();
        self.visit(model, &mut inlined, &format!("inlined in {at}"), puf);
        if inlined.is_empty() {
            return TypeRef::named(UNTYPED_ATOMIC_TYPE);
        }
        TypeRef::inline(inlined)
    }

    fn list_ext(&mut self, m: &Map, at: &str) -> (ElementRelationship, Vec<Str>) {
        let (er, keys, problem) = list_relationship(m);
        if let Some(e) = problem {
            self.report(at, e);
        }
        (er, keys)
    }
}

fn model_default(m: &Model) -> Option<Value> {
    let map = match m {
        Model::Ref(_, m)
        | Model::Kind(m, _)
        | Model::Map(m, _)
        | Model::Array(m, _)
        | Model::Primitive(m, _, _)
        | Model::Arbitrary(m) => m,
    };
    map.get("default").filter(|d| !d.is_null()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    #[test]
    fn converts_like_schemaconv() {
        let doc = json::parse(
            br##"{"definitions":{
              "a.Thing":{"type":"object","x-kubernetes-group-version-kind":[{"group":"ex.com","version":"v1","kind":"Thing"}],
                "properties":{
                  "items":{"type":"array","items":{"$ref":"#/definitions/a.Item"},"x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name"},
                  "tags":{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"set"},
                  "sel":{"type":"object","additionalProperties":{"type":"string"},"x-kubernetes-map-type":"atomic"},
                  "raw":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.runtime.RawExtension"},
                  "port":{"type":"string","format":"int-or-string"},
                  "any":{}
                }},
              "a.Item":{"type":"object","properties":{"name":{"type":"string"}}},
              "io.k8s.apimachinery.pkg.runtime.RawExtension":{"type":"object"},
              "io.k8s.apimachinery.pkg.api.resource.Quantity":{"type":"string"}
            }}"##,
        )
        .unwrap();
        let s = from_value(&doc).unwrap();
        assert_eq!(
            s.type_for(&Gvk::new("ex.com", "v1", "Thing")),
            Some("a.Thing")
        );
        let t = s.find_named("a.Thing").unwrap().atom.map.as_ref().unwrap();
        let items = t
            .find_field("items")
            .unwrap()
            .ty
            .inlined
            .list
            .as_ref()
            .unwrap();
        assert_eq!(items.element_relationship, ElementRelationship::Associative);
        assert_eq!(items.keys, vec!["name"]);
        let sel = s.resolve(&t.find_field("sel").unwrap().ty).unwrap();
        assert_eq!(sel.map_er(), ElementRelationship::Atomic);
        assert_eq!(
            t.find_field("raw").unwrap().ty.name(),
            Some(UNTYPED_ATOMIC_TYPE)
        );
        assert_eq!(
            t.find_field("port").unwrap().ty.inlined.scalar,
            Some(Scalar::Untyped)
        );
        let any = &t.find_field("any").unwrap().ty.inlined;
        assert!(any.scalar.is_some() && any.list.is_some() && any.map.is_some());
        let q = s.find_named(QUANTITY).unwrap();
        assert_eq!(q.atom.scalar, Some(Scalar::Untyped));
    }
}
