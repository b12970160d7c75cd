//! Whether an apply's prune step can remove anything. smd removes everything the applier owned
//! before, adds back what anyone still owns, then adds back dangling parents: three passes that
//! rebuild the object. Nearly always nothing is removed; these checks establish that from the
//! field sets alone, and the updater runs the passes only when they cannot.

use crate::fieldpath::{PathElement, Set};
use crate::schema::{Schema, TypeRef};
use std::cmp::Ordering;
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
    dropped_walk(schema, tr, last, dropped, Some(mine), others, false)
}

fn dropped_walk(
    schema: &Schema,
    tr: &TypeRef,
    last: &Set,
    dropped: &Set,
    mine: Option<&Set>,
    others: &[&Set],
    below: bool,
) -> bool {
    if dropped.members().is_empty() && dropped.children().is_empty() {
        return true;
    }
    let map = schema.resolve(tr).and_then(|a| a.map);
    let in_others = |pe: &PathElement, is_named: bool| {
        others
            .iter()
            .any(|o| o.has_member(pe) || (is_named && o.child(pe).is_some()))
    };
    for m in dropped.members() {
        let is_named = declared(map, m);
        if is_named && mine.is_some_and(|s| s.child(m).is_some()) {
            continue;
        }
        if !in_others(m, is_named) {
            return false;
        }
    }
    let mut below_owned: Vec<&Set> = Vec::with_capacity(others.len());
    for (pe, dsub) in dropped.children() {
        let Some(lsub) = last.child(pe) else {
            continue;
        };
        let is_named = declared(map, pe);
        let member = is_named || last.has_member(pe);
        let mine_below = mine.and_then(|s| s.child(pe));
        if member || below {
            let owned_here = mine.is_some_and(|s| s.has_member(pe))
                || (is_named && mine_below.is_some())
                || in_others(pe, is_named);
            if !owned_here {
                return false;
            }
        }
        below_owned.clear();
        below_owned.extend(others.iter().filter_map(|o| o.child(pe)));
        let child_tr = child_type(schema, tr, pe);
        if !dropped_walk(
            schema,
            child_tr,
            lsub,
            dsub,
            mine_below,
            &below_owned,
            below || member,
        ) {
            return false;
        }
    }
    true
}

/// True if pruning cannot remove anything: every node the applier owned (with declared struct
/// fields that have owned children counted as owned, as `EnsureNamedFieldsAreMembers` does) is
/// still owned by someone, and no unowned list item or map key sits between two nodes the
/// applier owned (such an item would be removed with everything below it). Walks the applier's
/// previous set with the schema, building nothing. `mine` (the applier's new set) is walked in
/// step with `last`; `others` are searched only for what `mine` lacks.
pub(super) fn nothing_to_prune(
    schema: &Schema,
    tr: &TypeRef,
    last: &Set,
    mine: Option<&Set>,
    others: &[&Set],
    below: bool,
) -> bool {
    let map = schema.resolve(tr).and_then(|a| a.map);
    let (my_members, my_children) = match mine {
        Some(s) => (s.members(), s.children()),
        None => (&[][..], &[][..]),
    };
    // Owned by someone other than the applier.
    let in_others = |pe: &PathElement, is_named: bool| {
        others
            .iter()
            .any(|o| o.has_member(pe) || (is_named && o.child(pe).is_some()))
    };
    // Cursors into the applier's members and children: `last`'s members and children are
    // each sorted, so each is found by advancing, not searching.
    let mut mi = 0usize;
    for m in last.members() {
        if seek(my_members, &mut mi, m, |x| x).is_some() {
            continue;
        }
        let is_named = declared(map, m);
        if is_named && mine.is_some_and(|s| s.child(m).is_some()) {
            continue;
        }
        if !in_others(m, is_named) {
            return false;
        }
    }
    let (mut mi, mut ci) = (0usize, 0usize);
    let mut below_owned: Vec<&Set> = Vec::with_capacity(others.len());
    for (pe, sub) in last.children() {
        let is_named = declared(map, pe);
        let member = is_named || last.has_member(pe);
        let mine_below = seek(my_children, &mut ci, pe, |(c, _)| c).map(|(_, s)| s);
        if member || below {
            let owned_here = seek(my_members, &mut mi, pe, |x| x).is_some()
                || (is_named && mine_below.is_some())
                || in_others(pe, is_named);
            if !owned_here {
                return false;
            }
        }
        below_owned.clear();
        below_owned.extend(others.iter().filter_map(|o| o.child(pe)));
        let child_tr = child_type(schema, tr, pe);
        if !nothing_to_prune(
            schema,
            child_tr,
            sub,
            mine_below,
            &below_owned,
            below || member,
        ) {
            return false;
        }
    }
    true
}

/// Advances `pos` over `items` (sorted by PE) to `pe`; the item if present.
fn seek<'a, T>(
    items: &'a [T],
    pos: &mut usize,
    pe: &PathElement,
    key: impl Fn(&T) -> &PathElement,
) -> Option<&'a T> {
    while let Some(x) = items.get(*pos) {
        match key(x).compare(pe) {
            Ordering::Less => *pos += 1,
            Ordering::Equal => return Some(x),
            Ordering::Greater => return None,
        }
    }
    None
}
