//! Pods (`ValidatePodUpdate`, `pkg/apis/core/validation/validation.go`): what a Pod's update
//! may change once it is created — its containers' images, a lower `activeDeadlineSeconds`,
//! added tolerations, removed scheduling gates and, while it is gated, added `nodeSelector`
//! keys and node affinity requirements — and the annotations only the kubelet writes.

use super::{Rule, Update, at, forbidden, invalid, render, same};
use crate::validation::FieldError;
use crate::value::{Map, Value};

pub static RULES: [Rule; 1] = [Rule {
    group: "",
    kinds: &["Pod"],
    versions: &[],
    source: "ValidatePodUpdate, ValidatePodSpecificAnnotationUpdates, ValidateContainerUpdates, validateOnlyAddedTolerations, validateOnlyDeletedSchedulingGates, validateNodeSelectorMutation, validateNodeAffinityMutation (pkg/apis/core/validation)",
    refuses: "mirror-pod and AppArmor annotations added, changed or removed; containers added or removed; spec changed other than container and init container images, activeDeadlineSeconds (set, or lowered), added tolerations, removed scheduling gates, terminationGracePeriodSeconds from negative to 1 and, while the Pod is gated, added nodeSelector keys and node affinity requirements (refused at spec with a diff of the internal pod specs)",
    check: pod,
}];

const POD_UPDATABLE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix`.
const APPARMOR_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `core.MirrorPodAnnotationKey`.
const MIRROR: &str = "kubernetes.io/config.mirror";

fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_list).unwrap_or(&[])
}

fn pod(u: &Update) -> Vec<FieldError> {
    let mut errs = annotation_updates(u);
    // ValidateContainerUpdates: the number of containers may not change (and then nothing
    // else is checked).
    for (key, field) in [
        ("containers", "spec.containers"),
        ("initContainers", "spec.initContainers"),
    ] {
        if list(u.old_at(&["spec", key])).len() != list(u.new_at(&["spec", key])).len() {
            errs.push(forbidden(
                field,
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
    }
    let deadline = ["spec", "activeDeadlineSeconds"];
    let int = |v: Option<&Value>| match v {
        Some(Value::Int(i)) => Some(*i),
        _ => None,
    };
    match (int(u.old_at(&deadline)), int(u.new_at(&deadline))) {
        (_, Some(n)) if n < 0 || n > i64::from(i32::MAX) => {
            errs.push(invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be between 0 and 2147483647, inclusive",
            ));
            return errs;
        }
        (Some(o), Some(n)) if o < n => {
            errs.push(invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (Some(_), None) => errs.push(invalid(
            "spec.activeDeadlineSeconds",
            "null",
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    // validateOnlyAddedTolerations: every old toleration is still there (its
    // tolerationSeconds may change).
    let tolerations = ["spec", "tolerations"];
    let new_tolerations = list(u.new_at(&tolerations));
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_map_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let kept = list(u.old_at(&tolerations)).iter().all(|o| {
        let o = without_seconds(o);
        new_tolerations
            .iter()
            .any(|n| same(Some(&o), Some(&without_seconds(n))))
    });
    if !kept {
        errs.push(forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    errs.extend(only_deleted_gates(u));
    if same(u.old_at(&["spec"]), u.new_at(&["spec"])) {
        return errs;
    }
    // The rest of the spec may not change.
    let old_spec = u
        .old_at(&["spec"])
        .cloned()
        .unwrap_or(Value::Map(Map::new()));
    let mut munged = munged_pod_spec(u);
    if !list(u.old_at(&["spec", "schedulingGates"])).is_empty() {
        errs.extend(gated_mutations(&old_spec, &mut munged));
    }
    if !same(Some(&old_spec), Some(&munged)) {
        // With a diff of the two internal specs (`diff.Diff(oldPod.Spec, mungedPodSpec)`).
        let diff = render::internal_diff("PodSpec", &old_spec, &munged);
        errs.push(forbidden("spec", &format!("{POD_UPDATABLE}\n{diff}")));
    }
    errs
}

/// `ValidatePodSpecificAnnotationUpdates`: the mirror-pod annotation and the deprecated
/// AppArmor ones may not be added, changed or removed.
fn annotation_updates(u: &Update) -> Vec<FieldError> {
    let annotations = |v: &Value| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = at(v, &["metadata", "annotations"])
            .and_then(Value::as_map)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.to_string(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    };
    let (old, new) = (annotations(u.old), annotations(u.new));
    let find = |l: &[(String, String)], k: &str| {
        l.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.to_string())
    };
    let field = |k: &str| format!("metadata.annotations[{k}]");
    let mut errs = Vec::new();
    for (k, v) in &old {
        if find(&new, k).as_ref() == Some(v) {
            continue;
        }
        if k.starts_with(APPARMOR_PREFIX) {
            errs.push(forbidden(
                &field(k),
                "may not remove or update AppArmor annotations",
            ));
        }
        if k == MIRROR {
            errs.push(forbidden(
                &field(k),
                "may not remove or update mirror pod annotation",
            ));
        }
    }
    for (k, _) in &new {
        if find(&old, k).is_some() {
            continue;
        }
        if k.starts_with(APPARMOR_PREFIX) {
            errs.push(forbidden(&field(k), "may not add AppArmor annotations"));
        }
        if k == MIRROR {
            errs.push(forbidden(&field(k), "may not add mirror pod annotation"));
        }
    }
    errs
}

/// `validateOnlyDeletedSchedulingGates`: a gate the old Pod has not, one error each, at its
/// (last) index in the new list.
fn only_deleted_gates(u: &Update) -> Vec<FieldError> {
    let name = |g: &Value| g.str_at(&["name"]).unwrap_or("").to_string();
    let old: Vec<String> = list(u.old_at(&["spec", "schedulingGates"]))
        .iter()
        .map(name)
        .collect();
    let mut added: Vec<(String, usize)> = Vec::new();
    for (i, g) in list(u.new_at(&["spec", "schedulingGates"]))
        .iter()
        .enumerate()
    {
        let n = name(g);
        added.retain(|(x, _)| *x != n);
        added.push((n, i));
    }
    added
        .into_iter()
        .filter(|(n, _)| !old.contains(n))
        .map(|(n, i)| {
            forbidden(
                &format!("spec.schedulingGates[{i}].name"),
                &format!("only deletion is allowed, but found new scheduling gate '{n}'"),
            )
        })
        .collect()
}

/// The new Pod spec (as decoded) with what may change taken from the old one.
fn munged_pod_spec(u: &Update) -> Value {
    let mut spec = at(u.decoded, &["spec"])
        .cloned()
        .unwrap_or(Value::Map(Map::new()));
    let Some(m) = spec.as_map_mut() else {
        return spec;
    };
    let set = |m: &mut Map, key: &str, v: Option<&Value>| match v {
        Some(v) => {
            m.insert(key, v.clone());
        }
        None => {
            m.remove(key);
        }
    };
    for key in ["containers", "initContainers"] {
        let old = list(u.old_at(&["spec", key]));
        // Go rebuilds the list by appending: an empty one is nil.
        if matches!(m.get(key), Some(Value::List(items)) if items.is_empty()) {
            m.remove(key);
        }
        if let Some(Value::List(items)) = m.get_mut(key) {
            for (n, o) in items.iter_mut().zip(old) {
                if let Some(c) = n.as_map_mut() {
                    set(c, "image", o.get_path(&["image"]).filter(|x| !x.is_null()));
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        set(m, key, u.old_at(&["spec", key]));
    }
    let grace = "terminationGracePeriodSeconds";
    if let (Some(Value::Int(o)), Some(Value::Int(1))) = (u.old_at(&["spec", grace]), m.get(grace))
        && *o < 0
    {
        m.insert(grace, Value::Int(*o));
    }
    spec
}

/// What a gated Pod (the old one has scheduling gates) may change: its `nodeSelector` may
/// gain keys (`validateNodeSelectorMutation`) and its node affinity gain requirements
/// (`validateNodeAffinityMutation`); either is then taken from the old spec into `munged`.
fn gated_mutations(old: &Value, munged: &mut Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = munged.as_map_mut() else {
        return errs;
    };
    let old_selector = at(old, &["nodeSelector"]);
    let new_selector = m.get("nodeSelector").filter(|x| !x.is_null()).cloned();
    if !same(new_selector.as_ref(), old_selector) {
        let kept = old_selector
            .and_then(Value::as_map)
            .into_iter()
            .flat_map(|o| o.iter())
            .all(|(k, v)| {
                new_selector
                    .as_ref()
                    .and_then(|n| n.get_path(&[k.as_str()]))
                    .is_some_and(|w| crate::value::equals(v, w))
            });
        if !kept {
            errs.push(invalid(
                "spec.nodeSelector",
                &new_selector
                    .as_ref()
                    .map_or_else(|| "null".into(), |n| render::json(&render::sorted(n))),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            ));
        }
        match old_selector {
            Some(o) => {
                m.insert("nodeSelector", o.clone());
            }
            None => {
                m.remove("nodeSelector");
            }
        }
    }
    let old_affinity = at(old, &["affinity"]);
    let old_na = at(old, &["affinity", "nodeAffinity"]).cloned();
    let affinity = m.get("affinity").filter(|x| !x.is_null()).cloned();
    let munged_na = affinity
        .as_ref()
        .and_then(|a| at(a, &["nodeAffinity"]))
        .cloned();
    if !same(old_na.as_ref(), munged_na.as_ref()) {
        errs.extend(node_affinity_mutation(munged_na.as_ref(), old_na.as_ref()));
        let with_node_affinity = |a: Option<&Value>, na: Option<Value>| {
            let mut a = a.and_then(Value::as_map).cloned().unwrap_or_default();
            match na {
                Some(na) => {
                    a.insert("nodeAffinity", na);
                }
                None => {
                    a.remove("nodeAffinity");
                }
            }
            Value::Map(a)
        };
        match (&affinity, &old_na) {
            (None, None) => {}
            (None, Some(_)) => {
                m.insert("affinity", with_node_affinity(None, old_na.clone()));
            }
            (Some(a), _)
                if old_affinity.is_none()
                    && at(a, &["podAntiAffinity"]).is_none()
                    && at(a, &["podAffinity"]).is_none() =>
            {
                m.remove("affinity");
            }
            (Some(a), _) => {
                m.insert("affinity", with_node_affinity(Some(a), old_na.clone()));
            }
        }
    }
    errs
}

const TERMS: &str =
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";

/// `validateNodeAffinityMutation`: the required node selector terms, when the old Pod has
/// some, keep their number and each only gains requirements.
fn node_affinity_mutation(new: Option<&Value>, old: Option<&Value>) -> Vec<FieldError> {
    let required = ["requiredDuringSchedulingIgnoredDuringExecution"];
    let Some(old_required) = old.and_then(|o| at(o, &required)) else {
        return Vec::new();
    };
    let old_terms = list(at(old_required, &["nodeSelectorTerms"]));
    let new_terms = list(
        new.and_then(|n| at(n, &required))
            .and_then(|r| at(r, &["nodeSelectorTerms"])),
    );
    let term = |t: &Value| {
        render::internal_value("NodeSelectorTerm", t).unwrap_or_else(|| render::sorted(t))
    };
    if !old_terms.is_empty() && old_terms.len() != new_terms.len() {
        let shown = if new_terms.is_empty() {
            "null".to_string()
        } else {
            render::json(&Value::List(new_terms.iter().map(term).collect()))
        };
        return vec![invalid(
            TERMS,
            &shown,
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        )];
    }
    let mut errs = Vec::new();
    for (i, (o, n)) in old_terms.iter().zip(new_terms).enumerate() {
        if !only_additions(n, o) {
            errs.push(invalid(
                &format!("{TERMS}[{i}]"),
                &render::json(&term(n)),
                "only additions are allowed (no mutations or deletions)",
            ));
        }
    }
    errs
}

/// `validateNodeSelectorTermHasOnlyAdditions`.
fn only_additions(new: &Value, old: &Value) -> bool {
    let reqs = |t: &Value, k: &str| list(at(t, &[k])).to_vec();
    let (oe, of) = (reqs(old, "matchExpressions"), reqs(old, "matchFields"));
    let (ne, nf) = (reqs(new, "matchExpressions"), reqs(new, "matchFields"));
    if oe.is_empty() && of.is_empty() && (!ne.is_empty() || !nf.is_empty()) {
        return false;
    }
    let prefix = |o: &[Value], n: &[Value]| {
        o.is_empty()
            || (n.len() >= o.len()
                && same(
                    Some(&Value::List(n[..o.len()].to_vec())),
                    Some(&Value::List(o.to_vec())),
                ))
    };
    prefix(&oe, &ne) && prefix(&of, &nf)
}
