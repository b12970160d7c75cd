//! smd `merge.Updater`: Apply (merge, claim, prune, detect conflicts) and Update (take what
//! changed). Conversion between API versions is the identity; managers recorded at versions the
//! caller marks unknown are dropped, as kube-apiserver drops versions it no longer serves.

use super::dangling;
use super::prune::{self, PlainSets};
use super::{Conflict, Conflicts, ManagedFields, SetChange, VersionedSet};
use crate::fieldpath::{Path, Set};
use crate::managedfields::FieldsCache;
use crate::schema::{Schema, TypeRef};
use crate::typed::{self, ApplyWalk, Comparison};
use crate::value::{self, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Why an apply or update did not go through.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpdateError {
    #[error("{0}")]
    Conflicts(Conflicts),
    #[error("{0}")]
    Failed(String),
}

/// Applies and updates for one object type.
pub struct Updater<'s> {
    pub schema: &'s Schema,
    pub type_ref: &'s TypeRef,
    /// Fields each API version's endpoint resets (never owned, never conflicting).
    pub ignored: &'s BTreeMap<String, Set>,
    /// API versions that can be converted to (`None`: all).
    pub known_versions: Option<&'s HashSet<String>>,
    /// The managers' sets were already reconciled with this schema (see
    /// [`crate::managedfields::Prepared`]); skip that pass.
    pub reconciled: bool,
    /// Sets known to have the shape applies produce (see [`PlainSets`]).
    pub plain: Option<&'s PlainSets>,
    /// Sets known to need no reconciling, and where to note more.
    pub fields: Option<&'s FieldsCache>,
}

/// The result of a successful apply.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The new object, or `None` when nothing in the object changes.
    pub object: Option<Value>,
    pub managers: ManagedFields,
    /// What changed between the live object and the result (reset fields excluded).
    pub comparison: Comparison,
    /// How the applier's set changed, when the prune check worked it out.
    pub applier_change: Option<SetChange>,
    /// True when the result (`object`, or the live object when it is `None`) is known valid for
    /// the type, duplicates allowed: the apply walk merged a config it validated into a live
    /// object known valid, and the prune removed nothing.
    pub valid: bool,
}

impl<'s> Updater<'s> {
    fn convertible(&self, version: &str) -> bool {
        self.known_versions.is_none_or(|k| k.contains(version))
    }

    fn filter(&self, version: &str, mut set: Set) -> Set {
        if let Some(ex) = self.ignored.get(version) {
            set.remove_recursive(ex);
        }
        set
    }

    /// Collapses ownership below fields that are atomic in the current schema; drops managers
    /// recorded at versions that cannot be converted.
    fn reconcile(&self, managers: ManagedFields) -> Result<ManagedFields, UpdateError> {
        if self.reconciled {
            return Ok(managers);
        }
        self.reconcile_all(managers)
    }

    /// Reconciles every manager's set with the schema (unconditionally).
    pub fn reconcile_all(&self, managers: ManagedFields) -> Result<ManagedFields, UpdateError> {
        let mut out = ManagedFields::new();
        for (k, vs) in managers {
            if !self.convertible(&vs.api_version) {
                continue;
            }
            if self
                .fields
                .is_some_and(|c| c.is_reconciled(&vs.set, self.schema, self.type_ref))
            {
                out.insert(k, vs);
                continue;
            }
            let set = typed::reconcile_field_set_with_schema(&vs.set, self.schema, self.type_ref)
                .map_err(UpdateError::Failed)?;
            if let (None, Some(c)) = (&set, self.fields) {
                c.reconciled(&vs.set, self.schema, self.type_ref);
            }
            match set {
                Some(set) => {
                    out.insert(
                        k,
                        VersionedSet {
                            set: set.into(),
                            ..vs
                        },
                    );
                }
                None => {
                    out.insert(k, vs);
                }
            }
        }
        Ok(out)
    }

    /// The ownership pass shared by apply and update: other managers lose what changes
    /// (or it conflicts, unless `force`) and what is removed.
    fn compare(&self, old: &Value, new: &Value) -> Result<Comparison, UpdateError> {
        typed::compare(self.schema, self.type_ref, old, new)
            .map_err(|e| UpdateError::Failed(format!("failed to compare objects: {e}")))
    }

    /// `raw` is the comparison of the old and the new object.
    fn update_managers(
        &self,
        raw: Comparison,
        version: &str,
        managers: &mut ManagedFields,
        workflow: &str,
        force: bool,
    ) -> Result<Comparison, UpdateError> {
        // Per API version: the comparison without that version's reset fields (`None`: it has
        // none, or `raw` touches none of them, and `raw` is that comparison, not copied), and
        // what it changed (modified or added; borrowed when one of the two is empty, as it
        // usually is).
        let r = &raw;
        let per_version = move |v: &str| match self.ignored.get(v) {
            Some(ex) if r.touches(ex) => {
                let c = r.exclude(ex);
                let changed = c.modified.union(&c.added);
                (Some(c), Cow::Owned(changed))
            }
            _ => (None, changed_by(r)),
        };
        let mut versions: BTreeMap<String, (Option<Comparison>, Cow<Set>)> = BTreeMap::new();
        versions.insert(version.to_string(), per_version(version));
        let mut conflicts: Vec<(String, Set)> = Vec::new();
        let mut removed: Vec<String> = Vec::new();
        let mut dropped = Vec::new();
        for (k, vs) in managers.iter() {
            if k == workflow {
                continue;
            }
            if !self.convertible(&vs.api_version) {
                dropped.push(k.clone());
                continue;
            }
            let (cmp, changed) = versions
                .entry(vs.api_version.clone())
                .or_insert_with(|| per_version(&vs.api_version));
            let cmp = cmp.as_ref().unwrap_or(r);
            let cs = vs.set.intersection(changed);
            if !cs.is_empty() {
                conflicts.push((k.clone(), cs));
            }
            if !cmp.removed.is_empty() {
                removed.push(k.clone());
            }
        }
        for k in dropped {
            managers.remove(&k);
        }
        if !force && !conflicts.is_empty() {
            let mut out = Conflicts::default();
            for (k, cs) in &conflicts {
                cs.iterate(|p| {
                    out.0.push(Conflict {
                        manager: k.clone(),
                        path: Path(p.to_vec()),
                    })
                });
            }
            out.sort();
            return Err(UpdateError::Conflicts(out));
        }
        for (k, cs) in conflicts {
            if let Some(vs) = managers.get_mut(&k) {
                Arc::make_mut(&mut vs.set).remove_all(&cs);
            }
        }
        for k in removed {
            if let Some(vs) = managers.get_mut(&k) {
                let rm = &versions[&vs.api_version].0.as_ref().unwrap_or(r).removed;
                Arc::make_mut(&mut vs.set).remove_all(rm);
            }
        }
        managers.retain(|_, vs| !vs.set.is_empty());
        let own = versions.remove(version).expect("inserted above").0;
        drop(versions);
        Ok(own.unwrap_or(raw))
    }

    /// A non-apply write of `new` by `manager` (smd `Updater.Update`). `live` and `new` must
    /// be valid (as `typed::validate` with duplicates allowed finds them), as the field
    /// manager checks before it calls this.
    pub fn update(
        &self,
        live: &Value,
        new: &Value,
        version: &str,
        managers: ManagedFields,
        manager: &str,
    ) -> Result<ManagedFields, UpdateError> {
        let mut managers = self.reconcile(managers)?;
        let raw = typed::compare_valid(self.schema, self.type_ref, live, new)
            .map_err(|e| UpdateError::Failed(format!("failed to compare objects: {e}")))?;
        let cmp = self.update_managers(raw, version, &mut managers, manager, true)?;
        let prev = managers.remove(manager).map(|v| v.set).unwrap_or_default();
        let mut set = prev.difference(&cmp.removed);
        set.union_with(cmp.modified);
        set.union_with(cmp.added);
        let set = self.filter(version, set);
        if !set.is_empty() {
            managers.insert(
                manager.to_string(),
                VersionedSet {
                    set: set.into(),
                    api_version: version.to_string(),
                    applied: false,
                },
            );
        }
        Ok(managers)
    }

    /// An apply of `config` by `manager` (smd `Updater.Apply`). Returns the new object, or
    /// `None` when the object would not change.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        version: &str,
        managers: ManagedFields,
        manager: &str,
        force: bool,
    ) -> Result<Applied, UpdateError> {
        let set = typed::to_field_set(self.schema, self.type_ref, config)
            .map_err(|e| UpdateError::Failed(format!("failed to get field set: {e}")))?;
        self.apply_with_set(live, config, set, version, managers, manager, force)
    }

    /// [`Updater::apply`] with the config's field set already computed
    /// ([`typed::validate_to_field_set`]).
    #[allow(clippy::too_many_arguments)]
    pub fn apply_with_set(
        &self,
        live: &Value,
        config: &Value,
        set: Set,
        version: &str,
        managers: ManagedFields,
        manager: &str,
        force: bool,
    ) -> Result<Applied, UpdateError> {
        let managers = self.reconcile(managers)?;
        let merged = typed::merge(self.schema, self.type_ref, live, config)
            .map_err(|e| UpdateError::Failed(format!("failed to merge config: {e}")))?
            .unwrap_or(Value::Null);
        self.apply_merged(
            live, config, set, merged, None, version, managers, manager, force,
        )
    }

    /// [`Updater::apply`] from an [`ApplyWalk`] of the config over `live`
    /// ([`typed::apply_walk`]), which already holds the field set, the merge and its comparison.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_walked(
        &self,
        live: &Value,
        config: &Value,
        walk: ApplyWalk,
        version: &str,
        managers: ManagedFields,
        manager: &str,
        force: bool,
    ) -> Result<Applied, UpdateError> {
        let managers = self.reconcile(managers)?;
        let ApplyWalk {
            set,
            merged,
            comparison,
            unchanged,
        } = walk;
        self.apply_merged(
            live,
            config,
            set,
            merged,
            Some((comparison, unchanged)),
            version,
            managers,
            manager,
            force,
        )
    }

    /// The rest of an apply once the config is merged: claim, prune, ownership, conflicts.
    /// `merged_cmp` is the comparison of `live` and `merged` and whether they are equal, if
    /// known.
    #[allow(clippy::too_many_arguments)]
    fn apply_merged(
        &self,
        live: &Value,
        config: &Value,
        set: Set,
        merged: Value,
        merged_cmp: Option<(Comparison, bool)>,
        version: &str,
        mut managers: ManagedFields,
        manager: &str,
        force: bool,
    ) -> Result<Applied, UpdateError> {
        let last = managers.get(manager).cloned();
        let set = self.filter(version, set);
        managers.insert(
            manager.to_string(),
            VersionedSet {
                set: set.into(),
                api_version: version.to_string(),
                applied: true,
            },
        );
        let (merged, pruned_nothing, applier_change) =
            self.prune(merged, &managers, manager, last.as_ref())?;
        // Only an apply walk comes with `merged_cmp`: it validated the config and required a
        // live object known valid, so its merge is valid unless the prune removed something.
        let valid = pruned_nothing && merged_cmp.is_some();
        let mut unchanged = None;
        let raw = match (pruned_nothing, merged_cmp) {
            (true, Some((cmp, same))) => {
                unchanged = Some(same);
                cmp
            }
            // `merged` differs from `live` only where the config says something.
            (true, None) => {
                typed::compare_merged(self.schema, self.type_ref, live, &merged, config)
                    .map_err(|e| UpdateError::Failed(format!("failed to compare objects: {e}")))?
            }
            (false, _) => self.compare(live, &merged)?,
        };
        #[cfg(debug_assertions)]
        if pruned_nothing {
            let full = self.compare(live, &merged)?;
            debug_assert!(
                full.equals(&raw),
                "guided comparison disagrees with the full comparison"
            );
        }
        let comparison = self.update_managers(raw, version, &mut managers, manager, force)?;
        let object = if unchanged.unwrap_or_else(|| value::equals(live, &merged)) {
            None
        } else {
            Some(merged)
        };
        Ok(Applied {
            object,
            managers,
            comparison,
            applier_change,
            valid,
        })
    }

    fn field_set(&self, v: &Value, what: &str) -> Result<Set, UpdateError> {
        typed::to_field_set(self.schema, self.type_ref, v).map_err(|e| {
            UpdateError::Failed(format!(
                "failed to create field set from {what} object: {e}"
            ))
        })
    }

    fn named(&self, s: &Set) -> Set {
        s.ensure_named_fields_are_members(self.schema, self.type_ref)
    }

    /// [`Self::named`] of an owned set, in place.
    fn named_owned(&self, mut s: Set) -> Set {
        #[cfg(debug_assertions)]
        let copied = self.named(&s);
        s.make_named_fields_members(self.schema, self.type_ref);
        #[cfg(debug_assertions)]
        debug_assert!(s.equals(&copied), "in-place naming disagrees");
        s
    }

    /// Removes what the applier owned before and no longer applies, unless someone else owns it
    /// (smd `prune` + `addBackOwnedItems` + `addBackDanglingItems`).
    fn prune(
        &self,
        merged: Value,
        managers: &ManagedFields,
        manager: &str,
        last: Option<&VersionedSet>,
    ) -> Result<(Value, bool, Option<SetChange>), UpdateError> {
        let Some(last) = last.filter(|l| !l.set.is_empty()) else {
            return Ok((merged, true, None));
        };
        if !self.convertible(&last.api_version) {
            return Ok((merged, true, None));
        }
        // The applier's new set first: a re-apply mostly repeats what it applied before.
        let mine = managers
            .get(manager)
            .filter(|vs| self.convertible(&vs.api_version))
            .map(|vs| &*vs.set);
        let others: Vec<&Set> = managers
            .iter()
            .filter(|(k, vs)| k.as_str() != manager && self.convertible(&vs.api_version))
            .map(|(_, vs)| &*vs.set)
            .collect();
        let (sc, tr) = (self.schema, self.type_ref);
        let mut change = None;
        let unprunable = match (mine, self.plain) {
            // The previous set's shape is known: only what the applier dropped needs a look.
            (Some(mine), Some(plain)) if plain.contains(&last.set) => {
                let (gained, dropped) = mine.differences(&last.set);
                let ok =
                    prune::nothing_dropped_to_prune(sc, tr, &last.set, &dropped, mine, &others);
                change = Some(SetChange { gained, dropped });
                ok
            }
            _ => prune::nothing_to_prune(sc, tr, &last.set, mine, &others),
        };
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            unprunable,
            prune::nothing_to_prune(sc, tr, &last.set, mine, &others),
            "prune shortcut disagrees with the full check"
        );
        if unprunable {
            #[cfg(debug_assertions)]
            self.assert_as_prune_full(merged.clone(), managers, last, &merged, "prune fast path");
            return Ok((merged, true, change));
        }
        #[cfg(debug_assertions)]
        let before = merged.clone();
        let merged = match self.prune_targeted(merged, managers, last) {
            Ok(pruned) => {
                #[cfg(debug_assertions)]
                self.assert_as_prune_full(before, managers, last, &pruned, "targeted prune");
                return Ok((pruned, false, change));
            }
            Err(merged) => merged,
        };
        let last_named = self.named(&last.set);
        Ok((
            self.prune_full(merged, managers, last, &last_named)?,
            false,
            change,
        ))
    }

    /// The three passes' result computed along the applier's previous set
    /// ([`dangling::dangling`]) when every manager is recorded at that set's version; `merged`
    /// back when that walk cannot tell.
    fn prune_targeted(
        &self,
        merged: Value,
        managers: &ManagedFields,
        last: &VersionedSet,
    ) -> Result<Value, Value> {
        if managers.is_empty()
            || managers
                .values()
                .any(|vs| vs.api_version != last.api_version)
        {
            return Err(merged);
        }
        let owners: Vec<&Set> = managers.values().map(|vs| &*vs.set).collect();
        let (sc, tr) = (self.schema, self.type_ref);
        match dangling::dangling(sc, tr, &merged, &last.set, &owners) {
            Ok(removed) if removed.is_empty() => Ok(merged),
            Ok(removed) => Ok(typed::remove_items(sc, tr, &merged, &removed)),
            Err(dangling::GiveUp) => Err(merged),
        }
    }

    /// Debug builds (the test suite): a shortcut's result `got` must be what the three passes
    /// make of `before`.
    #[cfg(debug_assertions)]
    fn assert_as_prune_full(
        &self,
        before: Value,
        managers: &ManagedFields,
        last: &VersionedSet,
        got: &Value,
        shortcut: &str,
    ) {
        let last_named = self.named(&last.set);
        let full = self.prune_full(before, managers, last, &last_named);
        debug_assert!(
            full.as_ref().is_ok_and(|f| f.strict_eq(got)),
            "{shortcut} disagrees with the full algorithm"
        );
    }

    /// The reference's three passes, unabridged.
    fn prune_full(
        &self,
        merged: Value,
        managers: &ManagedFields,
        last: &VersionedSet,
        last_named: &Set,
    ) -> Result<Value, UpdateError> {
        let (sc, tr) = (self.schema, self.type_ref);
        let mut pruned = typed::remove_items(sc, tr, &merged, last_named);

        // Add back everything someone still owns, version by version (prune's version first).
        let mut managed_at: BTreeMap<&str, Set> = BTreeMap::new();
        for vs in managers.values() {
            managed_at
                .entry(vs.api_version.as_str())
                .or_default()
                .union_with(Set::clone(&vs.set));
        }
        let merged_named = self.named_owned(self.field_set(&merged, "merged")?);
        let mut order: Vec<&str> = Vec::new();
        if managed_at.contains_key(last.api_version.as_str()) {
            order.push(last.api_version.as_str());
        }
        order.extend(
            managed_at
                .keys()
                .copied()
                .filter(|v| *v != last.api_version.as_str()),
        );
        for version in order {
            if !self.convertible(version) {
                continue;
            }
            let pruned_named = self.named_owned(self.field_set(&pruned, "pruned")?);
            let managed = managed_at.remove(version).unwrap_or_default();
            let mut keep = pruned_named;
            keep.union_with(self.named_owned(managed));
            pruned = typed::remove_items(sc, tr, &merged, &merged_named.difference(&keep));
        }

        // Remove items that became dangling: parents the applier owned whose owned children
        // were all removed above.
        let pruned_named = self.named_owned(self.field_set(&pruned, "pruned")?);
        let dangling = merged_named
            .difference(&pruned_named)
            .intersection(last_named);
        Ok(typed::remove_items(sc, tr, &merged, &dangling))
    }
}

/// What `cmp` changed: its modified and added fields (borrowed when one of the two is empty).
fn changed_by(cmp: &Comparison) -> Cow<'_, Set> {
    if cmp.added.is_empty() {
        Cow::Borrowed(&cmp.modified)
    } else if cmp.modified.is_empty() {
        Cow::Borrowed(&cmp.added)
    } else {
        Cow::Owned(cmp.modified.union(&cmp.added))
    }
}
