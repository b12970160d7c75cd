//! Turning an apply's before/after state into explanations.

use super::{ApplyRequest, FieldConflict, OwnedField, Owner, Prediction, Verdict, value_at};
use crate::fieldpath::{Path, PathElement, Set};
use crate::managedfields::{
    Identity, Managed, Operation, Outcome, encode, format_time, identity, parse_identity,
};
use crate::merge::Conflicts;
use crate::value::Value;

pub(super) struct Context<'a> {
    pub req: &'a ApplyRequest<'a>,
    pub live: &'a Value,
    pub live_managed: &'a Managed,
    pub exists: bool,
}

fn owner(key: &str, m: &Managed) -> Owner {
    let id = parse_identity(key).unwrap_or_default();
    let vs = m.fields.get(key);
    Owner {
        manager: id.manager,
        operation: id.operation,
        api_version: vs.map(|v| v.api_version.clone()).unwrap_or(id.api_version),
        subresource: id.subresource,
        time: m.times.get(key).copied().flatten().map(format_time),
    }
}

/// Members of `s` that have no member below them (the most specific paths).
fn leaf_paths(s: &Set) -> Vec<Path> {
    s.leaves().paths()
}

/// Paths of `s` that have no proper prefix in `s` (the roots of removed subtrees).
fn top_paths(s: &Set) -> Vec<Path> {
    let all = s.paths();
    all.iter()
        .filter(|p| !(1..p.len()).any(|n| s.has(&p.0[..n])))
        .cloned()
        .collect()
}

impl<'a> Context<'a> {
    fn value_in(&self, v: &Value, path: &[PathElement]) -> Option<Value> {
        value_at(self.req.schema, self.req.type_ref, v, path).cloned()
    }

    fn owners_of(&self, m: &Managed, path: &[PathElement], skip: &str) -> Vec<Owner> {
        m.fields
            .iter()
            .filter(|(k, vs)| k.as_str() != skip && vs.set.has(path))
            .map(|(k, _)| owner(k, m))
            .collect()
    }

    pub fn conflicts(
        &self,
        cs: &Conflicts,
        forced: impl Fn(&Identity) -> bool,
    ) -> Vec<FieldConflict> {
        let before = self.live_managed;
        let mut out: Vec<FieldConflict> = Vec::new();
        for c in &cs.0 {
            let o = owner(&c.manager, before);
            let allowed = parse_identity(&c.manager).is_some_and(|id| forced(&id));
            if let Some(existing) = out.iter_mut().find(|f| f.path_elements == c.path) {
                existing.owners.push(o);
                existing.forced &= allowed;
                continue;
            }
            out.push(FieldConflict {
                path: c.path.to_string(),
                path_elements: c.path.clone(),
                owners: vec![o],
                current: self.value_in(self.live, &c.path.0),
                proposed: self.value_in(self.req.config, &c.path.0),
                forced: allowed,
            });
        }
        out
    }

    pub fn success(&self, out: Outcome, taken: Option<Conflicts>) -> Prediction {
        let before = out.before.as_ref().unwrap_or(self.live_managed);
        let after = &out.managed;
        let name = if self.req.manager.is_empty() {
            "unknown"
        } else {
            self.req.manager
        };
        let key = identity(name, Operation::Apply, "", self.req.subresource);
        let empty = Set::new();
        let old_set = before.fields.get(&key).map_or(&empty, |v| &v.set);
        let new_set = after.fields.get(&key).map_or(&empty, |v| &v.set);

        let taken_over = match &taken {
            Some(cs) => self.conflicts(cs, |_| true),
            None => vec![],
        };
        let taken_paths: Vec<&Path> = taken_over.iter().map(|t| &t.path_elements).collect();

        let (gained, dropped) = match (out.applier_change, &out.before) {
            (Some(c), None) => (c.gained, c.dropped),
            _ => new_set.differences(old_set),
        };
        #[cfg(debug_assertions)]
        {
            let (g, d) = new_set.differences(old_set);
            debug_assert!(
                g.equals(&gained) && d.equals(&dropped),
                "applier change differs"
            );
        }
        let shared = leaf_paths(&gained)
            .into_iter()
            .filter(|p| !taken_paths.contains(&p))
            .filter_map(|p| {
                let owners = self.owners_of(after, &p.0, &key);
                (!owners.is_empty()).then(|| OwnedField {
                    path: p.to_string(),
                    value: self.value_in(&out.object, &p.0),
                    path_elements: p,
                    owners,
                })
            })
            .collect();

        // A field the merge removed that the server's defaulting puts back (a custom
        // resource's schema `default`) is not removed: it is reset, and a note says to what.
        let mut notes = Vec::new();
        let removed = match (&out.comparison, out.changed && self.exists) {
            (Some(cmp), true) => top_paths(&cmp.removed)
                .into_iter()
                .filter_map(|p| {
                    if let Some(now) = self
                        .req
                        .structural
                        .and_then(|_| self.value_in(&out.object, &p.0))
                    {
                        // Back at the value it had: no news.
                        if self
                            .value_in(self.live, &p.0)
                            .is_some_and(|was| crate::value::equals(&was, &now))
                        {
                            return None;
                        }
                        notes.push(format!(
                            "{p}: dropped by this apply, and the server fills in its default \
                             ({})",
                            crate::value::json::to_string(&now, crate::value::json::Style::PLAIN)
                        ));
                        return None;
                    }
                    Some(OwnedField {
                        path: p.to_string(),
                        value: self.value_in(self.live, &p.0),
                        owners: self.owners_of(before, &p.0, ""),
                        path_elements: p,
                    })
                })
                .collect(),
            _ => vec![],
        };

        let stuck = leaf_paths(&dropped)
            .into_iter()
            .filter_map(|p| {
                let value = self.value_in(&out.object, &p.0)?;
                let owners = self.owners_of(after, &p.0, &key);
                (!owners.is_empty()).then(|| OwnedField {
                    path: p.to_string(),
                    path_elements: p,
                    owners,
                    value: Some(value),
                })
            })
            .collect();

        let ownership_changed = encode(self.live_managed) != encode(&out.managed);
        let verdict = if !self.exists {
            Verdict::Created
        } else if out.changed {
            Verdict::Configured
        } else if ownership_changed {
            Verdict::OwnershipOnly
        } else {
            Verdict::Unchanged
        };
        Prediction {
            verdict,
            conflicts: vec![],
            taken_over,
            shared,
            removed,
            stuck,
            message: None,
            status: None,
            error: None,
            object: Some(out.object),
            decoded: None,
            managed: out.managed,
            ownership_changed,
            rejections: Vec::new(),
            not_evaluated: Vec::new(),
            notes,
        }
    }
}
