//! Whether an apply's prune step can remove anything. smd removes everything the applier owned
//! before, adds back what anyone still owns, then adds back dangling parents: three passes that
//! rebuild the object. Nearly always nothing is removed; these checks establish that from the
//! field sets alone, and the updater runs the passes only when they cannot.

use crate::fieldpath::{PathElement, Set};
use crate::schema::{Schema, TypeRef};
use std::sync::Arc;

/// Manager sets known to be *plain* for one type: every node that is not itself a member is a
/// declared struct field with members below it (the shape applies produce). For a plain
/// previous set, only what the applier dropped needs checking ([`nothing_dropped_to_prune`]).
/// Sets are recognised by identity, so the record is valid while the sets are shared with it
/// (as a prepared live object's are).
#[derive(Clone, Debug, Default)]
pub struct PlainSets(rustc_hash::FxHashSet<usize>);

impl PlainSets {
    /// Records which of `sets` are plain for `tr`.
    pub fn of<'a>(
        schema: &Schema,
        tr: &TypeRef,
        sets: impl IntoIterator<Item = &'a Arc<Set>>,
    ) -> Self {
        PlainSets(
            sets.into_iter()
                .filter(|s| is_plain(schema, tr, s))
                .map(|s| Arc::as_ptr(s) as usize)
                .collect(),
        )
    }

    pub fn contains(&self, set: &Arc<Set>) -> bool {
        self.0.contains(&(Arc::as_ptr(set) as usize))
    }
}

fn declared(map: Option<&crate::schema::MapType>, pe: &PathElement) -> bool {
    match (pe, map) {
        (PathElement::Field(n), Some(m)) => m.find_field(n).is_some(),
        _ => false,
    }
}

fn child_type<'s>(schema: &'s Schema, tr: &'s TypeRef, pe: &PathElement) -> &'s TypeRef {
    let atom = schema.resolve(tr);
    match (
        pe,
        atom.as_ref().and_then(|a| a.map),
        atom.as_ref().and_then(|a| a.list),
    ) {
        (PathElement::Field(n), Some(m), _) => crate::typed::field_type(m, n),
        (PathElement::Key(_), _, Some(l)) => &l.element_type,
        _ => &TypeRef::EMPTY,
    }
}

fn is_plain(schema: &Schema, tr: &TypeRef, set: &Set) -> bool {
    let map = schema.resolve(tr).and_then(|a| a.map);
    set.children().iter().all(|(pe, sub)| {
        (set.has_member(pe) || (!sub.is_empty() && declared(map, pe)))
            && is_plain(schema, child_type(schema, tr, pe), sub)
    })
}

/// [`nothing_to_prune`] for a plain `last`, given `dropped = last − mine`: members the applier
/// still has are owned, and the nodes above them are members or declared fields with `mine`
/// below them, so only the paths leading to dropped members are examined.
pub(super) fn nothing_dropped_to_prune(
    schema: &Schema,
    tr: &TypeRef,
    last: &Set,
    dropped: &Set,
    mine: &Set,
    others: &[&Set],
) -> bool {
    walk(schema, tr, last, dropped, Some(mine), others, false)
}

/// True if pruning cannot remove anything: every node the applier owned (with declared struct
/// fields that have owned children counted as owned, as `EnsureNamedFieldsAreMembers` does) is
/// still owned by someone, and no unowned list item or map key sits between two nodes the
/// applier owned (such an item would be removed with everything below it). Walks the applier's
/// previous set with the schema, building nothing; `mine` is the applier's new set.
pub(super) fn nothing_to_prune(
    schema: &Schema,
    tr: &TypeRef,
    last: &Set,
    mine: Option<&Set>,
    others: &[&Set],
) -> bool {
    walk(schema, tr, last, last, mine, others, false)
}

/// Checks the nodes of `part` (a subset of `last`, in its shape) as [`nothing_to_prune`]
/// describes; `below` is true under a node the applier owned.
fn walk(
    schema: &Schema,
    tr: &TypeRef,
    last: &Set,
    part: &Set,
    mine: Option<&Set>,
    others: &[&Set],
    below: bool,
) -> bool {
    if part.members().is_empty() && part.children().is_empty() {
        return true;
    }
    let map = schema.resolve(tr).and_then(|a| a.map);
    // Owned by the applier (still) or by someone else.
    let owned = |pe: &PathElement, is_named: bool| {
        std::iter::once(mine)
            .flatten()
            .chain(others.iter().copied())
            .any(|o| o.has_named_member(pe, is_named))
    };
    for m in part.members() {
        if !owned(m, declared(map, m)) {
            return false;
        }
    }
    let mut below_owned: Vec<&Set> = Vec::with_capacity(others.len());
    for (pe, psub) in part.children() {
        let Some(lsub) = last.child(pe) else {
            continue;
        };
        let is_named = declared(map, pe);
        let member = is_named || last.has_member(pe);
        if (member || below) && !owned(pe, is_named) {
            return false;
        }
        below_owned.clear();
        below_owned.extend(others.iter().filter_map(|o| o.child(pe)));
        let child_tr = child_type(schema, tr, pe);
        let mine_below = mine.and_then(|s| s.child(pe));
        if !walk(
            schema,
            child_tr,
            lsub,
            psub,
            mine_below,
            &below_owned,
            below || member,
        ) {
            return false;
        }
    }
    true
}
