//! The Kubernetes schemas shipped inside the binary, so everything works offline: the OpenAPI v2
//! documents of Kubernetes v1.30.1 and v1.36.0, converted as kube-apiserver does, completed with
//! the field defaults of the smd schemas Kubernetes generates (see `data/SOURCE.md`).

use super::formats::Formats;
use super::model::{Schema, SchemaError};
use super::{compiled, openapi_v2, smd_yaml};
use std::io::Read;
use std::sync::{Arc, OnceLock};

/// The version fieldguard defaults to, everywhere (one default, kept by the catalog).
pub const DEFAULT_VERSION: &str = crate::catalog::DEFAULT_KUBERNETES;

/// The version the reference oracle's `"k8s"` schema is (the case format `replay` shares with
/// it), and the version random cases are generated over.
pub const ORACLE_VERSION: &str = "v1.30.1";

struct Bundle {
    version: &'static str,
    swagger_gz: &'static [u8],
    /// The smd schema as JSON (read ten times faster than the YAML it is published as); only
    /// the tests convert it, to hold the compiled form to it.
    #[cfg(test)]
    smd_gz: &'static [u8],
    /// The two above converted and encoded ([`compiled`]): what a process reads.
    compiled: &'static [u8],
    cell: OnceLock<Result<(Arc<Schema>, Formats), SchemaError>>,
}

static BUNDLES: [Bundle; 2] = [
    Bundle {
        version: "v1.30.1",
        swagger_gz: include_bytes!("data/k8s-v1.30.1.swagger.json.gz"),
        #[cfg(test)]
        smd_gz: include_bytes!("data/k8s-v1.30.1.smd.json.gz"),
        compiled: include_bytes!("data/k8s-v1.30.1.schema.postcard"),
        cell: OnceLock::new(),
    },
    Bundle {
        version: "v1.36.0",
        swagger_gz: include_bytes!("data/k8s-v1.36.0.swagger.json.gz"),
        #[cfg(test)]
        smd_gz: include_bytes!("data/k8s-v1.36.0.smd.json.gz"),
        compiled: include_bytes!("data/k8s-v1.36.0.schema.postcard"),
        cell: OnceLock::new(),
    },
];

/// Kubernetes versions with a built-in schema.
pub fn versions() -> Vec<&'static str> {
    BUNDLES.iter().map(|b| b.version).collect()
}

fn gunzip(data: &[u8]) -> Result<String, SchemaError> {
    let mut s = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut s)
        .map_err(|e| SchemaError(format!("corrupt built-in schema: {e}")))?;
    Ok(s)
}

/// Builds a schema from an OpenAPI v2 document plus an smd overlay (field defaults and
/// field-level relationship overrides), the way the reference oracle does.
pub fn from_v2_with_overlay(swagger: &str, smd: Option<&str>) -> Result<Schema, SchemaError> {
    let doc = crate::value::json::parse(swagger.as_bytes())
        .map_err(|e| SchemaError(format!("OpenAPI v2: {e}")))?;
    schema_of(&doc, smd)
}

fn schema_of(doc: &crate::value::Value, smd: Option<&str>) -> Result<Schema, SchemaError> {
    let mut schema = openapi_v2::from_value(doc)?;
    if let Some(smd) = smd {
        let overlay = smd_yaml::parse(smd)?;
        schema.overlay(&overlay);
    }
    Ok(schema)
}

/// A bundle's schema and formats converted from its sources: the smd overlay is read on a
/// second thread while the OpenAPI document is read and converted. Processes read the compiled
/// form instead ([`build`]); the tests hold the two equal.
#[cfg(test)]
fn convert(bundle: &Bundle) -> Result<(Schema, Formats), SchemaError> {
    let overlay = || {
        let smd = gunzip(bundle.smd_gz)?;
        let v = crate::value::json::parse(smd.as_bytes())
            .map_err(|e| SchemaError(format!("smd schema: {e}")))?;
        smd_yaml::from_value(&v)
    };
    let (overlay, swagger) = std::thread::scope(|scope| {
        let overlay = scope.spawn(overlay);
        let swagger = (|| {
            let swagger = gunzip(bundle.swagger_gz)?;
            let doc = crate::value::json::parse(swagger.as_bytes())
                .map_err(|e| SchemaError(format!("OpenAPI v2: {e}")))?;
            Ok((openapi_v2::from_value(&doc)?, Formats::from_swagger(&doc)))
        })();
        let overlay = overlay
            .join()
            .unwrap_or_else(|_| Err(SchemaError("reading the smd schema failed".into())));
        (overlay, swagger)
    });
    let (mut schema, formats) = swagger?;
    schema.overlay(&overlay?);
    Ok((schema, formats))
}

/// A bundle's schema and formats, read from their compiled form.
fn build(bundle: &Bundle) -> Result<(Arc<Schema>, Formats), SchemaError> {
    compiled::decode(bundle.compiled).map(|(s, f)| (Arc::new(s), f))
}

fn bundle(version: &str) -> Result<&'static Bundle, SchemaError> {
    let want = if version.starts_with('v') {
        version.to_string()
    } else {
        format!("v{version}")
    };
    BUNDLES.iter().find(|b| b.version == want).ok_or_else(|| {
        SchemaError(format!(
            "no built-in schema for Kubernetes {version} (available: {})",
            versions().join(", ")
        ))
    })
}

fn built(version: &str) -> Result<&'static (Arc<Schema>, Formats), SchemaError> {
    let bundle = bundle(version)?;
    bundle
        .cell
        .get_or_init(|| build(bundle))
        .as_ref()
        .map_err(Clone::clone)
}

/// The built-in schema of a Kubernetes version (`v1.30.1`, `1.30.1`, ...), built once.
pub fn kubernetes(version: &str) -> Result<&'static Schema, SchemaError> {
    built(version).map(|(s, _)| &**s)
}

/// [`kubernetes`], shared (catalogs hold it without copying it).
pub fn shared(version: &str) -> Result<Arc<Schema>, SchemaError> {
    built(version).map(|(s, _)| s.clone())
}

/// The `format`s of a Kubernetes version's built-in types (values their Go types cannot hold).
pub fn formats(version: &str) -> Result<&'static Formats, SchemaError> {
    built(version).map(|(_, f)| f)
}

/// The bundled OpenAPI v2 document of a Kubernetes version, and the version's canonical name.
pub fn swagger_json(version: &str) -> Result<(&'static str, String), SchemaError> {
    let bundle = bundle(version)?;
    Ok((bundle.version, gunzip(bundle.swagger_gz)?))
}

/// The default built-in schema ([`DEFAULT_VERSION`]).
pub fn default_schema() -> Result<&'static Schema, SchemaError> {
    kubernetes(DEFAULT_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ElementRelationship, Gvk};

    /// The compiled schemas shipped in the binary are what the sources convert to, byte for
    /// byte. After changing a source or the conversion, regenerate them:
    /// `FIELDGUARD_REGENERATE_SCHEMAS=1 cargo test compiled_schemas_match_their_sources`.
    #[test]
    fn compiled_schemas_match_their_sources() {
        let regenerate = std::env::var_os("FIELDGUARD_REGENERATE_SCHEMAS").is_some();
        for bundle in &BUNDLES {
            let (schema, formats) = convert(bundle).unwrap();
            let fresh = compiled::encode(&schema, &formats).unwrap();
            if fresh == bundle.compiled {
                continue;
            }
            let file = format!(
                "{}/src/schema/data/k8s-{}.schema.postcard",
                env!("CARGO_MANIFEST_DIR"),
                bundle.version
            );
            if regenerate {
                std::fs::write(&file, &fresh).unwrap();
                continue;
            }
            panic!(
                "{file} is not what the sources of {} convert to ({} bytes shipped, {} fresh): \
                 run `FIELDGUARD_REGENERATE_SCHEMAS=1 cargo test compiled_schemas_match_their_sources`",
                bundle.version,
                bundle.compiled.len(),
                fresh.len()
            );
        }
        // What a process reads is what the sources give: read back, it encodes to the same bytes.
        for bundle in &BUNDLES {
            let (schema, formats) = build(bundle).unwrap();
            assert_eq!(
                compiled::encode(&schema, &formats).unwrap(),
                bundle.compiled,
                "{}",
                bundle.version
            );
        }
    }

    #[test]
    fn builtin_schemas_load_and_know_kinds() {
        for v in versions() {
            let s = kubernetes(v).unwrap();
            let dep = s.type_for(&Gvk::new("apps", "v1", "Deployment")).unwrap();
            assert_eq!(dep, "io.k8s.api.apps.v1.Deployment");
            let port = s.find_named("io.k8s.api.core.v1.ContainerPort").unwrap();
            let proto = port
                .atom
                .map
                .as_ref()
                .unwrap()
                .find_field("protocol")
                .unwrap();
            assert_eq!(proto.default.as_ref().and_then(|d| d.as_str()), Some("TCP"));
            let pv = s
                .find_named("io.k8s.api.core.v1.PersistentVolumeSpec")
                .unwrap();
            let claim = pv
                .atom
                .map
                .as_ref()
                .unwrap()
                .find_field("claimRef")
                .unwrap();
            assert_eq!(
                claim.ty.element_relationship,
                Some(ElementRelationship::Separable)
            );
        }
        assert!(kubernetes("v9.9.9").is_err());
    }

    /// The smd schemas bundled as JSON are the YAML ones Kubernetes publishes, type for type.
    #[test]
    fn bundled_smd_json_is_the_published_yaml() {
        let yaml: [&[u8]; 2] = [
            include_bytes!("data/k8s-v1.30.1.smd.yaml.gz"),
            include_bytes!("data/k8s-v1.36.0.smd.yaml.gz"),
        ];
        for (bundle, yaml) in BUNDLES.iter().zip(yaml) {
            let from_yaml = smd_yaml::parse(&gunzip(yaml).unwrap()).unwrap();
            let json = gunzip(bundle.smd_gz).unwrap();
            let from_json =
                smd_yaml::from_value(&crate::value::json::parse(json.as_bytes()).unwrap()).unwrap();
            assert!(from_yaml.types().len() > 400, "{}", bundle.version);
            assert_eq!(from_yaml.types().len(), from_json.types().len());
            assert_eq!(
                smd_yaml::diff(&from_yaml, &from_json, false),
                Vec::<String>::new()
            );
            assert_eq!(
                smd_yaml::diff(&from_json, &from_yaml, false),
                Vec::<String>::new()
            );
        }
    }
}
