//! Merging an applied configuration into a live object (smd `TypedValue.Merge`, rule "keep rhs"):
//! the config wins on scalars and atomic parts, granular maps and associative lists merge
//! key by key, and merged list order follows the config (structured-merge-diff >= v4.2).

use super::{
    Handler, ListIndex, ValidationErrors, check_scalar, field_type, handler, invalid_atom, resolve,
};
use crate::fieldpath::PathElement;
use crate::schema::{ElementRelationship, List, MapType, Schema, TypeRef};
use crate::value::{Map, Value};

/// Merges `rhs` (the config) into `lhs` (the live object). `None` means "no value".
pub fn merge(
    schema: &Schema,
    tr: &TypeRef,
    lhs: &Value,
    rhs: &Value,
) -> Result<Option<Value>, ValidationErrors> {
    let mut w = Walker {
        schema,
        path: Vec::new(),
        errs: ValidationErrors::default(),
    };
    let out = w.node(tr, Some(lhs), Some(rhs));
    w.errs.into_result().map(|_| out)
}

struct Walker<'s> {
    schema: &'s Schema,
    path: Vec<PathElement>,
    errs: ValidationErrors,
}

impl<'s> Walker<'s> {
    fn node(&mut self, tr: &'s TypeRef, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
        if lhs.is_none() && rhs.is_none() {
            self.errs
                .push(&self.path, "at least one of lhs and rhs must be provided");
            return None;
        }
        let a = match resolve(self.schema, tr) {
            Ok(a) => a,
            Err(e) => {
                self.errs.push(&self.path, e);
                return None;
            }
        };
        let (al, ar) = (a.deduce(lhs), a.deduce(rhs));
        let mut in_leaf = false;
        if rhs.is_none() {
            self.handle(tr, handler(&al), lhs, rhs, &mut in_leaf)
        } else if lhs.is_none() || al.shape() == ar.shape() {
            self.handle(tr, handler(&ar), lhs, rhs, &mut in_leaf)
        } else {
            let mut scratch = false;
            let _ = self.handle(tr, handler(&al), lhs, rhs, &mut scratch);
            self.handle(tr, handler(&ar), lhs, rhs, &mut in_leaf)
        }
    }

    fn leaf(lhs: Option<&Value>, rhs: Option<&Value>, in_leaf: &mut bool) -> Option<Value> {
        if *in_leaf {
            return None;
        }
        *in_leaf = true;
        rhs.or(lhs).cloned()
    }

    fn handle(
        &mut self,
        tr: &'s TypeRef,
        h: Handler<'s>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) -> Option<Value> {
        match h {
            Handler::Scalar(t) => {
                let le = lhs.and_then(|v| check_scalar(t, v));
                let re = rhs.and_then(|v| check_scalar(t, v));
                if let (Some(le), Some(re)) = (le, re) {
                    self.errs.push(&self.path, format!("lhs: {le}"));
                    self.errs.push(&self.path, format!("rhs: {re}"));
                    return None;
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
                self.list_items(l, er, ll.unwrap_or(&[]), rl.unwrap_or(&[]))
            }
            Handler::Map(m, er) => {
                let lm = lhs.and_then(Value::as_map);
                let rm = rhs.and_then(Value::as_map);
                let empty = lm.is_none_or(|x| x.is_empty()) && rm.is_none_or(|x| x.is_empty());
                if er == ElementRelationship::Atomic || empty {
                    return Self::leaf(lhs, rhs, in_leaf);
                }
                self.map_items(m, lm, rm)
            }
            Handler::Invalid => {
                self.errs.push(&self.path, invalid_atom(tr));
                None
            }
        }
    }

    fn map_items(&mut self, m: &'s MapType, lhs: Option<&Map>, rhs: Option<&Map>) -> Option<Value> {
        let cap = lhs.map_or(0, Map::len) + rhs.map_or(0, Map::len);
        let mut out = Map::with_capacity(cap);
        let rl = rhs.map(|r| r.lookup());
        if let Some(lm) = lhs {
            for (i, (k, lv)) in lm.iter().enumerate() {
                let rv = rl.as_ref().and_then(|r| r.get_at(k, i));
                self.path.push(PathElement::Field(k.clone()));
                let v = self.node(field_type(m, k), Some(lv), rv);
                self.path.pop();
                if let Some(v) = v {
                    out.push_unique(k.clone(), v);
                }
            }
        }
        if let Some(rm) = rhs {
            let ll = lhs.map(|l| l.lookup());
            for (k, rv) in rm.iter() {
                if ll.as_ref().is_some_and(|l| l.contains(k)) {
                    continue;
                }
                self.path.push(PathElement::Field(k.clone()));
                let v = self.node(field_type(m, k), None, Some(rv));
                self.path.pop();
                if let Some(v) = v {
                    out.push_unique(k.clone(), v);
                }
            }
        }
        (!out.is_empty()).then_some(Value::Map(out))
    }

    fn list_items(
        &mut self,
        l: &'s List,
        er: ElementRelationship,
        lhs: &[Value],
        rhs: &[Value],
    ) -> Option<Value> {
        let (ri, rprob) = ListIndex::build(self.schema, l, er, rhs);
        let (li, lprob) = ListIndex::build(self.schema, l, er, lhs);
        let mut failed = false;
        for (i, e) in rprob {
            self.errs.push(&self.path, format!("element {i}: {e}"));
            failed = true;
        }
        // The config may not repeat a key; report each repeat once per extra occurrence.
        for (i, pe) in ri.pes.iter().enumerate() {
            if let Some(pe) = pe {
                if !ri.is_first(i) {
                    self.errs
                        .push(&self.path, format!("duplicate entries for key {pe}"));
                    failed = true;
                }
            }
        }
        for (i, e) in lprob {
            self.errs.push(&self.path, format!("element {i}: {e}"));
            failed = true;
        }
        if failed {
            return None;
        }
        // The lhs twin of a PE: the item, or null when the live object repeats the key.
        let observed_lhs = |pe: &PathElement| -> Option<&Value> {
            let first = li.find(pe)?;
            Some(if li.group_len(first) == 1 {
                &lhs[first]
            } else {
                &Value::Null
            })
        };
        let mut out: Vec<Value> = Vec::with_capacity(lhs.len().max(rhs.len()));
        for step in list_merge_steps(&li, &ri) {
            let v = match step {
                ListStep::Lhs(i) => self.item(l, li.pe_at(i), Some(&lhs[i]), None),
                ListStep::Rhs(r) => {
                    let pe = ri.pe_at(r);
                    self.item(l, pe, observed_lhs(pe), Some(&rhs[r]))
                }
            };
            if let Some(v) = v {
                out.push(v);
            }
        }
        (!out.is_empty()).then_some(Value::List(out))
    }

    /// Merges one list item. Like the reference, problems inside an item are not reported.
    fn item(
        &mut self,
        l: &'s List,
        pe: &PathElement,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
    ) -> Option<Value> {
        let saved = self.errs.0.len();
        self.path.push(pe.clone());
        let v = self.node(&l.element_type, lhs, rhs);
        self.path.pop();
        self.errs.0.truncate(saved);
        v
    }
}

/// One step of a list merge: keep an lhs item the rhs does not mention, or merge an rhs item
/// (with its lhs twin, if any).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ListStep {
    Lhs(usize),
    Rhs(usize),
}

/// The merged list's items in order (structured-merge-diff >= v4.2): the rhs order wins for
/// items both sides have; lhs-only items stay where they were relative to the shared ones.
/// Both indexes must be complete (every item has a PE) and the rhs free of repeats.
pub(crate) fn list_merge_steps(li: &ListIndex, ri: &ListIndex) -> Vec<ListStep> {
    let (llen, rlen) = (li.pes.len(), ri.pes.len());
    if llen == rlen && (0..llen).all(|i| li.pe_at(i).equals(ri.pe_at(i))) {
        // The same items in the same order (a re-apply): merged pairwise.
        return (0..rlen).map(ListStep::Rhs).collect();
    }
    let shared: Vec<usize> = (0..rlen)
        .filter(|&r| li.find(ri.pe_at(r)).is_some())
        .collect();
    let mut ns = 0usize;
    let mut merged_r = vec![false; rlen];
    let mut out = Vec::with_capacity(llen.max(rlen));
    let (mut l, mut r) = (0usize, 0usize);
    while l < llen || r < rlen {
        if l < llen && r < rlen {
            let pe = li.pe_at(l);
            if pe.equals(ri.pe_at(r)) {
                merged_r[r] = true;
                out.push(ListStep::Rhs(r));
                l += 1;
                r += 1;
                ns += 1;
                continue;
            }
            let next_shared = shared.get(ns).map(|&x| ri.pe_at(x));
            if ri.find(pe).is_some() && next_shared.is_some_and(|n| !n.equals(pe)) {
                l += 1;
                continue;
            }
        }
        if l < llen {
            match ri.find(li.pe_at(l)) {
                None => {
                    out.push(ListStep::Lhs(l));
                    l += 1;
                    continue;
                }
                Some(x) if merged_r[x] => l += 1,
                Some(_) => {}
            }
        }
        if r < rlen {
            let pe = ri.pe_at(r);
            merged_r[r] = true;
            out.push(ListStep::Rhs(r));
            r += 1;
            if shared.get(ns).is_some_and(|&x| ri.pe_at(x).equals(pe)) {
                ns += 1;
            }
        }
    }
    out
}
