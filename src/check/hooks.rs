//! Helm hooks in a prediction: which hooks an operation runs, in which phase, in the order
//! Helm 4 runs them (helm/helm `pkg/action/hooks.go`: a stable sort by weight, then name, over
//! hooks already in kind install order — the code, where the docs say weight, kind, name), and
//! what writing each will do. A hook recreated under `before-hook-creation` (the default) is a
//! creation, never a patch of the live hook.

use super::{ObjectReport, Options, Target, check_one};
use crate::manifest::hooks::Hook;
use crate::predict::Verdict;
use crate::value::Value;
use serde::Serialize;

/// Helm's kind order for installs (`releaseutil.InstallOrder`); other kinds come after, by name.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Sort key of a kind in install order (`lessByKind`: known kinds by rank, unknown ones last,
/// alphabetically).
pub fn kind_rank(kind: &str) -> (usize, String) {
    match INSTALL_ORDER.iter().position(|k| *k == kind) {
        Some(i) => (i, String::new()),
        None => (INSTALL_ORDER.len(), kind.to_string()),
    }
}

/// A release operation, as far as hooks go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Install,
    Upgrade,
    Rollback,
    Uninstall,
}

impl Operation {
    pub fn parse(s: &str) -> Result<Operation, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "install" => Ok(Operation::Install),
            "upgrade" => Ok(Operation::Upgrade),
            "rollback" => Ok(Operation::Rollback),
            "uninstall" | "delete" => Ok(Operation::Uninstall),
            other => Err(format!(
                "unknown operation {other:?}: install, upgrade, rollback or uninstall"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Install => "install",
            Operation::Upgrade => "upgrade",
            Operation::Rollback => "rollback",
            Operation::Uninstall => "uninstall",
        }
    }

    /// The hook events before and after the operation's objects.
    pub fn events(self) -> (&'static str, &'static str) {
        match self {
            Operation::Install => ("pre-install", "post-install"),
            Operation::Upgrade => ("pre-upgrade", "post-upgrade"),
            Operation::Rollback => ("pre-rollback", "post-rollback"),
            Operation::Uninstall => ("pre-delete", "post-delete"),
        }
    }
}

/// The items whose hook runs on `event`, in the order Helm 4 runs them (`items` in manifest
/// order; `of` reads an item's hook and target).
pub fn order<'h, T>(
    items: &'h [T],
    event: &str,
    of: impl Fn(&T) -> (&Hook, &Target),
) -> Vec<&'h T> {
    let mut out: Vec<&T> = items
        .iter()
        .filter(|i| of(i).0.events.iter().any(|e| e == event))
        .collect();
    out.sort_by_key(|i| kind_rank(&of(i).1.info.gvk.kind));
    out.sort_by(|a, b| {
        let (ha, ta) = of(a);
        let (hb, tb) = of(b);
        (ha.weight, &ta.object_ref.name).cmp(&(hb.weight, &tb.object_ref.name))
    });
    out
}

/// How a hook is written: the release's method.
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    /// Server-side apply without force: it can conflict with the live hook's owners.
    ServerSide,
    /// A create; `resource` (`jobs.batch`) names the type in "already exists".
    ClientSide { resource: &'a str },
}

/// What running the hook `t` in `event` will do (`nth`: its place in the phase), against the
/// live hook object `live`. Hooks are written without force, whatever the run's policy.
pub fn predict(
    t: &Target,
    hook: &Hook,
    live: Option<&Value>,
    opts: &Options,
    write: Write,
    event: &str,
    nth: (usize, usize),
) -> ObjectReport {
    let is_crd = t.info.gvk.kind == "CustomResourceDefinition";
    let recreated = hook.recreated() && !is_crd;
    let unforced = Options {
        force: super::Force::None,
        ..opts.clone()
    };
    let mut o = check_one(t, if recreated { None } else { live }, &unforced);
    let how = match (write, recreated, live.is_some()) {
        (_, _, false) => "created".to_string(),
        (_, true, true) => {
            "the live one is deleted (before-hook-creation), then this one is created".into()
        }
        (Write::ServerSide, false, true) => {
            "applied onto the live one (no before-hook-creation): server-side without force, so it can conflict".into()
        }
        (Write::ClientSide { resource }, false, true) => {
            o.verdict = Verdict::Rejected;
            let m = format!("{resource} {:?} already exists", t.object_ref.name);
            o.message = Some(m.clone());
            format!("a create (client-side), refused: the live one is in the way ({m})")
        }
    };
    o.notes.insert(
        0,
        format!(
            "{event} hook, {} of {} (weight {}): {how}",
            nth.0, nth.1, hook.weight
        ),
    );
    o.hook = Some(hook.clone());
    o.hook_event = Some(event.to_string());
    o
}

/// Why a hook of the manifests does not run in `op`, or `None` when it does.
pub fn not_run(hook: &Hook, op: Operation) -> Option<String> {
    let (pre, post) = op.events();
    if !hook.unknown_events.is_empty() {
        return Some(format!(
            "unknown event(s) {}: Helm 4 drops the document, it never runs",
            hook.unknown_events.join(", ")
        ));
    }
    if hook.events.iter().any(|e| e == pre || e == post) {
        return None;
    }
    Some(if hook.events.is_empty() {
        "no event Helm knows: never runs".to_string()
    } else {
        format!("runs on {}, not on {}", hook.events.join(", "), op.as_str())
    })
}
