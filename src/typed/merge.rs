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
        let rpe = |r: usize| ri.pes[r].as_ref().expect("no problems");
        let lpe = |l: usize| li.pes[l].as_ref().expect("no problems");
        // The lhs twin of a PE: the item, or null when the live object repeats the key.
        let observed_lhs = |pe: &PathElement| -> Option<&Value> {
            let first = li.find(pe)?;
            Some(if li.group_len(first) == 1 {
                &lhs[first]
            } else {
                &Value::Null
            })
        };
        let rhs_index = |pe: &PathElement| ri.find(pe);

        let shared: Vec<usize> = (0..rhs.len())
            .filter(|&r| li.find(rpe(r)).is_some())
            .collect();
        let mut ns = 0usize;
        let mut merged_r = vec![false; rhs.len()];
        let mut out: Vec<Value> = Vec::with_capacity(lhs.len().max(rhs.len()));
        let (llen, rlen) = (lhs.len(), rhs.len());
        let (mut li_, mut ri_) = (0usize, 0usize);
        while li_ < llen || ri_ < rlen {
            if li_ < llen && ri_ < rlen {
                let pe = lpe(li_);
                if pe.equals(rpe(ri_)) {
                    merged_r[ri_] = true;
                    if let Some(v) = self.item(l, pe, observed_lhs(pe), Some(&rhs[ri_])) {
                        out.push(v);
                    }
                    li_ += 1;
                    ri_ += 1;
                    ns += 1;
                    continue;
                }
                let next_shared = shared.get(ns).map(|&r| rpe(r));
                if rhs_index(pe).is_some() && next_shared.is_some_and(|n| !n.equals(pe)) {
                    li_ += 1;
                    continue;
                }
            }
            if li_ < llen {
                let pe = lpe(li_);
                match rhs_index(pe) {
                    None => {
                        if let Some(v) = self.item(l, pe, Some(&lhs[li_]), None) {
                            out.push(v);
                        }
                        li_ += 1;
                        continue;
                    }
                    Some(r) if merged_r[r] => li_ += 1,
                    Some(_) => {}
                }
            }
            if ri_ < rlen {
                let pe = rpe(ri_);
                merged_r[ri_] = true;
                if let Some(v) = self.item(l, pe, observed_lhs(pe), Some(&rhs[ri_])) {
                    out.push(v);
                }
                ri_ += 1;
                if shared.get(ns).is_some_and(|&r| rpe(r).equals(pe)) {
                    ns += 1;
                }
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
