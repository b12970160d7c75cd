//! Finding the value a field path points at (list-map items by key, set items by value).

use crate::fieldpath::PathElement;
use crate::schema::{Schema, TypeRef};
use crate::typed::{field_type, list_item_pe};
use crate::value::{self, Value};

/// The value at `path` in `v` (of type `tr`), if present.
pub fn value_at<'v>(
    schema: &Schema,
    tr: &TypeRef,
    v: &'v Value,
    path: &[PathElement],
) -> Option<&'v Value> {
    let mut cur = v;
    let mut ty = tr.clone();
    for pe in path {
        let atom = schema.resolve(&ty)?.deduce(Some(cur));
        match pe {
            PathElement::Field(name) => {
                let m = cur.as_map()?;
                let next = m.get(name)?;
                ty = match atom.map {
                    Some(mt) => field_type(mt, name).clone(),
                    None => TypeRef::EMPTY,
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
                ty = l.element_type.clone();
                cur = found;
            }
            PathElement::Index(i) => {
                let items = cur.as_list()?;
                let idx = usize::try_from(*i).ok()?;
                ty = atom
                    .list
                    .map(|l| l.element_type.clone())
                    .unwrap_or(TypeRef::EMPTY);
                cur = items.get(idx)?;
            }
        }
    }
    Some(cur)
}
