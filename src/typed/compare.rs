//! Comparison of two values of one type (smd `TypedValue.Compare`): which paths were added,
//! modified or removed. List items compare by key, so a pure reorder changes nothing.
//!
//! The three result sets are built bottom-up: a subtree that did not change allocates nothing.

use super::{
    At, Handler, ListIndex, ValidationErrors, check_scalar, field_type, handler, invalid_atom,
    resolve,
};
use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, List, MapType, Schema, TypeRef};
use crate::value::{self, Value};

/// The difference between an old and a new value.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
    /// Removes `exclude` (and everything below its members) from all three sets.
    /// True if [`Comparison::exclude`] would remove anything (else it is a copy).
    pub fn touches(&self, exclude: &Set) -> bool {
        self.added.touches_recursive(exclude)
            || self.modified.touches_recursive(exclude)
            || self.removed.touches_recursive(exclude)
    }

    /// The same three sets, structurally.
    pub fn equals(&self, other: &Comparison) -> bool {
        self.added.equals(&other.added)
            && self.modified.equals(&other.modified)
            && self.removed.equals(&other.removed)
    }

    pub fn exclude(&self, exclude: &Set) -> Comparison {
        let mut out = self.clone();
        out.added.remove_recursive(exclude);
        out.modified.remove_recursive(exclude);
        out.removed.remove_recursive(exclude);
        out
    }
}

/// Compares `lhs` (old) with `rhs` (new).
pub fn compare(
    schema: &Schema,
    tr: &TypeRef,
    lhs: &Value,
    rhs: &Value,
) -> Result<Comparison, ValidationErrors> {
    compare_impl(schema, tr, lhs, rhs, None, false)
}

/// [`compare`] of two values both valid for `tr` (as [`super::validate`] with duplicates
/// allowed finds them): a subtree that is the same on both sides is not walked, since nothing
/// in it can differ and, both sides being valid, nothing in it can be reported either. Debug
/// builds compare with the full walk on every call.
pub fn compare_valid(
    schema: &Schema,
    tr: &TypeRef,
    lhs: &Value,
    rhs: &Value,
) -> Result<Comparison, ValidationErrors> {
    let out = compare_impl(schema, tr, lhs, rhs, None, true);
    #[cfg(debug_assertions)]
    {
        let full = compare_impl(schema, tr, lhs, rhs, None, false);
        debug_assert!(
            matches!((&out, &full), (Ok(a), Ok(b)) if a.equals(b)),
            "skipping same subtrees changed the comparison"
        );
    }
    out
}

/// Compares a validated `lhs` with `rhs = merge(lhs, config)` (nothing pruned), visiting only
/// what `config` touches: wherever `config` has no entry, `rhs` equals `lhs` by construction
/// (merging with nothing returns the left side unchanged), so there is nothing to find there.
pub fn compare_merged(
    schema: &Schema,
    tr: &TypeRef,
    lhs: &Value,
    rhs: &Value,
    config: &Value,
) -> Result<Comparison, ValidationErrors> {
    compare_impl(schema, tr, lhs, rhs, Some(Guide(Some(config))), false)
}

/// In guided mode, the config value at the current node (`Guide(None)`: the config has none).
#[derive(Clone, Copy)]
struct Guide<'v>(Option<&'v Value>);

impl<'v> Guide<'v> {
    /// The guide's keys at a map node, looked up through `Map::lookup` (hashed when the map is
    /// large: a scan per key made comparing a map of n keys cost n² key comparisons).
    fn keys(g: Option<Self>) -> Option<crate::value::MapLookup<'v>> {
        g.and_then(|Guide(v)| v)
            .and_then(Value::as_map)
            .map(|m| m.lookup())
    }
    /// The guide below key `k` (found at position `hint` when the maps list their keys alike),
    /// given the guide at the map (`g`) and its keys (`keys`, from [`Guide::keys`]).
    fn key(
        g: Option<Self>,
        keys: Option<&crate::value::MapLookup<'v>>,
        k: &str,
        hint: usize,
    ) -> Option<Self> {
        g.map(|_| Guide(keys.and_then(|l| l.get_at(k, hint))))
    }
    /// True if the subtree is known to be unchanged (guided, and the config has nothing here).
    fn untouched(g: Option<Self>) -> bool {
        matches!(g, Some(Guide(None)))
    }
}

fn compare_impl(
    schema: &Schema,
    tr: &TypeRef,
    lhs: &Value,
    rhs: &Value,
    guide: Option<Guide>,
    skip_same: bool,
) -> Result<Comparison, ValidationErrors> {
    let mut w = Walker {
        schema,
        errs: ValidationErrors::default(),
        skip_same,
    };
    // The root path itself is never recorded (smd ignores empty paths).
    let d = w.node(&At::Root, tr, Some(lhs), Some(rhs), guide);
    w.errs.into_result().map(|_| d.into_comparison())
}

pub(super) const ADDED: u8 = 1;
pub(super) const MODIFIED: u8 = 2;
const REMOVED: u8 = 4;

/// What changed at one node: flags for the node's own path, sets for paths below it (boxed:
/// most nodes do not change, and then nothing is allocated or dropped).
#[derive(Default)]
pub(super) struct Diff {
    pub(super) here: u8,
    below: Option<Box<[Set; 3]>>,
}

impl Diff {
    pub(super) fn flag(f: u8) -> Diff {
        Diff {
            here: f,
            below: None,
        }
    }
    pub(super) fn is_empty(&self) -> bool {
        self.here == 0 && self.below.is_none()
    }
    /// The comparison below the root (the root path itself is never recorded).
    pub(super) fn into_comparison(self) -> Comparison {
        match self.below {
            Some(b) => {
                let [added, modified, removed] = *b;
                Comparison {
                    added,
                    modified,
                    removed,
                }
            }
            None => Comparison::default(),
        }
    }
    fn union(mut self, o: Diff) -> Diff {
        self.here |= o.here;
        match (&mut self.below, o.below) {
            (Some(a), Some(b)) => {
                let [x, y, z] = *b;
                a[0].union_with(x);
                a[1].union_with(y);
                a[2].union_with(z);
            }
            (None, Some(b)) => self.below = Some(b),
            _ => {}
        }
        self
    }
}

/// Members and children of one result set under construction.
#[derive(Default)]
struct Parts {
    members: Vec<PathElement>,
    children: Vec<(PathElement, Set)>,
}

impl Parts {
    fn add(&mut self, pe: &PathElement, here: bool, below: Set) {
        if here {
            self.members.push(pe.clone());
        }
        if !below.is_empty() {
            self.children.push((pe.clone(), below));
        }
    }
    fn finish(mut self) -> Set {
        if self.members.len() > 1 {
            self.members.sort_by(|a, b| a.compare(b));
            self.members.dedup_by(|a, b| a.compare(b).is_eq());
        }
        if self.children.len() > 1 {
            self.children.sort_by(|a, b| a.0.compare(&b.0));
            let mut merged: Vec<(PathElement, Set)> = Vec::with_capacity(self.children.len());
            for (pe, s) in self.children {
                match merged.last_mut() {
                    Some((last, ls)) if last.compare(&pe).is_eq() => ls.union_with(s),
                    _ => merged.push((pe, s)),
                }
            }
            self.children = merged;
        }
        Set::from_sorted_parts(self.members, self.children)
    }
}

/// Accumulates the changes of a container's children.
#[derive(Default)]
pub(super) struct Acc {
    added: Parts,
    modified: Parts,
    removed: Parts,
}

impl Acc {
    pub(super) fn add(&mut self, pe: &PathElement, d: Diff) {
        if d.is_empty() {
            return;
        }
        let [a, m, r] = match d.below {
            Some(b) => *b,
            None => Default::default(),
        };
        self.added.add(pe, d.here & ADDED != 0, a);
        self.modified.add(pe, d.here & MODIFIED != 0, m);
        self.removed.add(pe, d.here & REMOVED != 0, r);
    }
    fn is_empty(&self) -> bool {
        [&self.added, &self.modified, &self.removed]
            .iter()
            .all(|p| p.members.is_empty() && p.children.is_empty())
    }
    pub(super) fn finish(self) -> Diff {
        if self.is_empty() {
            return Diff::default();
        }
        Diff {
            here: 0,
            below: Some(Box::new([
                self.added.finish(),
                self.modified.finish(),
                self.removed.finish(),
            ])),
        }
    }
}

/// How a leaf (scalar or atomic value) changed.
pub(super) fn leaf_diff(lhs: Option<&Value>, rhs: Option<&Value>) -> Diff {
    match (lhs, rhs) {
        (None, _) => Diff::flag(ADDED),
        (_, None) => Diff::flag(REMOVED),
        (Some(l), Some(r)) if !value::equals(r, l) => Diff::flag(MODIFIED),
        _ => Diff::default(),
    }
}

struct Walker<'s> {
    schema: &'s Schema,
    errs: ValidationErrors,
    /// Both sides are valid: a subtree the same on both sides is skipped ([`compare_valid`]).
    skip_same: bool,
}

/// The two values compared at a node, and the guide (config) value in guided mode.
#[derive(Clone, Copy)]
struct Sides<'v> {
    lhs: Option<&'v Value>,
    rhs: Option<&'v Value>,
    g: Option<Guide<'v>>,
}

impl<'s> Walker<'s> {
    fn node(
        &mut self,
        at: &At,
        tr: &'s TypeRef,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        g: Option<Guide>,
    ) -> Diff {
        if lhs.is_none() && rhs.is_none() {
            self.errs
                .push_at(at, "at least one of lhs and rhs must be provided");
            return Diff::default();
        }
        if self.skip_same
            && let (Some(l), Some(r)) = (lhs, rhs)
            && l.strict_eq(r)
        {
            return Diff::default();
        }
        let a = match resolve(self.schema, tr) {
            Ok(a) => a,
            Err(e) => {
                self.errs.push_at(at, e);
                return Diff::default();
            }
        };
        let (al, ar) = (a.deduce(lhs), a.deduce(rhs));
        let mut in_leaf = false;
        let sides = Sides { lhs, rhs, g };
        let mut d = if rhs.is_none() {
            self.handle(at, tr, handler(&al), sides, &mut in_leaf)
        } else if lhs.is_none() || al.shape() == ar.shape() {
            self.handle(at, tr, handler(&ar), sides, &mut in_leaf)
        } else {
            let mut scratch = false;
            let first = self.handle(at, tr, handler(&al), sides, &mut scratch);
            first.union(self.handle(at, tr, handler(&ar), sides, &mut in_leaf))
        };
        if !in_leaf {
            if lhs.is_none() {
                d.here |= ADDED;
            } else if rhs.is_none() {
                d.here |= REMOVED;
            }
        }
        d
    }

    fn leaf(lhs: Option<&Value>, rhs: Option<&Value>, in_leaf: &mut bool) -> Diff {
        if *in_leaf {
            return Diff::default();
        }
        *in_leaf = true;
        leaf_diff(lhs, rhs)
    }

    fn handle(
        &mut self,
        at: &At,
        tr: &'s TypeRef,
        h: Handler<'s>,
        sides: Sides,
        in_leaf: &mut bool,
    ) -> Diff {
        let Sides { lhs, rhs, g } = sides;
        match h {
            Handler::Scalar(t) => {
                let le = lhs.and_then(|v| check_scalar(t, v));
                let re = rhs.and_then(|v| check_scalar(t, v));
                if let (Some(le), Some(re)) = (le, re) {
                    self.errs.push_at(at, format!("lhs: {le}"));
                    self.errs.push_at(at, format!("rhs: {re}"));
                    return Diff::default();
                }
                Self::leaf(lhs, rhs, in_leaf)
            }
            Handler::List(l, er) => {
                let ll = lhs.and_then(Value::as_list);
                let rl = rhs.and_then(Value::as_list);
                let empty = ll.is_none_or(|x| x.is_empty()) && rl.is_none_or(|x| x.is_empty());
                if er == ElementRelationship::Atomic || empty {
                    return Self::leaf(lhs, rhs, in_leaf);
                }
                self.list_items(at, l, er, ll.unwrap_or(&[]), rl.unwrap_or(&[]), g)
            }
            Handler::Map(m, er) => {
                let lm = lhs.and_then(Value::as_map);
                let rm = rhs.and_then(Value::as_map);
                let empty = lm.is_none_or(|x| x.is_empty()) && rm.is_none_or(|x| x.is_empty());
                if er == ElementRelationship::Atomic || empty {
                    return Self::leaf(lhs, rhs, in_leaf);
                }
                self.map_items(at, m, lm, rm, g)
            }
            Handler::Invalid => {
                self.errs.push_at(at, invalid_atom(tr));
                Diff::default()
            }
        }
    }

    fn map_items(
        &mut self,
        at: &At,
        m: &'s MapType,
        lhs: Option<&crate::value::Map>,
        rhs: Option<&crate::value::Map>,
        g: Option<Guide>,
    ) -> Diff {
        let mut acc = Acc::default();
        let rl = rhs.map(|r| r.lookup());
        let gl = Guide::keys(g);
        if let Some(lm) = lhs {
            for (i, (k, lv)) in lm.iter().enumerate() {
                let rv = rl.as_ref().and_then(|r| r.get_at(k, i));
                let cg = Guide::key(g, gl.as_ref(), k, i);
                if rv.is_some() && Guide::untouched(cg) {
                    continue;
                }
                let d = self.node(&at.field(k), field_type(m, k), Some(lv), rv, cg);
                if !d.is_empty() {
                    acc.add(&PathElement::Field(k.clone()), d);
                }
            }
        }
        if let Some(rm) = rhs {
            let ll = lhs.map(|l| l.lookup());
            for (i, (k, rv)) in rm.iter().enumerate() {
                if ll.as_ref().is_some_and(|l| l.contains(k)) {
                    continue;
                }
                let d = self.node(
                    &at.field(k),
                    field_type(m, k),
                    None,
                    Some(rv),
                    Guide::key(g, gl.as_ref(), k, i),
                );
                if !d.is_empty() {
                    acc.add(&PathElement::Field(k.clone()), d);
                }
            }
        }
        acc.finish()
    }

    fn list_items(
        &mut self,
        at: &At,
        l: &'s List,
        er: ElementRelationship,
        lhs: &[Value],
        rhs: &[Value],
        g: Option<Guide>,
    ) -> Diff {
        let li = self.index(at, l, er, lhs);
        let ri = self.index(at, l, er, rhs);
        // In guided mode: the config's items, to tell which PEs it touches.
        let gitems: &[Value] = match g {
            Some(Guide(Some(v))) => v.as_list().unwrap_or(&[]),
            _ => &[],
        };
        let gi = g.map(|_| ListIndex::build(self.schema, l, er, gitems).0);
        let item_guide = |pe: &PathElement| -> Option<Guide> {
            let gi = gi.as_ref()?;
            Some(Guide(gi.find(pe).map(|i| &gitems[i])))
        };
        // Every distinct PE, in first-appearance order over lhs, then rhs-only ones.
        let mut order: Vec<&PathElement> = Vec::new();
        for (i, pe) in li.pes.iter().enumerate() {
            if let Some(pe) = pe {
                if li.is_first(i) {
                    order.push(pe);
                }
            }
        }
        for (i, pe) in ri.pes.iter().enumerate() {
            if let Some(pe) = pe {
                if ri.is_first(i) && li.find(pe).is_none() {
                    order.push(pe);
                }
            }
        }
        let mut acc = Acc::default();
        for pe in order {
            let lg = li.group(pe);
            let rg = ri.group(pe);
            let (lg, rg) = (&lg[..], &rg[..]);
            let lv = |k: usize| &lhs[lg[k] as usize];
            let rv = |k: usize| &rhs[rg[k] as usize];
            let here = at.item(pe);
            let ig = item_guide(pe);
            if !rg.is_empty() && Guide::untouched(ig) {
                continue;
            }
            match (lg.len(), rg.len()) {
                (0, 0) => break,
                (a, b) if a <= 1 && b <= 1 => {
                    let d = self.node(
                        &here,
                        &l.element_type,
                        (a == 1).then(|| lv(0)),
                        (b == 1).then(|| rv(0)),
                        ig,
                    );
                    acc.add(pe, d);
                }
                (a, b) if a >= 2 && b >= 2 => {
                    let same = a == b && (0..a).all(|k| value::equals(lv(k), rv(k)));
                    if !same {
                        acc.modified.members.push(pe.clone());
                    }
                }
                (a, b) if a >= 2 => {
                    if b > 0 {
                        let d = self.node(&here, &l.element_type, None, Some(rv(0)), ig);
                        acc.add(pe, d);
                    }
                    acc.removed.members.push(pe.clone());
                }
                (a, _) => {
                    if a > 0 {
                        let d = self.node(&here, &l.element_type, Some(lv(0)), None, ig);
                        acc.add(pe, d);
                    }
                    acc.added.members.push(pe.clone());
                }
            }
        }
        acc.finish()
    }

    fn index(
        &mut self,
        at: &At,
        l: &'s List,
        er: ElementRelationship,
        items: &[Value],
    ) -> ListIndex {
        let (idx, problems) = ListIndex::build(self.schema, l, er, items);
        for (i, e) in problems {
            self.errs.push_at(at, format!("element {i}: {e}"));
        }
        idx
    }
}
