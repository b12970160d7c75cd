//! Cluster machinery: RBAC bindings, storage (StorageClass, VolumeAttachment, CSIDriver),
//! IngressClass, PriorityClass and EndpointSlice. Where v1 defaulting fills a field the
//! manifest may leave out (a StorageClass's `reclaimPolicy`, a binding's `roleRef.apiGroup`),
//! both sides are compared defaulted.

use super::{FIELD_IMMUTABLE, Rule, Update, forbidden, invalid, render, same};
use crate::validation::FieldError;
use crate::value::Value;

pub static RULES: [Rule; 7] = [
    Rule {
        group: "rbac.authorization.k8s.io",
        kinds: &["RoleBinding", "ClusterRoleBinding"],
        versions: &[],
        source: "ValidateRoleBindingUpdate, ValidateClusterRoleBindingUpdate (pkg/apis/rbac/validation)",
        refuses: "roleRef changed",
        check: role_ref,
    },
    Rule {
        group: "storage.k8s.io",
        kinds: &["StorageClass"],
        versions: &[],
        source: "ValidateStorageClassUpdate (pkg/apis/storage/validation)",
        refuses: "parameters, provisioner, reclaimPolicy or volumeBindingMode changed",
        check: storage_class,
    },
    Rule {
        group: "storage.k8s.io",
        kinds: &["VolumeAttachment"],
        versions: &[],
        source: "ValidateVolumeAttachmentUpdate (pkg/apis/storage/validation)",
        refuses: "spec changed",
        check: volume_attachment,
    },
    Rule {
        group: "storage.k8s.io",
        kinds: &["CSIDriver"],
        versions: &[],
        source: "ValidateCSIDriverUpdate (pkg/apis/storage/validation)",
        refuses: "spec.attachRequired (reported as spec.attachedRequired) or spec.volumeLifecycleModes changed",
        check: csi_driver,
    },
    Rule {
        group: "networking.k8s.io",
        kinds: &["IngressClass"],
        versions: &[],
        source: "ValidateIngressClassUpdate, validateIngressClassSpecUpdate (pkg/apis/networking/validation)",
        refuses: "spec.controller changed",
        check: ingress_class,
    },
    Rule {
        group: "scheduling.k8s.io",
        kinds: &["PriorityClass"],
        versions: &[],
        source: "ValidatePriorityClassUpdate (pkg/apis/scheduling/validation)",
        refuses: "value or preemptionPolicy changed",
        check: priority_class,
    },
    Rule {
        group: "discovery.k8s.io",
        kinds: &["EndpointSlice"],
        versions: &[],
        source: "ValidateEndpointSliceUpdate (pkg/apis/discovery/validation)",
        refuses: "addressType changed",
        check: endpoint_slice,
    },
];

fn role_ref(u: &Update) -> Vec<FieldError> {
    // v1 defaulting fills an empty roleRef.apiGroup.
    let fields = |v: &Value| {
        let s = |k: &str| v.str_at(&["roleRef", k]).unwrap_or("").to_string();
        let group = s("apiGroup");
        let group = if group.is_empty() {
            "rbac.authorization.k8s.io".to_string()
        } else {
            group
        };
        (group, s("kind"), s("name"))
    };
    let (old, new) = (fields(u.old), fields(u.new));
    if old == new {
        return vec![];
    }
    let mut shown = crate::value::Map::new();
    shown.insert("APIGroup", Value::from(new.0.as_str()));
    shown.insert("Kind", Value::from(new.1.as_str()));
    shown.insert("Name", Value::from(new.2.as_str()));
    vec![invalid(
        "roleRef",
        &render::json(&Value::Map(shown)),
        "cannot change roleRef",
    )]
}

fn storage_class(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !u.unchanged(&["parameters"]) {
        errs.push(forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if u.old_str(&["provisioner"]) != u.new_str(&["provisioner"]) {
        errs.push(forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    let defaulted = |s: &'_ str, d: &'static str| {
        if s.is_empty() {
            d.to_string()
        } else {
            s.to_string()
        }
    };
    if defaulted(u.old_str(&["reclaimPolicy"]), "Delete")
        != defaulted(u.new_str(&["reclaimPolicy"]), "Delete")
    {
        errs.push(forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    let mode = |v: &str| defaulted(v, "Immediate");
    let new_mode = mode(u.new_str(&["volumeBindingMode"]));
    if mode(u.old_str(&["volumeBindingMode"])) != new_mode {
        errs.push(invalid(
            "volumeBindingMode",
            &render::json_str(Some(&new_mode)),
            FIELD_IMMUTABLE,
        ));
    }
    errs
}

fn volume_attachment(u: &Update) -> Vec<FieldError> {
    if u.unchanged(&["spec"]) {
        return vec![];
    }
    vec![invalid(
        "spec",
        &render::json(&attachment_spec(u.new_at(&["spec"]))),
        FIELD_IMMUTABLE,
    )]
}

/// The internal `storage.VolumeAttachmentSpec` as JSON (Go field names). An inline volume spec
/// is shown as stored (its internal form is not reproduced).
fn attachment_spec(spec: Option<&Value>) -> Value {
    let s = |path: &[&str]| spec.and_then(|v| v.str_at(path)).unwrap_or("");
    let mut source = crate::value::Map::new();
    source.insert(
        "PersistentVolumeName",
        spec.and_then(|v| v.str_at(&["source", "persistentVolumeName"]))
            .map_or(Value::Null, Value::from),
    );
    source.insert(
        "InlineVolumeSpec",
        spec.and_then(|v| v.get_path(&["source", "inlineVolumeSpec"]))
            .map_or(Value::Null, render::sorted),
    );
    let mut m = crate::value::Map::new();
    m.insert("Attacher", Value::from(s(&["attacher"])));
    m.insert("Source", Value::Map(source));
    m.insert("NodeName", Value::from(s(&["nodeName"])));
    Value::Map(m)
}

fn csi_driver(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // v1 defaulting: attachRequired true, volumeLifecycleModes [Persistent].
    let attach = |v: Option<&Value>| match v {
        Some(Value::Bool(b)) => *b,
        _ => true,
    };
    let (old_attach, new_attach) = (
        attach(u.old_at(&["spec", "attachRequired"])),
        attach(u.new_at(&["spec", "attachRequired"])),
    );
    if old_attach != new_attach {
        errs.push(invalid(
            "spec.attachedRequired",
            &new_attach.to_string(),
            FIELD_IMMUTABLE,
        ));
    }
    let persistent = Value::List(vec![Value::from("Persistent")]);
    let modes = |v: Option<&Value>| -> Value {
        match v {
            Some(Value::List(l)) if !l.is_empty() => Value::List(l.clone()),
            _ => persistent.clone(),
        }
    };
    let path = ["spec", "volumeLifecycleModes"];
    let new_modes = modes(u.new_at(&path));
    if !same(Some(&modes(u.old_at(&path))), Some(&new_modes)) {
        errs.push(invalid(
            "spec.volumeLifecycleModes",
            &render::json(&new_modes),
            FIELD_IMMUTABLE,
        ));
    }
    errs
}

fn ingress_class(u: &Update) -> Vec<FieldError> {
    let new = u.new_str(&["spec", "controller"]);
    if u.old_str(&["spec", "controller"]) == new {
        return vec![];
    }
    vec![invalid(
        "spec.controller",
        &render::string(new),
        FIELD_IMMUTABLE,
    )]
}

fn priority_class(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !u.unchanged(&["value"]) {
        errs.push(forbidden("value", "may not be changed in an update."));
    }
    let policy = |s: &'_ str| {
        if s.is_empty() {
            "PreemptLowerPriority".to_string()
        } else {
            s.to_string()
        }
    };
    let new = policy(u.new_str(&["preemptionPolicy"]));
    if policy(u.old_str(&["preemptionPolicy"])) != new {
        errs.push(invalid(
            "preemptionPolicy",
            &render::json_str(Some(&new)),
            FIELD_IMMUTABLE,
        ));
    }
    errs
}

fn endpoint_slice(u: &Update) -> Vec<FieldError> {
    let new = u.new_str(&["addressType"]);
    if u.old_str(&["addressType"]) == new {
        return vec![];
    }
    vec![invalid(
        "addressType",
        &render::json_str(Some(new)),
        FIELD_IMMUTABLE,
    )]
}
