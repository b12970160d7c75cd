//! Defaulting of built-in kinds: what kube-apiserver fills into an object before it validates
//! and stores it — written from Kubernetes 1.36's defaulters (`pkg/apis/*/v1/defaults.go` and
//! the generated walks that call them, `zz_generated.defaults.go`) — and judged by
//! kube-apiserver itself (`tests/real/builtin.rs`). The server runs them on the merged object of
//! every apply (the field manager's `Default` after the merge), so a field a manifest leaves
//! out is there in the stored object, owned by nobody; a prediction that compares the merged
//! object with the live one (which was read defaulted) must default the merged one too, or a
//! manifest that leaves out a defaulted field would look like a change.
//!
//! Go's checks are kept exactly: `== nil` (absent or `null`) for pointers, `== ""` (absent,
//! `null` or empty) for strings, `== 0` for plain integers. Custom resources are defaulted from
//! their structural schemas instead ([`crate::validation::defaults`]).
//!
//! Not done here: what a kind's registry strategy sets beyond defaulting (a Service's
//! allocated `clusterIP`s and IP families, a Job's generated selector, a Secret's `stringData`
//! folded into `data`; see [`stored`]), quantities' canonical form (`SetDefaults_ResourceList`
//! rounds up to milli-units and the server re-encodes them), and feature-gated defaults of
//! alpha features (off by default in 1.36).

mod pod;
pub mod shapes;
pub mod stored;

use crate::value::{Map, Str, Value};

/// What kube-apiserver stores of a merged object of the built-in type `type_name` that
/// replaces `live` (`None`: a create): the object defaulted ([`apply`]), through its Go
/// type's encoding ([`shapes::round_trip`]), converted and prepared by its strategy
/// ([`stored::apply`]). Whether anything changed, and, for an update, the object as the
/// server validates it (defaulted, not yet encoded) when the encoding changed it; a create's
/// is not needed (only updates are checked for what may not change).
pub fn stored_object(
    type_name: &str,
    obj: &mut Value,
    live: Option<&Value>,
) -> (bool, Option<Value>) {
    let defaulted = apply(type_name, obj);
    let before = live.is_some().then(|| obj.clone());
    let encoded = shapes::round_trip(type_name, obj);
    let converted = stored::apply(type_name, obj, live);
    (defaulted | encoded | converted, before.filter(|_| encoded))
}

/// A non-apply write (a create, an update, a patch's result) of the built-in type
/// `type_name` as the server decodes it before its field manager records the write:
/// defaulted, through its Go type, converted to the internal type and back. What the
/// strategy does after that is [`prepared`].
pub fn decoded_write(type_name: &str, obj: &mut Value) {
    apply(type_name, obj);
    shapes::round_trip(type_name, obj);
    stored::convert(type_name, obj);
}

/// What the strategy and admission make of a decoded write before it is stored (`live`:
/// the object it replaces, `None` for a create).
pub fn prepared(type_name: &str, obj: &mut Value, live: Option<&Value>) {
    stored::prepare(type_name, obj, live);
}

/// The object a create's field manager compares the new one with: the Go zero value of the
/// built-in type `type_name` as it encodes ([`shapes::zero`]: `spec: {}`, a pod spec's
/// `containers: null`), with `apiVersion` and `kind`; a managed field is what differs from it
/// (so a created object's entry has no `.` for what the zero value already holds).
pub fn zero_object(type_name: &str, api_version: &str, kind: &str) -> Value {
    let mut v = shapes::zero(type_name).unwrap_or(Value::Map(Map::new()));
    if let Some(m) = v.as_map_mut() {
        m.insert("apiVersion", Value::from(api_version));
        m.insert("kind", Value::from(kind));
    }
    v
}

/// A stored object of the built-in type `type_name` as the server decodes it: with the
/// defaults it may have been stored without (written before they existed, or a hand-written
/// snapshot), through its Go type.
pub fn as_decoded(type_name: &str, stored: &Value) -> Value {
    let mut v = stored.clone();
    apply(type_name, &mut v);
    shapes::round_trip(type_name, &mut v);
    v
}

/// Fills in what the apiserver's defaulters would for an object of the built-in type
/// `type_name` (its OpenAPI name, e.g. `io.k8s.api.apps.v1.Deployment`). Whether anything
/// changed. Types without defaulters, and custom resources, are left alone.
pub fn apply(type_name: &str, obj: &mut Value) -> bool {
    let Some(o) = obj.as_map_mut() else {
        return false;
    };
    let mut d = Defaulter::default();
    match type_name {
        "io.k8s.api.apps.v1.Deployment" => deployment(&mut d, o),
        "io.k8s.api.apps.v1.StatefulSet" => stateful_set(&mut d, o),
        "io.k8s.api.apps.v1.DaemonSet" => daemon_set(&mut d, o),
        "io.k8s.api.apps.v1.ReplicaSet" => {
            if let Some(spec) = d.child(o, "spec") {
                d.fill(spec, "replicas", || Value::Int(1));
                template(&mut d, spec, "template");
            }
        }
        "io.k8s.api.batch.v1.Job" => job(&mut d, o),
        "io.k8s.api.batch.v1.CronJob" => cron_job(&mut d, o),
        "io.k8s.api.core.v1.Pod" => pod::pod(&mut d, o),
        "io.k8s.api.core.v1.PodTemplate" => template(&mut d, o, "template"),
        "io.k8s.api.core.v1.ReplicationController" => {
            if let Some(spec) = d.child(o, "spec") {
                d.fill(spec, "replicas", || Value::Int(1));
                template(&mut d, spec, "template");
            }
        }
        "io.k8s.api.core.v1.Service" => service(&mut d, o),
        "io.k8s.api.core.v1.Secret" => {
            d.fill_str(o, "type", "Opaque");
        }
        "io.k8s.api.core.v1.PersistentVolumeClaim" => {
            if let Some(spec) = d.child(o, "spec") {
                claim_spec(&mut d, spec);
            }
            let status = d.ensure(o, "status");
            d.fill_str(status, "phase", "Pending");
        }
        "io.k8s.api.core.v1.PersistentVolume" => {
            if let Some(spec) = d.child(o, "spec") {
                d.fill_str(spec, "persistentVolumeReclaimPolicy", "Retain");
                d.fill(spec, "volumeMode", || "Filesystem".into());
            }
            let status = d.ensure(o, "status");
            d.fill_str(status, "phase", "Pending");
        }
        "io.k8s.api.core.v1.Namespace" => {
            if let Some(name) = o.get("metadata").and_then(|m| m.str_at(&["name"])) {
                let name = Str::from(name);
                if !name.is_empty() {
                    let meta = d.ensure(o, "metadata");
                    let labels = d.ensure(meta, "labels");
                    if labels
                        .get("kubernetes.io/metadata.name")
                        .and_then(Value::as_str)
                        != Some(name.as_str())
                    {
                        labels.insert("kubernetes.io/metadata.name", Value::String(name));
                        d.changed = true;
                    }
                }
            }
            let status = d.ensure(o, "status");
            d.fill_str(status, "phase", "Active");
        }
        "io.k8s.api.rbac.v1.RoleBinding" | "io.k8s.api.rbac.v1.ClusterRoleBinding" => {
            if let Some(role_ref) = d.child(o, "roleRef") {
                d.fill_str(role_ref, "apiGroup", "rbac.authorization.k8s.io");
            }
            subjects(&mut d, o);
        }
        "io.k8s.api.networking.v1.NetworkPolicy" => network_policy(&mut d, o),
        "io.k8s.api.networking.v1.IngressClass" => {
            if let Some(params) = d.child(o, "spec").and_then(|s| s.get_mut("parameters")) {
                if let Some(p) = params.as_map_mut() {
                    d.fill(p, "scope", || "Cluster".into());
                }
            }
        }
        _ => {}
    }
    d.changed
}

/// Records whether a default was filled in; the helpers keep Go's notion of "unset".
#[derive(Default)]
pub(crate) struct Defaulter {
    pub changed: bool,
}

/// The string at `key`.
pub(crate) fn text<'a>(m: &'a Map, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// Absent or `null`: Go's `nil` pointer, slice or map.
pub(crate) fn unset(m: &Map, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}

/// Absent, `null` or `""`: Go's empty string.
pub(crate) fn empty_str(m: &Map, key: &str) -> bool {
    match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// Absent, `null` or `0`: Go's zero integer.
pub(crate) fn zero(m: &Map, key: &str) -> bool {
    matches!(m.get(key), None | Some(Value::Null) | Some(Value::Int(0)))
}

impl Defaulter {
    /// A pointer field: set to `v()` when unset.
    pub fn fill(&mut self, m: &mut Map, key: &str, v: impl FnOnce() -> Value) {
        if unset(m, key) {
            m.insert(key, v());
            self.changed = true;
        }
    }

    /// A string field: set to `v` when empty.
    pub fn fill_str(&mut self, m: &mut Map, key: &str, v: &str) {
        if empty_str(m, key) {
            m.insert(key, v.into());
            self.changed = true;
        }
    }

    /// A plain integer field: set to `v` when zero.
    pub fn fill_int(&mut self, m: &mut Map, key: &str, v: i64) {
        if zero(m, key) {
            m.insert(key, Value::Int(v));
            self.changed = true;
        }
    }

    /// The map at `key`, if there is one (a struct the object holds).
    pub fn child<'a>(&mut self, m: &'a mut Map, key: &str) -> Option<&'a mut Map> {
        m.get_mut(key).and_then(Value::as_map_mut)
    }

    /// The map at `key`, made `{}` when unset (a struct field, or a pointer a defaulter
    /// allocates).
    pub fn ensure<'a>(&mut self, m: &'a mut Map, key: &str) -> &'a mut Map {
        if !matches!(m.get(key), Some(Value::Map(_))) {
            m.insert(key, Value::Map(Map::new()));
            self.changed = true;
        }
        m.get_mut(key)
            .and_then(Value::as_map_mut)
            .expect("just inserted")
    }

    /// Each map item of the list at `key`.
    pub fn each(&mut self, m: &mut Map, key: &str, mut f: impl FnMut(&mut Self, &mut Map)) {
        if let Some(Value::List(items)) = m.get_mut(key) {
            for item in items.iter_mut() {
                if let Some(im) = item.as_map_mut() {
                    f(self, im);
                }
            }
        }
    }
}

/// A pod template at `key` of `m`: its spec's defaults (`SetDefaults_PodSpec` and the walk
/// below it; templates get no `SetDefaults_Pod`).
fn template(d: &mut Defaulter, m: &mut Map, key: &str) {
    if let Some(t) = d.child(m, key) {
        let spec = d.ensure(t, "spec");
        pod::pod_spec(d, spec);
    }
}

fn deployment(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    d.fill(spec, "replicas", || Value::Int(1));
    let strategy = d.ensure(spec, "strategy");
    d.fill_str(strategy, "type", "RollingUpdate");
    if text(strategy, "type") == Some("RollingUpdate") {
        let ru = d.ensure(strategy, "rollingUpdate");
        d.fill(ru, "maxUnavailable", || "25%".into());
        d.fill(ru, "maxSurge", || "25%".into());
    }
    d.fill(spec, "revisionHistoryLimit", || Value::Int(10));
    d.fill(spec, "progressDeadlineSeconds", || Value::Int(600));
    template(d, spec, "template");
}

fn daemon_set(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    let strategy = d.ensure(spec, "updateStrategy");
    d.fill_str(strategy, "type", "RollingUpdate");
    if text(strategy, "type") == Some("RollingUpdate") {
        let ru = d.ensure(strategy, "rollingUpdate");
        d.fill(ru, "maxUnavailable", || Value::Int(1));
        d.fill(ru, "maxSurge", || Value::Int(0));
    }
    d.fill(spec, "revisionHistoryLimit", || Value::Int(10));
    template(d, spec, "template");
}

fn stateful_set(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    d.fill_str(spec, "podManagementPolicy", "OrderedReady");
    let strategy = d.ensure(spec, "updateStrategy");
    if empty_str(strategy, "type") {
        d.fill_str(strategy, "type", "RollingUpdate");
        d.fill(strategy, "rollingUpdate", || Value::Map(Map::new()));
    }
    if text(strategy, "type") == Some("RollingUpdate")
        && let Some(ru) = d.child(strategy, "rollingUpdate")
    {
        d.fill(ru, "partition", || Value::Int(0));
    }
    let policy = d.ensure(spec, "persistentVolumeClaimRetentionPolicy");
    d.fill_str(policy, "whenDeleted", "Retain");
    d.fill_str(policy, "whenScaled", "Retain");
    d.fill(spec, "replicas", || Value::Int(1));
    d.fill(spec, "revisionHistoryLimit", || Value::Int(10));
    template(d, spec, "template");
    d.each(spec, "volumeClaimTemplates", |d, claim| {
        if let Some(cs) = d.child(claim, "spec") {
            claim_spec(d, cs);
        }
        let status = d.ensure(claim, "status");
        d.fill_str(status, "phase", "Pending");
    });
}

/// `SetDefaults_Job`: the metadata labels come from the template's when the Job has none.
fn job(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    job_spec(d, spec);
    let template_labels = spec
        .get("template")
        .and_then(|t| t.get_path(&["metadata", "labels"]))
        .filter(|l| !l.is_null())
        .cloned();
    if let Some(labels) = template_labels {
        let meta = d.ensure(o, "metadata");
        if meta
            .get("labels")
            .and_then(Value::as_map)
            .is_none_or(Map::is_empty)
        {
            meta.insert("labels", labels);
            d.changed = true;
        }
    }
}

/// A Job's spec (`SetDefaults_Job` without the labels; a CronJob's job template gets only the
/// generated walk's part: its pod template and pod failure policy).
fn job_spec(d: &mut Defaulter, spec: &mut Map) {
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions", Value::Int(1));
        spec.insert("parallelism", Value::Int(1));
        d.changed = true;
    }
    d.fill(spec, "parallelism", || Value::Int(1));
    if unset(spec, "backoffLimit") {
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit", Value::Int(limit));
        d.changed = true;
    }
    d.fill(spec, "completionMode", || "NonIndexed".into());
    d.fill(spec, "suspend", || Value::Bool(false));
    // JobPodReplacementPolicy is on by default (GA in 1.34).
    if unset(spec, "podReplacementPolicy") {
        let policy = if unset(spec, "podFailurePolicy") {
            "TerminatingOrFailed"
        } else {
            "Failed"
        };
        spec.insert("podReplacementPolicy", policy.into());
        d.changed = true;
    }
    d.fill(spec, "manualSelector", || Value::Bool(false));
    pod_failure_policy(d, spec);
    template(d, spec, "template");
}

fn pod_failure_policy(d: &mut Defaulter, spec: &mut Map) {
    if let Some(policy) = d.child(spec, "podFailurePolicy") {
        d.each(policy, "rules", |d, rule| {
            d.each(rule, "onPodConditions", |d, c| {
                d.fill_str(c, "status", "True")
            });
        });
    }
}

fn cron_job(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    d.fill_str(spec, "concurrencyPolicy", "Allow");
    d.fill(spec, "suspend", || Value::Bool(false));
    d.fill(spec, "successfulJobsHistoryLimit", || Value::Int(3));
    d.fill(spec, "failedJobsHistoryLimit", || Value::Int(1));
    if let Some(jt) = d.child(spec, "jobTemplate") {
        let js = d.ensure(jt, "spec");
        pod_failure_policy(d, js);
        template(d, js, "template");
    }
}

fn claim_spec(d: &mut Defaulter, spec: &mut Map) {
    d.fill(spec, "volumeMode", || "Filesystem".into());
}

fn service(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    d.fill_str(spec, "sessionAffinity", "None");
    let affinity = text(spec, "sessionAffinity").unwrap_or("").to_string();
    match affinity.as_str() {
        "None" if spec.remove("sessionAffinityConfig").is_some() => d.changed = true,
        "ClientIP" => {
            let timeout = spec.get("sessionAffinityConfig").and_then(|c| {
                c.get_path(&["clientIP", "timeoutSeconds"])
                    .filter(|t| !t.is_null())
            });
            if timeout.is_none() {
                let mut client = Map::new();
                client.insert("timeoutSeconds", Value::Int(10800));
                let mut config = Map::new();
                config.insert("clientIP", Value::Map(client));
                spec.insert("sessionAffinityConfig", Value::Map(config));
                d.changed = true;
            }
        }
        _ => {}
    }
    d.fill_str(spec, "type", "ClusterIP");
    d.each(spec, "ports", |d, p| {
        d.fill_str(p, "protocol", "TCP");
        let no_target = match p.get("targetPort") {
            None | Some(Value::Null) | Some(Value::Int(0)) => true,
            Some(Value::String(s)) => s.is_empty(),
            _ => false,
        };
        if no_target && let Some(port) = p.get("port").cloned() {
            p.insert("targetPort", port);
            d.changed = true;
        }
    });
    let kind = text(spec, "type").unwrap_or("").to_string();
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_list)
        .is_some_and(|l| !l.is_empty());
    // `service.ExternallyAccessible`: a load balancer, a node port, or a cluster IP with
    // external IPs.
    let externally =
        kind == "LoadBalancer" || kind == "NodePort" || (kind == "ClusterIP" && external_ips);
    if externally {
        d.fill_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        d.fill(spec, "internalTrafficPolicy", || "Cluster".into());
    }
    if kind == "LoadBalancer" {
        d.fill(spec, "allocateLoadBalancerNodePorts", || Value::Bool(true));
        if let Some(lb) = d.child(o, "status").and_then(|s| s.get_mut("loadBalancer")) {
            if let Some(lb) = lb.as_map_mut() {
                d.each(lb, "ingress", |d, ing| {
                    if !empty_str(ing, "ip") {
                        d.fill(ing, "ipMode", || "VIP".into());
                    }
                });
            }
        }
    }
}

fn subjects(d: &mut Defaulter, o: &mut Map) {
    d.each(o, "subjects", |d, s| {
        let group = match text(s, "kind") {
            Some("User") | Some("Group") => "rbac.authorization.k8s.io",
            _ => return,
        };
        d.fill_str(s, "apiGroup", group);
    });
}

fn network_policy(d: &mut Defaulter, o: &mut Map) {
    let Some(spec) = d.child(o, "spec") else {
        return;
    };
    for dir in ["ingress", "egress"] {
        d.each(spec, dir, |d, rule| {
            d.each(rule, "ports", |d, p| d.fill(p, "protocol", || "TCP".into()));
        });
    }
    let no_types = spec
        .get("policyTypes")
        .and_then(Value::as_list)
        .is_none_or(|l| l.is_empty());
    if no_types {
        let egress = spec
            .get("egress")
            .and_then(Value::as_list)
            .is_some_and(|l| !l.is_empty());
        let mut types = vec![Value::from("Ingress")];
        if egress {
            types.push("Egress".into());
        }
        spec.insert("policyTypes", Value::List(types));
        d.changed = true;
    }
}

#[cfg(test)]
mod tests;
