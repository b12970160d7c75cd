//! What the apiserver stores of an object it has merged. Every `metav1.ObjectMeta` in it — the
//! root `metadata`, a pod template's, a custom resource's `x-kubernetes-embedded-resource`'s —
//! is decoded into the typed struct and encoded again before it is stored (kube-apiserver's
//! typed objects; for custom resources `structuralobjectmeta.Coerce`). So fields ObjectMeta does
//! not declare are dropped, and so are empty values, since every field is `omitempty`:
//! `labels: {}`, `finalizers: []`, `name: ""`, `generation: 0`, and `null`s.
//!
//! Seen against the real apiserver (`tests/real/differential.rs`): an apply of
//! `metadata: {labels: {}}` stores no `labels`, and a merge that empties an embedded object's
//! `metadata.labels` (smd leaves `null` there) stores `metadata: {}`.

use crate::schema::{Schema, TypeRef};
use crate::value::{Map, Value};

/// The type name of ObjectMeta in the schemas kube-apiserver publishes.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Rewrites `v` (of type `tr`) into the form the apiserver stores. Returns true if anything
/// changed.
pub fn to_stored_form(schema: &Schema, tr: &TypeRef, v: &mut Value) -> bool {
    if tr.name() == Some(OBJECT_META) {
        return match v {
            Value::Map(m) => coerce_object_meta(schema, tr, m),
            _ => false,
        };
    }
    let Some(r) = schema.resolve(tr) else {
        return false;
    };
    let mut changed = false;
    match v {
        Value::Map(m) => {
            if let Some(mt) = r.map {
                for (k, child) in m.entries_mut().iter_mut() {
                    let ft = super::field_type(mt, k);
                    changed |= to_stored_form(schema, ft, child);
                }
            }
        }
        Value::List(items) => {
            if let Some(l) = r.list {
                for item in items.iter_mut() {
                    changed |= to_stored_form(schema, &l.element_type, item);
                }
            }
        }
        _ => {}
    }
    changed
}

/// ObjectMeta through its Go struct and back: undeclared fields and empty values go.
fn coerce_object_meta(schema: &Schema, tr: &TypeRef, m: &mut Map) -> bool {
    let declared = schema.resolve(tr).and_then(|r| r.map);
    let before = m.len();
    m.entries_mut().retain(|(k, v)| {
        let known = declared.is_none_or(|d| d.find_field(k).is_some());
        known && !omitted(k, v)
    });
    before != m.len()
}

/// True when `omitempty` leaves the field out. `deletionGracePeriodSeconds` is a pointer, so
/// its `0` stays.
fn omitted(key: &str, v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Int(0) => key != "deletionGracePeriodSeconds",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    fn schema() -> (&'static Schema, TypeRef) {
        let s = crate::schema::builtin::kubernetes(crate::catalog::DEFAULT_KUBERNETES).unwrap();
        (s, s.type_ref("io.k8s.api.apps.v1.Deployment"))
    }

    #[test]
    fn empty_and_undeclared_metadata_fields_are_dropped_at_every_object_meta() {
        let (s, t) = schema();
        let mut v = parse_one(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {}\n  finalizers: []\n  bogus: 1\n  generation: 0\nspec:\n  replicas: 0\n  template:\n    metadata:\n      labels: null\n      annotations: {a: b}\n",
        )
        .unwrap();
        assert!(to_stored_form(s, &t, &mut v));
        let want = parse_one(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 0\n  template:\n    metadata:\n      annotations: {a: b}\n",
        )
        .unwrap();
        assert!(crate::value::equals(&v, &want), "{v:?}");
        // Already stored: nothing to do.
        assert!(!to_stored_form(s, &t, &mut v));
    }
}
