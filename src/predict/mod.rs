//! Predictions with explanations: what a server-side apply will do and why. Given the live object
//! (with its managedFields), the manifest, the field manager and a force policy, reports the
//! conflicts (with owners and both values), the fields that become shared, those taken over
//! under force, those removed, and those the applier dropped that stay because others own them.

mod explain;
mod lookup;

pub use lookup::value_at;

use crate::fieldpath::{Path, Set};
use crate::managedfields::{
    FieldManager, Identity, Managed, ManagedFieldsEntry, ManagerError, ManagerOptions, Outcome,
    Prepared, Time, conflict_message, conflict_status, encode, parse_identity,
};
use crate::merge::Conflicts;
use crate::schema::{Schema, TypeRef};
use crate::validation::FieldError;
use crate::value::Value;
use std::collections::BTreeMap;

/// Whose fields an apply may take over.
pub enum ForcePolicy<'a> {
    /// Never (the apply fails on any conflict).
    None,
    /// Always (`--force-conflicts`).
    All,
    /// Only from managers the predicate accepts; any other conflict fails the apply.
    Selective(&'a dyn Fn(&Identity) -> bool),
}

/// One apply to predict.
pub struct ApplyRequest<'a> {
    pub schema: &'a Schema,
    pub type_ref: &'a TypeRef,
    /// The stored object, prepared ([`Prepared::new`]); `None` for a create.
    pub live: Option<&'a Prepared>,
    /// The manifest (must not contain managedFields).
    pub config: &'a Value,
    pub manager: &'a str,
    pub force: ForcePolicy<'a>,
    /// `""` for the main resource, or `status`, `scale`, ...
    pub subresource: &'a str,
    /// Fields the endpoint resets, per API version (e.g. `status` on the main resource).
    pub reset_fields: &'a BTreeMap<String, Set>,
    /// Time to stamp on entries the apply touches.
    pub now: Time,
    /// A custom resource's structural schema: the server fills its defaults into what it
    /// stores ([`crate::validation::defaults`]). `None` for built-in kinds, which are
    /// defaulted by their type's name ([`crate::defaulting`]).
    pub structural: Option<&'a crate::validation::Structural>,
}

/// An owner of a field.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub manager: String,
    pub operation: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// Last change by this manager (RFC 3339), if recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// A field another manager owns that the apply changes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FieldConflict {
    /// Printed like kube-apiserver prints it.
    pub path: String,
    #[serde(skip)]
    pub path_elements: Path,
    pub owners: Vec<Owner>,
    /// Live value (`None`: the field does not exist yet, the owner's claim is stale).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<Value>,
    /// The manifest's value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed: Option<Value>,
    /// True if the force policy takes this field over.
    pub forced: bool,
}

/// A field and the managers that own it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OwnedField {
    pub path: String,
    #[serde(skip)]
    pub path_elements: Path,
    pub owners: Vec<Owner>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// What the apply does.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The object does not exist and will be created.
    Created,
    /// The object changes.
    Configured,
    /// Only `metadata.managedFields` changes (the applier's entry is added or its fields
    /// change, e.g. a manager claims values that are already there): the server still writes
    /// the object, and its resourceVersion moves.
    #[serde(rename = "ownership-only")]
    OwnershipOnly,
    /// Nothing changes: the server does not write.
    Unchanged,
    /// Rejected with 409: conflicts the force policy does not cover.
    Conflict,
    /// Rejected with 422: the object the apply would store fails validation (a custom
    /// resource's schema), though the manifest itself is fine.
    Rejected,
    /// Rejected for another reason (invalid manifest, ...).
    Invalid,
}

/// The prediction for one object.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Prediction {
    pub verdict: Verdict,
    /// Conflicts that fail the apply (verdict `conflict`).
    pub conflicts: Vec<FieldConflict>,
    /// Conflicts the force policy takes over (the previous owners lose the field).
    pub taken_over: Vec<FieldConflict>,
    /// Fields the applier newly co-owns because it sets them to their current value.
    pub shared: Vec<OwnedField>,
    /// Fields the apply deletes (the applier dropped them and nobody else owns them).
    pub removed: Vec<OwnedField>,
    /// Fields the applier dropped that stay because other managers still own them.
    pub stuck: Vec<OwnedField>,
    /// kube-apiserver's 409 message, when rejected for conflicts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The 409 `Status` body, when rejected for conflicts.
    #[serde(skip)]
    pub status: Option<Value>,
    /// Why the request is invalid (verdict `invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The object after the apply (without managedFields), when it succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// A built-in kind's merged object as the apiserver validates it: defaulted, before its
    /// Go encoding drops empty lists and maps (`None`: the same as `object`).
    pub decoded: Option<Value>,
    /// The managed fields after the apply, when it succeeds ([`Prediction::managed_fields`]
    /// encodes them).
    #[serde(skip)]
    pub managed: Managed,
    /// True when the apply changes `metadata.managedFields` (an entry added, dropped, or its
    /// fields changed): the server then writes even if the object's contents stay the same.
    #[serde(skip)]
    pub ownership_changed: bool,
    /// Why the stored object would fail validation (verdict `rejected`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<FieldError>,
    /// Constraints of the type's schema fieldguard did not evaluate (e.g. CEL rules).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_evaluated: Vec<String>,
    /// What else the apply does that the verdict does not say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Prediction {
    fn invalid(error: String) -> Prediction {
        Prediction {
            verdict: Verdict::Invalid,
            conflicts: vec![],
            taken_over: vec![],
            shared: vec![],
            removed: vec![],
            stuck: vec![],
            message: None,
            status: None,
            error: Some(error),
            object: None,
            decoded: None,
            managed: Managed::default(),
            ownership_changed: false,
            rejections: Vec::new(),
            not_evaluated: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The apply refused with `422` because the object it would store fails validation:
    /// `errors` (already ratcheted), the server's message and `Status` body.
    pub fn reject(&mut self, kind: &str, group: &str, name: &str, errors: &[FieldError]) {
        self.verdict = Verdict::Rejected;
        self.message = Some(crate::validation::invalid_message(
            kind, group, name, errors,
        ));
        self.status = Some(crate::validation::invalid_status(kind, group, name, errors));
        self.rejections = errors.to_vec();
        self.object = None;
        self.taken_over.clear();
        self.shared.clear();
        self.removed.clear();
        self.stuck.clear();
        self.ownership_changed = false;
    }

    /// True when the server writes the object (its resourceVersion moves): it is created, its
    /// contents change, or only its managedFields do.
    pub fn writes(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Created | Verdict::Configured | Verdict::OwnershipOnly
        )
    }

    /// `metadata.managedFields` after the apply, as kube-apiserver would write them.
    pub fn managed_fields(&self) -> Vec<ManagedFieldsEntry> {
        encode(&self.managed)
    }
}

/// The group/version of an object.
fn api_version_of(v: &Value) -> &str {
    v.str_at(&["apiVersion"]).unwrap_or("")
}

/// Predicts an apply exactly as kube-apiserver would perform it, with explanations.
pub fn predict(req: &ApplyRequest) -> Prediction {
    let api_version = api_version_of(req.config).to_string();
    let kind = req.config.str_at(&["kind"]).unwrap_or("").to_string();
    let created;
    let nobody = Managed::default();
    let (live_obj, live_managed) = match req.live {
        Some(p) => (p.object(), p.managed()),
        None => {
            let mut m = crate::value::Map::new();
            m.insert("apiVersion", Value::from(api_version.as_str()));
            m.insert("kind", Value::from(kind.as_str()));
            created = Value::Map(m);
            (&created, &nobody)
        }
    };
    let fm = FieldManager {
        schema: req.schema,
        type_ref: req.type_ref,
        api_version,
        kind,
        subresource: req.subresource.to_string(),
        ignored: req.reset_fields,
        known_versions: None,
        now: req.now,
        options: ManagerOptions {
            prepared: req.live,
            capture_before: true,
            fields: None,
            validated: None,
        },
    };
    let first = fm.apply_managed(
        live_obj,
        req.config,
        live_managed.clone(),
        req.manager,
        false,
    );
    let (outcome, taken): (Result<Outcome, ManagerError>, Option<Conflicts>) = match first {
        Err(ManagerError::Conflicts(cs)) => {
            let allowed = match &req.force {
                ForcePolicy::None => false,
                ForcePolicy::All => true,
                ForcePolicy::Selective(ok) => {
                    cs.0.iter()
                        .all(|c| parse_identity(&c.manager).is_some_and(|id| ok(&id)))
                }
            };
            if allowed {
                (
                    fm.apply_managed(
                        live_obj,
                        req.config,
                        live_managed.clone(),
                        req.manager,
                        true,
                    ),
                    Some(cs),
                )
            } else {
                (Err(ManagerError::Conflicts(cs)), None)
            }
        }
        other => (other, None),
    };
    let ctx = explain::Context {
        req,
        live: live_obj,
        live_managed,
        exists: req.live.is_some(),
    };
    match outcome {
        Err(ManagerError::Conflicts(mut cs)) => {
            cs.sort();
            let mut p = Prediction::invalid(String::new());
            p.error = None;
            p.verdict = Verdict::Conflict;
            p.message = Some(conflict_message(&cs));
            p.status = Some(conflict_status(&cs));
            p.conflicts = ctx.conflicts(&cs, |id| match &req.force {
                ForcePolicy::Selective(ok) => ok(id),
                ForcePolicy::All => true,
                ForcePolicy::None => false,
            });
            p
        }
        Err(e) => Prediction::invalid(e.to_string()),
        Ok(mut out) => {
            // What the server stores; a change that only the stored form undoes is none, and
            // so is one that defaulting puts back (the live object was read defaulted).
            let stored = crate::typed::to_stored_form(req.schema, req.type_ref, &mut out.object);
            let mut decoded = None;
            let defaulted = match (req.structural, req.type_ref.named.as_deref()) {
                (Some(s), _) => crate::validation::defaults::apply(&mut out.object, s),
                // A built-in kind: defaulted, converted, through its Go type's encoding.
                (None, Some(name)) => {
                    let live = req.live.map(|_| live_obj);
                    let (changed, d) =
                        crate::defaulting::stored_object(name, &mut out.object, live);
                    decoded = d;
                    changed
                }
                (None, None) => false,
            };
            if (stored && out.changed || defaulted) && req.live.is_some() {
                out.changed = !crate::value::equals(live_obj, &out.object);
                // The server decodes the stored object with its defaults too: a live object
                // read without them (an old one in etcd, a hand-written snapshot) is compared
                // as the server sees it. (One read from the server is already so.)
                if out.changed
                    && defaulted
                    && req.structural.is_none()
                    && let Some(name) = req.type_ref.named.as_deref()
                {
                    let seen = crate::defaulting::as_decoded(name, live_obj);
                    out.changed = !crate::value::equals(&seen, &out.object);
                }
            }
            // An owned, empty ObjectMeta field the server does not serve may still be in its
            // stored bytes (when it was written through the storage version): then the server
            // rewrites the object though nothing it serves changes. Whether it is there, no
            // client can read — say so.
            let unserved = (!out.changed)
                .then_some(req.live)
                .flatten()
                .and_then(|live| {
                    live.managed().fields.iter().find_map(|(_, vs)| {
                        vs.set.paths().into_iter().find(|p| {
                            lookup::unserved_meta_field(req.schema, req.type_ref, live_obj, &p.0)
                        })
                    })
                });
            let mut p = ctx.success(out, taken);
            p.decoded = decoded;
            if let Some(path) = unserved {
                p.notes.push(format!(
                    "{path} is owned but not served (applied empty, e.g. `{{}}`): if it was written \
                     through the storage version, the server keeps it in its stored form and \
                     rewrites the object now (its resourceVersion moves) though nothing served \
                     changes"
                ));
            }
            p
        }
    }
}
