//! Path elements: how a child is selected from its parent (field name, list-map key, set value,
//! index), with structured-merge-diff's total order and its printed form.

use crate::value::gofmt::{format_float_v, quote};
use crate::value::{self, Str, Value};
use std::cmp::Ordering;
use std::fmt;

/// One field of a list-map key (`name=value`).
#[derive(Clone, Debug)]
pub struct KeyField {
    pub name: Str,
    pub value: Value,
}

/// Selects a child of a map, an associative list or a list.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A struct field or map key (`.name`).
    Field(Str),
    /// An item of a list map, by its key fields sorted by name (`[a=1,b="x"]`).
    Key(std::sync::Arc<[KeyField]>),
    /// An item of a set, by its value (`[="x"]`).
    Value(Value),
    /// A position in a list (`[3]`); only produced by very old writers.
    Index(i64),
}

impl PathElement {
    pub fn field(name: &str) -> Self {
        PathElement::Field(Str::from(name))
    }

    /// A key from fields in any order; sorted by name (stable, duplicates kept) like smd.
    pub fn key(mut fields: Vec<KeyField>) -> Self {
        fields.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        PathElement::Key(fields.into())
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// smd `PathElement.Compare`: Field < Key < Value < Index, then by content.
    #[inline]
    pub fn compare(&self, other: &PathElement) -> Ordering {
        // Field names are most of what sets hold; compare them without the general match.
        if let (PathElement::Field(a), PathElement::Field(b)) = (self, other) {
            return value::compare_bytes(a.as_bytes(), b.as_bytes());
        }
        self.compare_other(other)
    }

    #[inline(never)]
    fn compare_other(&self, other: &PathElement) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => {
                value::compare_bytes(a.as_bytes(), b.as_bytes())
            }
            (PathElement::Key(a), PathElement::Key(b)) => compare_keys(a, b),
            (PathElement::Value(a), PathElement::Value(b)) => value::compare(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }

    /// smd `PathElement.Equals` (numeric values compare across int and float).
    pub fn equals(&self, other: &PathElement) -> bool {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a == b,
            (PathElement::Key(a), PathElement::Key(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|(x, y)| x.name == y.name && value::equals(&x.value, &y.value))
            }
            (PathElement::Value(a), PathElement::Value(b)) => value::equals(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a == b,
            _ => false,
        }
    }

    pub fn as_field(&self) -> Option<&str> {
        match self {
            PathElement::Field(s) => Some(s),
            _ => None,
        }
    }
}

fn compare_keys(a: &[KeyField], b: &[KeyField]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let c = value::compare_bytes(x.name.as_bytes(), y.name.as_bytes());
        if c != Ordering::Equal {
            return c;
        }
        let c = match (&x.value, &y.value) {
            (Value::String(p), Value::String(q)) => {
                value::compare_bytes(p.as_bytes(), q.as_bytes())
            }
            (p, q) => value::compare(p, q),
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.equals(other)
    }
}

/// smd `value.ToString`: how values print inside paths.
pub fn value_to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Float(f) => format_float_v(*f),
        Value::Int(i) => i.to_string(),
        Value::String(s) => quote(s),
        Value::Bool(b) => b.to_string(),
        Value::List(l) => {
            let parts: Vec<String> = l.iter().map(value_to_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Map(m) => m
            .sorted_entries()
            .into_iter()
            .map(|(k, v)| format!("{}={}", k, value_to_string(v)))
            .collect(),
    }
}

impl fmt::Display for PathElement {
    /// Exactly as kube-apiserver prints paths in conflict messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, k) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}={}", k.name, value_to_string(&k.value))?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => write!(f, "[={}]", value_to_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the root of an object to one field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    pub fn new() -> Self {
        Path(Vec::new())
    }
    /// A path of plain field names (`["spec", "replicas"]`).
    pub fn fields(names: &[&str]) -> Self {
        Path(names.iter().map(|n| PathElement::field(n)).collect())
    }
    pub fn compare(&self, other: &Path) -> Ordering {
        for (a, b) in self.0.iter().zip(&other.0) {
            let c = a.compare(b);
            if c != Ordering::Equal {
                return c;
            }
        }
        self.0.len().cmp(&other.0.len())
    }
    pub fn elements(&self) -> &[PathElement] {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

impl From<Vec<PathElement>> for Path {
    fn from(v: Vec<PathElement>) -> Self {
        Path(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kf(name: &str, v: Value) -> KeyField {
        KeyField {
            name: name.into(),
            value: v,
        }
    }

    #[test]
    fn prints_like_kube_apiserver() {
        let p = Path(vec![
            PathElement::field("spec"),
            PathElement::field("template"),
            PathElement::field("spec"),
            PathElement::field("containers"),
            PathElement::key(vec![kf("name", "nginx".into())]),
            PathElement::field("ports"),
            PathElement::key(vec![
                kf("protocol", "TCP".into()),
                kf("containerPort", Value::Int(80)),
            ]),
            PathElement::field("name"),
        ]);
        assert_eq!(
            p.to_string(),
            r#".spec.template.spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"].name"#
        );
        let f = Path(vec![
            PathElement::field("metadata"),
            PathElement::field("finalizers"),
            PathElement::Value("x".into()),
        ]);
        assert_eq!(f.to_string(), r#".metadata.finalizers[="x"]"#);
        assert_eq!(PathElement::Index(3).to_string(), "[3]");
    }

    #[test]
    fn order_is_field_key_value_index() {
        let els = [
            PathElement::field("a"),
            PathElement::key(vec![kf("a", Value::Int(1))]),
            PathElement::Value(Value::Int(1)),
            PathElement::Index(0),
        ];
        for w in els.windows(2) {
            assert_eq!(w[0].compare(&w[1]), Ordering::Less);
        }
        // keys: shorter first when the common prefix is equal
        let k1 = PathElement::key(vec![kf("a", Value::Int(1))]);
        let k2 = PathElement::key(vec![kf("a", Value::Int(1)), kf("b", Value::Int(0))]);
        assert_eq!(k1.compare(&k2), Ordering::Less);
        // numeric key values compare across int and float
        let k3 = PathElement::key(vec![kf("a", Value::Float(1.0))]);
        assert!(k1.equals(&k3));
    }
}
