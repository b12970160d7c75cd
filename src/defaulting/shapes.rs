//! The Go round trip of a built-in object: kube-apiserver decodes every object it writes into
//! its Go types and encodes it again, so what those types cannot hold is gone (unknown
//! fields, `null`s), what `omitempty` drops is gone (`minReadySeconds: 0`, `env: []`,
//! `labels: {}`), and what a type always encodes is there (a struct field such as a
//! container's `resources: {}`, a Service's `status: {loadBalancer: {}}`, a required scalar's
//! zero). The shapes of the Go types are a table (`data/go-shapes.json`) that
//! `controlplane/goshapes` prints from the Go types themselves, at the versions the control
//! plane is built from.
//!
//! Types with their own JSON encoding (quantities, times, int-or-strings, raw extensions) are
//! kept as they are, except that `omitzero` drops an absent or `null` one; their canonical forms
//! (a quantity's `1000m` → `1`) are not rewritten here.

use crate::value::{Map, Value};
use foldhash::HashMap;
use std::sync::LazyLock;

/// One field of a Go struct: its JSON name (an internal type's: its Go name), its shape, the
/// struct type it holds, its Go name through the structs it is embedded from.
pub(crate) struct Field {
    pub name: String,
    pub pointer: bool,
    pub shape: Shape,
    pub omitempty: bool,
    pub omitzero: bool,
    pub elem: Option<String>,
    pub go_path: String,
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Shape {
    Struct,
    List,
    Map,
    Custom,
    String,
    Int,
    Float,
    Bool,
}

struct Shapes {
    types: HashMap<String, Vec<Field>>,
}

static SHAPES: LazyLock<Shapes> = LazyLock::new(|| {
    let raw: serde_json::Value = serde_json::from_str(include_str!("data/go-shapes.json"))
        .expect("data/go-shapes.json is valid JSON");
    let mut types = HashMap::default();
    for (name, fields) in raw["types"].as_object().into_iter().flatten() {
        let fields = fields
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| {
                let name = f.get(0)?.as_str()?.to_string();
                let flags = f.get(1)?.as_str()?;
                let elem = f.get(2)?.as_str().filter(|e| !e.is_empty());
                let go_path = f.get(3)?.as_str()?.to_string();
                let shape = match () {
                    _ if flags.contains('s') => Shape::Struct,
                    _ if flags.contains('l') => Shape::List,
                    _ if flags.contains('m') => Shape::Map,
                    _ if flags.contains('S') => Shape::String,
                    _ if flags.contains('I') => Shape::Int,
                    _ if flags.contains('F') => Shape::Float,
                    _ if flags.contains('B') => Shape::Bool,
                    _ => Shape::Custom,
                };
                Some(Field {
                    name,
                    pointer: flags.contains('p'),
                    shape,
                    omitempty: flags.contains('e'),
                    omitzero: flags.contains('z'),
                    elem: elem.map(String::from),
                    go_path,
                })
            })
            .collect();
        types.insert(name.clone(), fields);
    }
    Shapes { types }
});

/// The fields of Go struct type `type_name`.
pub(crate) fn fields(type_name: &str) -> Option<&'static [Field]> {
    SHAPES.types.get(type_name).map(Vec::as_slice)
}

/// Rewrites `v`, an object of Go type `type_name`, as decoding it into that type and encoding
/// it again would. Whether anything changed. Unknown types are left alone.
pub fn round_trip(type_name: &str, v: &mut Value) -> bool {
    let Some(fields) = SHAPES.types.get(type_name) else {
        return false;
    };
    if !matches!(v, Value::Map(_)) {
        // `null` or a mistyped value: the struct's zero value (a mistyped value is an error
        // the server reports before this; it is not this function's to judge).
        if !v.is_null() {
            return false;
        }
        *v = Value::Map(Map::new());
    }
    let Value::Map(m) = v else { unreachable!() };
    encode_struct(fields, m)
}

fn encode_struct(fields: &[Field], m: &mut Map) -> bool {
    let mut changed = false;
    // Fields the type does not declare are not decoded.
    let before = m.len();
    m.entries_mut()
        .retain(|(k, _)| fields.iter().any(|f| f.name == k.as_str()));
    changed |= m.len() != before;
    for f in fields {
        changed |= encode_field(f, m);
    }
    changed
}

/// The Go zero value of struct type `type_name`, encoded: a struct field is there (its own
/// zero), a nil list, map, pointer or custom value without `omitempty` is `null`, a scalar
/// without `omitempty` its zero, what `omitempty`/`omitzero` drops is not there. `None`: an
/// unknown type.
pub fn zero(type_name: &str) -> Option<Value> {
    let fields = SHAPES.types.get(type_name)?;
    let mut m = Map::new();
    for f in fields {
        if f.omitzero {
            continue;
        }
        let v = if f.pointer {
            (!f.omitempty).then_some(Value::Null)
        } else {
            match f.shape {
                Shape::Struct => Some(
                    f.elem
                        .as_deref()
                        .and_then(zero)
                        .unwrap_or(Value::Map(Map::new())),
                ),
                // A struct-valued custom type (a time) is not dropped by omitempty.
                Shape::Custom => Some(Value::Null),
                Shape::List | Shape::Map => (!f.omitempty).then_some(Value::Null),
                Shape::String => (!f.omitempty).then(|| Value::from("")),
                Shape::Int => (!f.omitempty).then_some(Value::Int(0)),
                Shape::Float => (!f.omitempty).then_some(Value::Float(0.0)),
                Shape::Bool => (!f.omitempty).then_some(Value::Bool(false)),
            }
        };
        if let Some(v) = v {
            m.insert(f.name.as_str(), v);
        }
    }
    Some(Value::Map(m))
}

/// One field of a struct, encoded from what decoding left in it.
fn encode_field(f: &Field, m: &mut Map) -> bool {
    let absent = m.get(&f.name).is_none_or(Value::is_null);
    if absent {
        let was_null = m.contains_key(&f.name);
        // Go's zero value of the field, and whether encoding drops it.
        let zero = if f.pointer {
            None
        } else {
            match f.shape {
                Shape::Struct => {
                    let mut z = Value::Map(Map::new());
                    if let Some(t) = &f.elem {
                        round_trip(t, &mut z);
                    }
                    (!f.omitzero).then_some(z)
                }
                Shape::List | Shape::Map | Shape::Custom => None,
                Shape::String => (!f.omitempty && !f.omitzero).then(|| Value::from("")),
                Shape::Int => (!f.omitempty && !f.omitzero).then_some(Value::Int(0)),
                Shape::Float => (!f.omitempty && !f.omitzero).then_some(Value::Float(0.0)),
                Shape::Bool => (!f.omitempty && !f.omitzero).then_some(Value::Bool(false)),
            }
        };
        // A nil list, map, pointer or custom value without omitempty encodes as `null`; kept
        // as the `null` (or absence) it was.
        let keep_null = was_null
            && !f.omitempty
            && !f.omitzero
            && (f.pointer || matches!(f.shape, Shape::List | Shape::Map | Shape::Custom));
        return match zero {
            Some(z) => {
                m.insert(f.name.as_str(), z);
                true
            }
            None if was_null && !keep_null => {
                m.remove(&f.name);
                true
            }
            None => false,
        };
    }
    let v = m.get_mut(&f.name).expect("present");
    let mut changed = false;
    match f.shape {
        Shape::Struct => {
            if let Some(t) = &f.elem {
                changed |= round_trip(t, v);
            }
        }
        Shape::List => {
            if let (Some(t), Value::List(items)) = (&f.elem, &mut *v) {
                for item in items.iter_mut() {
                    changed |= round_trip(t, item);
                }
            }
        }
        Shape::Map => {
            if let (Some(t), Value::Map(entries)) = (&f.elem, &mut *v) {
                for (_, item) in entries.entries_mut() {
                    changed |= round_trip(t, item);
                }
            }
        }
        _ => {}
    }
    // What omitempty drops: a non-pointer's empty value (pointers are kept, even to zero).
    if f.omitempty && !f.pointer && empty(f.shape, v) {
        m.remove(&f.name);
        return true;
    }
    changed
}

/// Go's "empty" for omitempty: zero scalars, empty lists and maps (never a struct).
fn empty(shape: Shape, v: &Value) -> bool {
    match (shape, v) {
        (Shape::String, Value::String(s)) => s.is_empty(),
        (Shape::Int, Value::Int(0)) | (Shape::Bool, Value::Bool(false)) => true,
        (Shape::Float, Value::Float(x)) => *x == 0.0,
        (Shape::Int, Value::Float(x)) => *x == 0.0,
        (Shape::List, Value::List(l)) => l.is_empty(),
        (Shape::Map, Value::Map(m)) => m.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    /// Asserts that `text`, an object of `type_name`, round-trips to `want` (compared as
    /// values: key order is not the point).
    fn rt(type_name: &str, text: &str, want: &str) {
        let mut v = json::parse_str(text).unwrap();
        round_trip(type_name, &mut v);
        let want = json::parse_str(want).unwrap();
        assert!(
            crate::value::equals(&v, &want),
            "{} != {}",
            json::to_string(&v, json::Style::PLAIN),
            json::to_string(&want, json::Style::PLAIN)
        );
    }

    #[test]
    fn omitempty_drops_empty_values_and_structs_are_always_encoded() {
        // Seen on kube-apiserver 1.36: `minReadySeconds: 0` and `env: []` are not stored, a
        // container always has `resources`, a Service always has `status.loadBalancer`.
        rt(
            "io.k8s.api.apps.v1.DaemonSetSpec",
            r#"{"minReadySeconds":0,"revisionHistoryLimit":0,"updateStrategy":{"type":"OnDelete"},"template":{"spec":{"containers":[{"name":"a","env":[],"unknown":1}]}}}"#,
            r#"{"revisionHistoryLimit":0,"updateStrategy":{"type":"OnDelete"},"template":{"metadata":{},"spec":{"containers":[{"name":"a","resources":{}}]}}}"#,
        );
        rt(
            "io.k8s.api.core.v1.Service",
            r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"s","labels":{}},"spec":{"ports":[{"port":80,"nodePort":0}]}}"#,
            r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]},"status":{"loadBalancer":{}}}"#,
        );
    }

    #[test]
    fn pointers_keep_zero_values_and_nulls_are_decoded_away() {
        // A null list or pointer without omitempty stays null (Go encodes a nil one so); an absent
        // one stays absent.
        rt(
            "io.k8s.api.apps.v1.DeploymentSpec",
            r#"{"replicas":0,"paused":false,"minReadySeconds":null,"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}}}"#,
            r#"{"replicas":0,"selector":null,"template":{"metadata":{},"spec":{"containers":null}},"strategy":{}}"#,
        );
        assert!(fields("io.k8s.api.core.v1.PodSpec").is_some());
        let mut v = json::parse_str(r#"{"a":1}"#).unwrap();
        assert!(!round_trip("com.example.v1.Widget", &mut v));
    }

    #[test]
    fn the_zero_value_holds_structs_and_nil_lists_as_go_encodes_them() {
        // What kube-apiserver's field manager compares a created Job with: its entry then has
        // no `.` for `spec` or a pod spec's `containers` (seen on 1.36 for client-side creates).
        let z = zero("io.k8s.api.batch.v1.Job").unwrap();
        let spec = z.get_path(&["spec", "template", "spec"]).unwrap();
        assert_eq!(spec.get_path(&["containers"]), Some(&Value::Null));
        assert!(spec.get_path(&["volumes"]).is_none(), "omitempty drops it");
        assert!(
            z.get_path(&["status"])
                .is_some_and(|s| s.as_map().is_some())
        );
        assert!(zero("com.example.v1.Widget").is_none());
    }
}
