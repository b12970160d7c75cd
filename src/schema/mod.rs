//! Merge schemas: what structured-merge-diff needs to know about a type (scalars, structs and
//! maps granular or atomic, lists atomic / set / map-with-keys, untyped content), loaded from
//! Kubernetes OpenAPI v2 and v3, CRD structural schemas, or the smd YAML format.

pub mod builtin;
mod compiled;
pub mod crd;
pub mod formats;
mod model;
pub mod openapi_v2;
pub mod openapi_v3;
pub mod smd_yaml;

pub use model::{
    Atom, DEDUCED_TYPE, ElementRelationship, Gvk, List, MapType, Resolved, Scalar, Schema,
    SchemaError, StructField, TypeDef, TypeRef, UNTYPED_ATOMIC_TYPE,
};

/// Loads a schema document of any supported kind, detected from its content: OpenAPI v2
/// (`swagger`/`definitions`), OpenAPI v3 (`components.schemas`), an smd schema (`types`), or a
/// CustomResourceDefinition (completed with ObjectMeta from the default built-in schema).
pub fn load_document(text: &str, source: &str) -> Result<Schema, SchemaError> {
    let v = if text.trim_start().starts_with('{') {
        crate::value::json::parse_str(text).map_err(|e| SchemaError(format!("{source}: {e}")))?
    } else {
        crate::value::yaml::parse_one(text).map_err(|e| SchemaError(format!("{source}: {e}")))?
    };
    let has = |k: &str| v.as_map().is_some_and(|m| m.contains_key(k));
    if has("types") {
        smd_yaml::from_value(&v)
    } else if has("swagger") || has("definitions") {
        openapi_v2::from_value(&v)
    } else if v.get_path(&["components", "schemas"]).is_some() {
        openapi_v3::from_value(&v)
    } else if crd::is_crd(&v) {
        let base = builtin::default_schema()?;
        crd::schema_for(&v, base).map(|(s, _)| s)
    } else {
        Err(SchemaError(format!(
            "{source}: not an OpenAPI v2/v3 document, an smd schema or a CustomResourceDefinition"
        )))
    }
}
