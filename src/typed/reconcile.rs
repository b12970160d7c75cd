//! Adapting an old field set to the current schema (smd `ReconcileFieldSetWithSchema`): when a
//! field became atomic, ownership of its children collapses into ownership of the field itself.

use super::{Handler, handler, is_untyped_deduced_map};
use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, Schema, TypeRef};

/// The reconciled set, or `None` if nothing needs to change. An error means a type in the
/// schema could not be resolved.
pub fn reconcile_field_set_with_schema(
    set: &Set,
    schema: &Schema,
    tr: &TypeRef,
) -> Result<Option<Set>, String> {
    let mut w = Walker {
        schema,
        path: Vec::new(),
        to_remove: Set::new(),
        to_add: Set::new(),
        changed: false,
    };
    w.visit(tr, Some(set), false)?;
    if !w.changed {
        return Ok(None);
    }
    Ok(Some(
        set.recursive_difference(&w.to_remove).union(&w.to_add),
    ))
}

struct Walker<'s> {
    schema: &'s Schema,
    path: Vec<PathElement>,
    to_remove: Set,
    to_add: Set,
    changed: bool,
}

impl<'s> Walker<'s> {
    fn visit(&mut self, tr: &'s TypeRef, set: Option<&Set>, is_atomic: bool) -> Result<(), String> {
        let atom = self.schema.resolve(tr).ok_or_else(|| {
            format!(
                "errors reconciling field set with schema: could not resolve {}",
                tr.name().unwrap_or("inlined type")
            )
        })?;
        match handler(&atom) {
            Handler::Scalar(_) => Ok(()),
            Handler::Map(m, er) => {
                if is_untyped_deduced_map(m) {
                    return Ok(());
                }
                if !is_atomic && er == ElementRelationship::Atomic {
                    if set.is_some_and(|s| s.size() > 0) {
                        self.collapse();
                    }
                    return Ok(());
                }
                let Some(set) = set else { return Ok(()) };
                self.items(set, |pe| {
                    let t = match pe {
                        PathElement::Field(n) => {
                            m.find_field(n).map(|f| &f.ty).unwrap_or(&m.element_type)
                        }
                        _ => &m.element_type,
                    };
                    (!t.is_empty()).then_some(t)
                })
            }
            Handler::List(l, er) => {
                if !is_atomic && er == ElementRelationship::Atomic {
                    self.collapse();
                    return Ok(());
                }
                let Some(set) = set else { return Ok(()) };
                self.items(set, |_| Some(&l.element_type))
            }
            Handler::Invalid => Err(format!(
                "errors reconciling field set with schema: schema error: invalid atom: {}",
                tr.name().unwrap_or("inlined")
            )),
        }
    }

    fn collapse(&mut self) {
        self.to_remove.insert(&self.path);
        self.to_add.insert(&self.path);
        self.changed = true;
    }

    /// Visits children that are not members, then members (smd's order).
    fn items(
        &mut self,
        set: &Set,
        type_of: impl Fn(&PathElement) -> Option<&'s TypeRef>,
    ) -> Result<(), String> {
        for (pe, _) in set.children() {
            if !set.has_member(pe) {
                self.element(set, pe, false, &type_of)?;
            }
        }
        for pe in set.members() {
            self.element(set, pe, true, &type_of)?;
        }
        Ok(())
    }

    fn element(
        &mut self,
        set: &Set,
        pe: &PathElement,
        is_member: bool,
        type_of: &impl Fn(&PathElement) -> Option<&'s TypeRef>,
    ) -> Result<(), String> {
        let Some(tr) = type_of(pe) else { return Ok(()) };
        let child = set.child(pe);
        self.path.push(pe.clone());
        let r = self.visit(tr, child, is_member && child.is_none());
        self.path.pop();
        r
    }
}
