//! Recreation: a release object whose update the server would refuse (an immutable field, a CEL
//! transition rule) is deleted and created again — when asked. Per object
//! (`fieldguard.dev/recreate: if-immutable|always`; werf's `werf.io/delete-policy:
//! before-creation-if-immutable`) or per run (`--recreate-on-immutable`); Jobs that are not hooks
//! recreate on an immutable change by default, as nelm does. The prediction shows it with its
//! blast radius; objects whose recreation destroys data or a stateful set's pods (StatefulSet,
//! PersistentVolumeClaim, PersistentVolume) are recreated only when named on the object itself.

use crate::check::{self, Target};
use crate::predict::Verdict;
use crate::value::Value;

pub use crate::manifest::directives::{Policy, RECREATE_ANNOTATION};

/// The object's own policy; an annotation value fieldguard does not know is an error (refused
/// already when the manifests were resolved).
pub fn own_policy(obj: &Value) -> Result<Option<Policy>, String> {
    crate::manifest::directives::recreate_policy(obj).map_err(|p| p.message)
}

/// What recreating an object of this kind destroys; `true`: only when named on the object.
fn blast_radius(group: &str, kind: &str) -> (&'static str, bool) {
    match (group, kind) {
        ("apps", "StatefulSet") => (
            "its pods are deleted and created again from ordinal 0, not rolled; its claims stay",
            true,
        ),
        ("", "PersistentVolumeClaim") => (
            "the claim's volume is released: with reclaim policy Delete, its data is gone",
            true,
        ),
        ("", "PersistentVolume") => (
            "the volume object is deleted: with reclaim policy Delete, the storage behind it too",
            true,
        ),
        ("batch", "Job") => ("its pods are deleted and the Job runs again", false),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => (
            "its pods are deleted at once and created again, not rolled",
            false,
        ),
        ("", "Service") => (
            "its cluster IP is allocated anew; it has no endpoints while it is away",
            false,
        ),
        _ => (
            "its uid changes; objects it owns are garbage-collected",
            false,
        ),
    }
}

/// The decision for one release object.
#[derive(Clone, Debug)]
pub enum Decision {
    /// Applied as usual.
    Apply,
    /// Deleted (background propagation, waited for), then created: the prediction of the
    /// creation, with a note saying why and what it destroys.
    Recreate(Box<check::ObjectReport>),
}

/// Decides for `t` (`predicted`: the prediction of its update) and explains a recreation that
/// policy asks for but the kind does not allow without naming the object.
pub fn decide(
    t: &Target,
    live: Option<&Value>,
    predicted: &mut check::ObjectReport,
    run_wide: bool,
    opts: &check::Options,
) -> Result<Decision, String> {
    let own = own_policy(&t.doc.object)?;
    let gvk = &t.info.gvk;
    let job = gvk.group == "batch" && gvk.kind == "Job";
    let policy = match own {
        Some(p) => p,
        None if run_wide || job => Policy::IfImmutable,
        None => return Ok(Decision::Apply),
    };
    if live.is_none() {
        return Ok(Decision::Apply);
    }
    let why = match policy {
        Policy::Always => format!("{RECREATE_ANNOTATION}: always"),
        Policy::IfImmutable => {
            if predicted.verdict != Verdict::Rejected {
                return Ok(Decision::Apply);
            }
            format!(
                "the server refuses the update ({})",
                predicted
                    .rejections
                    .first()
                    .map(|e| e.to_string())
                    .or_else(|| predicted.message.clone())
                    .unwrap_or_else(|| "422".into())
            )
        }
    };
    let (blast, explicit_only) = blast_radius(&gvk.group, &gvk.kind);
    if explicit_only && own.is_none() {
        predicted.notes.insert(
            0,
            format!(
                "not recreated: recreating a {} destroys what it holds ({blast}); name it with {RECREATE_ANNOTATION}: if-immutable on the object to allow it",
                gvk.kind
            ),
        );
        return Ok(Decision::Apply);
    }
    let mut created = check::check_one(t, None, opts);
    if matches!(created.verdict, Verdict::Rejected | Verdict::Invalid) {
        // Not even a creation would be accepted: the refusal stands.
        return Ok(Decision::Apply);
    }
    created.notes.insert(
        0,
        format!(
            "recreated: {why}; deleted (background propagation, as Helm deletes; waited for until it is gone), then created. Blast radius: {blast}"
        ),
    );
    Ok(Decision::Recreate(Box::new(created)))
}
