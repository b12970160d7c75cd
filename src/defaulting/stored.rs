//! What a built-in kind's conversion, registry strategy and admission do to a merged object
//! before it is stored, beyond defaulting — what kube-apiserver 1.36 showed
//! (`tests/real/builtin.rs`), each written from its upstream source:
//!
//! - a Secret's `stringData` is folded into `data` (base64; `stringData` wins) and is gone
//!   from the stored object (`Convert_v1_Secret_To_core_Secret`), while its applier still owns
//!   `f:stringData`;
//! - a StatefulSet's claim templates are served with `apiVersion: v1` and
//!   `kind: PersistentVolumeClaim` (`Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec`);
//! - a DaemonSet's template generation is served as the annotation
//!   `deprecated.daemonset.template.generation`: 1 when created, the live one's plus one when
//!   its pod template changes, else the live one's (`daemonSetStrategy`: what a writer puts in
//!   the annotation is not what is stored);
//! - a created PersistentVolumeClaim gets the finalizer `kubernetes.io/pvc-protection`
//!   (admission plugin `StorageObjectInUseProtection`, on by default).

use super::Defaulter;
use crate::value::{Map, Value};

/// A Secret's `data` with `stringData` folded in, as the conversion to the internal type does
/// (`None`: neither is set).
pub fn secret_data(secret: &Value) -> Option<Value> {
    use base64::Engine;
    let data = secret.get_path(&["data"]).filter(|d| !d.is_null()).cloned();
    let Some(Value::Map(strings)) = secret.get_path(&["stringData"]) else {
        return data;
    };
    let mut out = match data {
        Some(Value::Map(m)) => m,
        _ => Map::new(),
    };
    for (k, s) in strings.iter() {
        let s = s.as_str().unwrap_or("");
        let b64 = base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        out.insert(k.clone(), Value::from(b64.as_str()));
    }
    Some(Value::Map(out))
}

/// Rewrites an object of built-in type `type_name` into the form the server stores and
/// serves; `live`: the object it replaces (`None`: a create). Whether anything changed.
pub fn apply(type_name: &str, obj: &mut Value, live: Option<&Value>) -> bool {
    convert(type_name, obj) | prepare(type_name, obj, live)
}

/// What the conversion to the internal type and back does (part of decoding a request: the
/// field manager of a non-apply write compares the converted object with the live one).
pub fn convert(type_name: &str, obj: &mut Value) -> bool {
    match type_name {
        "io.k8s.api.core.v1.Secret" => fold_string_data(obj),
        "io.k8s.api.apps.v1.StatefulSet" => claim_template_kinds(obj),
        _ => false,
    }
}

/// What the registry strategy and admission do after the field manager has recorded a write
/// (nobody owns what they change).
pub fn prepare(type_name: &str, obj: &mut Value, live: Option<&Value>) -> bool {
    match type_name {
        "io.k8s.api.apps.v1.DaemonSet" => template_generation(obj, live),
        "io.k8s.api.core.v1.PersistentVolumeClaim" if live.is_none() => {
            add_finalizer(obj, "kubernetes.io/pvc-protection")
        }
        _ => false,
    }
}

fn fold_string_data(obj: &mut Value) -> bool {
    if obj.get_path(&["stringData"]).is_none() {
        return false;
    }
    let data = secret_data(obj);
    let Some(m) = obj.as_map_mut() else {
        return false;
    };
    m.remove("stringData");
    match data {
        Some(Value::Map(d)) if !d.is_empty() => {
            m.insert("data", Value::Map(d));
        }
        _ => {
            m.remove("data");
        }
    }
    true
}

fn claim_template_kinds(obj: &mut Value) -> bool {
    let mut changed = false;
    let templates = obj
        .as_map_mut()
        .and_then(|m| m.get_mut("spec"))
        .and_then(Value::as_map_mut)
        .and_then(|s| s.get_mut("volumeClaimTemplates"));
    if let Some(Value::List(items)) = templates {
        for t in items.iter_mut() {
            if let Some(t) = t.as_map_mut() {
                for (k, v) in [("apiVersion", "v1"), ("kind", "PersistentVolumeClaim")] {
                    if t.get(k).and_then(Value::as_str) != Some(v) {
                        t.insert(k, v.into());
                        changed = true;
                    }
                }
            }
        }
    }
    changed
}

const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

fn template_generation(obj: &mut Value, live: Option<&Value>) -> bool {
    let generation = match live {
        None => 1,
        Some(live) => {
            let old: i64 = live
                .str_at(&["metadata", "annotations", TEMPLATE_GENERATION])
                .and_then(|g| g.parse().ok())
                .unwrap_or(0);
            let template = |o: &Value| o.get_path(&["spec", "template"]).cloned();
            let same = match (template(live), template(obj)) {
                (Some(a), Some(b)) => crate::value::equals(&a, &b),
                (a, b) => a.is_none() && b.is_none(),
            };
            if same { old } else { old + 1 }
        }
    };
    let want = generation.to_string();
    let Some(m) = obj.as_map_mut() else {
        return false;
    };
    let mut d = Defaulter::default();
    let meta = d.ensure(m, "metadata");
    let annotations = d.ensure(meta, "annotations");
    if annotations.get(TEMPLATE_GENERATION).and_then(Value::as_str) != Some(want.as_str()) {
        annotations.insert(TEMPLATE_GENERATION, Value::from(want.as_str()));
        d.changed = true;
    }
    d.changed
}

fn add_finalizer(obj: &mut Value, finalizer: &str) -> bool {
    let Some(m) = obj.as_map_mut() else {
        return false;
    };
    let mut d = Defaulter::default();
    let meta = d.ensure(m, "metadata");
    if !matches!(meta.get("finalizers"), Some(Value::List(_))) {
        meta.insert("finalizers", Value::List(Vec::new()));
    }
    let Some(Value::List(fs)) = meta.get_mut("finalizers") else {
        return false;
    };
    if !fs.iter().any(|f| f.as_str() == Some(finalizer)) {
        fs.push(finalizer.into());
        d.changed = true;
    }
    d.changed
}
