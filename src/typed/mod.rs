//! Values interpreted through a schema: validation, the field set a value claims, comparison,
//! merge and removal (structured-merge-diff `typed`). Each operation reproduces the reference's
//! observable behaviour, including how duplicates, nulls and empty containers are treated.

mod apply;
mod compare;
mod merge;
mod reconcile;
mod remove;
mod stored;
mod validate;

pub use apply::{ApplyWalk, apply_walk, apply_walk_indexed};
pub use compare::{Comparison, compare, compare_merged, compare_valid};
pub use merge::merge;
pub use reconcile::reconcile_field_set_with_schema;
pub use remove::remove_items;
pub use stored::{OBJECT_META, to_stored_form};
pub use validate::{to_field_set, validate, validate_beside, validate_to_field_set};

use crate::fieldpath::{KeyField, PathElement};
use crate::schema::{ElementRelationship, List, Resolved, Schema, TypeRef};
use crate::value::Value;
use std::fmt;

/// A schema violation at a path.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidationError {
    /// Printed path (`.spec.containers[name="a"].image`), empty at the root.
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// One or more schema violations (printed like smd's `ValidationErrors`).
#[derive(Clone, Debug, Default, PartialEq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() == 1 {
            return write!(f, "{}", self.0[0]);
        }
        f.write_str("errors:")?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl ValidationErrors {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(crate) fn push(&mut self, path: &[PathElement], message: impl Into<String>) {
        self.0.push(ValidationError {
            path: path_string(path),
            message: message.into(),
        });
    }
    pub(crate) fn into_result(self) -> Result<(), ValidationErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

pub(crate) fn path_string(path: &[PathElement]) -> String {
    path.iter().map(|p| p.to_string()).collect()
}

/// Resolves `tr`, or describes why it cannot be resolved.
pub(crate) fn resolve<'s>(schema: &'s Schema, tr: &'s TypeRef) -> Result<Resolved<'s>, String> {
    schema.resolve(tr).ok_or_else(|| {
        format!(
            "schema error: no type found matching: {}",
            tr.name().unwrap_or("inlined type")
        )
    })
}

/// Which handler smd picks for an atom: map first, then scalar, then list.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Handler<'s> {
    Map(&'s crate::schema::MapType, ElementRelationship),
    Scalar(crate::schema::Scalar),
    List(&'s List, ElementRelationship),
    Invalid,
}

pub(crate) fn handler<'s>(a: &Resolved<'s>) -> Handler<'s> {
    if let Some(m) = a.map {
        Handler::Map(m, a.map_er())
    } else if let Some(s) = a.scalar {
        Handler::Scalar(s)
    } else if let Some(l) = a.list {
        Handler::List(l, a.list_er())
    } else {
        Handler::Invalid
    }
}

pub(crate) fn invalid_atom(tr: &TypeRef) -> String {
    match tr.name() {
        Some(n) => format!("schema error: invalid atom: named type: {n}"),
        None => "schema error: invalid atom: inlined".to_string(),
    }
}

/// The type of a map entry: the declared field's, else the element type.
pub fn field_type<'s>(m: &'s crate::schema::MapType, key: &str) -> &'s TypeRef {
    match m.find_field(key) {
        Some(f) => &f.ty,
        None => &m.element_type,
    }
}

/// smd `validateScalar`: `None` if `v` fits the scalar kind (null always fits).
pub(crate) fn check_scalar(t: crate::schema::Scalar, v: &Value) -> Option<String> {
    use crate::schema::Scalar::*;
    let ok = matches!(
        (t, v),
        (_, Value::Null)
            | (Numeric, Value::Int(_) | Value::Float(_))
            | (String, Value::String(_))
            | (Boolean, Value::Bool(_))
            | (
                Untyped,
                Value::Int(_) | Value::Float(_) | Value::String(_) | Value::Bool(_)
            )
    );
    if ok {
        return None;
    }
    let what = match t {
        Numeric => "numeric (int or float)",
        String => "string",
        Boolean => "boolean",
        Untyped => "any scalar",
    };
    // The type only, never the value: a value in an error can be a Secret's (a PIN written
    // as a bare number), and errors are printed, logged and sent to callers.
    Some(format!("expected {what}, got {}", v.type_name()))
}

/// The path element of a list item (smd `listItemToPathElement`), filling missing key fields
/// from the key field's schema default.
pub fn list_item_pe(
    schema: &Schema,
    list: &List,
    er: ElementRelationship,
    child: &Value,
) -> Result<PathElement, String> {
    if er != ElementRelationship::Associative {
        return Err("invalid indexing of non-associative list".into());
    }
    if let [k] = list.keys.as_slice() {
        // The common case (`name`, `containerPort`, ...): one key field, no sorting, one
        // allocation.
        if let Value::Map(m) = child {
            if let Some(v) = m.get(k) {
                return Ok(PathElement::Key(std::sync::Arc::new([KeyField {
                    name: k.clone(),
                    value: v.clone(),
                }])));
            }
        }
    }
    if !list.keys.is_empty() {
        let m = match child {
            Value::Null => {
                return Err("associative list with keys may not have a null element".into());
            }
            Value::Map(m) => m,
            _ => return Err("associative list with keys may not have non-map elements".into()),
        };
        let mut fields = Vec::with_capacity(list.keys.len());
        for k in &list.keys {
            if let Some(v) = m.get(k) {
                fields.push(KeyField {
                    name: k.clone(),
                    value: v.clone(),
                });
                continue;
            }
            let elem = schema.resolve(&list.element_type).ok_or_else(|| {
                format!("couldn't find default value for {k}: invalid elementType for list")
            })?;
            let em = elem.map.ok_or_else(|| {
                format!("couldn't find default value for {k}: associative list may not have non-map types")
            })?;
            // structured-merge-diff v6 (Kubernetes 1.36): a key field that is missing and has
            // no default is left out of the key — the item is keyed by the fields it has (a
            // different item than one that sets it); only an item with none is refused.
            if let Some(def) = em.find_field(k).and_then(|f| f.default.as_ref()) {
                fields.push(KeyField {
                    name: k.clone(),
                    value: def.clone(),
                });
            }
        }
        if fields.is_empty() {
            let keys: Vec<String> = list
                .keys
                .iter()
                .map(|k| crate::value::gofmt::quote(k))
                .collect();
            return Err(format!(
                "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                keys.join(" ")
            ));
        }
        return Ok(PathElement::key(fields));
    }
    match child {
        Value::Map(_) => {
            Err("associative list without keys has an element that's a map type".into())
        }
        Value::List(_) => Err("not supported: associative list with lists as elements".into()),
        Value::Null => {
            Err("associative list without keys has an element that's an explicit null".into())
        }
        v => Ok(PathElement::Value(v.clone())),
    }
}

/// True for maps smd treats as "untyped deduced" (reconciliation skips them).
pub(crate) fn is_untyped_deduced_map(m: &crate::schema::MapType) -> bool {
    let tr = &m.element_type;
    let deduced_ref = match tr.name() {
        Some(n) => n == crate::schema::DEDUCED_TYPE,
        None => tr.inlined.scalar == Some(crate::schema::Scalar::Untyped),
    };
    deduced_ref && m.fields.is_empty()
}

/// Lists up to this length group their items by linear comparison (no sorting).
const SMALL_LIST: usize = 16;

/// The indexes of an object's associative lists, built once for an object that serves many
/// requests (a prepared live object). Lists are found by address, so an index is only valid
/// for the very object it was built from, while that object is neither moved nor changed.
#[derive(Default)]
pub struct ListIndexes(rustc_hash::FxHashMap<usize, ListIndex>);

impl std::fmt::Debug for ListIndexes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ListIndexes({} lists)", self.0.len())
    }
}

impl ListIndexes {
    /// Indexes every non-empty associative list of `v` (typed `tr`) whose items all have PEs.
    pub fn of(schema: &Schema, tr: &TypeRef, v: &Value) -> ListIndexes {
        let mut out = ListIndexes::default();
        out.visit(schema, tr, v, 0);
        out
    }

    fn visit(&mut self, schema: &Schema, tr: &TypeRef, v: &Value, depth: usize) {
        if depth > 2 * crate::value::MAX_DEPTH {
            return;
        }
        let Some(atom) = schema.resolve(tr) else {
            return;
        };
        match (handler(&atom.deduce(Some(v))), v) {
            (Handler::Map(m, er), Value::Map(map)) if er != ElementRelationship::Atomic => {
                for (k, child) in map.iter() {
                    self.visit(schema, field_type(m, k), child, depth + 1);
                }
            }
            (Handler::List(l, ElementRelationship::Associative), Value::List(items))
                if !items.is_empty() =>
            {
                let (idx, problems) =
                    ListIndex::build(schema, l, ElementRelationship::Associative, items);
                if problems.is_empty() {
                    self.0.insert(items.as_ptr() as usize, idx);
                }
                for item in items {
                    self.visit(schema, &l.element_type, item, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// The index of `items`, if they are one of the indexed lists.
    pub(crate) fn get(&self, items: &[Value]) -> Option<&ListIndex> {
        if items.is_empty() {
            return None;
        }
        self.0.get(&(items.as_ptr() as usize))
    }
}

/// The path elements of a list's items, grouped: which items share a PE, in original order.
pub(crate) struct ListIndex {
    /// Per item, its PE (`None` if it could not be computed).
    pub pes: Vec<Option<PathElement>>,
    /// Per item, the index of the first item with an equal PE (`u32::MAX`: no PE).
    leader: Vec<u32>,
    /// Per item that leads a group, the group's size (0 for other items).
    size: Vec<u32>,
    /// For long lists: leaders sorted by PE, for binary search.
    sorted_leaders: Vec<u32>,
}

impl ListIndex {
    /// Indexes `items`; returns item problems as `(index, message)`.
    pub fn build(
        schema: &Schema,
        l: &List,
        er: ElementRelationship,
        items: &[Value],
    ) -> (ListIndex, Vec<(usize, String)>) {
        let mut problems = Vec::new();
        let pes: Vec<Option<PathElement>> = items
            .iter()
            .enumerate()
            .map(|(i, c)| match list_item_pe(schema, l, er, c) {
                Ok(pe) => Some(pe),
                Err(e) => {
                    problems.push((i, e));
                    None
                }
            })
            .collect();
        let n = pes.len();
        let mut leader = vec![u32::MAX; n];
        let mut size = vec![0u32; n];
        let mut sorted_leaders = Vec::new();
        if n <= SMALL_LIST {
            for i in 0..n {
                let Some(pe) = &pes[i] else { continue };
                let found = (0..i).find(|&j| {
                    leader[j] == j as u32 && pes[j].as_ref().is_some_and(|p| p.compare(pe).is_eq())
                });
                let l = found.unwrap_or(i);
                leader[i] = l as u32;
                size[l] += 1;
            }
        } else {
            let mut idx: Vec<u32> = (0..n as u32)
                .filter(|&i| pes[i as usize].is_some())
                .collect();
            idx.sort_by(|&a, &b| {
                let (x, y) = (pes[a as usize].as_ref(), pes[b as usize].as_ref());
                x.expect("filtered").compare(y.expect("filtered"))
            });
            let mut k = 0;
            while k < idx.len() {
                let first = idx[k];
                let pe = pes[first as usize].as_ref().expect("filtered");
                let mut j = k;
                while j < idx.len()
                    && pes[idx[j] as usize]
                        .as_ref()
                        .expect("filtered")
                        .compare(pe)
                        .is_eq()
                {
                    leader[idx[j] as usize] = first;
                    j += 1;
                }
                size[first as usize] = (j - k) as u32;
                sorted_leaders.push(first);
                k = j;
            }
        }
        (
            ListIndex {
                pes,
                leader,
                size,
                sorted_leaders,
            },
            problems,
        )
    }

    /// The PE of item `i`, which must have one.
    pub fn pe_at(&self, i: usize) -> &PathElement {
        self.pes[i].as_ref().expect("indexed items have a PE")
    }

    fn pe(&self, i: u32) -> &PathElement {
        self.pes[i as usize]
            .as_ref()
            .expect("indexed items have a PE")
    }

    /// The first item whose PE equals `pe`.
    pub fn find(&self, pe: &PathElement) -> Option<usize> {
        if self.sorted_leaders.is_empty() {
            (0..self.pes.len())
                .find(|&i| self.leader[i] == i as u32 && self.pe(i as u32).compare(pe).is_eq())
        } else {
            self.sorted_leaders
                .binary_search_by(|&i| self.pe(i).compare(pe))
                .ok()
                .map(|k| self.sorted_leaders[k] as usize)
        }
    }

    /// Like [`ListIndex::find`], trying item `hint` first (lists being merged usually keep
    /// their items in the same order).
    pub fn find_at(&self, pe: &PathElement, hint: usize) -> Option<usize> {
        match self.pes.get(hint) {
            Some(Some(p)) if self.leader[hint] == hint as u32 && p.equals(pe) => Some(hint),
            _ => self.find(pe),
        }
    }

    /// Item indexes whose PE equals `pe`, in original order.
    pub fn group(&self, pe: &PathElement) -> Vec<u32> {
        match self.find(pe) {
            None => Vec::new(),
            Some(first) if self.size[first] == 1 => vec![first as u32],
            Some(first) => (first..self.pes.len())
                .filter(|&i| self.leader[i] == first as u32)
                .map(|i| i as u32)
                .collect(),
        }
    }

    /// How many items share the PE of the group led by `first`.
    pub fn group_len(&self, first: usize) -> usize {
        self.size[first] as usize
    }

    /// True if item `i` is the first item with its PE.
    pub fn is_first(&self, i: usize) -> bool {
        self.leader[i] == i as u32
    }

    /// True if item `i`'s PE occurs more than once.
    pub fn is_duplicated(&self, i: usize) -> bool {
        self.leader[i] != u32::MAX && self.size[self.leader[i] as usize] > 1
    }
}

/// Where a walker is, as a chain of borrowed steps: free to extend, turned into a printed
/// path only when an error needs one.
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Item(&'a At<'a>, &'a PathElement),
}

impl<'a> At<'a> {
    pub fn field(&'a self, name: &'a str) -> At<'a> {
        At::Field(self, name)
    }
    pub fn item(&'a self, pe: &'a PathElement) -> At<'a> {
        At::Item(self, pe)
    }
    /// The path from the root.
    pub fn path(&self) -> Vec<PathElement> {
        let mut out = Vec::new();
        let mut cur = self;
        loop {
            match cur {
                At::Root => break,
                At::Field(p, n) => {
                    out.push(PathElement::field(n));
                    cur = p;
                }
                At::Item(p, pe) => {
                    out.push((*pe).clone());
                    cur = p;
                }
            }
        }
        out.reverse();
        out
    }
}

impl ValidationErrors {
    pub(crate) fn push_at(&mut self, at: &At, message: impl Into<String>) {
        self.0.push(ValidationError {
            path: path_string(&at.path()),
            message: message.into(),
        });
    }
}
