//! The types a check knows: for an object's apiVersion and kind, its merge schema, whether it
//! is namespaced, and which fields its endpoint resets. Built-in Kubernetes types come from a
//! bundled schema; custom resources from their CustomResourceDefinitions (found in the
//! manifests or the live state); a cluster adds its own OpenAPI v3 documents and discovery.

use crate::fieldpath::Set;
use crate::schema::crd::{self, CrdVersion};
use crate::schema::{Gvk, Schema, SchemaError, TypeRef, builtin};
use crate::validation::Structural;
use crate::value::Value;
use foldhash::HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The newest bundled Kubernetes version: what checks assume unless told otherwise.
pub const DEFAULT_KUBERNETES: &str = "v1.36.0";

/// Built-in kinds that are not namespaced, by group.
const CLUSTER_SCOPED: &[(&str, &[&str])] = &[
    (
        "",
        &["Namespace", "Node", "PersistentVolume", "ComponentStatus"],
    ),
    (
        "rbac.authorization.k8s.io",
        &["ClusterRole", "ClusterRoleBinding"],
    ),
    ("apiextensions.k8s.io", &["CustomResourceDefinition"]),
    (
        "storage.k8s.io",
        &[
            "StorageClass",
            "CSIDriver",
            "CSINode",
            "VolumeAttachment",
            "VolumeAttributesClass",
        ],
    ),
    ("scheduling.k8s.io", &["PriorityClass"]),
    (
        "admissionregistration.k8s.io",
        &[
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
        ],
    ),
    ("apiregistration.k8s.io", &["APIService"]),
    ("node.k8s.io", &["RuntimeClass"]),
    (
        "networking.k8s.io",
        &["IngressClass", "IPAddress", "ServiceCIDR"],
    ),
    (
        "certificates.k8s.io",
        &["CertificateSigningRequest", "ClusterTrustBundle"],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
    ("internal.apiserver.k8s.io", &["StorageVersion"]),
    ("resource.k8s.io", &["DeviceClass", "ResourceSlice"]),
    ("storagemigration.k8s.io", &["StorageVersionMigration"]),
];

/// What a check needs to know about one type.
#[derive(Clone, Debug)]
pub struct TypeInfo {
    pub gvk: Gvk,
    pub schema: Arc<Schema>,
    pub type_ref: TypeRef,
    pub namespaced: bool,
    /// Fields the main endpoint resets, per API version (`status` when there is a status
    /// subresource).
    pub reset_fields: Arc<BTreeMap<String, Set>>,
    /// The structural schema the apiserver defaults and validates stored objects with (custom
    /// resources only: built-in kinds are defaulted and validated by Go code, not by their
    /// published schema).
    pub validation: Option<Arc<Structural>>,
    /// True for custom resources (a CRD, or a served type the built-in bundle does not
    /// define): stored unstructured, compared strictly by the apiserver.
    pub custom_resource: bool,
}

/// A type with no schema anywhere.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "unknown kind {kind} in {api_version}: no built-in schema, CustomResourceDefinition or served type for it"
)]
pub struct UnknownKind {
    pub api_version: String,
    pub kind: String,
}

/// A custom resource type from a CRD.
#[derive(Clone, Debug)]
struct Custom {
    schema: Arc<Schema>,
    version: CrdVersion,
}

/// Scope and subresources a cluster's discovery reports for a resource.
#[derive(Clone, Debug)]
pub struct Discovered {
    pub namespaced: bool,
    pub plural: String,
    pub has_status: bool,
}

/// Every type a check can resolve.
#[derive(Clone, Debug)]
pub struct Catalog {
    builtin: Arc<Schema>,
    /// The built-in types' value formats (int32, base64 bytes).
    formats: Option<&'static crate::schema::formats::Formats>,
    /// Custom resources by group/version/kind.
    custom: HashMap<Gvk, Custom>,
    /// A cluster's published schemas (OpenAPI v3), searched before the built-in bundle.
    served: Vec<Arc<Schema>>,
    /// A cluster's discovery, by group/version/kind.
    discovered: HashMap<Gvk, Discovered>,
    /// Custom resources' structural schemas, by group/version/kind.
    validations: HashMap<Gvk, Arc<Structural>>,
}

impl Catalog {
    /// The catalog of a Kubernetes version's built-in types (`v1.36.0`, `1.30.1`, ...).
    pub fn kubernetes(version: &str) -> Result<Catalog, SchemaError> {
        Ok(Catalog {
            builtin: builtin::shared(version)?,
            formats: builtin::formats(version).ok(),
            custom: HashMap::default(),
            served: Vec::new(),
            discovered: HashMap::default(),
            validations: HashMap::default(),
        })
    }

    /// Values the built-in kinds' types cannot hold in `obj` (`info`'s type): located by the
    /// path kube-apiserver prints. Custom resources have none (their schema is checked after
    /// the merge, see [`crate::validation`]).
    pub fn format_problems(&self, info: &TypeInfo, obj: &Value) -> Vec<(String, String)> {
        match self.formats {
            Some(f) if !info.custom_resource => f.check(&info.gvk, obj),
            _ => Vec::new(),
        }
    }

    /// Adds the types a CustomResourceDefinition defines.
    pub fn add_crd(&mut self, crd_object: &Value) -> Result<(), SchemaError> {
        let (schema, versions) = crd::schema_for(crd_object, &self.builtin)?;
        for (gvk, s) in crd::structural_schemas(crd_object) {
            self.validations.insert(gvk, Arc::new(s));
        }
        let schema = Arc::new(schema);
        for v in versions {
            self.custom.insert(
                v.gvk.clone(),
                Custom {
                    schema: schema.clone(),
                    version: v,
                },
            );
        }
        Ok(())
    }

    /// Adds schemas a cluster publishes (converted from its OpenAPI v3 documents); they take
    /// precedence over the built-in bundle.
    pub fn add_served(&mut self, schema: Schema) {
        self.served.push(Arc::new(schema));
    }

    /// [`Catalog::add_served`] for a schema shared with other catalogs.
    pub fn add_served_shared(&mut self, schema: Arc<Schema>) {
        self.served.push(schema);
    }

    /// Records the structural schema a cluster validates a custom resource with.
    pub fn add_validation(&mut self, gvk: Gvk, s: Arc<Structural>) {
        self.validations.insert(gvk, s);
    }

    /// Records what a cluster's discovery says about a type.
    pub fn add_discovered(&mut self, gvk: Gvk, d: Discovered) {
        self.discovered.insert(gvk, d);
    }

    /// What the cluster's discovery said about a type, if it was asked.
    pub fn discovered(&self, gvk: &Gvk) -> Option<&Discovered> {
        self.discovered.get(gvk)
    }

    /// Custom resource kinds known from CRDs.
    pub fn custom_kinds(&self) -> impl Iterator<Item = &Gvk> {
        self.custom.keys()
    }

    /// The type of objects with this apiVersion and kind.
    pub fn lookup(&self, api_version: &str, kind: &str) -> Result<TypeInfo, UnknownKind> {
        let gvk = Gvk::from_api_version(api_version, kind);
        let unknown = || UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        };
        let discovered = self.discovered.get(&gvk);
        if let Some(c) = self.custom.get(&gvk) {
            let tr = match &c.version.type_name {
                Some(n) => c.schema.type_ref(n),
                None => TypeRef::named(crate::schema::DEDUCED_TYPE),
            };
            let schema = match &c.version.type_name {
                Some(_) => c.schema.clone(),
                None => deduced_schema(),
            };
            let mut info = self.info(gvk, schema, tr, c.version.namespaced, c.version.has_status);
            info.custom_resource = true;
            return Ok(info);
        }
        for s in self.served.iter().chain(std::iter::once(&self.builtin)) {
            if let Some(name) = s.type_for(&gvk) {
                let tr = s.type_ref(name);
                let has_status = match discovered {
                    Some(d) => d.has_status,
                    None => declares_status(s, &tr),
                };
                let namespaced = match discovered {
                    Some(d) => d.namespaced,
                    None => !is_cluster_scoped(&gvk.group, kind),
                };
                let mut info = self.info(gvk.clone(), s.clone(), tr, namespaced, has_status);
                info.custom_resource = self.builtin.type_for(&gvk).is_none();
                return Ok(info);
            }
        }
        Err(unknown())
    }

    fn info(
        &self,
        gvk: Gvk,
        schema: Arc<Schema>,
        type_ref: TypeRef,
        namespaced: bool,
        has_status: bool,
    ) -> TypeInfo {
        let mut reset = BTreeMap::new();
        if has_status {
            reset.insert(
                gvk.api_version(),
                Set::from_paths([&[crate::fieldpath::PathElement::field("status")][..]]),
            );
        }
        TypeInfo {
            schema,
            type_ref,
            namespaced,
            reset_fields: Arc::new(reset),
            validation: self.validations.get(&gvk).cloned(),
            custom_resource: false,
            gvk,
        }
    }
}

/// True for built-in kinds that are not namespaced.
pub fn is_cluster_scoped(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED
        .iter()
        .any(|(g, kinds)| *g == group && kinds.contains(&kind))
}

/// Built-in types declaring a `status` field have a status subresource (their main endpoint
/// resets `status`).
fn declares_status(schema: &Schema, tr: &TypeRef) -> bool {
    schema
        .resolve(tr)
        .and_then(|a| a.map)
        .is_some_and(|m| m.find_field("status").is_some())
}

/// The schema of custom resources without one, shared (prepared objects are kept per schema).
fn deduced_schema() -> Arc<Schema> {
    static DEDUCED: std::sync::OnceLock<Arc<Schema>> = std::sync::OnceLock::new();
    DEDUCED.get_or_init(|| Arc::new(Schema::deduced())).clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    #[test]
    fn built_in_kinds_resolve_with_scope_and_reset_fields() {
        let c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        let d = c.lookup("apps/v1", "Deployment").unwrap();
        assert!(d.namespaced);
        assert!(d.reset_fields.contains_key("apps/v1"));
        let ns = c.lookup("v1", "Namespace").unwrap();
        assert!(!ns.namespaced);
        let cm = c.lookup("v1", "ConfigMap").unwrap();
        assert!(cm.reset_fields.is_empty());
        let e = c.lookup("example.com/v1", "Widget").unwrap_err();
        assert!(e.to_string().contains("unknown kind Widget"), "{e}");
    }

    #[test]
    fn crds_add_their_kinds() {
        let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        let crd = parse_one(
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
",
        )
        .unwrap();
        c.add_crd(&crd).unwrap();
        let w = c.lookup("example.com/v1", "Widget").unwrap();
        assert!(!w.namespaced);
        assert!(w.reset_fields.contains_key("example.com/v1"));
    }
}
