//! The field-manager pipeline of kube-apiserver (`NewDefaultFieldManager`), outermost first:
//! version check → last-applied updater → last-applied manager (kubectl's exemption) →
//! skip-non-applied (`before-first-apply`) → cap managers → manager identity →
//! timestamps → strip metadata → structured merge.

use super::entry::{
    Managed, ManagedFieldsEntry, Operation, Time, decode_with, encode_with, identity,
};
use super::{FieldsCache, Prepared};
use crate::fieldpath::{Path, Set};
use crate::merge::{Conflicts, SetChange, UpdateError, Updater, VersionedSet};
use crate::schema::{Schema, TypeRef};
use crate::typed;
use crate::typed::Comparison;
use crate::value::json::Style;
use crate::value::{Map, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// kubectl's client-side-apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
const CURRENT_OPERATION: &str = "current-operation";
const ANCIENT_CHANGES: &str = "ancient-changes";
/// At most this many `Update` entries are kept; older ones fold into `ancient-changes`.
pub const MAX_UPDATE_MANAGERS: usize = 10;
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManagerError {
    /// The apply would change fields other managers own (HTTP 409).
    #[error("{}", super::status::conflict_message(.0))]
    Conflicts(Conflicts),
    /// The request itself is invalid (HTTP 400).
    #[error("BadRequest: {0}")]
    BadRequest(String),
    /// Anything else the apiserver would reject (HTTP 500, e.g. schema validation).
    #[error("{0}")]
    Failed(String),
}

/// The result of a successful apply or update.
#[derive(Clone, Debug)]
pub struct ApplyOutcome {
    /// The resulting object, without `metadata.managedFields`.
    pub object: Value,
    /// True if the merge changed the object (false for a no-op apply).
    pub changed: bool,
    pub entries: Vec<ManagedFieldsEntry>,
    /// True when `object` is known valid for the type (duplicates allowed): an update validated
    /// it, or an apply walked a config it validated over a live object known valid and pruned
    /// nothing. A caller may pass it back as [`ManagerOptions::validated`] with the next request
    /// (debug builds validate it anyway and compare).
    pub validated: bool,
}

/// What kube-apiserver fixes per request endpoint.
pub struct FieldManager<'s> {
    pub schema: &'s Schema,
    pub type_ref: &'s TypeRef,
    /// The request's group/version.
    pub api_version: String,
    pub kind: String,
    /// `""`, `status`, `scale`, ...
    pub subresource: String,
    /// Reset fields per API version (the endpoint's strategy).
    pub ignored: &'s BTreeMap<String, Set>,
    /// Versions the converter can reach (`None`: all).
    pub known_versions: Option<&'s HashSet<String>>,
    /// The time stamped on entries this request touches.
    pub now: Time,
    pub options: ManagerOptions<'s>,
}

/// Switches for callers that hold more state than the apiserver's request has.
#[derive(Clone, Copy, Debug, Default)]
pub struct ManagerOptions<'s> {
    /// The live object and managers passed in are this prepared object's: validated,
    /// reconciled and indexed already.
    pub prepared: Option<&'s Prepared>,
    /// Keep the managers as they were just before the final merge (for explanations).
    pub capture_before: bool,
    /// Decode and encode managed fields through this cache (a caller that reads back what it
    /// wrote: see [`FieldsCache`]). The schema must outlive the cache.
    pub fields: Option<&'s FieldsCache>,
    /// An object known to pass validation against this type with duplicates allowed (one an
    /// earlier request reported [`ApplyOutcome::validated`]): it is not validated again when it
    /// is this request's live object.
    pub validated: Option<&'s Value>,
}

/// The result of a successful request, decoded.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The resulting object, without `metadata.managedFields`.
    pub object: Value,
    pub managed: Managed,
    /// True if the request changed the object.
    pub changed: bool,
    /// What changed (for applies): added, modified and removed paths.
    pub comparison: Option<Comparison>,
    /// The managers just before the final merge when they differ from the ones passed in (a
    /// synthesized `before-first-apply`; only with [`ManagerOptions::capture_before`]).
    pub before: Option<Managed>,
    /// How the applier's entry changed (applies, when known without extra work).
    pub applier_change: Option<SetChange>,
    /// True when `object` is known valid for the type (duplicates allowed): an update validated
    /// it, or an apply walked a valid config over a valid live object and pruned nothing.
    pub valid: bool,
}

type Step = Result<Outcome, ManagerError>;

/// What an apply leaves before its timestamp is set.
struct Stripped {
    /// The new object; `None` when the object does not change.
    object: Option<Value>,
    managed: Managed,
    comparison: Comparison,
    applier_change: Option<SetChange>,
    /// The result (the new object, or else the live one) is known valid ([`Outcome::valid`]).
    valid: bool,
}

/// The metadata fields stripped from the acting manager's set after every request.
fn strip_set() -> &'static Set {
    static STRIP: std::sync::OnceLock<Set> = std::sync::OnceLock::new();
    STRIP.get_or_init(build_strip_set)
}

fn build_strip_set() -> Set {
    let mut s = Set::new();
    for p in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "clusterName"],
        &["metadata", "generation"],
        &["metadata", "managedFields"],
        &["metadata", "resourceVersion"],
    ] {
        s.insert(&Path::fields(p).0);
    }
    s
}

/// Removes `metadata.managedFields` from an object.
pub fn remove_managed_fields(obj: &mut Value) {
    if let Some(md) = obj
        .as_map_mut()
        .and_then(|m| m.get_mut("metadata"))
        .and_then(Value::as_map_mut)
    {
        md.remove("managedFields");
    }
}

/// A copy of `v` without `metadata.managedFields`, as [`remove_managed_fields`] leaves it; the
/// entries are never copied (they are a large part of a live object, FieldsV1 trees of small
/// maps, and copying them only to drop them was about 4% of a release's prediction).
pub(super) fn without_managed_fields(v: &Value) -> Value {
    let Some(m) = v.as_map() else {
        return v.clone();
    };
    // The first of each name, as `get_mut` and `remove` find them.
    let metadata = m.iter().position(|(k, _)| k == "metadata");
    let entries = m.iter().enumerate().map(|(i, (k, val))| {
        let val = match val.as_map() {
            Some(md) if Some(i) == metadata => {
                let skip = md.iter().position(|(k, _)| k == "managedFields");
                let kept = md.iter().enumerate().filter(|(j, _)| Some(*j) != skip);
                Value::Map(Map::from_unique(
                    kept.map(|(_, (k, v))| (k.clone(), v.clone())).collect(),
                ))
            }
            _ => val.clone(),
        };
        (k.clone(), val)
    });
    Value::Map(Map::from_unique(entries.collect()))
}

impl<'s> FieldManager<'s> {
    fn updater(&self) -> Updater<'_> {
        Updater {
            schema: self.schema,
            type_ref: self.type_ref,
            ignored: self.ignored,
            known_versions: self.known_versions,
            reconciled: self.options.prepared.is_some(),
            plain: self.options.prepared.map(|p| &p.plain),
            fields: self.options.fields,
        }
    }

    /// Tells the fields cache that the managers' sets need no reconciling with this type: the
    /// updater leaves only such sets (each reconciled as it started, built by walks of this
    /// type, or a part or union of those), so the next request on them skips that walk.
    fn remember_reconciled(&self, m: &Managed) {
        let Some(cache) = self.options.fields else {
            return;
        };
        for vs in m.fields.values() {
            debug_assert!(
                matches!(
                    typed::reconcile_field_set_with_schema(&vs.set, self.schema, self.type_ref),
                    Ok(None)
                ),
                "an updater's set needs reconciling: {}",
                vs.set.to_fields_v1()
            );
            cache.reconciled(&vs.set, self.schema, self.type_ref);
        }
    }

    fn check(&self, v: &Value, what: &str, allow_duplicates: bool) -> Result<(), ManagerError> {
        if allow_duplicates && self.known_valid(v) {
            return Ok(());
        }
        typed::validate(self.schema, self.type_ref, v, allow_duplicates)
            .map_err(|e| invalid(what, e))
    }

    /// True when `v` is the object the caller knows valid ([`ManagerOptions::validated`]).
    fn known_valid(&self, v: &Value) -> bool {
        let known = self.options.validated.is_some_and(|k| std::ptr::eq(k, v));
        debug_assert!(
            !known || typed::validate(self.schema, self.type_ref, v, true).is_ok(),
            "an object passed as validated is not valid"
        );
        known
    }

    /// A server-side apply of `patch` as `manager` (`FieldManager.Apply`). `live` is the stored
    /// object, or `{apiVersion, kind}` for a create.
    pub fn apply(
        &self,
        live: &Value,
        patch: &Value,
        live_entries: &[ManagedFieldsEntry],
        manager: &str,
        force: bool,
    ) -> Result<ApplyOutcome, ManagerError> {
        let m = decode_with(live_entries, self.options.fields)
            .map_err(|e| ManagerError::Failed(format!("failed to decode managed fields: {e}")))?;
        let out = self.apply_managed(live, patch, m, manager, force)?;
        self.remember_reconciled(&out.managed);
        Ok(ApplyOutcome {
            validated: out.valid,
            object: out.object,
            changed: out.changed,
            entries: encode_with(&out.managed, self.options.fields),
        })
    }

    /// [`FieldManager::apply`] on decoded managed fields (no encoding of the result).
    pub fn apply_managed(
        &self,
        live: &Value,
        patch: &Value,
        m: Managed,
        manager: &str,
        force: bool,
    ) -> Step {
        let pav = patch.str_at(&["apiVersion"]).unwrap_or("");
        let pk = patch.str_at(&["kind"]).unwrap_or("");
        if pav != self.api_version || pk != self.kind {
            let (g, v) = pav.rsplit_once('/').unwrap_or(("", pav));
            return Err(ManagerError::BadRequest(format!(
                "invalid object type: {g}/{v}, Kind={pk}"
            )));
        }
        self.last_applied_updater(live, patch, m, manager, force)
    }

    fn last_applied_updater(
        &self,
        live: &Value,
        patch: &Value,
        m: Managed,
        manager: &str,
        force: bool,
    ) -> Step {
        let mut out = self.last_applied_manager(live, patch, m, manager, force)?;
        let has = out
            .object
            .str_at(&["metadata", "annotations", LAST_APPLIED])
            .is_some_and(|s| !s.is_empty());
        if manager == "kubectl" && has {
            set_last_applied(&mut out.object, build_last_applied(patch));
        }
        Ok(out)
    }

    fn last_applied_manager(
        &self,
        live: &Value,
        patch: &Value,
        m: Managed,
        manager: &str,
        force: bool,
    ) -> Step {
        if manager != "kubectl" {
            return self.skip_non_applied(live, patch, m, manager, force);
        }
        let res = self.skip_non_applied(live, patch, m.clone(), manager, force);
        let Err(ManagerError::Conflicts(cs)) = &res else {
            return res;
        };
        let Ok(allowed) = self.allowed_from_last_applied(live) else {
            return res;
        };
        let mut conflict_set = Set::new();
        for c in &cs.0 {
            conflict_set.insert(&c.path.0);
        }
        if !conflict_set.difference(&allowed).is_empty() {
            let remaining = Conflicts(
                cs.0.iter()
                    .filter(|c| !allowed.has(&c.path.0))
                    .cloned()
                    .collect(),
            );
            return Err(ManagerError::Conflicts(remaining));
        }
        self.skip_non_applied(live, patch, m, manager, true)
    }

    /// Fields the last-applied annotation claims whose live value still equals it.
    fn allowed_from_last_applied(&self, live: &Value) -> Result<Set, String> {
        let la = live
            .str_at(&["metadata", "annotations", LAST_APPLIED])
            .filter(|s| !s.is_empty())
            .ok_or("no last applied annotation")?;
        typed::validate(self.schema, self.type_ref, live, false).map_err(|e| e.to_string())?;
        let last = crate::value::json::parse_str(la).map_err(|e| e.to_string())?;
        if last.str_at(&["apiVersion"]) != Some(self.api_version.as_str()) {
            return Err("expected version of last applied to match live object".into());
        }
        typed::validate(self.schema, self.type_ref, &last, false).map_err(|e| e.to_string())?;
        let set =
            typed::to_field_set(self.schema, self.type_ref, &last).map_err(|e| e.to_string())?;
        let cmp =
            typed::compare(self.schema, self.type_ref, &last, live).map_err(|e| e.to_string())?;
        Ok(set
            .difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed))
    }

    fn skip_non_applied(
        &self,
        live: &Value,
        patch: &Value,
        m: Managed,
        manager: &str,
        force: bool,
    ) -> Step {
        if m.fields.is_empty() {
            let mut empty = Map::new();
            for k in ["apiVersion", "kind"] {
                if let Some(v) = patch.as_map().and_then(|p| p.get(k)) {
                    empty.insert(k, v.clone());
                }
            }
            let out = self
                .cap_managers(
                    &Value::Map(empty),
                    Cow::Borrowed(live),
                    m,
                    BEFORE_FIRST_APPLY,
                )
                .map_err(|e| {
                    ManagerError::Failed(format!(
                        "failed to create manager for existing fields: {e}"
                    ))
                })?;
            return self.timestamps_apply(&out.object, patch, out.managed, manager, force, true);
        }
        self.timestamps_apply(live, patch, m, manager, force, false)
    }

    fn timestamps_apply(
        &self,
        live: &Value,
        patch: &Value,
        m: Managed,
        manager: &str,
        force: bool,
        synthesized: bool,
    ) -> Step {
        let name = if manager.is_empty() {
            "unknown"
        } else {
            manager
        };
        let key = identity(name, Operation::Apply, &self.api_version, &self.subresource);
        // Callers have the managers they passed in; only a synthesized state is new to them.
        let before = (self.options.capture_before && synthesized).then(|| m.clone());
        let mut st = self.strip_apply(live, patch, m, &key, force)?;
        let (object, changed) = match st.object {
            Some(obj) => {
                st.managed.times.insert(key, Some(self.now));
                (obj, true)
            }
            None => (without_managed_fields(live), false),
        };
        Ok(Outcome {
            object,
            managed: st.managed,
            changed,
            comparison: Some(st.comparison),
            before,
            applier_change: st.applier_change,
            valid: st.valid,
        })
    }

    fn strip_apply(
        &self,
        live: &Value,
        patch: &Value,
        mut m: Managed,
        key: &str,
        force: bool,
    ) -> Result<Stripped, ManagerError> {
        if patch.str_at(&["apiVersion"]) != Some(self.api_version.as_str()) {
            return Err(ManagerError::BadRequest(format!(
                "Incorrect version specified in apply patch. Specified patch version: {}, expected: {}",
                patch.str_at(&["apiVersion"]).unwrap_or(""),
                self.api_version
            )));
        }
        if patch
            .get_path(&["metadata", "managedFields"])
            .is_some_and(|v| !v.is_null())
        {
            return Err(ManagerError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        // One walk when it can (the live object must be known valid); else the reference's
        // three steps, which also produce its exact errors.
        let walk = match self.options.prepared {
            Some(p) => typed::apply_walk_indexed(self.schema, self.type_ref, live, &p.lists, patch),
            None => (self.known_valid(live)
                || typed::validate(self.schema, self.type_ref, live, true).is_ok())
            .then(|| typed::apply_walk(self.schema, self.type_ref, live, patch))
            .flatten(),
        };
        let previous = m.fields.get(key).map(|vs| vs.set.clone());
        let fields = std::mem::take(&mut m.fields);
        let applied = match walk {
            Some(walk) => self.updater().apply_walked(
                live,
                patch,
                walk,
                &self.api_version,
                fields,
                key,
                force,
            ),
            None => {
                let set = typed::validate_to_field_set(self.schema, self.type_ref, patch).map_err(
                    |e| {
                        ManagerError::Failed(format!(
                            "failed to convert patch object to smd typed: {e}"
                        ))
                    },
                )?;
                if self.options.prepared.is_none() {
                    self.check(live, "live object", true)?;
                }
                self.updater().apply_with_set(
                    live,
                    patch,
                    set,
                    &self.api_version,
                    fields,
                    key,
                    force,
                )
            }
        }
        .map_err(|e| match e {
            UpdateError::Conflicts(c) => ManagerError::Conflicts(c),
            UpdateError::Failed(s) => ManagerError::Failed(s),
        })?;
        m.fields = applied.managers;
        if let Some(o) = &applied.object {
            if o.as_map().is_none() {
                return Err(ManagerError::Failed(
                    "failed to convert new typed object to object".into(),
                ));
            }
        }
        strip_fields(&mut m, key);
        // The change the updater saw was before stripping; the stored entry is after.
        let change = applied.applier_change.map(|mut c| {
            c.gained.remove_all(strip_set());
            if let Some(prev) = &previous {
                c.dropped.union_with(strip_set().intersection(prev));
            }
            c
        });
        Ok(Stripped {
            object: applied.object,
            managed: m,
            comparison: applied.comparison,
            applier_change: change,
            valid: applied.valid,
        })
    }

    /// A non-apply write (create, update, patch) of `new_obj` by `manager` (`FieldManager.Update`).
    /// `new_entries` are the `managedFields` the request carried, if any (`Some(empty)` resets).
    pub fn update(
        &self,
        live: &Value,
        new_obj: &Value,
        live_entries: &[ManagedFieldsEntry],
        new_entries: Option<&[ManagedFieldsEntry]>,
        manager: &str,
    ) -> Result<ApplyOutcome, ManagerError> {
        let decode = |e: &[ManagedFieldsEntry]| decode_with(e, self.options.fields);
        let decode_or_empty = |e: &[ManagedFieldsEntry]| decode(e).unwrap_or_default();
        let reset = new_entries.is_some_and(|e| {
            e.is_empty() || (e.len() == 1 && e[0] == ManagedFieldsEntry::default())
        });
        let m = if !self.subresource.is_empty() {
            decode_or_empty(live_entries)
        } else if reset {
            Managed::default()
        } else {
            match new_entries.map(decode) {
                Some(Ok(dm)) if !dm.fields.is_empty() => dm,
                _ => decode_or_empty(live_entries),
            }
        };
        let new_obj = without_managed_fields(new_obj);
        // Only an update whose managers are tracked validates the new object.
        let out = if m.fields.is_empty()
            && live
                .str_at(&["metadata", "uid"])
                .is_some_and(|u| !u.is_empty())
        {
            // An existing object whose tracking stopped: updates do not restart it.
            Outcome {
                object: new_obj,
                managed: m,
                changed: true,
                comparison: None,
                before: None,
                applier_change: None,
                valid: false,
            }
        } else {
            let out = self.cap_managers(live, Cow::Owned(new_obj), m, manager)?;
            self.remember_reconciled(&out.managed);
            out
        };
        Ok(ApplyOutcome {
            validated: out.valid,
            changed: !out.object.strict_eq(live),
            entries: encode_with(&out.managed, self.options.fields),
            object: out.object,
        })
    }

    /// `new_obj` is taken as it comes: an owned object becomes the result without a copy.
    fn cap_managers(
        &self,
        live: &Value,
        new_obj: Cow<'_, Value>,
        m: Managed,
        manager: &str,
    ) -> Step {
        let name = if manager.is_empty() {
            "unknown"
        } else {
            manager
        };
        let key = identity(
            name,
            Operation::Update,
            &self.api_version,
            &self.subresource,
        );
        let mut out = self.timestamps_update(live, new_obj, m, &key)?;
        cap_update_managers(&mut out.managed, MAX_UPDATE_MANAGERS);
        Ok(out)
    }

    fn timestamps_update(
        &self,
        live: &Value,
        new_obj: Cow<'_, Value>,
        mut m: Managed,
        key: &str,
    ) -> Step {
        // Both must be valid, and a new object's error is the one reported. The live object
        // is checked first (usually known valid already), so that the new one need only be
        // walked where it differs from it.
        match self.check(live, "live object", true) {
            Ok(()) => typed::validate_beside(self.schema, self.type_ref, &new_obj, live)
                .map_err(|e| invalid("new object", e))?,
            Err(live_err) => {
                self.check(&new_obj, "new object", true)?;
                return Err(live_err);
            }
        }
        m.fields = self
            .updater()
            .update(
                live,
                &new_obj,
                &self.api_version,
                std::mem::take(&mut m.fields),
                CURRENT_OPERATION,
            )
            .map_err(|e| ManagerError::Failed(format!("failed to update ManagedFields: {e}")))?;
        strip_fields(&mut m, CURRENT_OPERATION);
        if let Some(vs) = m.fields.remove(CURRENT_OPERATION) {
            let merged = match m.fields.get(key) {
                Some(prev) => VersionedSet {
                    set: vs.set.union(&prev.set).into(),
                    ..vs
                },
                None => vs,
            };
            m.fields.insert(key.to_string(), merged);
            m.times.insert(key.to_string(), Some(self.now));
        }
        Ok(Outcome {
            object: new_obj.into_owned(),
            managed: m,
            changed: true,
            comparison: None,
            before: None,
            applier_change: None,
            // Checked above.
            valid: true,
        })
    }
}

/// The error for an object that fails validation (`what`: "new object", "live object", ...).
fn invalid(what: &str, e: typed::ValidationErrors) -> ManagerError {
    ManagerError::Failed(format!("failed to convert {what} to smd typed: {e}"))
}

fn strip_fields(m: &mut Managed, key: &str) {
    let Some(vs) = m.fields.get_mut(key) else {
        return;
    };
    // The acting manager's set was just written, so this does not copy.
    Arc::make_mut(&mut vs.set).remove_all(strip_set());
    if vs.set.is_empty() {
        m.fields.remove(key);
    }
}

/// kube-apiserver's `capUpdateManagers`: folds the oldest `Update` entries into
/// `ancient-changes` buckets (per API version) until at most `max` remain.
pub fn cap_update_managers(m: &mut Managed, max: usize) {
    let mut updaters: Vec<String> = m
        .fields
        .iter()
        .filter(|(_, vs)| !vs.applied)
        .map(|(k, _)| k.clone())
        .collect();
    if updaters.len() <= max {
        return;
    }
    let secs = |k: &str| m.times.get(k).copied().flatten().unwrap_or(0);
    updaters.sort_by(|a, b| secs(a).cmp(&secs(b)).then_with(|| a.cmp(b)));
    let mut first_of_version: BTreeMap<String, String> = BTreeMap::new();
    let mut length = updaters.len();
    for key in &updaters {
        if length <= max {
            break;
        }
        let Some(vs) = m.fields.get(key).cloned() else {
            continue;
        };
        let t = m.times.get(key).copied().flatten();
        let version = vs.api_version.clone();
        let bucket = identity(ANCIENT_CHANGES, Operation::Update, &version, "");
        if let Some(first) = first_of_version.get(&version) {
            if !m.fields.contains_key(&bucket) {
                if let Some(s) = m.fields.remove(first) {
                    m.fields.insert(bucket.clone(), s);
                }
            }
            let prev = m
                .fields
                .get(&bucket)
                .map(|b| b.set.clone())
                .unwrap_or_default();
            m.fields.insert(
                bucket.clone(),
                VersionedSet {
                    set: vs.set.union(&prev).into(),
                    api_version: vs.api_version.clone(),
                    applied: vs.applied,
                },
            );
            m.fields.remove(key);
            length -= 1;
            m.times.insert(bucket, t);
        } else {
            first_of_version.insert(version, key.clone());
        }
    }
}

/// The annotation value kubectl's server-side apply writes: the applied config without the
/// annotation, as `json.Encoder` prints it (HTML-escaped, sorted keys, trailing newline).
fn build_last_applied(patch: &Value) -> String {
    let mut obj = patch.clone();
    if let Some(ann) = obj
        .as_map_mut()
        .and_then(|m| m.get_mut("metadata"))
        .and_then(Value::as_map_mut)
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_map_mut)
    {
        ann.remove(LAST_APPLIED);
    }
    let mut s = crate::value::json::to_string(&obj, Style::GO);
    s.push('\n');
    s
}

fn set_last_applied(obj: &mut Value, value: String) {
    let Some(root) = obj.as_map_mut() else { return };
    if !matches!(root.get("metadata"), Some(Value::Map(_))) {
        root.insert("metadata", Value::Map(Map::new()));
    }
    let md = root
        .get_mut("metadata")
        .and_then(Value::as_map_mut)
        .expect("metadata map");
    let mut ann = match md.get("annotations") {
        Some(Value::Map(a)) => a.clone(),
        _ => Map::new(),
    };
    ann.insert(LAST_APPLIED, Value::from(value.as_str()));
    let total: usize = ann
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        ann.remove(LAST_APPLIED);
    }
    md.insert("annotations", Value::Map(ann));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_without_managed_fields_is_the_object_with_them_removed() {
        let objects = [
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}],"labels":{"x":"y"}},"data":{"k":"v"}}"#,
            r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#,
            r#"{"metadata":{"managedFields":[]}}"#,
            r#"{"metadata":"not a map","managedFields":[1]}"#,
            r#"{"kind":"X"}"#,
            r#"[{"metadata":{"managedFields":[]}}]"#,
            r#""text""#,
        ];
        for text in objects {
            let v = crate::value::json::parse(text.as_bytes()).expect("test JSON");
            let mut expected = v.clone();
            remove_managed_fields(&mut expected);
            // Equal, and in the same order.
            let got = without_managed_fields(&v);
            assert_eq!(got, expected, "{text}");
            assert_eq!(format!("{got:?}"), format!("{expected:?}"), "{text}");
        }
    }
}
