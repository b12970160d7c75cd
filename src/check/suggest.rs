//! Concrete ways out of a conflict, chosen from who owns the field and why.

use super::{Options, REDACTED};
use crate::live::ObjectRef;
use crate::predict::{FieldConflict, Owner};
use crate::value::{Value, json};
use serde::Serialize;

/// The kind of fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Remove the field from the manifest (someone else rightly manages it).
    DropField,
    /// Set the manifest to the live value: equal values are shared, not conflicting.
    ShareValue,
    /// Take the field over from these managers only (`--force-against`).
    ForceSelective,
    /// Take every conflicting field over (`--force-conflicts`).
    ForceAll,
    /// Move ownership to this manager for good (the other applier stops setting it).
    TransferOwnership,
}

/// One way to resolve a conflict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Suggestion {
    pub action: Action,
    pub message: String,
}

/// Managers that edit by hand or through legacy client-side paths: overwriting them is usually
/// what the user wants.
pub fn is_stray(manager: &str) -> bool {
    matches!(
        manager,
        "kubectl-edit"
            | "kubectl-client-side-apply"
            | "before-first-apply"
            | "kubectl-patch"
            | "kubectl-set"
            | "kubectl-label"
            | "kubectl-annotate"
            | "kubectl"
    )
}

/// Owners that scale the object: an autoscaler, or anyone writing through `/scale`.
fn is_scaler(o: &Owner) -> bool {
    let m = o.manager.to_ascii_lowercase();
    o.subresource == "scale"
        || m == "kube-controller-manager"
        || m.contains("autoscaler")
        || m.contains("keda")
        || m.contains("kubectl-scale")
}

fn is_vpa(o: &Owner) -> bool {
    let m = o.manager.to_ascii_lowercase();
    m.contains("vpa") || m.contains("vertical-pod-autoscaler")
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) if s.as_str() == REDACTED => REDACTED.to_string(),
        _ => json::to_string(v, json::Style::PLAIN),
    }
}

/// Suggestions for one conflict, best first.
pub fn for_conflict(c: &FieldConflict, object: &ObjectRef, opts: &Options) -> Vec<Suggestion> {
    let mut out = Vec::new();
    let field = c.path.trim_start_matches('.');
    let names: Vec<&str> = c.owners.iter().map(|o| o.manager.as_str()).collect();
    let owners = names.join(", ");
    let replicas = c.path == ".spec.replicas";
    if replicas && c.owners.iter().any(is_scaler) {
        out.push(Suggestion {
            action: Action::DropField,
            message: format!(
                "remove `{field}` from the manifest: {owners} scales {} (an autoscaler or \
                 `kubectl scale`); setting it in the manifest resets the scale on every deploy",
                object.kind
            ),
        });
        return out;
    }
    if c.path.contains(".resources") && c.owners.iter().any(is_vpa) {
        out.push(Suggestion {
            action: Action::DropField,
            message: format!(
                "remove `{field}` from the manifest: {owners} (a vertical autoscaler) sets it"
            ),
        });
        return out;
    }
    let strays: Vec<&str> = names.iter().copied().filter(|m| is_stray(m)).collect();
    if !strays.is_empty() && strays.len() == names.len() {
        let pattern = strays.join("|");
        out.push(Suggestion {
            action: Action::ForceSelective,
            message: format!(
                "take it over from {owners} (a manual or legacy client-side change): \
                 --force-against '{pattern}' (only from them: a conflict with anyone else still fails the apply)"
            ),
        });
    }
    if let Some(cur) = c.current.as_ref().filter(|v| v.as_str() != Some(REDACTED)) {
        out.push(Suggestion {
            action: Action::ShareValue,
            message: format!(
                "set `{field}` to the live value {} to share ownership with {owners} \
                 (equal values do not conflict)",
                show(cur)
            ),
        });
    }
    let appliers = c.owners.iter().any(|o| o.operation == "Apply");
    if appliers {
        out.push(Suggestion {
            action: Action::TransferOwnership,
            message: format!(
                "if {} should own it from now on, apply once with --force-conflicts, then \
                 remove `{field}` from {owners}'s configuration; otherwise remove it from this \
                 manifest",
                opts.field_manager
            ),
        });
    } else if strays.is_empty() {
        out.push(Suggestion {
            action: Action::ForceAll,
            message: format!(
                "a controller ({owners}) writes this field: remove it from the manifest, or \
                 force to take it over (the controller may write it back)"
            ),
        });
    }
    out
}
