//! Values a built-in kind's Go types cannot hold, found from the OpenAPI v2 `format`s the merge
//! schema does not carry: an `int32` field set to a number outside its range (or to a fraction),
//! a `byte` field (`Secret.data`, `ConfigMap.binaryData`, CA bundles) holding text that is not
//! base64. kube-apiserver decodes objects into those types, so it cannot store such values:
//! they are refused (or, for a server-side apply of an out-of-range int32, changed), never
//! created as written.
//!
//! Messages name the field and what is wrong with its value, never the value of a `byte`
//! field (Secret data).

use super::Gvk;
use crate::value::{Map, Value};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Fmt {
    Int32,
    Int64,
    Byte,
}

/// What matters of one schema node: its format, or where to look further.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Prop {
    fmt: Option<Fmt>,
    reference: Option<Box<str>>,
    items: Option<Box<Prop>>,
    values: Option<Box<Prop>>,
    #[serde(serialize_with = "super::compiled::sorted_optional")]
    properties: Option<HashMap<Box<str>, Prop>>,
}

impl Prop {
    fn of(v: &Value) -> Prop {
        let Some(m) = v.as_map() else {
            return Prop::default();
        };
        let fmt = match (
            m.get("type").and_then(Value::as_str),
            m.get("format").and_then(Value::as_str),
        ) {
            (Some("integer"), Some("int32")) => Some(Fmt::Int32),
            (Some("integer"), Some("int64")) => Some(Fmt::Int64),
            (Some("string"), Some("byte")) => Some(Fmt::Byte),
            _ => None,
        };
        Prop {
            fmt,
            reference: m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/definitions/"))
                .map(Box::from),
            items: m.get("items").map(|i| Box::new(Prop::of(i))),
            values: m
                .get("additionalProperties")
                .filter(|a| a.as_map().is_some())
                .map(|a| Box::new(Prop::of(a))),
            properties: m.get("properties").and_then(Value::as_map).map(props),
        }
    }

    /// Whether anything below can hold a checked format (so walks skip the rest).
    fn relevant(&self, defs: &HashMap<Box<str>, Prop>, seen: &mut Vec<Box<str>>) -> bool {
        if self.fmt.is_some() {
            return true;
        }
        if let Some(r) = &self.reference {
            if seen.contains(r) {
                return false;
            }
            seen.push(r.clone());
            return defs.get(r).is_some_and(|d| d.relevant(defs, seen));
        }
        [&self.items, &self.values]
            .into_iter()
            .flatten()
            .any(|p| p.relevant(defs, seen))
            || self
                .properties
                .as_ref()
                .is_some_and(|ps| ps.values().any(|p| p.relevant(defs, seen)))
    }
}

fn props(m: &Map) -> HashMap<Box<str>, Prop> {
    m.iter()
        .map(|(k, v)| (Box::from(k.as_str()), Prop::of(v)))
        .collect()
}

/// The formats of a Kubernetes version's built-in types.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Formats {
    #[serde(serialize_with = "super::compiled::sorted")]
    defs: HashMap<Box<str>, Prop>,
    #[serde(serialize_with = "super::compiled::sorted")]
    by_gvk: HashMap<(String, String, String), Box<str>>,
}

impl Formats {
    /// From an OpenAPI v2 document (`definitions` with `x-kubernetes-group-version-kind`).
    pub fn from_swagger(doc: &Value) -> Formats {
        let mut f = Formats::default();
        let Some(defs) = doc.get_path(&["definitions"]).and_then(Value::as_map) else {
            return f;
        };
        for (name, def) in defs.iter() {
            for g in super::openapi_v2::gvk_list(def) {
                f.by_gvk
                    .insert((g.group, g.version, g.kind), Box::from(name.as_str()));
            }
            f.defs.insert(Box::from(name.as_str()), Prop::of(def));
        }
        // Keep only what can reach a format: the walk then stops early everywhere else.
        let names: Vec<Box<str>> = f.defs.keys().cloned().collect();
        let keep: Vec<Box<str>> = names
            .into_iter()
            .filter(|n| {
                f.defs
                    .get(n)
                    .is_some_and(|d| d.relevant(&f.defs, &mut vec![n.clone()]))
            })
            .collect();
        f.defs.retain(|n, _| keep.contains(n));
        f
    }

    /// The problems of `obj` (a `gvk` object): `(path as kube-apiserver prints it, message)`.
    pub fn check(&self, gvk: &Gvk, obj: &Value) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let key = (gvk.group.clone(), gvk.version.clone(), gvk.kind.clone());
        if let Some(def) = self.by_gvk.get(&key).and_then(|n| self.defs.get(n)) {
            self.walk(def, obj, &mut String::new(), &mut out, 0);
        }
        out
    }

    fn walk(
        &self,
        p: &Prop,
        v: &Value,
        path: &mut String,
        out: &mut Vec<(String, String)>,
        depth: usize,
    ) {
        if depth > crate::value::MAX_DEPTH {
            return;
        }
        if let Some(r) = &p.reference {
            if let Some(d) = self.defs.get(r) {
                self.walk(d, v, path, out, depth + 1);
            }
            return;
        }
        if let Some(f) = p.fmt {
            if let Some(msg) = problem(f, v) {
                out.push((path.clone(), msg));
            }
            return;
        }
        let at = path.len();
        match v {
            Value::Map(m) => {
                for (k, child) in m.iter() {
                    let prop = match &p.properties {
                        Some(ps) => ps.get(k.as_str()),
                        None => p.values.as_deref(),
                    };
                    if let Some(prop) = prop {
                        path.push('.');
                        path.push_str(k);
                        self.walk(prop, child, path, out, depth + 1);
                        path.truncate(at);
                    }
                }
            }
            Value::List(items) => {
                if let Some(prop) = &p.items {
                    for (i, child) in items.iter().enumerate() {
                        path.push_str(&format!("[{i}]"));
                        self.walk(prop, child, path, out, depth + 1);
                        path.truncate(at);
                    }
                }
            }
            _ => {}
        }
    }
}

fn problem(f: Fmt, v: &Value) -> Option<String> {
    let (lo, hi, name) = match f {
        Fmt::Int32 => (i32::MIN as f64, i32::MAX as f64, "int32"),
        Fmt::Int64 => (i64::MIN as f64, i64::MAX as f64, "int64"),
        Fmt::Byte => {
            return match v {
                Value::String(s) => go_base64_error(s.as_bytes())
                    .map(|at| format!("illegal base64 data at input byte {at}")),
                _ => None,
            };
        }
    };
    let fits = match v {
        Value::Int(i) => (*i as f64) >= lo && (*i as f64) <= hi,
        Value::Float(x) => x.fract() == 0.0 && *x >= lo && *x <= hi,
        _ => true,
    };
    if fits {
        return None;
    }
    let shown = match v {
        Value::Int(i) => i.to_string(),
        Value::Float(x) => crate::value::gofmt::format_float_v(*x),
        _ => String::new(),
    };
    Some(format!(
        "{shown} is not an {name}: the field's type cannot hold it (kube-apiserver refuses \
         the object, or a server-side apply stores another number)"
    ))
}

/// Where Go's `base64.StdEncoding.DecodeString` reports `illegal base64 data at input byte N`
/// (`None`: it decodes). Line breaks are skipped, as Go does; padding is required.
pub fn go_base64_error(src: &[u8]) -> Option<usize> {
    let decodes = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let skip = |c: u8| c == b'\n' || c == b'\r';
    let mut si = 0usize;
    loop {
        // One quantum of four characters (decodeQuantum).
        let mut j = 0usize;
        while j < 4 {
            if si == src.len() {
                return match j {
                    0 => None,
                    // Missing characters or padding.
                    _ => Some(si - j),
                };
            }
            let c = src[si];
            si += 1;
            if decodes(c) {
                j += 1;
                continue;
            }
            if skip(c) {
                continue;
            }
            if c != b'=' {
                return Some(si - 1);
            }
            // Padding.
            match j {
                0 | 1 => return Some(si - 1),
                2 => {
                    while si < src.len() && skip(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Some(src.len());
                    }
                    if src[si] != b'=' {
                        return Some(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && skip(src[si]) {
                si += 1;
            }
            return if si < src.len() { Some(si) } else { None };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_errors_are_where_go_reports_them() {
        assert_eq!(go_base64_error(b""), None);
        assert_eq!(go_base64_error(b"aHVudGVyMg=="), None);
        assert_eq!(go_base64_error(b"aHVu\ndGVyMg==\n"), None);
        assert_eq!(go_base64_error(b"hunter2"), Some(4));
        assert_eq!(go_base64_error(b"abc"), Some(0));
        assert_eq!(go_base64_error(b"ab!d"), Some(2));
        assert_eq!(go_base64_error(b"a==="), Some(1));
        assert_eq!(go_base64_error(b"ab="), Some(3));
        assert_eq!(go_base64_error(b"abc=x"), Some(4));
        assert_eq!(go_base64_error(b"ab=x"), Some(2));
    }

    #[test]
    fn out_of_range_and_undecodable_values_are_found() {
        let (_, swagger) = crate::schema::builtin::swagger_json("v1.36.0").unwrap();
        let doc = crate::value::json::parse(swagger.as_bytes()).unwrap();
        let f = Formats::from_swagger(&doc);
        let dep = crate::value::yaml::parse_one(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 100000000000000000000000000000000\n  template:\n    spec:\n      containers:\n      - name: a\n        ports: [{containerPort: 80}, {containerPort: 4294967296}]\n",
        )
        .unwrap();
        let found: Vec<String> = f
            .check(&Gvk::new("apps", "v1", "Deployment"), &dep)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            found,
            [
                ".spec.replicas",
                ".spec.template.spec.containers[0].ports[1].containerPort"
            ]
        );
        let secret = crate::value::yaml::parse_one(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {ok: aGk=, bad: hunter2}\n",
        )
        .unwrap();
        let found = f.check(&Gvk::new("", "v1", "Secret"), &secret);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, ".data.bad");
        assert_eq!(found[0].1, "illegal base64 data at input byte 4");
        assert!(!found[0].1.contains("hunter2"));
    }
}
