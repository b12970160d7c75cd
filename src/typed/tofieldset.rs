//! The set of fields a value claims (smd `ToFieldSet`): scalars and atomic containers as leaves,
//! list items and undeclared map keys as members, null and `{}` values as members, duplicated
//! list items as single atomic leaves.

use super::{Handler, ListIndex, ValidationErrors, field_type, handler, invalid_atom, resolve};
use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, Schema, TypeRef};
use crate::value::Value;

/// The field set of `v` as type `tr`.
pub fn to_field_set(schema: &Schema, tr: &TypeRef, v: &Value) -> Result<Set, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let (_, set) = node(schema, tr, v, &mut errs);
    errs.into_result().map(|_| set)
}

/// Returns whether the node's own path is inserted, and the set below it.
/// Errors here can only come from an unresolvable schema (values were validated before); they
/// are reported without a path, which keeps this hot walk free of path bookkeeping.
fn node(schema: &Schema, tr: &TypeRef, v: &Value, errs: &mut ValidationErrors) -> (bool, Set) {
    let atom = match resolve(schema, tr) {
        Ok(a) => a.deduce(Some(v)),
        Err(e) => {
            errs.push(&[], e);
            return (false, Set::new());
        }
    };
    match handler(&atom) {
        Handler::Scalar(_) => (true, Set::new()),
        Handler::List(l, er) => {
            if er == ElementRelationship::Atomic {
                return (true, Set::new());
            }
            let Value::List(items) = v else {
                return (false, Set::new());
            };
            (false, list_items(schema, l, er, items, errs))
        }
        Handler::Map(m, er) => {
            if er == ElementRelationship::Atomic {
                return (true, Set::new());
            }
            let Value::Map(map) = v else {
                return (false, Set::new());
            };
            let mut members = Vec::new();
            let mut children = Vec::new();
            for (k, val) in map.iter() {
                let declared = m.find_field(k).is_some();
                let (own, sub) = node(schema, field_type(m, k), val, errs);
                let pe = PathElement::Field(k.clone());
                let empty_map = matches!(val, Value::Map(x) if x.is_empty());
                if own || val.is_null() || empty_map || !declared {
                    members.push(pe.clone());
                }
                if !sub.is_empty() {
                    children.push((pe, sub));
                }
            }
            (false, assemble(members, children))
        }
        Handler::Invalid => {
            errs.push(&[], invalid_atom(tr));
            (false, Set::new())
        }
    }
}

fn list_items(
    schema: &Schema,
    l: &crate::schema::List,
    er: ElementRelationship,
    items: &[Value],
    errs: &mut ValidationErrors,
) -> Set {
    // smd ignores item errors here (the value was validated before).
    let (idx, _) = ListIndex::build(schema, l, er, items);
    let mut members = Vec::with_capacity(items.len());
    let mut children = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(pe) = &idx.pes[i] else { continue };
        if idx.is_duplicated(i) {
            // A repeated key is owned as one atomic leaf.
            if idx.is_first(i) {
                members.push(pe.clone());
            }
            continue;
        }
        let (_, sub) = node(schema, &l.element_type, item, errs);
        members.push(pe.clone());
        if !sub.is_empty() {
            children.push((pe.clone(), sub));
        }
    }
    assemble(members, children)
}

fn assemble(mut members: Vec<PathElement>, mut children: Vec<(PathElement, Set)>) -> Set {
    members.sort_by(|a, b| a.compare(b));
    members.dedup_by(|a, b| a.compare(b).is_eq());
    children.sort_by(|a, b| a.0.compare(&b.0));
    children.dedup_by(|a, b| a.0.compare(&b.0).is_eq());
    Set::from_sorted_parts(members, children)
}
