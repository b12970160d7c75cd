//! CustomResourceDefinitions to merge schemas, the way kube-apiserver builds the type converter
//! for custom resources: the version's structural schema with TypeMeta and ObjectMeta injected
//! at the root and into `x-kubernetes-embedded-resource` objects, converted as OpenAPI v3.

use super::model::{Gvk, Schema, SchemaError};
use super::openapi_v3;
use crate::value::{Map, Str, Value};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// One served version of a CRD.
#[derive(Clone, Debug)]
pub struct CrdVersion {
    pub gvk: Gvk,
    /// Type name of the root in the produced schema (`None`: no schema, content is deduced).
    pub type_name: Option<String>,
    pub served: bool,
    pub storage: bool,
    pub has_status: bool,
    /// JSON path of the replicas field when the scale subresource is enabled.
    pub scale_replicas_path: Option<String>,
    pub namespaced: bool,
    pub plural: String,
}

/// True if `v` is a CustomResourceDefinition object.
pub fn is_crd(v: &Value) -> bool {
    v.str_at(&["kind"]) == Some("CustomResourceDefinition")
        && v.str_at(&["apiVersion"])
            .is_some_and(|a| a.starts_with("apiextensions.k8s.io/"))
}

/// Type name kube-openapi gives a CRD kind (`com.example.v1.CronTab`).
pub fn type_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    let g = parts.join(".");
    if g.is_empty() {
        format!("{version}.{kind}")
    } else {
        format!("{g}.{version}.{kind}")
    }
}

/// A version entry: name, served, storage, schema, subresources.
type VersionSpec<'a> = (String, bool, bool, Option<&'a Value>, Option<&'a Value>);

/// Builds the schema for every version of `crd`; `base` supplies ObjectMeta and its types.
pub fn schema_for(crd: &Value, base: &Schema) -> Result<(Schema, Vec<CrdVersion>), SchemaError> {
    let err = |m: String| SchemaError(format!("CustomResourceDefinition: {m}"));
    if !is_crd(crd) {
        return Err(err("not a CustomResourceDefinition".into()));
    }
    let name = crd.str_at(&["metadata", "name"]).unwrap_or("<unnamed>");
    let err = |m: String| SchemaError(format!("CustomResourceDefinition {name}: {m}"));
    let spec = crd
        .get_path(&["spec"])
        .and_then(Value::as_map)
        .ok_or_else(|| err("missing spec".into()))?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or_else(|| err("missing spec.group".into()))?;
    let kind = crd
        .str_at(&["spec", "names", "kind"])
        .ok_or_else(|| err("missing spec.names.kind".into()))?;
    let plural = crd.str_at(&["spec", "names", "plural"]).unwrap_or_default();
    let namespaced = crd.str_at(&["spec", "scope"]) != Some("Cluster");
    let preserve = crd.get_path(&["spec", "preserveUnknownFields"]) == Some(&Value::Bool(true));

    // v1 lists versions with their own schema; v1beta1 may share spec.validation.
    let shared_schema = crd.get_path(&["spec", "validation", "openAPIV3Schema"]);
    let shared_sub = crd.get_path(&["spec", "subresources"]);
    let mut versions: Vec<VersionSpec> = Vec::new();
    match spec.get("versions") {
        Some(Value::List(vs)) if !vs.is_empty() => {
            for v in vs {
                let vname = v
                    .str_at(&["name"])
                    .ok_or_else(|| err("a version has no name".into()))?;
                let served = v.get_path(&["served"]) != Some(&Value::Bool(false));
                let storage = v.get_path(&["storage"]) == Some(&Value::Bool(true));
                let schema = v.get_path(&["schema", "openAPIV3Schema"]).or(shared_schema);
                let sub = v.get_path(&["subresources"]).or(shared_sub);
                versions.push((vname.to_string(), served, storage, schema, sub));
            }
        }
        _ => {
            let vname = spec
                .get("version")
                .and_then(Value::as_str)
                .ok_or_else(|| err("missing spec.versions".into()))?;
            versions.push((vname.to_string(), true, true, shared_schema, shared_sub));
        }
    }

    let mut models = Map::new();
    let mut out = Vec::new();
    for (vname, served, storage, schema, sub) in versions {
        let tn = schema.map(|s| {
            let tn = type_name(group, &vname, kind);
            models.insert(Str::from(tn.as_str()), kube_native(s));
            tn
        });
        out.push(CrdVersion {
            gvk: Gvk::new(group, &vname, kind),
            type_name: tn,
            served,
            storage,
            has_status: sub.and_then(|s| s.get_path(&["status"])).is_some(),
            scale_replicas_path: sub
                .and_then(|s| s.str_at(&["scale", "specReplicasPath"]))
                .map(str::to_string),
            namespaced,
            plural: plural.to_string(),
        });
    }
    let mut schema = openapi_v3::from_models(&models, preserve).map_err(|e| err(e.0))?;
    let deps = base.closure(&[OBJECT_META]);
    if deps.is_empty() {
        return Err(err(format!("base schema has no {OBJECT_META}")));
    }
    let mut meta = Schema::new(deps);
    for v in &out {
        if let Some(tn) = &v.type_name {
            meta.add_gvk(v.gvk.clone(), tn);
        }
    }
    schema.extend(meta);
    Ok((schema, out))
}

fn object_meta_ref() -> Value {
    let mut m = Map::new();
    m.insert(
        "$ref",
        Value::from(format!("#/components/schemas/{OBJECT_META}").as_str()),
    );
    Value::Map(m)
}

fn string_schema() -> Value {
    let mut m = Map::new();
    m.insert("type", Value::from("string"));
    Value::Map(m)
}

/// The CRD schema as the apiserver publishes it for apply: TypeMeta and ObjectMeta at the root.
fn kube_native(schema: &Value) -> Value {
    let mut root = schema.clone();
    add_embedded(&mut root);
    if let Value::Map(m) = &mut root {
        let props = match m.get_mut("properties") {
            Some(Value::Map(p)) => p,
            _ => {
                m.insert("properties", Value::Map(Map::new()));
                m.get_mut("properties")
                    .and_then(Value::as_map_mut)
                    .expect("just inserted")
            }
        };
        props.insert("metadata", object_meta_ref());
        props.insert("apiVersion", string_schema());
        props.insert("kind", string_schema());
    }
    root
}

/// Adds apiVersion/kind/metadata to every `x-kubernetes-embedded-resource` object.
fn add_embedded(s: &mut Value) {
    let Value::Map(m) = s else { return };
    if let Some(Value::Map(props)) = m.get_mut("properties") {
        for (_, p) in props.entries_mut().iter_mut() {
            add_embedded(p);
        }
    }
    if let Some(items) = m.get_mut("items") {
        add_embedded(items);
    }
    if let Some(ap) = m.get_mut("additionalProperties") {
        add_embedded(ap);
    }
    if m.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        let props = match m.get_mut("properties") {
            Some(Value::Map(p)) => p,
            _ => {
                m.insert("properties", Value::Map(Map::new()));
                m.get_mut("properties")
                    .and_then(Value::as_map_mut)
                    .expect("just inserted")
            }
        };
        props.insert("apiVersion", string_schema());
        props.insert("kind", string_schema());
        props.insert("metadata", object_meta_ref());
    }
}

/// Each version's structural schema read for validation (the apiserver checks stored custom
/// resources against it); versions without a schema have none.
pub fn structural_schemas(crd: &Value) -> Vec<(Gvk, crate::validation::Structural)> {
    let (Some(group), Some(kind)) = (
        crd.str_at(&["spec", "group"]),
        crd.str_at(&["spec", "names", "kind"]),
    ) else {
        return Vec::new();
    };
    let shared = crd.get_path(&["spec", "validation", "openAPIV3Schema"]);
    let Some(versions) = crd.get_path(&["spec", "versions"]).and_then(Value::as_list) else {
        return Vec::new();
    };
    versions
        .iter()
        .filter_map(|v| {
            let name = v.str_at(&["name"])?;
            let schema = v.get_path(&["schema", "openAPIV3Schema"]).or(shared)?;
            let api_version = format!("{group}/{name}");
            Some((
                Gvk::from_api_version(&api_version, kind),
                crate::validation::Structural::from_value(schema, None),
            ))
        })
        .collect()
}
