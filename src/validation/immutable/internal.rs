//! A versioned object as kube-apiserver's internal types print it. Validation runs on the
//! internal types, and a refusal's message shows the bad value with `json.Marshal` (a Job's
//! `spec.template: Invalid value: {"labels":…,"Spec":{"Volumes":null,…}}`) or a diff of
//! `json.MarshalIndent` (a claim's `spec is immutable …\n@@ -10,7 +10,7 @@ …`). Internal types
//! have no JSON tags: their fields print by Go name, in declaration order, every one of them
//! (`null` for a nil pointer, list or map); the apimachinery types inside them keep their tags.
//! The shapes come from the Go types (`src/defaulting/data/go-shapes.json`); a field of the internal type is
//! found in the versioned object by its Go name, through embedded structs. One conversion
//! moves fields: the pod-level `hostNetwork`, `hostPID`, `hostIPC`, `shareProcessNamespace`
//! and `hostUsers` of a versioned pod spec are the internal pod security context's.

use super::render;
use crate::defaulting::shapes::{Field, Shape, fields};
use crate::value::{Map, Value};

/// The internal type's rendering of `v`, a value of the versioned type `versioned`: a value
/// whose maps are in the order Go prints them (structs in declaration order, maps by key).
/// `None` when either type is unknown.
pub fn render(internal: &str, versioned: &str, v: &Value) -> Option<Value> {
    fields(internal)?;
    fields(versioned)?;
    Some(structure(internal, Some(versioned), Some(v), None))
}

/// The internal struct type `t` from the versioned value `v` of type `vt` (`parent`: the
/// versioned struct holding `v`, where a conversion moved fields from).
fn structure(t: &str, vt: Option<&str>, v: Option<&Value>, parent: Option<&Value>) -> Value {
    let mut out = Map::new();
    let Some(fs) = fields(t) else {
        return v.cloned().unwrap_or(Value::Null);
    };
    for f in fs {
        let (elem_vt, found) = match moved(t, f, parent) {
            Some(x) => (None, Some(x)),
            None => resolve(vt, v, &f.go_path),
        };
        let rendered = field(f, elem_vt, found, v);
        if omitted(f, &rendered) {
            continue;
        }
        out.insert(f.name.as_str(), rendered);
    }
    Value::Map(out)
}

/// `v`, a value of the versioned type `versioned`, as an internal type of the same Go shape
/// prints it, for the internal types the shapes lack (`resource.k8s.io`'s): every field by its
/// Go name, in the versioned type's order, an embedded `ObjectMeta` flattened (as Go encodes
/// an embedded struct without a tag); the apimachinery types inside keep their tags. Exact
/// where the internal type declares the versioned one's fields in its order, which holds for
/// the types this is used for. `None` when the type is unknown.
pub fn render_like(versioned: &str, v: &Value) -> Option<Value> {
    fields(versioned)?;
    Some(like(versioned, Some(v)))
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn like(vt: &str, v: Option<&Value>) -> Value {
    let Some(fs) = fields(vt) else {
        return v.map_or(Value::Null, render::sorted);
    };
    if vt.starts_with("io.k8s.apimachinery.") {
        return structure(vt, Some(vt), v, None);
    }
    let mut out = Map::new();
    for f in fs {
        let x = v
            .and_then(|v| v.get_path(&[f.name.as_str()]))
            .filter(|x| !x.is_null());
        if f.go_path == "ObjectMeta" && f.elem.as_deref() == Some(OBJECT_META) {
            if let Value::Map(meta) = structure(OBJECT_META, Some(OBJECT_META), x, None) {
                for (k, m) in meta.iter() {
                    out.insert(k.clone(), m.clone());
                }
            }
            continue;
        }
        let name = f.go_path.rsplit('.').next().unwrap_or(&f.go_path);
        out.insert(name, like_field(f, x));
    }
    Value::Map(out)
}

fn like_field(f: &Field, v: Option<&Value>) -> Value {
    let Some(v) = v else {
        return match (&f.elem, f.shape, f.pointer) {
            (Some(t), Shape::Struct, false) => like(t, None),
            _ => zero(f),
        };
    };
    match (&f.elem, f.shape, v) {
        (Some(t), Shape::Struct, _) => like(t, Some(v)),
        (Some(t), Shape::List, Value::List(items)) => {
            Value::List(items.iter().map(|i| like(t, Some(i))).collect())
        }
        (Some(t), Shape::Map, Value::Map(m)) => {
            let mut out = Map::new();
            for (k, x) in m.sorted_entries() {
                out.insert(k.clone(), like(t, Some(x)));
            }
            Value::Map(out)
        }
        _ => render::sorted(v),
    }
}

/// Fields the pod spec conversion moves into the internal pod security context.
fn moved<'a>(t: &str, f: &Field, parent: Option<&'a Value>) -> Option<&'a Value> {
    const POD_LEVEL: [(&str, &str); 5] = [
        ("HostNetwork", "hostNetwork"),
        ("HostPID", "hostPID"),
        ("HostIPC", "hostIPC"),
        ("ShareProcessNamespace", "shareProcessNamespace"),
        ("HostUsers", "hostUsers"),
    ];
    if t != "io.k8s.kubernetes.pkg.apis.core.PodSecurityContext" {
        return None;
    }
    let key = POD_LEVEL.iter().find(|(go, _)| *go == f.go_path)?.1;
    parent?.get_path(&[key]).filter(|x| !x.is_null())
}

/// The versioned value of the field at Go path `path` (through embedded and nested structs),
/// with the versioned type of what it holds.
fn resolve<'a>(
    vt: Option<&str>,
    v: Option<&'a Value>,
    path: &str,
) -> (Option<&'static str>, Option<&'a Value>) {
    let (Some(vt), Some(v)) = (vt, v) else {
        return (None, None);
    };
    let Some(fs) = fields(vt) else {
        return (None, None);
    };
    if let Some(f) = fs.iter().find(|f| f.go_path == path) {
        let x = v.get_path(&[f.name.as_str()]).filter(|x| !x.is_null());
        return (f.elem.as_deref(), x);
    }
    for f in fs {
        if let Some(rest) = path
            .strip_prefix(f.go_path.as_str())
            .and_then(|r| r.strip_prefix('.'))
            && f.shape == Shape::Struct
        {
            let inner = v.get_path(&[f.name.as_str()]).filter(|x| !x.is_null());
            return resolve(f.elem.as_deref(), inner, rest);
        }
    }
    (None, None)
}

/// One internal field from its versioned value (`None`: unset; Go's zero value prints).
fn field(f: &Field, vt: Option<&str>, v: Option<&Value>, parent: Option<&Value>) -> Value {
    let Some(v) = v else {
        return zero(f);
    };
    match f.shape {
        Shape::Struct => match &f.elem {
            Some(t) => structure(t, vt, Some(v), parent),
            None => v.clone(),
        },
        Shape::List => match (&f.elem, v) {
            (Some(t), Value::List(items)) => Value::List(
                items
                    .iter()
                    .map(|i| structure(t, vt, Some(i), None))
                    .collect(),
            ),
            _ => render::sorted(v),
        },
        Shape::Map => {
            let Value::Map(m) = v else {
                return v.clone();
            };
            let mut out = Map::new();
            for (k, x) in m.sorted_entries() {
                let x = match &f.elem {
                    Some(t) => structure(t, vt, Some(x), None),
                    None => render::sorted(x),
                };
                out.insert(k.clone(), x);
            }
            Value::Map(out)
        }
        _ => render::sorted(v),
    }
}

/// What Go prints for an unset field of this shape.
fn zero(f: &Field) -> Value {
    if f.pointer {
        return Value::Null;
    }
    match f.shape {
        Shape::Struct => match &f.elem {
            Some(t) => structure(t, None, None, None),
            None => Value::Null,
        },
        Shape::List | Shape::Map | Shape::Custom => Value::Null,
        Shape::String => Value::from(""),
        Shape::Int => Value::Int(0),
        Shape::Float => Value::Float(0.0),
        Shape::Bool => Value::Bool(false),
    }
}

/// What omitempty (or omitzero) leaves out.
fn omitted(f: &Field, v: &Value) -> bool {
    (f.omitempty || f.omitzero)
        && match v {
            Value::Null => true,
            Value::String(s) => s.is_empty() && !f.pointer,
            Value::Int(0) | Value::Bool(false) => !f.pointer,
            Value::Float(x) => *x == 0.0 && !f.pointer,
            Value::List(l) => l.is_empty() && f.omitempty,
            Value::Map(m) => f.shape == Shape::Map && m.is_empty() && f.omitempty,
            _ => false,
        }
}

/// `json.MarshalIndent(v, "", " ")` of an already shaped value.
pub fn indented(v: &Value) -> String {
    let mut out = String::new();
    indent_into(&mut out, v, 0);
    out
}

fn indent_into(out: &mut String, v: &Value, depth: usize) {
    let pad = |out: &mut String, d: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', d));
    };
    match v {
        Value::Map(m) if !m.is_empty() => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                out.push_str(&render::json(&Value::from(k.as_str())));
                out.push_str(": ");
                indent_into(out, x, depth + 1);
            }
            pad(out, depth);
            out.push('}');
        }
        Value::List(items) if !items.is_empty() => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                indent_into(out, x, depth + 1);
            }
            pad(out, depth);
            out.push(']');
        }
        other => out.push_str(&render::json(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    #[test]
    fn a_pod_template_as_the_internal_type_prints_it() {
        // What kube-apiserver 1.36 printed for this template (a Job's, refused as immutable).
        let v1 = json::parse_str(
            r#"{"metadata":{"labels":{"job-name":"two","app":"job-two"}},"spec":{"containers":[{"name":"app","image":"nginx","imagePullPolicy":"IfNotPresent","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Never","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}"#,
        )
        .unwrap();
        let r = render(
            "io.k8s.kubernetes.pkg.apis.core.PodTemplateSpec",
            "io.k8s.api.core.v1.PodTemplateSpec",
            &v1,
        )
        .unwrap();
        let want = r#"{"labels":{"app":"job-two","job-name":"two"},"Spec":{"Volumes":null,"InitContainers":null,"Containers":[{"Name":"app","Image":"nginx","Command":null,"Args":null,"WorkingDir":"","Ports":null,"EnvFrom":null,"Env":null,"Resources":{"Limits":null,"Requests":null,"Claims":null},"ResizePolicy":null,"RestartPolicy":null,"RestartPolicyRules":null,"VolumeMounts":null,"VolumeDevices":null,"LivenessProbe":null,"ReadinessProbe":null,"StartupProbe":null,"Lifecycle":null,"TerminationMessagePath":"/dev/termination-log","TerminationMessagePolicy":"File","ImagePullPolicy":"IfNotPresent","SecurityContext":null,"Stdin":false,"StdinOnce":false,"TTY":false}],"EphemeralContainers":null,"RestartPolicy":"Never","TerminationGracePeriodSeconds":30,"ActiveDeadlineSeconds":null,"DNSPolicy":"ClusterFirst","NodeSelector":null,"ServiceAccountName":"","AutomountServiceAccountToken":null,"NodeName":"","SecurityContext":{"HostNetwork":false,"HostPID":false,"HostIPC":false,"ShareProcessNamespace":null,"HostUsers":null,"SELinuxOptions":null,"WindowsOptions":null,"RunAsUser":null,"RunAsGroup":null,"RunAsNonRoot":null,"SupplementalGroups":null,"SupplementalGroupsPolicy":null,"FSGroup":null,"FSGroupChangePolicy":null,"Sysctls":null,"SeccompProfile":null,"AppArmorProfile":null,"SELinuxChangePolicy":null},"ImagePullSecrets":null,"Hostname":"","Subdomain":"","SetHostnameAsFQDN":null,"Affinity":null,"SchedulerName":"default-scheduler","Tolerations":null,"HostAliases":null,"PriorityClassName":"","Priority":null,"PreemptionPolicy":null,"DNSConfig":null,"ReadinessGates":null,"RuntimeClassName":null,"Overhead":null,"EnableServiceLinks":null,"TopologySpreadConstraints":null,"OS":null,"SchedulingGates":null,"ResourceClaims":null,"Resources":null,"HostnameOverride":null,"SchedulingGroup":null}}"#;
        assert_eq!(render::json(&r), want);
    }

    #[test]
    fn indented_as_go_indents() {
        let v = json::parse_str(r#"{"a":[],"b":{"c":["x"]},"d":null,"e":{}}"#).unwrap();
        assert_eq!(
            indented(&v),
            "{\n \"a\": [],\n \"b\": {\n  \"c\": [\n   \"x\"\n  ]\n },\n \"d\": null,\n \"e\": {}\n}"
        );
    }
}
