//! Pods and pod specs: `SetDefaults_PodSpec`, `SetDefaults_Container`, probes, handlers,
//! volume sources and the generated walk's declared defaults (`+default` markers), as
//! kube-apiserver 1.36 runs them for a Pod and for every pod template.

use super::{Defaulter, empty_str, text, zero};
use crate::value::{Map, Value};

/// A Pod: `SetDefaults_Pod` (requests from limits, service links, host-network ports) and
/// its spec.
pub(super) fn pod(d: &mut Defaulter, o: &mut Map) {
    let spec = d.ensure(o, "spec");
    for key in ["containers", "initContainers"] {
        d.each(spec, key, requests_from_limits);
    }
    d.fill(spec, "enableServiceLinks", || Value::Bool(true));
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for key in ["containers", "initContainers"] {
            d.each(spec, key, |d, c| {
                d.each(c, "ports", |d, p| {
                    if zero(p, "hostPort")
                        && let Some(port) = p.get("containerPort").cloned()
                    {
                        p.insert("hostPort", port);
                        d.changed = true;
                    }
                });
            });
        }
    }
    pod_spec(d, spec);
}

/// A container's requests default to its limits, resource by resource.
fn requests_from_limits(d: &mut Defaulter, c: &mut Map) {
    let Some(resources) = d.child(c, "resources") else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_map).cloned() else {
        return;
    };
    let requests = d.ensure(resources, "requests");
    for (k, v) in limits.iter() {
        if !requests.contains_key(k) {
            requests.insert(k.clone(), v.clone());
            d.changed = true;
        }
    }
}

/// `SetDefaults_PodSpec` and everything below it.
pub(super) fn pod_spec(d: &mut Defaulter, spec: &mut Map) {
    d.fill_str(spec, "dnsPolicy", "ClusterFirst");
    d.fill_str(spec, "restartPolicy", "Always");
    d.fill(spec, "securityContext", || Value::Map(Map::new()));
    d.fill(spec, "terminationGracePeriodSeconds", || Value::Int(30));
    d.fill_str(spec, "schedulerName", "default-scheduler");
    d.each(spec, "volumes", volume);
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        d.each(spec, key, container);
    }
    service_account_alias(d, spec);
}

/// `serviceAccount` is the deprecated alias of `serviceAccountName`: read when the name is
/// empty, and always written from it (`Convert_v1_PodSpec_To_core_PodSpec` and back).
fn service_account_alias(d: &mut Defaulter, spec: &mut Map) {
    if empty_str(spec, "serviceAccountName")
        && let Some(alias) = spec.get("serviceAccount").filter(|a| !a.is_null()).cloned()
    {
        spec.insert("serviceAccountName", alias);
        d.changed = true;
    }
    match spec.get("serviceAccountName").cloned() {
        Some(name) if !empty_str(spec, "serviceAccountName") => {
            if spec.get("serviceAccount") != Some(&name) {
                spec.insert("serviceAccount", name);
                d.changed = true;
            }
        }
        _ => {
            if spec.remove("serviceAccount").is_some() {
                d.changed = true;
            }
        }
    }
}

/// `SetDefaults_Container` and the walk below a container: the pull policy from the image's
/// tag, the termination message, ports' protocol, env sources, probes and lifecycle handlers.
/// `resources` is a struct, not a pointer: the stored object always has it.
fn container(d: &mut Defaulter, c: &mut Map) {
    if empty_str(c, "imagePullPolicy") {
        let image = text(c, "image").unwrap_or("");
        let policy = if image_tag(image) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy", policy.into());
        d.changed = true;
    }
    d.fill_str(c, "terminationMessagePath", "/dev/termination-log");
    d.fill_str(c, "terminationMessagePolicy", "File");
    d.ensure(c, "resources");
    d.each(c, "ports", |d, p| d.fill_str(p, "protocol", "TCP"));
    d.each(c, "env", |d, e| {
        if let Some(from) = d.child(e, "valueFrom") {
            if let Some(f) = d.child(from, "fieldRef") {
                d.fill_str(f, "apiVersion", "v1");
            }
            if let Some(f) = d.child(from, "fileKeyRef") {
                d.fill(f, "optional", || Value::Bool(false));
            }
        }
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = d.child(c, probe) {
            d.fill_int(p, "timeoutSeconds", 1);
            d.fill_int(p, "periodSeconds", 10);
            d.fill_int(p, "successThreshold", 1);
            d.fill_int(p, "failureThreshold", 3);
            if let Some(h) = d.child(p, "httpGet") {
                http_get(d, h);
            }
            if let Some(g) = d.child(p, "grpc") {
                d.fill(g, "service", || "".into());
            }
        }
    }
    if let Some(lifecycle) = d.child(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = d
                .child(lifecycle, hook)
                .and_then(|h| h.get_mut("httpGet"))
                .and_then(Value::as_map_mut)
            {
                http_get(d, h);
            }
        }
    }
}

fn http_get(d: &mut Defaulter, h: &mut Map) {
    d.fill_str(h, "path", "/");
    d.fill_str(h, "scheme", "HTTP");
}

/// `SetDefaults_Volume` (a volume without a source is an `emptyDir`) and its sources'
/// defaults: file modes 0644 (420), a host path's type `""`, a token's hour, field
/// selectors' `v1`, and the declared defaults of the older in-tree sources.
fn volume(d: &mut Defaulter, v: &mut Map) {
    let has_source = v.iter().any(|(k, val)| k != "name" && !val.is_null());
    if !has_source {
        v.insert("emptyDir", Value::Map(Map::new()));
        d.changed = true;
    }
    if let Some(h) = d.child(v, "hostPath") {
        d.fill(h, "type", || "".into());
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = d.child(v, source) {
            d.fill(s, "defaultMode", || Value::Int(420));
        }
    }
    if let Some(s) = d.child(v, "downwardAPI") {
        field_refs(d, s);
    }
    if let Some(p) = d.child(v, "projected") {
        d.each(p, "sources", |d, s| {
            if let Some(api) = d.child(s, "downwardAPI") {
                field_refs(d, api);
            }
            if let Some(t) = d.child(s, "serviceAccountToken") {
                d.fill(t, "expirationSeconds", || Value::Int(3600));
            }
        });
    }
    if let Some(s) = d.child(v, "iscsi") {
        d.fill_str(s, "iscsiInterface", "default");
    }
    if let Some(s) = d.child(v, "rbd") {
        d.fill_str(s, "pool", "rbd");
        d.fill_str(s, "user", "admin");
        d.fill_str(s, "keyring", "/etc/ceph/keyring");
    }
    if let Some(s) = d.child(v, "azureDisk") {
        d.fill(s, "cachingMode", || "ReadWrite".into());
        d.fill(s, "fsType", || "ext4".into());
        d.fill(s, "readOnly", || Value::Bool(false));
        d.fill(s, "kind", || "Shared".into());
    }
    if let Some(s) = d.child(v, "scaleIO") {
        d.fill_str(s, "storageMode", "ThinProvisioned");
        d.fill_str(s, "fsType", "xfs");
    }
    if let Some(spec) = d
        .child(v, "ephemeral")
        .and_then(|e| e.get_mut("volumeClaimTemplate"))
        .and_then(Value::as_map_mut)
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_map_mut)
    {
        d.fill(spec, "volumeMode", || "Filesystem".into());
    }
}

fn field_refs(d: &mut Defaulter, api: &mut Map) {
    d.each(api, "items", |d, item| {
        if let Some(f) = d.child(item, "fieldRef") {
            d.fill_str(f, "apiVersion", "v1");
        }
    });
}

/// The tag of an image reference as `parsers.ParseImageName` finds it: after the last `:`
/// that follows the last `/`, before any `@digest`; `latest` when there is none (and no
/// digest).
pub(crate) fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if digest => "",
        None => "latest",
    }
}

#[cfg(test)]
mod tests {
    use super::image_tag;

    #[test]
    fn image_tags_as_the_kubelet_parses_them() {
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("nginx:latest"), "latest");
        assert_eq!(image_tag("nginx:1.27"), "1.27");
        assert_eq!(image_tag("registry:5000/shop/app"), "latest");
        assert_eq!(image_tag("registry:5000/shop/app:2"), "2");
        assert_eq!(image_tag("app@sha256:abc"), "");
        assert_eq!(image_tag("app:1@sha256:abc"), "1");
    }
}
