//! Finding the value a field path points at (list-map items by key, set items by value).

use crate::fieldpath::PathElement;
use crate::schema::{Schema, TypeRef};
use crate::typed::{field_type, list_item_pe};
use crate::value::{self, Value};

/// The type of what a schema says nothing of (borrowed where a step has no type).
static EMPTY: TypeRef = TypeRef::EMPTY;

/// The value at `path` in `v` (of type `tr`), if present.
pub fn value_at<'v>(
    schema: &Schema,
    tr: &TypeRef,
    v: &'v Value,
    path: &[PathElement],
) -> Option<&'v Value> {
    let mut cur = v;
    let mut ty = tr;
    for pe in path {
        let atom = schema.resolve(ty)?.deduce(Some(cur));
        match pe {
            PathElement::Field(name) => {
                let m = cur.as_map()?;
                let next = m.get(name)?;
                ty = match atom.map {
                    Some(mt) => field_type(mt, name),
                    None => &EMPTY,
                };
                cur = next;
            }
            PathElement::Key(_) | PathElement::Value(_) => {
                let items = cur.as_list()?;
                let l = atom.list?;
                let er = atom.list_er();
                let found = items.iter().find(|item| match pe {
                    PathElement::Value(x) => value::equals(item, x),
                    _ => list_item_pe(schema, l, er, item).is_ok_and(|p| p.equals(pe)),
                })?;
                ty = &l.element_type;
                cur = found;
            }
            PathElement::Index(i) => {
                let items = cur.as_list()?;
                let idx = usize::try_from(*i).ok()?;
                ty = atom.list.map_or(&EMPTY, |l| &l.element_type);
                cur = items.get(idx)?;
            }
        }
    }
    Some(cur)
}

/// True when `path` names a field of an ObjectMeta (the root `metadata`, a pod template's, an
/// embedded resource's) that `v` does not have. The apiserver serves ObjectMeta in its stored
/// form (empty fields dropped) but keeps the bytes a write at the storage version sent, so a
/// manager can own `metadata.labels` that was applied as `{}`: stored, owned, never served.
/// The next write of any kind re-encodes the object without it — it writes even when nothing
/// else changes.
pub fn unserved_meta_field(schema: &Schema, tr: &TypeRef, v: &Value, path: &[PathElement]) -> bool {
    let mut cur = v;
    let mut ty = tr;
    for pe in path {
        let is_meta = ty.name() == Some(crate::typed::OBJECT_META);
        let Some(atom) = schema.resolve(ty).map(|a| a.deduce(Some(cur))) else {
            return false;
        };
        match pe {
            PathElement::Field(name) => {
                let Some(m) = cur.as_map() else { return false };
                let Some(next) = m.get(name) else {
                    return is_meta;
                };
                ty = match atom.map {
                    Some(mt) => field_type(mt, name),
                    None => &EMPTY,
                };
                cur = next;
            }
            PathElement::Key(_) | PathElement::Value(_) => {
                let (Some(items), Some(l)) = (cur.as_list(), atom.list) else {
                    return false;
                };
                let er = atom.list_er();
                let Some(found) = items.iter().find(|item| match pe {
                    PathElement::Value(x) => value::equals(item, x),
                    _ => list_item_pe(schema, l, er, item).is_ok_and(|p| p.equals(pe)),
                }) else {
                    return false;
                };
                ty = &l.element_type;
                cur = found;
            }
            PathElement::Index(_) => return false,
        }
    }
    false
}
