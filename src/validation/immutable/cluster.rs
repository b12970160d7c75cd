//! Cluster machinery: RBAC bindings, storage (StorageClass, VolumeAttachment, CSIDriver,
//! CSINode, CSIStorageCapacity, VolumeAttributesClass), networking (IngressClass, IPAddress,
//! ServiceCIDR), PriorityClass, EndpointSlice and RuntimeClass. Where v1 defaulting fills a
//! field the manifest may leave out (a StorageClass's `reclaimPolicy`, a binding's
//! `roleRef.apiGroup`), both sides are compared defaulted.

use super::{FIELD_IMMUTABLE, Rule, Update, at, forbidden, invalid, render, same};
use crate::validation::FieldError;
use crate::value::Value;

pub static RULES: [Rule; 13] = [
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
    Rule {
        group: "storage.k8s.io",
        kinds: &["CSINode"],
        versions: &[],
        source: "ValidateCSINodeUpdate (pkg/apis/storage/validation)",
        refuses: "a driver entry (by name) changed but for its allocatable count (MutableCSINodeAllocatableCount); drivers may be added or removed",
        check: csi_node,
    },
    Rule {
        group: "storage.k8s.io",
        kinds: &["CSIStorageCapacity"],
        versions: &[],
        source: "ValidateCSIStorageCapacityUpdate (pkg/apis/storage/validation)",
        refuses: "nodeTopology or storageClassName changed",
        check: csi_storage_capacity,
    },
    Rule {
        group: "storage.k8s.io",
        kinds: &["VolumeAttributesClass"],
        versions: &[],
        source: "ValidateVolumeAttributesClassUpdate (pkg/apis/storage/validation)",
        refuses: "driverName or parameters changed",
        check: volume_attributes_class,
    },
    Rule {
        group: "node.k8s.io",
        kinds: &["RuntimeClass"],
        versions: &[],
        source: "ValidateRuntimeClassUpdate (pkg/apis/node/validation)",
        refuses: "handler changed",
        check: runtime_class,
    },
    Rule {
        group: "networking.k8s.io",
        kinds: &["IPAddress"],
        versions: &[],
        source: "ValidateIPAddressUpdate (pkg/apis/networking/validation)",
        refuses: "spec.parentRef changed",
        check: ip_address,
    },
    Rule {
        group: "networking.k8s.io",
        kinds: &["ServiceCIDR"],
        versions: &[],
        source: "ValidateServiceCIDRUpdate (pkg/apis/networking/validation)",
        refuses: "spec.cidrs changed, but for a single CIDR gaining one of the other IP family (its first unchanged)",
        check: service_cidr,
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

/// `ValidateStorageClassUpdate`: each field by `ValidateImmutableField` (a nil and an empty
/// parameters map are one; the policy and mode are pointers, printed as their strings).
fn storage_class(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !u.unchanged(&["parameters"]) {
        errs.push(invalid(
            "parameters",
            &u.new_at(&["parameters"])
                .map_or_else(|| "null".into(), |p| render::json(&render::sorted(p))),
            FIELD_IMMUTABLE,
        ));
    }
    let provisioner = u.new_str(&["provisioner"]);
    if u.old_str(&["provisioner"]) != provisioner {
        errs.push(invalid(
            "provisioner",
            &render::string(provisioner),
            FIELD_IMMUTABLE,
        ));
    }
    let defaulted = |s: &'_ str, d: &'static str| {
        if s.is_empty() {
            d.to_string()
        } else {
            s.to_string()
        }
    };
    for (key, default) in [
        ("reclaimPolicy", "Delete"),
        ("volumeBindingMode", "Immediate"),
    ] {
        let new = defaulted(u.new_str(&[key]), default);
        if defaulted(u.old_str(&[key]), default) != new {
            errs.push(invalid(key, &render::json_str(Some(&new)), FIELD_IMMUTABLE));
        }
    }
    errs
}

/// `ValidateVolumeAttachmentUpdate`: the spec (printed as the internal
/// `storage.VolumeAttachmentSpec`, an inline volume spec as the internal
/// `core.PersistentVolumeSpec`) may not change.
fn volume_attachment(u: &Update) -> Vec<FieldError> {
    if u.unchanged(&["spec"]) {
        return vec![];
    }
    let empty = Value::Map(crate::value::Map::new());
    vec![invalid(
        "spec",
        &render::internal_of(
            "storage",
            "storage.v1",
            "VolumeAttachmentSpec",
            at(u.decoded, &["spec"]).unwrap_or(&empty),
        ),
        FIELD_IMMUTABLE,
    )]
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

/// `ValidateCSINodeUpdate`: each old driver against the new one of its name, compared (and
/// printed, as the internal `*storage.CSINodeDriver`) without `allocatable`.
fn csi_node(u: &Update) -> Vec<FieldError> {
    let drivers = |v: &Value| -> Vec<Value> {
        list(at(v, &["spec", "drivers"]))
            .iter()
            .map(|d| {
                let mut d = d.clone();
                if let Some(m) = d.as_map_mut() {
                    m.remove("allocatable");
                }
                d
            })
            .collect()
    };
    let (old, new) = (drivers(u.old), drivers(u.decoded));
    let mut errs = Vec::new();
    for o in &old {
        for n in new
            .iter()
            .filter(|n| n.str_at(&["name"]) == o.str_at(&["name"]))
        {
            if !same(Some(o), Some(n)) {
                errs.push(invalid(
                    "spec.drivers",
                    &render::internal_of("storage", "storage.v1", "CSINodeDriver", n),
                    FIELD_IMMUTABLE,
                ));
            }
        }
    }
    errs
}

fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_list).unwrap_or(&[])
}

fn csi_storage_capacity(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !u.unchanged(&["nodeTopology"]) {
        errs.push(invalid(
            "nodeTopology",
            &render::label_selector(u.new_at(&["nodeTopology"])),
            FIELD_IMMUTABLE,
        ));
    }
    let class = u.new_str(&["storageClassName"]);
    if u.old_str(&["storageClassName"]) != class {
        errs.push(invalid(
            "storageClassName",
            &render::string(class),
            FIELD_IMMUTABLE,
        ));
    }
    errs
}

/// `ValidateVolumeAttributesClassUpdate`: the parameters compare with `reflect.DeepEqual`, so
/// an empty map is not none (the stored object never has an empty one: its encoding drops it;
/// the new one as decoded may).
fn volume_attributes_class(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if u.old_str(&["driverName"]) != u.new_str(&["driverName"]) {
        errs.push(forbidden(
            "driverName",
            "updates to driverName are forbidden.",
        ));
    }
    let (old, new) = (u.old_at(&["parameters"]), at(u.decoded, &["parameters"]));
    let equal = match (old, new) {
        (None, None) => true,
        (Some(o), Some(n)) => crate::value::equals(o, n),
        _ => false,
    };
    if !equal {
        errs.push(forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    errs
}

fn runtime_class(u: &Update) -> Vec<FieldError> {
    let new = u.new_str(&["handler"]);
    if u.old_str(&["handler"]) == new {
        return vec![];
    }
    vec![invalid("handler", &render::string(new), FIELD_IMMUTABLE)]
}

/// `ValidateIPAddressUpdate`: the parent reference (`*networking.ParentReference`, printed as
/// the internal type) may not change.
fn ip_address(u: &Update) -> Vec<FieldError> {
    let path = ["spec", "parentRef"];
    if u.unchanged(&path) {
        return vec![];
    }
    let value = u.new_at(&path).map_or_else(
        || "null".to_string(),
        |p| render::internal_of("networking", "networking.v1", "ParentReference", p),
    );
    vec![invalid("spec.parentRef", &value, FIELD_IMMUTABLE)]
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    list(v).iter().map(|x| x.as_str().unwrap_or("")).collect()
}

/// The IP family of a CIDR (`netutils.IPFamilyOfCIDRString`; `None`: not a CIDR).
fn cidr_family(cidr: &str) -> Option<bool> {
    let (ip, bits) = cidr.split_once('/')?;
    bits.parse::<u8>().ok()?;
    match ip.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) => Some(false),
        std::net::IpAddr::V6(v6) => Some(v6.to_ipv4_mapped().is_none()),
    }
}

/// `ValidateServiceCIDRUpdate`. Going from one CIDR to two, the new spec is validated as
/// well: of its checks, the one that holds for valid CIDRs (one of each family) is here.
fn service_cidr(u: &Update) -> Vec<FieldError> {
    let path = ["spec", "cidrs"];
    let (old, new) = (strings(u.old_at(&path)), strings(u.new_at(&path)));
    let immutable = |field: String, value: String| invalid(&field, &value, FIELD_IMMUTABLE);
    let mut errs = Vec::new();
    if old.len() == new.len() {
        for (i, (o, n)) in old.iter().zip(&new).enumerate() {
            if o != n {
                errs.push(immutable(format!("spec.cidrs[{i}]"), render::string(n)));
            }
        }
    } else if old.len() == 1 && new.len() == 2 {
        if new[0] != old[0] {
            errs.push(immutable("spec.cidrs[0]".into(), render::string(new[0])));
        }
        let (a, b) = (cidr_family(new[0]), cidr_family(new[1]));
        if a.is_some() && a == b {
            errs.push(invalid(
                "spec.cidrs",
                &render::strings(u.new_at(&path)),
                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
            ));
        }
    } else {
        errs.push(immutable(
            "spec.cidrs".into(),
            render::strings(u.new_at(&path)),
        ));
    }
    errs
}
