//! Validation of a value against its schema (smd `TypedValue.Validate`): types of scalars,
//! undeclared fields, list-map keys and duplicate items.

use super::{
    Handler, ValidationErrors, check_scalar, field_type, handler, invalid_atom, list_item_pe,
    resolve,
};
use crate::fieldpath::PathElement;
use crate::schema::{ElementRelationship, Schema, TypeRef};
use crate::value::Value;

/// Validates `v` as type `tr`. Duplicate list-map keys and set values are errors unless
/// `allow_duplicates` (kube-apiserver allows them in live objects, never in applied configs).
pub fn validate(
    schema: &Schema,
    tr: &TypeRef,
    v: &Value,
    allow_duplicates: bool,
) -> Result<(), ValidationErrors> {
    let mut w = Walker {
        schema,
        allow_duplicates,
        path: Vec::new(),
        errs: ValidationErrors::default(),
    };
    w.walk(tr, v);
    w.errs.into_result()
}

struct Walker<'s> {
    schema: &'s Schema,
    allow_duplicates: bool,
    path: Vec<PathElement>,
    errs: ValidationErrors,
}

/// Values built in code can be deeper than parsed documents; refuse before recursing too far.
const MAX_PATH_DEPTH: usize = 2 * crate::value::MAX_DEPTH;

impl<'s> Walker<'s> {
    fn walk(&mut self, tr: &'s TypeRef, v: &Value) {
        if self.path.len() > MAX_PATH_DEPTH {
            return self.errs.push(&self.path, "nesting too deep");
        }
        let atom = match resolve(self.schema, tr) {
            Ok(a) => a.deduce(Some(v)),
            Err(e) => return self.errs.push(&self.path, e),
        };
        match handler(&atom) {
            Handler::Scalar(t) => {
                if let Some(e) = check_scalar(t, v) {
                    self.errs.push(&self.path, e);
                }
            }
            Handler::List(l, er) => match v {
                Value::Null => {}
                Value::List(items) => self.list(l, er, items),
                other => self.errs.push(
                    &self.path,
                    format!("expected list, got {}", other.type_name()),
                ),
            },
            Handler::Map(m, _) => match v {
                Value::Null => {}
                Value::Map(map) => {
                    for (k, val) in map.iter() {
                        let ftr = field_type(m, k);
                        self.path.push(PathElement::Field(k.clone()));
                        if m.find_field(k).is_none() && ftr.is_empty() {
                            self.errs.push(&self.path, "field not declared in schema");
                            self.path.pop();
                            return;
                        }
                        self.walk(ftr, val);
                        self.path.pop();
                    }
                }
                other => self.errs.push(
                    &self.path,
                    format!("expected map, got {}", other.type_name()),
                ),
            },
            Handler::Invalid => self.errs.push(&self.path, invalid_atom(tr)),
        }
    }

    fn list(&mut self, l: &'s crate::schema::List, er: ElementRelationship, items: &[Value]) {
        let mut seen: Vec<PathElement> = Vec::new();
        for (i, child) in items.iter().enumerate() {
            let pe = if er != ElementRelationship::Associative {
                PathElement::Index(i as i64)
            } else {
                match list_item_pe(self.schema, l, er, child) {
                    Ok(pe) => pe,
                    Err(e) => {
                        self.errs.push(&self.path, format!("element {i}: {e}"));
                        return;
                    }
                }
            };
            if er == ElementRelationship::Associative {
                match seen.binary_search_by(|s| s.compare(&pe)) {
                    Ok(_) if !self.allow_duplicates => {
                        self.errs
                            .push(&self.path, format!("duplicate entries for key {pe}"));
                    }
                    Ok(_) => {}
                    Err(pos) => seen.insert(pos, pe.clone()),
                }
            }
            self.path.push(pe);
            self.walk(&l.element_type, child);
            self.path.pop();
        }
    }
}
