//! Removing a set of fields from a value (smd `TypedValue.RemoveItems`). A container emptied by
//! removal becomes null, as in every structured-merge-diff release Kubernetes 1.33 uses.

use super::{Handler, field_type, handler, list_item_pe};
use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, Schema, TypeRef};
use crate::value::{Map, Value};

/// `v` without the members of `to_remove` (and their subtrees).
pub fn remove_items(schema: &Schema, tr: &TypeRef, v: &Value, to_remove: &Set) -> Value {
    node(schema, tr, v, to_remove).unwrap_or(Value::Null)
}

fn node(schema: &Schema, tr: &TypeRef, v: &Value, to_remove: &Set) -> Option<Value> {
    let atom = schema.resolve(tr)?.deduce(Some(v));
    match handler(&atom) {
        Handler::Scalar(_) => Some(v.clone()),
        Handler::List(l, er) => {
            let Value::List(items) = v else { return None };
            if items.is_empty() || er == ElementRelationship::Atomic {
                return None;
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let Ok(pe) = list_item_pe(schema, l, er, item) else {
                    out.push(item.clone());
                    continue;
                };
                if to_remove.has_member(&pe) {
                    continue;
                }
                out.push(descend(schema, &l.element_type, item, to_remove, &pe));
            }
            (!out.is_empty()).then_some(Value::List(out))
        }
        Handler::Map(m, er) => {
            let Value::Map(map) = v else { return None };
            if map.is_empty() || er == ElementRelationship::Atomic {
                return None;
            }
            let mut out = Map::with_capacity(map.len());
            for (k, val) in map.iter() {
                let pe = PathElement::Field(k.clone());
                if to_remove.has_member(&pe) {
                    continue;
                }
                out.push_unique(
                    k.clone(),
                    descend(schema, field_type(m, k), val, to_remove, &pe),
                );
            }
            (!out.is_empty()).then_some(Value::Map(out))
        }
        Handler::Invalid => None,
    }
}

fn descend(schema: &Schema, tr: &TypeRef, v: &Value, to_remove: &Set, pe: &PathElement) -> Value {
    match to_remove.child(pe) {
        Some(sub) if !sub.is_empty() => remove_items(schema, tr, v, sub),
        _ => v.clone(),
    }
}
