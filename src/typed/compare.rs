//! Comparison of two values of one type (smd `TypedValue.Compare`): which paths were added,
//! modified or removed. List items compare by key, so a pure reorder changes nothing.

use super::{
    Handler, ListIndex, ValidationErrors, check_scalar, field_type, handler, invalid_atom, resolve,
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
    pub fn exclude(&self, exclude: &Set) -> Comparison {
        Comparison {
            added: self.added.recursive_difference(exclude),
            modified: self.modified.recursive_difference(exclude),
            removed: self.removed.recursive_difference(exclude),
        }
    }
}

/// Compares `lhs` (old) with `rhs` (new).
pub fn compare(
    schema: &Schema,
    tr: &TypeRef,
    lhs: &Value,
    rhs: &Value,
) -> Result<Comparison, ValidationErrors> {
    let mut w = Walker {
        schema,
        path: Vec::new(),
        cmp: Comparison::default(),
        errs: ValidationErrors::default(),
    };
    w.node(tr, Some(lhs), Some(rhs));
    w.errs.into_result().map(|_| w.cmp)
}

struct Walker<'s> {
    schema: &'s Schema,
    path: Vec<PathElement>,
    cmp: Comparison,
    errs: ValidationErrors,
}

impl<'s> Walker<'s> {
    fn node(&mut self, tr: &'s TypeRef, lhs: Option<&Value>, rhs: Option<&Value>) {
        if lhs.is_none() && rhs.is_none() {
            self.errs
                .push(&self.path, "at least one of lhs and rhs must be provided");
            return;
        }
        let a = match resolve(self.schema, tr) {
            Ok(a) => a,
            Err(e) => return self.errs.push(&self.path, e),
        };
        let (al, ar) = (a.deduce(lhs), a.deduce(rhs));
        let mut in_leaf = false;
        if rhs.is_none() {
            self.handle(tr, handler(&al), lhs, rhs, &mut in_leaf);
        } else if lhs.is_none() || al.shape() == ar.shape() {
            self.handle(tr, handler(&ar), lhs, rhs, &mut in_leaf);
        } else {
            let mut scratch = false;
            self.handle(tr, handler(&al), lhs, rhs, &mut scratch);
            self.handle(tr, handler(&ar), lhs, rhs, &mut in_leaf);
        }
        if !in_leaf {
            if lhs.is_none() {
                self.cmp.added.insert(&self.path);
            } else if rhs.is_none() {
                self.cmp.removed.insert(&self.path);
            }
        }
    }

    fn leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, in_leaf: &mut bool) {
        if *in_leaf {
            return;
        }
        *in_leaf = true;
        match (lhs, rhs) {
            (None, _) => self.cmp.added.insert(&self.path),
            (_, None) => self.cmp.removed.insert(&self.path),
            (Some(l), Some(r)) => {
                if !value::equals(r, l) {
                    self.cmp.modified.insert(&self.path)
                }
            }
        }
    }

    fn handle(
        &mut self,
        tr: &'s TypeRef,
        h: Handler<'s>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) {
        match h {
            Handler::Scalar(t) => {
                let le = lhs.and_then(|v| check_scalar(t, v));
                let re = rhs.and_then(|v| check_scalar(t, v));
                if let (Some(le), Some(re)) = (le, re) {
                    self.errs.push(&self.path, format!("lhs: {le}"));
                    self.errs.push(&self.path, format!("rhs: {re}"));
                    return;
                }
                self.leaf(lhs, rhs, in_leaf);
            }
            Handler::List(l, er) => {
                let ll = lhs.and_then(Value::as_list);
                let rl = rhs.and_then(Value::as_list);
                let empty = ll.is_none_or(|x| x.is_empty()) && rl.is_none_or(|x| x.is_empty());
                if er == ElementRelationship::Atomic || empty {
                    return self.leaf(lhs, rhs, in_leaf);
                }
                self.list_items(l, er, ll.unwrap_or(&[]), rl.unwrap_or(&[]));
            }
            Handler::Map(m, er) => {
                let lm = lhs.and_then(Value::as_map);
                let rm = rhs.and_then(Value::as_map);
                let empty = lm.is_none_or(|x| x.is_empty()) && rm.is_none_or(|x| x.is_empty());
                if er == ElementRelationship::Atomic || empty {
                    return self.leaf(lhs, rhs, in_leaf);
                }
                self.map_items(m, lm, rm);
            }
            Handler::Invalid => self.errs.push(&self.path, invalid_atom(tr)),
        }
    }

    fn map_items(
        &mut self,
        m: &'s MapType,
        lhs: Option<&crate::value::Map>,
        rhs: Option<&crate::value::Map>,
    ) {
        let rl = rhs.map(|r| r.lookup());
        if let Some(lm) = lhs {
            for (k, lv) in lm.iter() {
                let rv = rl.as_ref().and_then(|r| r.get(k));
                self.path.push(PathElement::Field(k.clone()));
                self.node(field_type(m, k), Some(lv), rv);
                self.path.pop();
            }
        }
        if let Some(rm) = rhs {
            let ll = lhs.map(|l| l.lookup());
            for (k, rv) in rm.iter() {
                if ll.as_ref().is_some_and(|l| l.contains(k)) {
                    continue;
                }
                self.path.push(PathElement::Field(k.clone()));
                self.node(field_type(m, k), None, Some(rv));
                self.path.pop();
            }
        }
    }

    fn list_items(&mut self, l: &'s List, er: ElementRelationship, lhs: &[Value], rhs: &[Value]) {
        let li = self.index(l, er, lhs);
        let ri = self.index(l, er, rhs);
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
                if ri.is_first(i) && li.group(pe).is_empty() {
                    order.push(pe);
                }
            }
        }
        for pe in order {
            let lg = li.group(pe);
            let rg = ri.group(pe);
            let lv = |k: usize| &lhs[lg[k] as usize];
            let rv = |k: usize| &rhs[rg[k] as usize];
            match (lg.len(), rg.len()) {
                (0, 0) => return,
                (a, b) if a <= 1 && b <= 1 => {
                    self.item(l, pe, (a == 1).then(|| lv(0)), (b == 1).then(|| rv(0)));
                }
                (a, b) if a >= 2 && b >= 2 => {
                    let same = a == b && (0..a).all(|k| value::equals(lv(k), rv(k)));
                    if !same {
                        self.path.push(pe.clone());
                        self.cmp.modified.insert(&self.path);
                        self.path.pop();
                    }
                }
                (a, b) if a >= 2 => {
                    if b > 0 {
                        self.item(l, pe, None, Some(rv(0)));
                    }
                    self.path.push(pe.clone());
                    self.cmp.removed.insert(&self.path);
                    self.path.pop();
                }
                (a, _) => {
                    if a > 0 {
                        self.item(l, pe, Some(lv(0)), None);
                    }
                    self.path.push(pe.clone());
                    self.cmp.added.insert(&self.path);
                    self.path.pop();
                }
            }
        }
    }

    fn index(&mut self, l: &'s List, er: ElementRelationship, items: &[Value]) -> ListIndex {
        let (idx, problems) = ListIndex::build(self.schema, l, er, items);
        for (i, e) in problems {
            self.errs.push(&self.path, format!("element {i}: {e}"));
        }
        idx
    }

    fn item(&mut self, l: &'s List, pe: &PathElement, lhs: Option<&Value>, rhs: Option<&Value>) {
        self.path.push(pe.clone());
        self.node(&l.element_type, lhs, rhs);
        self.path.pop();
    }
}
