//! Field sets: a trie of path elements with the set algebra structured-merge-diff uses
//! (union, intersection, difference, recursive difference, leaves, named-field promotion).
//! Every operation keeps smd's exact structural behaviour, including which empty nodes survive,
//! because those details are visible in the FieldsV1 the apiserver writes.

use super::element::{Path, PathElement};
use crate::schema::{Schema, TypeRef};
use std::cmp::Ordering;

/// A set of field paths. A path is in the set iff its last element is a member of the node its
/// prefix leads to; a node may be a pure parent (`children`) without being a member.
#[derive(Clone, Debug, Default)]
pub struct Set {
    members: Vec<PathElement>,
    children: Vec<(PathElement, Set)>,
}

fn find(members: &[PathElement], pe: &PathElement) -> Result<usize, usize> {
    members.binary_search_by(|m| m.compare(pe))
}

fn find_child(children: &[(PathElement, Set)], pe: &PathElement) -> Result<usize, usize> {
    children.binary_search_by(|(c, _)| c.compare(pe))
}

impl Set {
    pub fn new() -> Self {
        Set::default()
    }

    /// Builds a set from paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a [PathElement]>) -> Self {
        let mut s = Set::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    /// Builds a node from members and children already sorted by [`PathElement::compare`]
    /// and free of duplicates (the caller guarantees it).
    pub(crate) fn from_sorted_parts(
        members: Vec<PathElement>,
        children: Vec<(PathElement, Set)>,
    ) -> Set {
        debug_assert!(members.windows(2).all(|w| w[0].compare(&w[1]).is_lt()));
        debug_assert!(children.windows(2).all(|w| w[0].0.compare(&w[1].0).is_lt()));
        Set { members, children }
    }

    pub fn members(&self) -> &[PathElement] {
        &self.members
    }

    pub fn children(&self) -> &[(PathElement, Set)] {
        &self.children
    }

    /// Adds a path (its parents are not added). The empty path is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, prefix)) = path.split_last() else {
            return;
        };
        let mut node = self;
        for pe in prefix {
            node = node.descend(pe);
        }
        node.insert_member(last.clone());
    }

    /// Adds `pe` as a member of this node.
    pub fn insert_member(&mut self, pe: PathElement) {
        if let Err(i) = find(&self.members, &pe) {
            self.members.insert(i, pe);
        }
    }

    /// The child node for `pe`, created if missing.
    pub fn descend(&mut self, pe: &PathElement) -> &mut Set {
        let i = match find_child(&self.children, pe) {
            Ok(i) => i,
            Err(i) => {
                self.children.insert(i, (pe.clone(), Set::new()));
                i
            }
        };
        &mut self.children[i].1
    }

    /// Appends a member, sorted in (the previous decoder, kept as a test oracle).
    #[cfg(test)]
    pub(crate) fn push_member_sorted(&mut self, pe: PathElement) {
        match self.members.last() {
            Some(last) if last.compare(&pe) != Ordering::Less => self.insert_member(pe),
            _ => self.members.push(pe),
        }
    }

    /// Appends or replaces a child (the previous decoder: a repeated key replaces the earlier
    /// subtree).
    #[cfg(test)]
    pub(crate) fn put_child(&mut self, pe: PathElement, set: Set) {
        match self.children.last() {
            Some((last, _)) if last.compare(&pe) != Ordering::Less => *self.descend(&pe) = set,
            _ => self.children.push((pe, set)),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, prefix)) = path.split_last() else {
            return false;
        };
        let mut node = self;
        for pe in prefix {
            match node.child(pe) {
                Some(c) => node = c,
                None => return false,
            }
        }
        node.has_member(last)
    }

    pub fn has_member(&self, pe: &PathElement) -> bool {
        find(&self.members, pe).is_ok()
    }

    /// True if `pe` is a member once named fields are promoted ([`Set::ensure_named_fields_are_members`]):
    /// a member, or, for a struct field the schema declares (`declared`), a node with a subset.
    pub fn has_named_member(&self, pe: &PathElement, declared: bool) -> bool {
        self.has_member(pe) || (declared && self.child(pe).is_some())
    }

    /// The subset below `pe` (smd `WithPrefix` / `Children.Get`).
    pub fn child(&self, pe: &PathElement) -> Option<&Set> {
        find_child(&self.children, pe)
            .ok()
            .map(|i| &self.children[i].1)
    }

    /// True if no path is a member (pure-parent nodes with empty subtrees count as empty).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.iter().all(|(_, c)| c.is_empty())
    }

    /// Number of member paths.
    pub fn size(&self) -> usize {
        self.members.len() + self.children.iter().map(|(_, c)| c.size()).sum::<usize>()
    }

    /// Structural equality (smd `Set.Equals`).
    pub fn equals(&self, other: &Set) -> bool {
        self.members.len() == other.members.len()
            && self.children.len() == other.children.len()
            && self
                .members
                .iter()
                .zip(&other.members)
                .all(|(a, b)| a.equals(b))
            && self
                .children
                .iter()
                .zip(&other.children)
                .all(|((pa, sa), (pb, sb))| pa.equals(pb) && sa.equals(sb))
    }

    pub fn union(&self, other: &Set) -> Set {
        Set {
            members: union_members(&self.members, &other.members),
            children: union_children(&self.children, &other.children),
        }
    }

    /// In-place union, moving `other`'s nodes in.
    pub fn union_with(&mut self, other: Set) {
        if other.members.is_empty() && other.children.is_empty() {
            return;
        }
        let mine = std::mem::take(self);
        *self = mine.union_owned(other);
    }

    fn union_owned(self, other: Set) -> Set {
        let mut members = Vec::with_capacity(self.members.len() + other.members.len());
        let mut a = self.members.into_iter().peekable();
        let mut b = other.members.into_iter().peekable();
        loop {
            match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match x.compare(y) {
                    Ordering::Less => members.push(a.next().unwrap()),
                    Ordering::Greater => members.push(b.next().unwrap()),
                    Ordering::Equal => {
                        b.next();
                        members.push(a.next().unwrap());
                    }
                },
                (Some(_), None) => members.push(a.next().unwrap()),
                (None, Some(_)) => members.push(b.next().unwrap()),
                (None, None) => break,
            }
        }
        let mut children = Vec::with_capacity(self.children.len() + other.children.len());
        let mut a = self.children.into_iter().peekable();
        let mut b = other.children.into_iter().peekable();
        loop {
            match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match x.0.compare(&y.0) {
                    Ordering::Less => children.push(a.next().unwrap()),
                    Ordering::Greater => children.push(b.next().unwrap()),
                    Ordering::Equal => {
                        let (pe, sa) = a.next().unwrap();
                        let (_, sb) = b.next().unwrap();
                        children.push((pe, sa.union_owned(sb)));
                    }
                },
                (Some(_), None) => children.push(a.next().unwrap()),
                (None, Some(_)) => children.push(b.next().unwrap()),
                (None, None) => break,
            }
        }
        Set { members, children }
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let mut members = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.members.len() && j < other.members.len() {
            match self.members[i].compare(&other.members[j]) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    members.push(self.members[i].clone());
                    i += 1;
                    j += 1;
                }
            }
        }
        let mut children = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.children.len() && j < other.children.len() {
            match self.children[i].0.compare(&other.children[j].0) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    let res = self.children[i].1.intersection(&other.children[j].1);
                    if !res.is_empty() {
                        children.push((self.children[i].0.clone(), res));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        Set { members, children }
    }

    /// Removes the exact members of `other` ("parent − child = parent", "child − parent = child").
    pub fn difference(&self, other: &Set) -> Set {
        let members = diff_members(&self.members, &other.members);
        // Grown on demand: the difference of two similar sets is mostly empty nodes.
        let mut children = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.children.len() && j < other.children.len() {
            match self.children[i].0.compare(&other.children[j].0) {
                Ordering::Less => {
                    children.push(self.children[i].clone());
                    i += 1;
                }
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    let d = self.children[i].1.difference(&other.children[j].1);
                    if !d.is_empty() {
                        children.push((self.children[i].0.clone(), d));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        children.extend_from_slice(&self.children[i..]);
        Set { members, children }
    }

    /// `(self.difference(other), other.difference(self))` in one walk.
    pub fn differences(&self, other: &Set) -> (Set, Set) {
        let (mut a_members, mut b_members) = (Vec::new(), Vec::new());
        let (a, b) = (&self.members, &other.members);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].compare(&b[j]) {
                Ordering::Less => {
                    a_members.push(a[i].clone());
                    i += 1;
                }
                Ordering::Greater => {
                    b_members.push(b[j].clone());
                    j += 1;
                }
                Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
        }
        a_members.extend_from_slice(&a[i..]);
        b_members.extend_from_slice(&b[j..]);
        let (mut a_children, mut b_children) = (Vec::new(), Vec::new());
        let (a, b) = (&self.children, &other.children);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.compare(&b[j].0) {
                Ordering::Less => {
                    a_children.push(a[i].clone());
                    i += 1;
                }
                Ordering::Greater => {
                    b_children.push(b[j].clone());
                    j += 1;
                }
                Ordering::Equal => {
                    let (x, y) = a[i].1.differences(&b[j].1);
                    if !x.is_empty() {
                        a_children.push((a[i].0.clone(), x));
                    }
                    if !y.is_empty() {
                        b_children.push((b[j].0.clone(), y));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        a_children.extend_from_slice(&a[i..]);
        b_children.extend_from_slice(&b[j..]);
        (
            Set {
                members: a_members,
                children: a_children,
            },
            Set {
                members: b_members,
                children: b_children,
            },
        )
    }

    /// In-place [`Set::difference`]: the same result without rebuilding untouched nodes.
    pub fn remove_all(&mut self, other: &Set) {
        if !other.members.is_empty() && !self.members.is_empty() {
            self.members.retain(|m| find(&other.members, m).is_err());
        }
        if other.children.is_empty() || self.children.is_empty() {
            return;
        }
        self.children
            .retain_mut(|(pe, sub)| match find_child(&other.children, pe) {
                Ok(j) => {
                    sub.remove_all(&other.children[j].1);
                    !sub.is_empty()
                }
                Err(_) => true,
            });
    }

    /// Removes each member of `other` together with its whole subtree.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = diff_members(&self.members, &other.members);
        let mut children = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.children.len() && j < other.children.len() {
            let (pe, sub) = &self.children[i];
            match pe.compare(&other.children[j].0) {
                Ordering::Less => {
                    if !other.has_member(pe) {
                        children.push((pe.clone(), sub.clone()));
                    }
                    i += 1;
                }
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    if !other.has_member(pe) {
                        let d = sub.recursive_difference(&other.children[j].1);
                        if !d.is_empty() {
                            children.push((pe.clone(), d));
                        }
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        for (pe, sub) in &self.children[i..] {
            if !other.has_member(pe) {
                children.push((pe.clone(), sub.clone()));
            }
        }
        Set { members, children }
    }

    /// In-place [`Set::recursive_difference`]: visits only the nodes `other` names.
    pub fn remove_recursive(&mut self, other: &Set) {
        for m in &other.members {
            if let Ok(i) = find(&self.members, m) {
                self.members.remove(i);
            }
            if let Ok(i) = find_child(&self.children, m) {
                self.children.remove(i);
            }
        }
        for (pe, sub) in &other.children {
            if other.has_member(pe) {
                continue;
            }
            if let Ok(i) = find_child(&self.children, pe) {
                let child = &mut self.children[i].1;
                child.remove_recursive(sub);
                if child.is_empty() {
                    self.children.remove(i);
                }
            }
        }
    }

    /// True if [`Set::remove_recursive`] of `other` would remove anything.
    pub fn touches_recursive(&self, other: &Set) -> bool {
        if self.is_empty() {
            return false;
        }
        for m in &other.members {
            if find(&self.members, m).is_ok() || find_child(&self.children, m).is_ok() {
                return true;
            }
        }
        other.children.iter().any(|(pe, sub)| {
            !other.has_member(pe)
                && find_child(&self.children, pe)
                    .is_ok_and(|i| self.children[i].1.touches_recursive(sub))
        })
    }

    /// Only the leaf paths: members that are not also parents.
    pub fn leaves(&self) -> Set {
        let members = self
            .members
            .iter()
            .filter(|m| find_child(&self.children, m).is_err())
            .cloned()
            .collect();
        Set {
            members,
            children: self
                .children
                .iter()
                .map(|(pe, s)| (pe.clone(), s.leaves()))
                .collect(),
        }
    }

    /// Adds every child that is a declared struct field of the type at that position as a
    /// member (smd `EnsureNamedFieldsAreMembers`); map keys and list items are not promoted.
    pub fn ensure_named_fields_are_members(&self, schema: &Schema, tr: &TypeRef) -> Set {
        let atom = schema.resolve(tr);
        let map = atom.as_ref().and_then(|a| a.map);
        let list = atom.as_ref().and_then(|a| a.list);
        let mut members = self.members.clone();
        let mut children = Vec::with_capacity(self.children.len());
        for (pe, sub) in &self.children {
            let mut child_tr = TypeRef::EMPTY;
            match (pe, map, list) {
                (PathElement::Field(name), Some(m), _) => {
                    child_tr = m.element_type.clone();
                    if let Some(f) = m.find_field(name) {
                        if let Err(i) = find(&members, pe) {
                            members.insert(i, pe.clone());
                        }
                        child_tr = f.ty.clone();
                    }
                }
                (PathElement::Key(_), _, Some(l)) => child_tr = l.element_type.clone(),
                _ => {}
            }
            children.push((
                pe.clone(),
                sub.ensure_named_fields_are_members(schema, &child_tr),
            ));
        }
        Set { members, children }
    }

    /// [`Set::ensure_named_fields_are_members`] in place (nothing copied).
    pub fn make_named_fields_members(&mut self, schema: &Schema, tr: &TypeRef) {
        let atom = schema.resolve(tr);
        let map = atom.as_ref().and_then(|a| a.map);
        let list = atom.as_ref().and_then(|a| a.list);
        let Set { members, children } = self;
        for (pe, sub) in children.iter_mut() {
            let child_tr = match (&*pe, map, list) {
                (PathElement::Field(name), Some(m), _) => match m.find_field(name) {
                    Some(f) => {
                        if let Err(i) = find(members, pe) {
                            members.insert(i, pe.clone());
                        }
                        &f.ty
                    }
                    None => &m.element_type,
                },
                (PathElement::Key(_), _, Some(l)) => &l.element_type,
                _ => &TypeRef::EMPTY,
            };
            sub.make_named_fields_members(schema, child_tr);
        }
    }

    /// Calls `f` for every member path in pre-order (members of a node before its children).
    pub fn iterate(&self, mut f: impl FnMut(&[PathElement])) {
        let mut prefix = Vec::new();
        self.iterate_prefix(&mut prefix, &mut f);
    }

    fn iterate_prefix(&self, prefix: &mut Vec<PathElement>, f: &mut impl FnMut(&[PathElement])) {
        for m in &self.members {
            prefix.push(m.clone());
            f(prefix);
            prefix.pop();
        }
        for (pe, sub) in &self.children {
            prefix.push(pe.clone());
            sub.iterate_prefix(prefix, f);
            prefix.pop();
        }
    }

    /// All member paths, in pre-order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.iterate(|p| out.push(Path(p.to_vec())));
        out
    }
}

fn union_members(a: &[PathElement], b: &[PathElement]) -> Vec<PathElement> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].compare(&b[j]) {
            Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
            Ordering::Equal => {
                out.push(b[j].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn union_children(a: &[(PathElement, Set)], b: &[(PathElement, Set)]) -> Vec<(PathElement, Set)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.compare(&b[j].0) {
            Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
            Ordering::Equal => {
                out.push((a[i].0.clone(), a[i].1.union(&b[j].1)));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn diff_members(a: &[PathElement], b: &[PathElement]) -> Vec<PathElement> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].compare(&b[j]) {
            Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fieldpath::PathElement as PE;

    fn p(names: &[&str]) -> Vec<PE> {
        names.iter().map(|n| PE::field(n)).collect()
    }

    fn set(paths: &[&[&str]]) -> Set {
        let mut s = Set::new();
        for names in paths {
            s.insert(&p(names));
        }
        s
    }

    #[test]
    fn insert_and_has() {
        let s = set(&[&["a", "b"], &["a"], &["c", "d", "e"]]);
        assert!(s.has(&p(&["a"])));
        assert!(s.has(&p(&["a", "b"])));
        assert!(!s.has(&p(&["c"])));
        assert!(!s.has(&p(&["c", "d"])));
        assert!(s.has(&p(&["c", "d", "e"])));
        assert_eq!(s.size(), 3);
    }

    #[test]
    fn remove_recursive_is_recursive_difference_in_place() {
        let a = set(&[
            &["a", "b"],
            &["a", "c", "d"],
            &["d"],
            &["e", "f", "g"],
            &["s", "t"],
        ]);
        for b in [
            set(&[&["a"]]),
            set(&[&["a", "c"], &["e", "f", "g"]]),
            set(&[&["s"], &["d"], &["x", "y"]]),
            set(&[&["a", "b"], &["a", "c", "d"]]),
            set(&[&["a", "x"], &["e", "f", "h"], &["z"]]),
            set(&[&["e", "f"]]),
            Set::new(),
        ] {
            let mut c = a.clone();
            c.remove_recursive(&b);
            assert!(c.equals(&a.recursive_difference(&b)), "{b:?}");
            // It says whether anything would go, without removing it.
            assert_eq!(a.touches_recursive(&b), !c.equals(&a), "{b:?}");
            assert!(!Set::new().touches_recursive(&b));
        }
    }

    #[test]
    fn differences_are_both_one_sided_differences() {
        let a = set(&[&["a", "b"], &["a", "c"], &["d"], &["e", "f", "g"]]);
        let b = set(&[
            &["a", "c"],
            &["a", "x"],
            &["e", "f"],
            &["e", "f", "g"],
            &["h"],
        ]);
        let (x, y) = a.differences(&b);
        assert!(x.equals(&a.difference(&b)));
        assert!(y.equals(&b.difference(&a)));
        assert_eq!(x.size(), 2);
        assert_eq!(y.size(), 3);
    }

    #[test]
    fn difference_is_exact_recursive_difference_prunes_subtrees() {
        let s = set(&[&["a"], &["a", "b"], &["a", "b", "c"], &["x"]]);
        let parent = set(&[&["a"]]);
        let d = s.difference(&parent);
        assert!(!d.has(&p(&["a"])));
        assert!(d.has(&p(&["a", "b"])));
        let r = s.recursive_difference(&parent);
        assert_eq!(r.paths().len(), 1);
        assert!(r.has(&p(&["x"])));
        // child − parent = child
        let child = set(&[&["a", "b"]]);
        assert!(parent.difference(&child).has(&p(&["a"])));
    }

    #[test]
    fn union_intersection_leaves() {
        let a = set(&[&["a", "b"], &["c"]]);
        let b = set(&[&["a", "d"], &["c"], &["a"]]);
        let u = a.union(&b);
        assert_eq!(u.size(), 4);
        let mut u2 = a.clone();
        u2.union_with(b.clone());
        assert!(u.equals(&u2));
        let i = a.intersection(&b);
        assert_eq!(i.paths().len(), 1);
        assert!(i.has(&p(&["c"])));
        let l = u.leaves();
        assert!(!l.has(&p(&["a"])));
        assert!(l.has(&p(&["a", "b"])));
    }

    /// Intersections of sets of very different sizes and of similar ones hold exactly the
    /// common paths.
    #[test]
    fn intersection_is_the_common_paths_whatever_the_sizes() {
        let names: Vec<String> = (0..40).map(|i| format!("f{i:02}")).collect();
        let mut rng = crate::value::skim::Rng(0x5851_f42d_4c95_7f2d);
        let mut next = |n: u64| rng.next() % n;
        for round in 0..300 {
            let mut random_set = |paths: u64| {
                let mut s = Set::new();
                for _ in 0..paths {
                    let depth = 1 + next(3) as usize;
                    let path: Vec<PathElement> = (0..depth)
                        .map(|_| PathElement::field(&names[next(40) as usize]))
                        .collect();
                    s.insert(&path);
                }
                s
            };
            let (a, b) = if round % 2 == 0 {
                (random_set(200), random_set(1 + round % 4))
            } else {
                (random_set(1 + round % 4), random_set(60))
            };
            let common: Vec<Path> = a.paths().into_iter().filter(|p| b.has(&p.0)).collect();
            let want = Set::from_paths(common.iter().map(|p| p.0.as_slice()));
            assert!(a.intersection(&b).equals(&want), "round {round}");
            assert!(b.intersection(&a).equals(&want), "round {round}");
        }
    }

    #[test]
    fn iteration_is_preorder_members_first() {
        let s = set(&[&["b"], &["a", "z"], &["a"], &["c", "d"]]);
        let printed: Vec<String> = s.paths().iter().map(|p| p.to_string()).collect();
        assert_eq!(printed, vec![".a", ".b", ".a.z", ".c.d"]);
    }
}
