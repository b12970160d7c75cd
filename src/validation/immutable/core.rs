//! The core group: PersistentVolumeClaims, PersistentVolumes, ConfigMaps, Secrets,
//! ResourceQuotas (`pkg/apis/core/validation/validation.go`); Pods, Services, Nodes and Events
//! are [`super::pods`], [`super::services`] and [`super::nodes`].

use super::{FIELD_IMMUTABLE, Quantity, Rule, Update, forbidden, invalid, render, same, str_at};
use crate::defaulting::stored;
use crate::validation::FieldError;
use crate::value::Value;

pub static RULES: [Rule; 5] = [
    Rule {
        group: "",
        kinds: &["PersistentVolumeClaim"],
        versions: &[],
        source: "ValidatePersistentVolumeClaimUpdate",
        refuses: "spec changed, except a bound claim's resources.requests.storage and volumeAttributesClassName, and volumeName set once (with a diff of the internal specs); storage below status.capacity; volumeMode; the beta storage-class annotation; volumeAttributesClassName made nil or empty once status.currentVolumeAttributesClassName is set",
        check: claim,
    },
    Rule {
        group: "",
        kinds: &["PersistentVolume"],
        versions: &[],
        source: "ValidatePersistentVolumeUpdate",
        refuses: "the volume source (spec.persistentvolumesource, with a diff of the internal sources; a CSI source may gain a controllerExpandSecretRef) and volumeMode changed; nodeAffinity changed once set (but beta topology keys to GA); volumeAttributesClassName unset",
        check: volume,
    },
    Rule {
        group: "",
        kinds: &["ConfigMap"],
        versions: &[],
        source: "ValidateConfigMapUpdate",
        refuses: "data, binaryData or immutable changed once immutable is true",
        check: config_map,
    },
    Rule {
        group: "",
        kinds: &["Secret"],
        versions: &[],
        source: "ValidateSecretUpdate",
        refuses: "type changed; data (stringData included) or immutable changed once immutable is true",
        check: secret,
    },
    Rule {
        group: "",
        kinds: &["ResourceQuota"],
        versions: &[],
        source: "ValidateResourceQuotaUpdate",
        refuses: "spec.scopes changed (as a set)",
        check: quota,
    },
];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_list)
        .map(|l| l.iter().map(|x| x.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

const STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// A copy of `v` with `spec.<key>` set to `to` (`None`: removed).
fn with_spec(v: &Value, key: &str, to: Option<&Value>) -> Value {
    let mut v = v.clone();
    if let Some(spec) = v
        .as_map_mut()
        .and_then(|m| m.get_mut("spec"))
        .and_then(Value::as_map_mut)
    {
        match to {
            Some(x) => {
                spec.insert(key, x.clone());
            }
            None => {
                spec.remove(key);
            }
        }
    }
    v
}

fn storage(v: &Value, path: &[&str]) -> Option<Quantity> {
    super::at(v, path).and_then(Quantity::of)
}

fn claim(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let annotation = ["metadata", "annotations", STORAGE_CLASS_ANNOTATION];
    let (old_ann, new_ann) = (str_at(u.old, &annotation), str_at(u.new, &annotation));
    let class = ["spec", "storageClassName"];
    let (old_sc, new_sc) = (str_at(u.old, &class), str_at(u.new, &class));
    let mut old_c = u.old.clone();
    let mut new_c = u.new.clone();
    // volumeName may be set once.
    if u.old_str(&["spec", "volumeName"]).is_empty() {
        old_c = with_spec(&old_c, "volumeName", u.new_at(&["spec", "volumeName"]));
    }
    // The storage class may move from the beta annotation to the field, or be set once.
    let from_annotation = old_ann.is_some()
        && old_sc.is_none()
        && new_sc.is_some()
        && new_sc == old_ann
        && (new_ann.is_none() || new_ann == old_ann);
    if from_annotation {
        new_c = with_spec(&new_c, "storageClassName", None);
    } else {
        if new_ann.unwrap_or("") != old_ann.unwrap_or("") {
            errs.push(invalid(
                &format!("metadata.annotations.{STORAGE_CLASS_ANNOTATION}"),
                &render::string(new_ann.unwrap_or("")),
                FIELD_IMMUTABLE,
            ));
        }
        let from_nil =
            new_sc.is_some() && old_sc.is_none() && (old_ann.is_none() || new_sc == old_ann);
        if from_nil {
            new_c = with_spec(
                &new_c,
                "storageClassName",
                u.old_at(&["spec", "storageClassName"]),
            );
        }
    }
    // A bound claim may change its requested storage and volume attributes class.
    let bound = u.old_str(&["status", "phase"]) == "Bound";
    if bound {
        if let Some(requests) = new_c
            .as_map_mut()
            .and_then(|m| m.get_mut("spec"))
            .and_then(Value::as_map_mut)
            .and_then(|s| s.get_mut("resources"))
            .and_then(Value::as_map_mut)
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_map_mut)
        {
            match u.old_at(&["spec", "resources", "requests", "storage"]) {
                Some(q) => {
                    requests.insert("storage", q.clone());
                }
                None => {
                    requests.remove("storage");
                }
            }
        }
        new_c = with_spec(
            &new_c,
            "volumeAttributesClassName",
            u.old_at(&["spec", "volumeAttributesClassName"]),
        );
    }
    if !same(super::at(&old_c, &["spec"]), super::at(&new_c, &["spec"])) {
        // With a diff of the two internal specs.
        let diff = render::internal_diff(
            "PersistentVolumeClaimSpec",
            super::at(&old_c, &["spec"]).unwrap_or(&Value::Null),
            super::at(&new_c, &["spec"]).unwrap_or(&Value::Null),
        );
        errs.push(forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{diff}"
            ),
        ));
    }
    let requested = ["spec", "resources", "requests", "storage"];
    let zero = Quantity::parse("0");
    let old_size = storage(u.old, &requested).or(zero);
    let new_size = storage(u.new, &requested).or(zero);
    let capacity = storage(u.old, &["status", "capacity", "storage"]).or(zero);
    // RecoverVolumeExpansionFailure is on (GA since 1.34): a claim may shrink down to, not
    // below or onto, its recorded capacity.
    if let (Some(o), Some(n), Some(c)) = (old_size, new_size, capacity)
        && n < o
        && n <= c
    {
        errs.push(forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    errs.extend(volume_mode(u));
    // VolumeAttributesClass is on (GA since 1.34): once a class was applied
    // (status.currentVolumeAttributesClassName), the claim's may not become nil or empty.
    let vac = ["spec", "volumeAttributesClassName"];
    let (old_vac, new_vac) = (str_at(u.old, &vac), str_at(u.new, &vac));
    if old_vac != new_vac
        && u.old_at(&["status", "currentVolumeAttributesClassName"])
            .is_some()
    {
        match new_vac {
            None => errs.push(forbidden(
                "spec.volumeAttributesClassName",
                "update to nil is forbidden when status.currentVolumeAttributesClassName is not nil",
            )),
            Some("") => errs.push(forbidden(
                "spec.volumeAttributesClassName",
                "update to empty string is forbidden when status.currentVolumeAttributesClassName is not nil",
            )),
            Some(_) => {}
        }
    }
    errs
}

/// The keys of a PersistentVolume's spec that are its volume source.
const VOLUME_SOURCES: &[&str] = &[
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "hostPath",
    "glusterfs",
    "nfs",
    "rbd",
    "iscsi",
    "cinder",
    "cephfs",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

fn volume(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // A CSI volume may gain a controllerExpandSecretRef.
    let secret_ref = ["spec", "csi", "controllerExpandSecretRef"];
    let expand_ref_added = u.old_at(&["spec", "csi"]).is_some()
        && u.old_at(&secret_ref).is_none()
        && u.new_at(&secret_ref).is_some();
    let source_changed = VOLUME_SOURCES.iter().any(|k| {
        let (o, n) = (u.old_at(&["spec", k]), u.new_at(&["spec", k]));
        if *k == "csi" && expand_ref_added {
            let mut n = n.cloned();
            if let Some(m) = n.as_mut().and_then(Value::as_map_mut) {
                m.remove("controllerExpandSecretRef");
            }
            return !same(o, n.as_ref());
        }
        !same(o, n)
    });
    if source_changed {
        // With a diff of the two internal volume sources (the new one without an added
        // controllerExpandSecretRef).
        let mut new = u.decoded.clone();
        if expand_ref_added
            && let Some(csi) = new
                .as_map_mut()
                .and_then(|m| m.get_mut("spec"))
                .and_then(Value::as_map_mut)
                .and_then(|s| s.get_mut("csi"))
                .and_then(Value::as_map_mut)
        {
            csi.remove("controllerExpandSecretRef");
        }
        let diff = render::diff(
            &volume_source(u.old_at(&["spec"])),
            &volume_source(super::at(&new, &["spec"])),
        );
        errs.push(forbidden(
            "spec.persistentvolumesource",
            &format!("spec.persistentvolumesource is immutable after creation\n{diff}"),
        ));
    }
    errs.extend(volume_mode(u));
    // validatePvNodeAffinity: set once; afterwards only beta topology keys may become GA.
    let affinity = ["spec", "nodeAffinity"];
    if let Some(old) = u.old_at(&affinity) {
        let new = u.new_at(&affinity);
        let changed = match new {
            None => true,
            Some(n) => !same(Some(&beta_keys_as(old, n)), Some(n)),
        };
        if changed {
            errs.push(invalid(
                "nodeAffinity",
                &render::json(&node_affinity(new)),
                "field is immutable, except for updating from beta label to GA",
            ));
        }
    }
    let vac = ["spec", "volumeAttributesClassName"];
    if u.old_at(&vac).is_some() && u.new_at(&vac).is_none() {
        errs.push(forbidden(
            "spec.volumeAttributesClassName",
            "update from non-nil value to nil is forbidden",
        ));
    }
    errs
}

/// A volume spec's `core.PersistentVolumeSource` (embedded in the internal spec: its fields
/// are the spec's whose Go path goes through it) as Go prints it.
fn volume_source(spec: Option<&Value>) -> Value {
    let empty = Value::Map(crate::value::Map::new());
    let Some(Value::Map(all)) =
        render::internal_value("PersistentVolumeSpec", spec.unwrap_or(&empty))
    else {
        return Value::Null;
    };
    let source: Vec<&str> =
        crate::defaulting::shapes::fields("io.k8s.kubernetes.pkg.apis.core.PersistentVolumeSpec")
            .into_iter()
            .flatten()
            .filter(|f| f.go_path.starts_with("PersistentVolumeSource."))
            .map(|f| f.name.as_str())
            .collect();
    let mut out = crate::value::Map::new();
    for (k, v) in all.iter() {
        if source.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Map(out)
}

/// Beta node labels and the GA labels that replace them.
const BETA_TO_GA: &[(&str, &str)] = &[
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
];

/// `old`'s node affinity with each requirement's beta key renamed where `new` has its GA key
/// at the same place (`getMaskNodeSelectorLabelChangeEqualities`).
fn beta_keys_as(old: &Value, new: &Value) -> Value {
    let mut out = old.clone();
    let terms = |v: &Value| {
        super::at(v, &["required", "nodeSelectorTerms"])
            .and_then(Value::as_list)
            .map(<[Value]>::to_vec)
    };
    let (Some(mut o_terms), Some(n_terms)) = (terms(&out), terms(new)) else {
        return out;
    };
    for (ot, nt) in o_terms.iter_mut().zip(&n_terms) {
        for list in ["matchExpressions", "matchFields"] {
            let n_reqs = nt.get_path(&[list]).and_then(Value::as_list);
            let Some(Value::List(o_reqs)) = ot.as_map_mut().and_then(|m| m.get_mut(list)) else {
                continue;
            };
            for (i, req) in o_reqs.iter_mut().enumerate() {
                let new_key = n_reqs
                    .and_then(|l| l.get(i))
                    .and_then(|r| r.str_at(&["key"]))
                    .unwrap_or("");
                let old_key = req.str_at(&["key"]).unwrap_or("").to_string();
                if BETA_TO_GA
                    .iter()
                    .any(|(b, g)| *b == old_key && *g == new_key)
                    && let Some(m) = req.as_map_mut()
                {
                    m.insert("key", Value::from(new_key));
                }
            }
        }
    }
    if let Some(req) = out
        .as_map_mut()
        .and_then(|m| m.get_mut("required"))
        .and_then(Value::as_map_mut)
    {
        req.insert("nodeSelectorTerms", Value::List(o_terms));
    }
    out
}

/// `*core.VolumeNodeAffinity` as JSON (internal type: Go field names, nil slices `null`).
fn node_affinity(v: Option<&Value>) -> Value {
    let Some(v) = v else { return Value::Null };
    fn list(x: Option<&Value>) -> Option<&[Value]> {
        x.and_then(Value::as_list).filter(|l| !l.is_empty())
    }
    let requirement = |r: &Value| {
        let mut m = crate::value::Map::new();
        m.insert("Key", Value::from(r.str_at(&["key"]).unwrap_or("")));
        m.insert(
            "Operator",
            Value::from(r.str_at(&["operator"]).unwrap_or("")),
        );
        m.insert(
            "Values",
            list(r.get_path(&["values"])).map_or(Value::Null, |l| Value::List(l.to_vec())),
        );
        Value::Map(m)
    };
    let requirements = |x: Option<&Value>| {
        list(x).map_or(Value::Null, |l| {
            Value::List(l.iter().map(requirement).collect())
        })
    };
    let Some(required) = super::at(v, &["required"]) else {
        let mut m = crate::value::Map::new();
        m.insert("Required", Value::Null);
        return Value::Map(m);
    };
    let terms = list(required.get_path(&["nodeSelectorTerms"])).map_or(Value::Null, |l| {
        Value::List(
            l.iter()
                .map(|t| {
                    let mut m = crate::value::Map::new();
                    m.insert(
                        "MatchExpressions",
                        requirements(t.get_path(&["matchExpressions"])),
                    );
                    m.insert("MatchFields", requirements(t.get_path(&["matchFields"])));
                    Value::Map(m)
                })
                .collect(),
        )
    });
    let mut sel = crate::value::Map::new();
    sel.insert("NodeSelectorTerms", terms);
    let mut m = crate::value::Map::new();
    m.insert("Required", Value::Map(sel));
    Value::Map(m)
}

/// A claim's or a volume's `volumeMode` changed (reported at `volumeMode`, as upstream does).
fn volume_mode(u: &Update) -> Option<FieldError> {
    let mode = ["spec", "volumeMode"];
    (str_at(u.old, &mode) != str_at(u.new, &mode)).then(|| {
        invalid(
            "volumeMode",
            &render::json_str(str_at(u.new, &mode)),
            FIELD_IMMUTABLE,
        )
    })
}

const WHEN_IMMUTABLE: &str = "field is immutable when `immutable` is set";

fn immutable_flag(v: &Value) -> bool {
    matches!(super::at(v, &["immutable"]), Some(Value::Bool(true)))
}

fn config_map(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if immutable_flag(u.old) {
        if !immutable_flag(u.new) {
            errs.push(forbidden("immutable", WHEN_IMMUTABLE));
        }
        if !u.unchanged(&["data"]) {
            errs.push(forbidden("data", WHEN_IMMUTABLE));
        }
        if !u.unchanged(&["binaryData"]) {
            errs.push(forbidden("binaryData", WHEN_IMMUTABLE));
        }
    }
    errs
}

fn secret(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // A Secret without a type is defaulted to Opaque.
    let ty = |s: &'_ str| if s.is_empty() { "Opaque" } else { s }.to_string();
    let (old_ty, new_ty) = (ty(u.old_str(&["type"])), ty(u.new_str(&["type"])));
    if old_ty != new_ty {
        errs.push(invalid(
            "type",
            &render::json_str(Some(&new_ty)),
            FIELD_IMMUTABLE,
        ));
    }
    if immutable_flag(u.old) {
        if !immutable_flag(u.new) {
            errs.push(forbidden("immutable", WHEN_IMMUTABLE));
        }
        if !same(
            stored::secret_data(u.old).as_ref(),
            stored::secret_data(u.new).as_ref(),
        ) {
            errs.push(forbidden("data", WHEN_IMMUTABLE));
        }
    }
    errs
}

fn quota(u: &Update) -> Vec<FieldError> {
    fn set(v: Option<&Value>) -> Vec<&str> {
        let mut s = strings(v);
        s.sort_unstable();
        s.dedup();
        s
    }
    let path = ["spec", "scopes"];
    if set(u.old_at(&path)) == set(u.new_at(&path)) {
        return vec![];
    }
    vec![invalid(
        "spec.scopes",
        &render::strings(u.new_at(&path)),
        FIELD_IMMUTABLE,
    )]
}
