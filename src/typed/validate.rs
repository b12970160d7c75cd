//! Validation of a value against its schema (smd `TypedValue.Validate`: scalar types, undeclared
//! fields, list-map keys, duplicate items) and the field set it claims (smd `ToFieldSet`), in one
//! walk that can do either or both: an applied config needs both, and walking it twice would
//! double the cost of every prediction.

use super::{
    At, Handler, ListIndex, ValidationErrors, check_scalar, handler, invalid_atom, resolve,
};
use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, List, Schema, TypeRef};
use crate::value::Value;

/// Validates `v` as type `tr`. Duplicate list-map keys and set values are errors unless
/// `allow_duplicates` (kube-apiserver allows them in live objects, never in applied configs).
pub fn validate(
    schema: &Schema,
    tr: &TypeRef,
    v: &Value,
    allow_duplicates: bool,
) -> Result<(), ValidationErrors> {
    validate_at(schema, tr, v, allow_duplicates, None)
}

/// [`validate`] with duplicates allowed, of `v` beside `valid`, a value of the same type known
/// to pass that check (the live object an update replaces): a subtree equal to `valid`'s at
/// the same place is valid too (validity depends only on the value, its type and its depth), so
/// it is not walked. Debug builds compare with the full walk on every call.
pub fn validate_beside(
    schema: &Schema,
    tr: &TypeRef,
    v: &Value,
    valid: &Value,
) -> Result<(), ValidationErrors> {
    let out = validate_at(schema, tr, v, true, Some(valid));
    #[cfg(debug_assertions)]
    {
        let full = validate(schema, tr, v, true);
        debug_assert_eq!(
            out.as_ref().map_err(ToString::to_string),
            full.as_ref().map_err(ToString::to_string),
            "validating beside a valid value changed the result"
        );
    }
    out
}

/// [`validate`], not walking what equals `valid` ([`validate_beside`]) when there is one.
fn validate_at(
    schema: &Schema,
    tr: &TypeRef,
    v: &Value,
    allow_duplicates: bool,
    valid: Option<&Value>,
) -> Result<(), ValidationErrors> {
    let mut w = Walker {
        schema,
        validate: true,
        build: false,
        allow_duplicates,
        errs: ValidationErrors::default(),
    };
    w.node(&At::Root, 0, tr, v, valid);
    w.errs.into_result()
}

/// The field set of `v` as type `tr` (smd `ToFieldSet`): scalars and atomic containers as
/// leaves, list items and undeclared map keys as members, null and `{}` values as members,
/// duplicated list items as single atomic leaves. `v` must be valid.
pub fn to_field_set(schema: &Schema, tr: &TypeRef, v: &Value) -> Result<Set, ValidationErrors> {
    let mut w = Walker {
        schema,
        validate: false,
        build: true,
        allow_duplicates: true,
        errs: ValidationErrors::default(),
    };
    let (_, set) = w.node(&At::Root, 0, tr, v, None);
    w.errs.into_result().map(|_| set)
}

/// [`validate`] (duplicates rejected, as for applied configs) and [`to_field_set`] in one walk.
pub fn validate_to_field_set(
    schema: &Schema,
    tr: &TypeRef,
    v: &Value,
) -> Result<Set, ValidationErrors> {
    let mut w = Walker {
        schema,
        validate: true,
        build: true,
        allow_duplicates: false,
        errs: ValidationErrors::default(),
    };
    let (_, set) = w.node(&At::Root, 0, tr, v, None);
    w.errs.into_result().map(|_| set)
}

/// True if `v`, found at `depth` in an applied config, passes [`validate_to_field_set`]'s checks
/// (for parts of a config whose field set is known without walking them: atomic values).
pub(super) fn config_part_is_valid(schema: &Schema, tr: &TypeRef, v: &Value, depth: usize) -> bool {
    let mut w = Walker {
        schema,
        validate: true,
        build: false,
        allow_duplicates: false,
        errs: ValidationErrors::default(),
    };
    w.node(&At::Root, depth, tr, v, None);
    w.errs.is_empty()
}

/// Values built in code can be deeper than parsed documents; refuse before recursing too far.
pub(super) const MAX_PATH_DEPTH: usize = 2 * crate::value::MAX_DEPTH;

struct Walker<'s> {
    schema: &'s Schema,
    validate: bool,
    build: bool,
    allow_duplicates: bool,
    errs: ValidationErrors,
}

impl<'s> Walker<'s> {
    /// Returns whether the node's own path belongs to the set, and the set below it. With
    /// `build` off (or inside an atomic part) nothing is built; validation still descends.
    /// `valid`: the same place in a value known valid ([`validate_beside`]; validation only).
    fn node(
        &mut self,
        at: &At,
        depth: usize,
        tr: &'s TypeRef,
        v: &Value,
        valid: Option<&Value>,
    ) -> (bool, Set) {
        if valid.is_some_and(|k| k.strict_eq(v)) {
            debug_assert!(!self.build, "only validation skips what is known valid");
            return (false, Set::new());
        }
        if depth > MAX_PATH_DEPTH {
            self.errs.push_at(at, "nesting too deep");
            return (false, Set::new());
        }
        let atom = match resolve(self.schema, tr) {
            Ok(a) => a.deduce(Some(v)),
            Err(e) => {
                self.errs.push_at(at, e);
                return (false, Set::new());
            }
        };
        match handler(&atom) {
            Handler::Scalar(t) => {
                if self.validate {
                    if let Some(e) = check_scalar(t, v) {
                        self.errs.push_at(at, e);
                    }
                }
                (true, Set::new())
            }
            Handler::List(l, er) => {
                let items = match v {
                    Value::List(items) => Some(items.as_slice()),
                    Value::Null => None,
                    other => {
                        if self.validate {
                            self.errs
                                .push_at(at, format!("expected list, got {}", other.type_name()));
                        }
                        None
                    }
                };
                let valid = valid.and_then(Value::as_list);
                if er == ElementRelationship::Atomic {
                    if self.validate {
                        if let Some(items) = items {
                            self.atomic_items(at, depth, l, items, valid);
                        }
                    }
                    return (true, Set::new());
                }
                match items {
                    Some(items) => (false, self.list_items(at, depth, l, er, items, valid)),
                    None => (false, Set::new()),
                }
            }
            Handler::Map(m, er) => {
                let map = match v {
                    Value::Map(map) => Some(map),
                    Value::Null => None,
                    other => {
                        if self.validate {
                            self.errs
                                .push_at(at, format!("expected map, got {}", other.type_name()));
                        }
                        None
                    }
                };
                let Some(map) = map else {
                    return (er == ElementRelationship::Atomic, Set::new());
                };
                let build = self.build && er != ElementRelationship::Atomic;
                let saved = self.build;
                self.build = build;
                let mut members = Vec::new();
                let mut children = Vec::new();
                let valid = valid.and_then(Value::as_map).map(|m| m.lookup());
                for (i, (k, val)) in map.iter().enumerate() {
                    let declared = m.find_field(k);
                    let ftr = declared.map_or(&m.element_type, |f| &f.ty);
                    if self.validate && declared.is_none() && ftr.is_empty() {
                        self.errs
                            .push_at(&at.field(k), "field not declared in schema");
                        break;
                    }
                    let beside = valid.as_ref().and_then(|m| m.get_at(k, i));
                    let (own, sub) = self.node(&at.field(k), depth + 1, ftr, val, beside);
                    if build {
                        let empty_map = matches!(val, Value::Map(x) if x.is_empty());
                        if own || val.is_null() || empty_map || declared.is_none() {
                            members.push(PathElement::Field(k.clone()));
                        }
                        if !sub.is_empty() {
                            children.push((PathElement::Field(k.clone()), sub));
                        }
                    }
                }
                self.build = saved;
                if er == ElementRelationship::Atomic {
                    return (true, Set::new());
                }
                (false, assemble(members, children))
            }
            Handler::Invalid => {
                self.errs.push_at(at, invalid_atom(tr));
                (false, Set::new())
            }
        }
    }

    /// Validation of an atomic list's items (they are indexed, never owned separately).
    fn atomic_items(
        &mut self,
        at: &At,
        depth: usize,
        l: &'s List,
        items: &[Value],
        valid: Option<&[Value]>,
    ) {
        let saved = self.build;
        self.build = false;
        for (i, child) in items.iter().enumerate() {
            let pe = PathElement::Index(i as i64);
            let beside = valid.and_then(|v| v.get(i));
            self.node(&at.item(&pe), depth + 1, &l.element_type, child, beside);
        }
        self.build = saved;
    }

    fn list_items(
        &mut self,
        at: &At,
        depth: usize,
        l: &'s List,
        er: ElementRelationship,
        items: &[Value],
        valid: Option<&[Value]>,
    ) -> Set {
        if er != ElementRelationship::Associative {
            // Not a valid relationship for a list: smd validates the items by index and owns
            // nothing below (item PEs cannot be computed).
            if self.validate {
                self.atomic_items(at, depth, l, items, valid);
            }
            return Set::new();
        }
        let (idx, problems) = ListIndex::build(self.schema, l, er, items);
        // Validation stops at the first item without a PE (items before it are checked).
        let stop = match problems.first() {
            Some((i, _)) if self.validate => *i,
            _ => items.len(),
        };
        let mut members = Vec::with_capacity(items.len());
        let mut children = Vec::new();
        for (i, item) in items.iter().enumerate().take(stop) {
            let Some(pe) = &idx.pes[i] else { continue };
            let beside = valid.and_then(|v| v.get(i));
            let dup = idx.is_duplicated(i);
            if self.validate && dup && !idx.is_first(i) && !self.allow_duplicates {
                self.errs
                    .push_at(at, format!("duplicate entries for key {pe}"));
            }
            if dup {
                // A repeated key is owned as one atomic leaf.
                if self.build && idx.is_first(i) {
                    members.push(pe.clone());
                }
                if self.validate {
                    let saved = self.build;
                    self.build = false;
                    self.node(&at.item(pe), depth + 1, &l.element_type, item, beside);
                    self.build = saved;
                }
                continue;
            }
            let (_, sub) = self.node(&at.item(pe), depth + 1, &l.element_type, item, beside);
            if self.build {
                members.push(pe.clone());
                if !sub.is_empty() {
                    children.push((pe.clone(), sub));
                }
            }
        }
        if let (true, Some((i, e))) = (self.validate, problems.first()) {
            self.errs.push_at(at, format!("element {i}: {e}"));
        }
        assemble(members, children)
    }
}

pub(super) fn assemble(
    mut members: Vec<PathElement>,
    mut children: Vec<(PathElement, Set)>,
) -> Set {
    if members.len() > 1 {
        members.sort_by(|a, b| a.compare(b));
        members.dedup_by(|a, b| a.compare(b).is_eq());
    }
    if children.len() > 1 {
        children.sort_by(|a, b| a.0.compare(&b.0));
        children.dedup_by(|a, b| a.0.compare(&b.0).is_eq());
    }
    Set::from_sorted_parts(members, children)
}
