//! The apply walk: everything an apply needs from the config and the live object in one pass —
//! the config's validation and field set ([`validate_to_field_set`]), the merged object
//! ([`merge`]) and what the merge changed ([`compare_merged`]).
//!
//! Three walks over the same nodes resolve every type three times and index every list six
//! times; this one does it once. It covers the inputs real applies consist of; anything unusual
//! (an invalid config, repeated list keys, a value whose shape differs from the live one) makes
//! it decline, and callers run the three reference-shaped operations instead, which agree with
//! it wherever it answers (debug builds check that on every call).
//!
//! [`validate_to_field_set`]: super::validate_to_field_set
//! [`merge`]: super::merge
//! [`compare_merged`]: super::compare_merged

use super::compare::{ADDED, Acc, Comparison, Diff, leaf_diff};
use super::merge::{ListStep, list_merge_steps};
use super::validate::{MAX_PATH_DEPTH, assemble, config_part_is_valid};
use super::{Handler, ListIndex, ListIndexes, check_scalar, handler};
use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, List, MapType, Schema, TypeRef};
use crate::value::{Map, Str, Value};

/// What an apply of a config to a live object computes before ownership is considered.
#[derive(Clone, Debug)]
pub struct ApplyWalk {
    /// The config's field set.
    pub set: Set,
    /// The live object with the config merged in.
    pub merged: Value,
    /// What changed from the live object to `merged`.
    pub comparison: Comparison,
    /// True if `merged` equals the live object ([`crate::value::equals`]): nothing changed and
    /// no list was reordered.
    pub unchanged: bool,
}

/// Validates `config`, computes its field set, merges it into `live` and compares the result
/// with `live`. `live` must be valid for `tr` (as [`super::validate`] with duplicates allowed
/// checks). `None` when the inputs need the general operations (see the module docs).
pub fn apply_walk(
    schema: &Schema,
    tr: &TypeRef,
    live: &Value,
    config: &Value,
) -> Option<ApplyWalk> {
    walk(schema, tr, live, config, None)
}

/// [`apply_walk`] with the live object's list indexes built beforehand ([`ListIndexes::of`]
/// for this very `live`).
pub fn apply_walk_indexed(
    schema: &Schema,
    tr: &TypeRef,
    live: &Value,
    lists: &ListIndexes,
    config: &Value,
) -> Option<ApplyWalk> {
    walk(schema, tr, live, config, Some(lists))
}

fn walk(
    schema: &Schema,
    tr: &TypeRef,
    live: &Value,
    config: &Value,
    lists: Option<&ListIndexes>,
) -> Option<ApplyWalk> {
    let w = Walker { schema, lists };
    let out = w.node(tr, 0, Some(live), config)?;
    // The root's own change is not a path, but it is a change.
    let root_changed = out.diff.here != 0;
    let comparison = out.diff.into_comparison();
    let walk = ApplyWalk {
        set: out.set,
        merged: out.merged,
        unchanged: !out.moved && !root_changed && comparison.is_same(),
        comparison,
    };
    #[cfg(debug_assertions)]
    check_against_reference(schema, tr, live, config, &walk);
    Some(walk)
}

#[cfg(debug_assertions)]
fn check_against_reference(
    schema: &Schema,
    tr: &TypeRef,
    live: &Value,
    config: &Value,
    walk: &ApplyWalk,
) {
    let set = super::validate_to_field_set(schema, tr, config)
        .expect("the apply walk accepted a config validation rejects");
    assert!(set.equals(&walk.set), "apply walk: field set differs");
    let merged = super::merge(schema, tr, live, config)
        .expect("the apply walk merged what merge rejects")
        .unwrap_or(Value::Null);
    assert!(
        merged.strict_eq(&walk.merged),
        "apply walk: merged object differs"
    );
    let cmp = super::compare_merged(schema, tr, live, &merged, config)
        .expect("the apply walk compared what compare rejects");
    assert!(
        cmp.added.equals(&walk.comparison.added)
            && cmp.modified.equals(&walk.comparison.modified)
            && cmp.removed.equals(&walk.comparison.removed),
        "apply walk: comparison differs"
    );
    assert_eq!(
        walk.unchanged,
        crate::value::equals(live, &merged),
        "apply walk: unchanged differs"
    );
}

/// One node's results: whether its own path is in the config's set and the set below it (as
/// the validate walk returns them), the merged value, and the change from live to merged.
struct Out {
    own: bool,
    set: Set,
    merged: Value,
    diff: Diff,
    /// Some list below has its live items in a new order.
    moved: bool,
}

impl Out {
    /// A value merged as a whole (scalar, atomic, or emptied): the config's value wins.
    fn leaf(own: bool, lhs: Option<&Value>, rhs: &Value) -> Out {
        Out {
            own,
            set: Set::new(),
            merged: rhs.clone(),
            diff: leaf_diff(lhs, Some(rhs)),
            moved: false,
        }
    }

    /// A null config over a non-empty granular live value: the merge keeps the live value.
    fn kept(lhs: &Value) -> Out {
        Out {
            own: false,
            set: Set::new(),
            merged: lhs.clone(),
            diff: Diff::default(),
            moved: false,
        }
    }
}

struct Walker<'s> {
    schema: &'s Schema,
    lists: Option<&'s ListIndexes>,
}

/// The config-side contributions of a container's children, gathered like the validate walk.
#[derive(Default)]
struct SetParts {
    members: Vec<PathElement>,
    children: Vec<(PathElement, Set)>,
}

impl SetParts {
    fn finish(self) -> Set {
        assemble(self.members, self.children)
    }
}

impl<'s> Walker<'s> {
    /// `lhs` is the live value (if any), `rhs` the config's.
    fn node(&self, tr: &'s TypeRef, depth: usize, lhs: Option<&Value>, rhs: &Value) -> Option<Out> {
        if depth > MAX_PATH_DEPTH {
            return None;
        }
        let atom = self.schema.resolve(tr)?;
        let ar = atom.deduce(Some(rhs));
        if let Some(l) = lhs {
            // Mixed shapes make merge and compare consult two handlers; leave them to those.
            if atom.deduce(Some(l)).shape() != ar.shape() {
                return None;
            }
        }
        let out = match handler(&ar) {
            Handler::Scalar(t) => {
                if check_scalar(t, rhs).is_some() {
                    return None;
                }
                Out::leaf(true, lhs, rhs)
            }
            Handler::List(l, er) => self.list(tr, depth, l, er, lhs, rhs)?,
            Handler::Map(m, er) => self.map(tr, depth, m, er, lhs, rhs)?,
            Handler::Invalid => return None,
        };
        Some(out)
    }

    fn list(
        &self,
        tr: &'s TypeRef,
        depth: usize,
        l: &'s List,
        er: ElementRelationship,
        lhs: Option<&Value>,
        rhs: &Value,
    ) -> Option<Out> {
        let items = match rhs {
            Value::List(items) => Some(items.as_slice()),
            Value::Null => None,
            _ => return None,
        };
        if er == ElementRelationship::Atomic {
            if !config_part_is_valid(self.schema, tr, rhs, depth) {
                return None;
            }
            return Some(Out::leaf(true, lhs, rhs));
        }
        if er != ElementRelationship::Associative {
            return None;
        }
        let ll = lhs.and_then(Value::as_list).unwrap_or(&[]);
        let rl = items.unwrap_or(&[]);
        if ll.is_empty() && rl.is_empty() {
            return Some(Out::leaf(false, lhs, rhs));
        }
        let Some(rl) = items else {
            // A null list over live items: the merge keeps them.
            return Some(Out::kept(lhs.expect("non-empty live list")));
        };
        let (ri, problems) = ListIndex::build(self.schema, l, er, rl);
        if !problems.is_empty() || (0..rl.len()).any(|i| !ri.is_first(i)) {
            return None;
        }
        let built;
        let li = match self.lists.and_then(|x| x.get(ll)) {
            Some(li) => {
                #[cfg(debug_assertions)]
                {
                    let (fresh, _) = ListIndex::build(self.schema, l, er, ll);
                    debug_assert!(
                        (0..ll.len()).all(|i| fresh.pes[i]
                            .as_ref()
                            .zip(li.pes[i].as_ref())
                            .is_some_and(|(a, b)| a.equals(b))),
                        "stale list index"
                    );
                }
                li
            }
            None => {
                let (fresh, problems) = ListIndex::build(self.schema, l, er, ll);
                if !problems.is_empty() {
                    return None;
                }
                built = fresh;
                &built
            }
        };
        if (0..ll.len()).any(|i| li.is_duplicated(i)) {
            return None;
        }
        let mut set = SetParts {
            members: Vec::with_capacity(rl.len()),
            children: Vec::new(),
        };
        let mut acc = Acc::default();
        let mut merged = Vec::with_capacity(ll.len().max(rl.len()));
        // The live items must come out in their order for the list to be unchanged.
        let (mut next_live, mut moved) = (0usize, false);
        let visit = |i: Option<usize>, next_live: &mut usize, moved: &mut bool| {
            *moved |= i != Some(*next_live);
            *next_live = i.map_or(*next_live, |i| i + 1);
        };
        for step in list_merge_steps(li, &ri) {
            match step {
                ListStep::Lhs(i) => {
                    visit(Some(i), &mut next_live, &mut moved);
                    merged.push(ll[i].clone());
                }
                ListStep::Rhs(r) => {
                    let pe = ri.pe_at(r);
                    let twin_at = li.find_at(pe, r);
                    visit(twin_at, &mut next_live, &mut moved);
                    let twin = twin_at.map(|i| &ll[i]);
                    let c = self.node(&l.element_type, depth + 1, twin, &rl[r])?;
                    moved |= c.moved;
                    set.members.push(pe.clone());
                    if !c.set.is_empty() {
                        set.children.push((pe.clone(), c.set));
                    }
                    acc.add(pe, c.diff);
                    merged.push(c.merged);
                }
            }
        }
        Some(Out {
            own: false,
            set: set.finish(),
            merged: Value::List(merged),
            diff: container_diff(acc, lhs),
            moved: moved || next_live != ll.len(),
        })
    }

    fn map(
        &self,
        tr: &'s TypeRef,
        depth: usize,
        m: &'s MapType,
        er: ElementRelationship,
        lhs: Option<&Value>,
        rhs: &Value,
    ) -> Option<Out> {
        let rm = match rhs {
            Value::Map(map) => Some(map),
            Value::Null => None,
            _ => return None,
        };
        let atomic = er == ElementRelationship::Atomic;
        let lm = lhs.and_then(Value::as_map);
        let Some(rm) = rm else {
            // A null config map.
            return Some(if atomic || lm.is_none_or(Map::is_empty) {
                Out::leaf(atomic, lhs, rhs)
            } else {
                Out::kept(lhs.expect("non-empty live map"))
            });
        };
        if atomic {
            if !config_part_is_valid(self.schema, tr, rhs, depth) {
                return None;
            }
            return Some(Out::leaf(true, lhs, rhs));
        }
        if lm.is_none_or(Map::is_empty) && rm.is_empty() {
            return Some(Out::leaf(false, lhs, rhs));
        }
        let mut set = SetParts::default();
        let keys = rm.len();
        let mut acc = Acc::default();
        let mut merged = Map::with_capacity(lm.map_or(0, Map::len) + rm.len());
        let rlook = rm.lookup();
        // One config key's results, recorded as the validate walk and compare record them.
        let mut moved = false;
        let mut take = |k: &Str, val: &Value, declared: bool, c: Out, merged: &mut Map| {
            moved |= c.moved;
            let empty_map = matches!(val, Value::Map(x) if x.is_empty());
            let pe = PathElement::Field(k.clone());
            // Sized for the config's keys on first use: one allocation, not a few doublings.
            if c.own || val.is_null() || empty_map || !declared {
                if set.members.capacity() == 0 {
                    set.members.reserve_exact(keys);
                }
                set.members.push(pe.clone());
            }
            if !c.set.is_empty() {
                if set.children.capacity() == 0 {
                    set.children.reserve_exact(keys);
                }
                set.children.push((pe.clone(), c.set));
            }
            if !c.diff.is_empty() {
                acc.add(&pe, c.diff);
            }
            merged.push_unique(k.clone(), c.merged);
        };
        let mut seen = 0usize;
        if let Some(lm) = lm {
            for (i, (k, lv)) in lm.iter().enumerate() {
                match rlook.get_at(k, i) {
                    None => merged.push_unique(k.clone(), lv.clone()),
                    Some(rv) => {
                        seen += 1;
                        let (ft, declared) = config_field_type(m, k)?;
                        let c = self.node(ft, depth + 1, Some(lv), rv)?;
                        take(k, rv, declared, c, &mut merged);
                    }
                }
            }
        }
        if seen < rm.len() {
            let llook = lm.map(Map::lookup);
            for (k, rv) in rm.iter() {
                if llook.as_ref().is_some_and(|l| l.contains(k)) {
                    continue;
                }
                let (ft, declared) = config_field_type(m, k)?;
                let c = self.node(ft, depth + 1, None, rv)?;
                take(k, rv, declared, c, &mut merged);
            }
        }
        Some(Out {
            own: false,
            set: set.finish(),
            merged: Value::Map(merged),
            diff: container_diff(acc, lhs),
            moved,
        })
    }
}

/// The type of a config key and whether the schema declares it; `None` if the schema does not
/// allow the key.
fn config_field_type<'s>(m: &'s MapType, k: &str) -> Option<(&'s TypeRef, bool)> {
    match m.find_field(k) {
        Some(f) => Some((&f.ty, true)),
        None if m.element_type.is_empty() => None,
        None => Some((&m.element_type, false)),
    }
}

/// A walked container's change: its children's, and itself as added if it is new.
fn container_diff(acc: Acc, lhs: Option<&Value>) -> Diff {
    let mut d = acc.finish();
    if lhs.is_none() {
        d.here |= ADDED;
    }
    d
}
