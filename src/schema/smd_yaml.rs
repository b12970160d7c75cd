//! The structured-merge-diff schema format (`types: [{name, map|list|scalar}]`), as Kubernetes
//! generates it for client-go's apply configurations. Used to cross-check conversions and to
//! complete OpenAPI v2 schemas with field defaults.

use super::model::{
    Atom, ElementRelationship, List, MapType, Scalar, Schema, SchemaError, StructField, TypeDef,
    TypeRef,
};
use crate::value::{Map, Str, Value};

/// Parses an smd schema from YAML or JSON text.
pub fn parse(text: &str) -> Result<Schema, SchemaError> {
    let v =
        crate::value::yaml::parse_one(text).map_err(|e| SchemaError(format!("smd schema: {e}")))?;
    from_value(&v)
}

/// Builds a schema from its parsed form.
pub fn from_value(v: &Value) -> Result<Schema, SchemaError> {
    let root = v
        .as_map()
        .ok_or_else(|| SchemaError("smd schema must be a mapping with `types`".into()))?;
    check_keys(root, &["types"], "schema")?;
    let types = match root.get("types") {
        Some(Value::List(l)) => l,
        Some(Value::Null) | None => return Ok(Schema::new(vec![])),
        _ => return Err(SchemaError("`types` must be a list".into())),
    };
    let mut out = Vec::with_capacity(types.len());
    for (i, t) in types.iter().enumerate() {
        let m = t
            .as_map()
            .ok_or_else(|| SchemaError(format!("types[{i}] must be a mapping")))?;
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| SchemaError(format!("types[{i}] has no name")))?;
        let ctx = format!("type {name}");
        check_keys(m, &["name", "scalar", "list", "map", "untyped"], &ctx)?;
        out.push(TypeDef {
            name: Str::from(name),
            atom: atom(m, &ctx)?,
        });
    }
    Ok(Schema::new(out))
}

fn check_keys(m: &Map, allowed: &[&str], ctx: &str) -> Result<(), SchemaError> {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(SchemaError(format!("{ctx}: unknown key {k:?}")));
        }
    }
    Ok(())
}

fn atom(m: &Map, ctx: &str) -> Result<Atom, SchemaError> {
    let mut a = Atom::default();
    if let Some(s) = m.get("scalar") {
        let s = s
            .as_str()
            .and_then(Scalar::parse)
            .ok_or_else(|| SchemaError(format!("{ctx}: invalid scalar {s:?}")))?;
        a.scalar = Some(s);
    }
    if m.contains_key("untyped") {
        // The pre-v2 smd format; same as an untyped scalar.
        a.scalar = Some(Scalar::Untyped);
    }
    if let Some(l) = m.get("list") {
        let lm = l
            .as_map()
            .ok_or_else(|| SchemaError(format!("{ctx}: list must be a mapping")))?;
        check_keys(lm, &["elementType", "elementRelationship", "keys"], ctx)?;
        let keys = match lm.get("keys") {
            Some(Value::List(k)) => k
                .iter()
                .map(|k| {
                    k.as_str()
                        .map(Str::from)
                        .ok_or_else(|| SchemaError(format!("{ctx}: list keys must be strings")))
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Null) | None => vec![],
            _ => return Err(SchemaError(format!("{ctx}: keys must be a list"))),
        };
        a.list = Some(Box::new(List {
            element_type: type_ref(lm.get("elementType"), ctx)?,
            element_relationship: relationship(lm.get("elementRelationship"), ctx)?,
            keys,
        }));
    }
    if let Some(mv) = m.get("map") {
        let mm = mv
            .as_map()
            .ok_or_else(|| SchemaError(format!("{ctx}: map must be a mapping")))?;
        check_keys(
            mm,
            &["fields", "elementType", "elementRelationship", "unions"],
            ctx,
        )?;
        let mut fields = Vec::new();
        if let Some(Value::List(fs)) = mm.get("fields") {
            for f in fs {
                let fm = f
                    .as_map()
                    .ok_or_else(|| SchemaError(format!("{ctx}: fields must be mappings")))?;
                check_keys(fm, &["name", "type", "default"], ctx)?;
                let name = fm
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| SchemaError(format!("{ctx}: field without name")))?;
                let fctx = format!("{ctx}.{name}");
                fields.push(StructField {
                    name: Str::from(name),
                    ty: type_ref(fm.get("type"), &fctx)?,
                    default: fm.get("default").filter(|d| !d.is_null()).cloned(),
                });
            }
        }
        a.map = Some(Box::new(MapType::new(
            fields,
            type_ref(mm.get("elementType"), ctx)?,
            relationship(mm.get("elementRelationship"), ctx)?,
        )));
    }
    Ok(a)
}

fn relationship(v: Option<&Value>, ctx: &str) -> Result<ElementRelationship, SchemaError> {
    match v {
        None | Some(Value::Null) => Ok(ElementRelationship::Separable),
        Some(Value::String(s)) => ElementRelationship::parse(s)
            .ok_or_else(|| SchemaError(format!("{ctx}: invalid elementRelationship {s:?}"))),
        Some(other) => Err(SchemaError(format!(
            "{ctx}: invalid elementRelationship {other:?}"
        ))),
    }
}

fn type_ref(v: Option<&Value>, ctx: &str) -> Result<TypeRef, SchemaError> {
    let Some(v) = v else {
        return Ok(TypeRef::EMPTY);
    };
    let Some(m) = v.as_map() else {
        if v.is_null() {
            return Ok(TypeRef::EMPTY);
        }
        return Err(SchemaError(format!("{ctx}: type must be a mapping")));
    };
    check_keys(
        m,
        &[
            "namedType",
            "scalar",
            "list",
            "map",
            "untyped",
            "elementRelationship",
        ],
        ctx,
    )?;
    let mut tr = TypeRef::inline(atom(m, ctx)?);
    if let Some(n) = m.get("namedType").and_then(Value::as_str) {
        tr.named = Some(Str::from(n));
    }
    if let Some(er) = m.get("elementRelationship") {
        tr.element_relationship = Some(relationship(Some(er), ctx)?);
    }
    Ok(tr)
}

/// Differences between two schemas over the types they share (used to cross-check converters).
/// Compares atoms structurally; optionally ignores field defaults.
pub fn diff(a: &Schema, b: &Schema, ignore_defaults: bool) -> Vec<String> {
    let mut out = Vec::new();
    for t in a.types() {
        if let Some(o) = b.find_named(&t.name) {
            diff_atom(&t.atom, &o.atom, &t.name, ignore_defaults, &mut out);
        }
    }
    out
}

fn diff_atom(a: &Atom, b: &Atom, at: &str, nd: bool, out: &mut Vec<String>) {
    if a.scalar != b.scalar {
        out.push(format!("{at}: scalar {:?} vs {:?}", a.scalar, b.scalar));
    }
    match (&a.list, &b.list) {
        (Some(x), Some(y)) => {
            if x.element_relationship != y.element_relationship || x.keys != y.keys {
                out.push(format!(
                    "{at}: list {:?}{:?} vs {:?}{:?}",
                    x.element_relationship, x.keys, y.element_relationship, y.keys
                ));
            }
            diff_ref(
                &x.element_type,
                &y.element_type,
                &format!("{at}[]"),
                nd,
                out,
            );
        }
        (None, None) => {}
        _ => out.push(format!("{at}: list presence differs")),
    }
    match (&a.map, &b.map) {
        (Some(x), Some(y)) => {
            if x.element_relationship != y.element_relationship {
                out.push(format!(
                    "{at}: map {:?} vs {:?}",
                    x.element_relationship, y.element_relationship
                ));
            }
            diff_ref(
                &x.element_type,
                &y.element_type,
                &format!("{at}{{}}"),
                nd,
                out,
            );
            let mut names: Vec<&str> = x.fields.iter().map(|f| f.name.as_str()).collect();
            let mut onames: Vec<&str> = y.fields.iter().map(|f| f.name.as_str()).collect();
            names.sort_unstable();
            onames.sort_unstable();
            if names != onames {
                out.push(format!("{at}: fields {names:?} vs {onames:?}"));
                return;
            }
            for f in &x.fields {
                let g = y.find_field(&f.name).expect("same names");
                let fat = format!("{at}.{}", f.name);
                if !nd {
                    let same = match (&f.default, &g.default) {
                        (None, None) => true,
                        (Some(p), Some(q)) => p.strict_eq(q),
                        _ => false,
                    };
                    if !same {
                        out.push(format!("{fat}: default {:?} vs {:?}", f.default, g.default));
                    }
                }
                diff_ref(&f.ty, &g.ty, &fat, nd, out);
            }
        }
        (None, None) => {}
        _ => out.push(format!("{at}: map presence differs")),
    }
}

/// True for `__untyped_deduced_`, named or written out inline (v2 conversion inlines it).
fn is_deduced(t: &TypeRef) -> bool {
    if t.named.as_deref() == Some(super::DEDUCED_TYPE) {
        return true;
    }
    let a = &t.inlined;
    t.named.is_none()
        && a.scalar == Some(Scalar::Untyped)
        && a.list.as_ref().is_some_and(|l| {
            l.element_relationship == ElementRelationship::Atomic
                && l.element_type.named.as_deref() == Some(super::UNTYPED_ATOMIC_TYPE)
        })
        && a.map.as_ref().is_some_and(|m| {
            m.fields.is_empty()
                && m.element_relationship == ElementRelationship::Separable
                && m.element_type.named.as_deref() == Some(super::DEDUCED_TYPE)
        })
}

fn diff_ref(a: &TypeRef, b: &TypeRef, at: &str, nd: bool, out: &mut Vec<String>) {
    if a.element_relationship == b.element_relationship && is_deduced(a) && is_deduced(b) {
        return;
    }
    if a.named != b.named || a.element_relationship != b.element_relationship {
        out.push(format!(
            "{at}: ref {:?}/{:?} vs {:?}/{:?}",
            a.named, a.element_relationship, b.named, b.element_relationship
        ));
        return;
    }
    diff_atom(&a.inlined, &b.inlined, at, nd, out);
}

/// The smd form of a schema (`{"types": [...]}`), as JSON-compatible value. With `only`, just
/// those types and everything they reference.
pub fn to_value(schema: &Schema, only: Option<&[&str]>) -> Value {
    let types: Vec<&TypeDef> = match only {
        None => schema.types().iter().collect(),
        Some(roots) => {
            let names: Vec<Str> = schema.closure(roots).into_iter().map(|t| t.name).collect();
            schema
                .types()
                .iter()
                .filter(|t| names.contains(&t.name))
                .collect()
        }
    };
    let mut root = Map::new();
    root.insert(
        "types",
        Value::List(
            types
                .iter()
                .map(|t| {
                    let mut m = atom_value(&t.atom);
                    m.entries_mut()
                        .insert(0, (Str::from("name"), Value::from(t.name.as_str())));
                    Value::Map(m)
                })
                .collect(),
        ),
    );
    Value::Map(root)
}

fn atom_value(a: &Atom) -> Map {
    let mut m = Map::new();
    if let Some(s) = a.scalar {
        m.insert("scalar", Value::from(s.as_str()));
    }
    if let Some(l) = &a.list {
        let mut lm = Map::new();
        lm.insert("elementType", Value::Map(ref_value(&l.element_type)));
        lm.insert(
            "elementRelationship",
            Value::from(l.element_relationship.as_str()),
        );
        if !l.keys.is_empty() {
            lm.insert(
                "keys",
                Value::List(l.keys.iter().map(|k| Value::from(k.as_str())).collect()),
            );
        }
        m.insert("list", Value::Map(lm));
    }
    if let Some(mt) = &a.map {
        let mut mm = Map::new();
        if !mt.fields.is_empty() {
            let fields = mt
                .fields
                .iter()
                .map(|f| {
                    let mut fm = Map::new();
                    fm.insert("name", Value::from(f.name.as_str()));
                    fm.insert("type", Value::Map(ref_value(&f.ty)));
                    if let Some(d) = &f.default {
                        fm.insert("default", d.clone());
                    }
                    Value::Map(fm)
                })
                .collect();
            mm.insert("fields", Value::List(fields));
        }
        if !mt.element_type.is_empty() {
            mm.insert("elementType", Value::Map(ref_value(&mt.element_type)));
        }
        if mt.element_relationship != ElementRelationship::Separable {
            mm.insert(
                "elementRelationship",
                Value::from(mt.element_relationship.as_str()),
            );
        }
        m.insert("map", Value::Map(mm));
    }
    m
}

fn ref_value(tr: &TypeRef) -> Map {
    let mut m = atom_value(&tr.inlined);
    if let Some(n) = &tr.named {
        m.entries_mut()
            .insert(0, (Str::from("namedType"), Value::from(n.as_str())));
    }
    if let Some(er) = tr.element_relationship {
        m.insert("elementRelationship", Value::from(er.as_str()));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_named_inline_and_overrides() {
        let s = parse(
            r#"
types:
- name: root
  map:
    fields:
    - name: items
      type:
        list:
          elementType: {namedType: item}
          elementRelationship: associative
          keys: [key]
    - name: ref
      type: {namedType: obj, elementRelationship: separable}
- name: item
  map:
    fields:
    - {name: key, type: {scalar: string}, default: x}
- name: obj
  map:
    elementRelationship: atomic
    elementType: {scalar: string}
"#,
        )
        .unwrap();
        let root = s.find_named("root").unwrap();
        let m = root.atom.map.as_ref().unwrap();
        let items = m.find_field("items").unwrap();
        assert_eq!(items.ty.inlined.list.as_ref().unwrap().keys, vec!["key"]);
        let r = s.resolve(&m.find_field("ref").unwrap().ty).unwrap();
        assert_eq!(r.map_er(), ElementRelationship::Separable);
        let item = s.find_named("item").unwrap().atom.map.as_ref().unwrap();
        assert!(item.find_field("key").unwrap().default.is_some());
    }

    #[test]
    fn rejects_unknown_keys() {
        assert!(parse("types:\n- name: a\n  mapp: {}\n").is_err());
    }
}
