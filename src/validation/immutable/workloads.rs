//! Workloads: Deployments, ReplicaSets, DaemonSets, StatefulSets and ControllerRevisions
//! (`pkg/apis/apps/validation/validation.go`) and Jobs (`pkg/apis/batch/validation/validation.go`
//! and the Job strategy's options); Pods are [`super::pods`]. CronJobs have no immutable spec
//! field (`ValidateCronJobUpdate`): their `jobTemplate` may change.

use super::{FIELD_IMMUTABLE, Rule, Update, at, forbidden, invalid, render, same};
use crate::validation::FieldError;
use crate::value::{Map, Value};

pub static RULES: [Rule; 4] = [
    Rule {
        group: "apps",
        kinds: &["Deployment", "ReplicaSet", "DaemonSet"],
        versions: &["v1"],
        source: "ValidateDeploymentUpdate, ValidateReplicaSetUpdate, ValidateDaemonSetUpdate (pkg/apis/apps/validation; the selector check moved there from the registry strategies in 1.34)",
        refuses: "spec.selector changed",
        check: selector,
    },
    Rule {
        group: "apps",
        kinds: &["StatefulSet"],
        versions: &["v1"],
        source: "ValidateStatefulSetUpdate (pkg/apis/apps/validation)",
        refuses: "any spec field other than replicas, ordinals, template, updateStrategy, revisionHistoryLimit, persistentVolumeClaimRetentionPolicy and minReadySeconds changed (selector, serviceName, volumeClaimTemplates, podManagementPolicy, ...)",
        check: stateful_set,
    },
    Rule {
        group: "batch",
        kinds: &["Job"],
        versions: &["v1"],
        source: "ValidateJobSpecUpdate, validatePodTemplateUpdate, validateCompletions (pkg/apis/batch/validation), options from the Job strategy (pkg/registry/batch/job/strategy.go)",
        refuses: "spec.selector, spec.template (but its labels, annotations, nodeSelector, tolerations, schedulingGates and node affinity while the Job is suspended and never started), completionMode, podFailurePolicy, backoffLimitPerIndex, managedBy, successPolicy changed; completions changed (an Indexed Job only together with parallelism)",
        check: job,
    },
    Rule {
        group: "apps",
        kinds: &["ControllerRevision"],
        versions: &["v1"],
        source: "ValidateControllerRevisionUpdate (pkg/apis/apps/validation)",
        refuses: "data changed (revision may)",
        check: controller_revision,
    },
];

fn selector(u: &Update) -> Vec<FieldError> {
    let path = ["spec", "selector"];
    if u.unchanged(&path) {
        return vec![];
    }
    vec![invalid(
        "spec.selector",
        &render::label_selector(u.new_at(&path)),
        FIELD_IMMUTABLE,
    )]
}

/// The spec without `keys`.
fn spec_without(v: &Value, keys: &[&str]) -> Value {
    let mut out = Map::new();
    if let Some(Value::Map(spec)) = at(v, &["spec"]) {
        for (k, x) in spec.iter() {
            if !keys.contains(&k.as_ref()) {
                out.insert(k.clone(), x.clone());
            }
        }
    }
    Value::Map(out)
}

/// A StatefulSet's claim templates as the server stores them: `volumeClaimTemplates` is an
/// atomic list, so the merged object has the manifest's templates, which the server defaults
/// (`SetDefaults_StatefulSet`: volumeMode `Filesystem`, status phase `Pending`) before it
/// compares; the stored ones also carry `apiVersion: v1` and `kind: PersistentVolumeClaim`.
fn claim_templates_defaulted(spec: &mut Value) {
    let Some(Value::List(templates)) = spec
        .as_map_mut()
        .and_then(|m| m.get_mut("volumeClaimTemplates"))
    else {
        return;
    };
    for t in templates.iter_mut() {
        let Some(m) = t.as_map_mut() else { continue };
        for (k, default) in [("apiVersion", "v1"), ("kind", "PersistentVolumeClaim")] {
            if m.get(k).is_none() {
                m.insert(k, Value::from(default));
            }
        }
        if m.get("status")
            .is_none_or(|s| s.as_map().is_none_or(Map::is_empty))
        {
            let mut status = Map::new();
            status.insert("phase", Value::from("Pending"));
            m.insert("status", Value::Map(status));
        }
        if let Some(Value::Map(spec)) = m.get_mut("spec")
            && spec.get("volumeMode").is_none()
        {
            spec.insert("volumeMode", Value::from("Filesystem"));
        }
    }
}

fn stateful_set(u: &Update) -> Vec<FieldError> {
    // Kubernetes 1.35 made revisionHistoryLimit updatable (the message names it since).
    let allowed = [
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
    ];
    let mut old = spec_without(u.old, &allowed);
    let mut new = spec_without(u.new, &allowed);
    claim_templates_defaulted(&mut old);
    claim_templates_defaulted(&mut new);
    if same(Some(&old), Some(&new)) {
        return vec![];
    }
    vec![forbidden(
        "spec",
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    )]
}

/// `*int32`, `*string` and the like as the server prints them (`null` when nil).
fn scalar_json(v: Option<&Value>) -> String {
    render::json(v.unwrap_or(&Value::Null))
}

fn job(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // validateCompletions (ElasticIndexedJob is on): an Indexed Job's completions may change
    // with its parallelism.
    let completions = ["spec", "completions"];
    if !u.unchanged(&completions) {
        let indexed = u.new_str(&["spec", "completionMode"]) == "Indexed";
        let new = u.new_at(&completions);
        if !indexed {
            errs.push(invalid(
                "spec.completions",
                &scalar_json(new),
                FIELD_IMMUTABLE,
            ));
        } else if let Some(n) = new
            && !same(Some(n), u.new_at(&["spec", "parallelism"]))
        {
            errs.push(invalid(
                "spec.completions",
                &scalar_json(Some(n)),
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    errs.extend(selector(u).into_iter().map(|mut e| {
        e.field = "spec.selector".into();
        e
    }));
    errs.extend(pod_template_update(u));
    // The policies print as their internal types (`*batch.PodFailurePolicy`, Go field names,
    // nil fields `null`), from the object as decoded.
    for (key, field, policy) in [
        ("completionMode", "spec.completionMode", None),
        (
            "podFailurePolicy",
            "spec.podFailurePolicy",
            Some("PodFailurePolicy"),
        ),
        ("backoffLimitPerIndex", "spec.backoffLimitPerIndex", None),
        ("managedBy", "spec.managedBy", None),
        ("successPolicy", "spec.successPolicy", Some("SuccessPolicy")),
    ] {
        let path = ["spec", key];
        if !u.unchanged(&path) {
            let value = match (policy, at(u.decoded, &path)) {
                (Some(t), Some(v)) => render::internal_of("batch", "batch.v1", t, v),
                (_, other) => scalar_json(other),
            };
            errs.push(invalid(field, &value, FIELD_IMMUTABLE));
        }
    }
    errs
}

/// `ValidateControllerRevisionUpdate`: `data` (a `runtime.RawExtension`: its raw JSON, as the
/// object's conversion wrote it, keys sorted) may not change; `revision` may.
fn controller_revision(u: &Update) -> Vec<FieldError> {
    let (old, new) = (u.old_at(&["data"]), u.new_at(&["data"]));
    let equal = match (old, new) {
        (None, None) => true,
        (Some(o), Some(n)) => crate::value::equals(o, n),
        _ => false,
    };
    if equal {
        return vec![];
    }
    vec![invalid(
        "data",
        &new.map_or_else(|| "null".to_string(), |n| render::json(&render::sorted(n))),
        FIELD_IMMUTABLE,
    )]
}

/// `validatePodTemplateUpdate` as 1.36 runs it. A suspended Job that has not started (or is
/// marked `Suspended`) and runs no Pods (`shouldAllowMutablePodTemplate`) may change its
/// template's scheduling directives (`MutableSchedulingDirectivesForSuspendedJobs`, beta,
/// on) and its containers' resources (`MutablePodResourcesForSuspendedJobs`, beta, on): then
/// anything else that changes is refused at `spec.template.spec` with the new pod spec.
/// Otherwise any change is refused at `spec.template` with the new template. Values print as
/// the internal types do, from the object as decoded.
fn pod_template_update(u: &Update) -> Vec<FieldError> {
    let template = ["spec", "template"];
    let suspended = matches!(u.old_at(&["spec", "suspend"]), Some(Value::Bool(true)));
    let never_started = u.old_at(&["status", "startTime"]).is_none();
    let marked_suspended = u
        .old_at(&["status", "conditions"])
        .and_then(Value::as_list)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.str_at(&["type"]) == Some("Suspended") && c.str_at(&["status"]) == Some("True")
            })
        });
    let active = matches!(u.old_at(&["status", "active"]), Some(Value::Int(n)) if *n != 0);
    let mutable = suspended && (never_started || marked_suspended) && !active;
    let new_template = u.new_at(&template).unwrap_or(&Value::Null);
    let decoded_template = at(u.decoded, &template).unwrap_or(&Value::Null);
    let old_template = match u.old_at(&template) {
        Some(t) if mutable => mutable_scheduling(t, new_template),
        other => other.cloned().unwrap_or(Value::Null),
    };
    if !mutable {
        if same(Some(&old_template), Some(new_template)) {
            return Vec::new();
        }
        return vec![invalid(
            "spec.template",
            &render::internal("PodTemplateSpec", decoded_template),
            FIELD_IMMUTABLE,
        )];
    }
    // Only the containers' resources may change: the old spec with the new resources of
    // each container that is still where it was, under the same name.
    let mut old_spec = at(&old_template, &["spec"]).cloned().unwrap_or(Value::Null);
    let new_spec = at(new_template, &["spec"]).unwrap_or(&Value::Null);
    for key in ["containers", "initContainers"] {
        let news = at(new_spec, &[key]).and_then(Value::as_list).unwrap_or(&[]);
        let olds = old_spec
            .as_map_mut()
            .and_then(|m| m.get_mut(key))
            .and_then(|l| match l {
                Value::List(items) => Some(items),
                _ => None,
            });
        if let Some(olds) = olds
            && olds.len() == news.len()
        {
            for (o, n) in olds.iter_mut().zip(news) {
                if o.str_at(&["name"]) == n.str_at(&["name"])
                    && let Some(om) = o.as_map_mut()
                {
                    match at(n, &["resources"]) {
                        Some(r) => {
                            om.insert("resources", r.clone());
                        }
                        None => {
                            om.remove("resources");
                        }
                    }
                }
            }
        }
    }
    if same(Some(&old_spec), Some(new_spec)) {
        return Vec::new();
    }
    vec![invalid(
        "spec.template.spec",
        &render::internal(
            "PodSpec",
            at(decoded_template, &["spec"]).unwrap_or(&Value::Null),
        ),
        FIELD_IMMUTABLE,
    )]
}

/// The old template with the new one's labels, annotations, nodeSelector, tolerations,
/// schedulingGates and node affinity (`AllowMutableSchedulingDirectives`).
fn mutable_scheduling(old: &Value, new: &Value) -> Value {
    let mut out = old.clone();
    let set = |m: &mut Map, k: &str, v: Option<&Value>| match v {
        Some(v) => {
            m.insert(k, v.clone());
        }
        None => {
            m.remove(k);
        }
    };
    if let Some(root) = out.as_map_mut() {
        if root.get("metadata").is_none() {
            root.insert("metadata", Value::Map(Map::new()));
        }
        if let Some(meta) = root.get_mut("metadata").and_then(Value::as_map_mut) {
            set(meta, "labels", at(new, &["metadata", "labels"]));
            set(meta, "annotations", at(new, &["metadata", "annotations"]));
        }
    }
    if let Some(spec) = out
        .as_map_mut()
        .and_then(|m| m.get_mut("spec"))
        .and_then(Value::as_map_mut)
    {
        for k in ["nodeSelector", "tolerations", "schedulingGates"] {
            set(spec, k, at(new, &["spec", k]));
        }
        let new_affinity = at(new, &["spec", "affinity"]);
        let node_affinity = at(new, &["spec", "affinity", "nodeAffinity"]);
        match (
            spec.get("affinity").filter(|a| !a.is_null()).is_some(),
            new_affinity,
        ) {
            // Cleared: allowed when the old one held node affinity only.
            (true, None) => {
                if let Some(Value::Map(a)) = spec.get_mut("affinity") {
                    a.remove("nodeAffinity");
                    if a.is_empty() {
                        spec.remove("affinity");
                    }
                }
            }
            (false, Some(_)) => {
                let mut a = Map::new();
                set(&mut a, "nodeAffinity", node_affinity);
                spec.insert("affinity", Value::Map(a));
            }
            (true, Some(_)) => {
                if let Some(Value::Map(a)) = spec.get_mut("affinity") {
                    set(a, "nodeAffinity", node_affinity);
                }
            }
            (false, None) => {}
        }
    }
    out
}
