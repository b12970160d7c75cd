//! Schema conversions cross-checked against each other on real Kubernetes documents:
//! OpenAPI v2 vs the smd schema Kubernetes generates, OpenAPI v3 vs v2, and real CRDs.

use fieldguard::schema::{
    ElementRelationship, Gvk, Schema, builtin, crd, load_document, openapi_v2, openapi_v3, smd_yaml,
};
use fieldguard::value::{Value, json, yaml};
use std::io::Read;
use std::path::Path;

fn gunzip(p: &Path) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

fn fixture(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn bundle_text(name: &str) -> String {
    gunzip(&fixture(&format!("src/schema/data/{name}")))
}

fn common_types(a: &Schema, b: &Schema) -> usize {
    a.types()
        .iter()
        .filter(|t| b.find_named(&t.name).is_some())
        .count()
}

#[test]
fn openapi_v2_conversion_equals_the_generated_smd_schema() {
    for (version, min_common) in [("v1.30.1", 484), ("v1.36.0", 484)] {
        let v2 = openapi_v2::from_value(
            &json::parse_str(&bundle_text(&format!("k8s-{version}.swagger.json.gz"))).unwrap(),
        )
        .unwrap();
        let smd = smd_yaml::parse(&bundle_text(&format!("k8s-{version}.smd.yaml.gz"))).unwrap();
        let common = common_types(&smd, &v2);
        assert!(
            common >= min_common,
            "{version}: only {common} common types"
        );
        // Apart from field defaults, the only difference is the one field-level override
        // Kubernetes declares (PersistentVolumeSpec.claimRef is granular over an atomic type).
        let diffs = smd_yaml::diff(&smd, &v2, true);
        assert_eq!(
            diffs,
            vec![
                "io.k8s.api.core.v1.PersistentVolumeSpec.claimRef: ref Some(\"io.k8s.api.core.v1.ObjectReference\")/Some(Separable) vs Some(\"io.k8s.api.core.v1.ObjectReference\")/None".to_string()
            ],
            "{version}"
        );
        // The built-in bundle (v2 + overlay) carries every default and the override.
        let built = builtin::kubernetes(version).unwrap();
        assert_eq!(
            smd_yaml::diff(&smd, built, false),
            Vec::<String>::new(),
            "{version}"
        );
    }
}

#[test]
fn openapi_v3_conversion_agrees_with_v2_up_to_documented_differences() {
    let dir = fixture("tests/fixtures/openapi-v3");
    let mut docs = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "gz") {
            docs.push(json::parse_str(&gunzip(&p)).unwrap());
        }
    }
    assert_eq!(docs.len(), 7);
    let v3 = openapi_v3::from_documents(&docs).unwrap();
    let base = builtin::kubernetes("v1.30.1").unwrap();
    assert!(common_types(&v3, base) > 300);
    for d in smd_yaml::diff(&v3, base, false) {
        let documented =
            // v3 carries defaults for types the generated smd schema (our overlay) omits.
            d.contains(": default Some(") && d.ends_with(" vs None")
            // A RawExtension: the v2 converter refers to `__untyped_atomic_` in its place,
            // the v3 one keeps the named type with the same atom (kube-openapi's
            // `ToSchemaFromOpenAPI`).
            || d.contains("RawExtension")
            // v3 writes IntOrString as oneOf (untyped scalar|list|map); v2 as an untyped scalar.
            || d.starts_with("io.k8s.apimachinery.pkg.util.intstr.IntOrString:");
        assert!(documented, "undocumented difference: {d}");
    }
    // Both sides know the same kinds.
    for gvk in [
        Gvk::new("apps", "v1", "Deployment"),
        Gvk::new("", "v1", "Service"),
        Gvk::new("batch", "v1", "CronJob"),
    ] {
        assert_eq!(v3.type_for(&gvk), base.type_for(&gvk), "{gvk}");
    }
}

fn crd_schema(file: &str) -> (Schema, Vec<crd::CrdVersion>) {
    let text = gunzip(&fixture(&format!("tests/fixtures/crds/{file}.gz")));
    let v = yaml::parse_one(&text).unwrap();
    crd::schema_for(&v, builtin::default_schema().unwrap()).unwrap()
}

/// The type reference at a path of field names (`[]` steps into list items).
fn field(s: &Schema, type_name: &str, path: &[&str]) -> fieldguard::schema::TypeRef {
    let mut tr = s.type_ref(type_name);
    for name in path {
        let r = s.resolve(&tr).unwrap_or_else(|| panic!("resolve {name}"));
        tr = match (r.map, r.list) {
            (Some(m), _) if *name != "[]" => m
                .find_field(name)
                .unwrap_or_else(|| panic!("no field {name}"))
                .ty
                .clone(),
            (_, Some(l)) => l.element_type.clone(),
            _ => panic!("cannot descend into {name}"),
        };
    }
    tr
}

#[test]
fn real_crds_convert_with_their_list_and_map_semantics() {
    let (s, vs) = crd_schema("argo-rollouts-Rollout.yaml");
    let t = vs[0].type_name.clone().unwrap();
    let containers_tr = field(&s, &t, &["spec", "template", "spec", "containers"]);
    let containers = s.resolve(&containers_tr).unwrap();
    assert_eq!(containers.list_er(), ElementRelationship::Associative);
    assert_eq!(containers.list.unwrap().keys, vec!["name"]);
    let ports = field(
        &s,
        &t,
        &["spec", "template", "spec", "containers", "[]", "ports"],
    );
    let ports = s.resolve(&ports).unwrap();
    assert_eq!(ports.list.unwrap().keys, vec!["containerPort", "protocol"]);
    let port = field(
        &s,
        &t,
        &[
            "spec",
            "template",
            "spec",
            "containers",
            "[]",
            "ports",
            "[]",
        ],
    );
    let port = s.resolve(&port).unwrap();
    let proto = port.map.unwrap().find_field("protocol").unwrap();
    assert_eq!(proto.default, Some(Value::from("TCP")));
    // ObjectMeta is injected at the root.
    let labels = field(&s, &t, &["metadata", "labels"]);
    assert_eq!(
        s.resolve(&labels).unwrap().map_er(),
        ElementRelationship::Separable
    );

    let (s, vs) = crd_schema("cert-manager-Certificate.yaml");
    let t = vs
        .iter()
        .find(|v| v.storage)
        .unwrap()
        .type_name
        .clone()
        .unwrap();
    let conds_tr = field(&s, &t, &["status", "conditions"]);
    let conds = s.resolve(&conds_tr).unwrap();
    assert_eq!(conds.list.unwrap().keys, vec!["type"]);
    assert!(vs[0].has_status);

    let (s, vs) = crd_schema("controller-tools-testdata-CronJob.yaml");
    assert_eq!(vs.len(), 3);
    let t = vs
        .iter()
        .find(|v| v.storage)
        .unwrap()
        .type_name
        .clone()
        .unwrap();
    let root = s.find_named(&t).unwrap();
    let spec = root.atom.map.as_ref().unwrap().find_field("spec").unwrap();
    assert!(spec.ty.inlined.map.is_some());
    for f in [
        "prometheus-operator-ServiceMonitor.yaml",
        "gateway-api-HTTPRoute.yaml",
    ] {
        let (s, vs) = crd_schema(f);
        for v in &vs {
            let t = v.type_name.as_ref().unwrap();
            assert_eq!(s.type_for(&v.gvk), Some(t.as_str()), "{f}");
        }
    }
}

#[test]
fn embedded_resources_get_type_and_object_meta() {
    let crd_text = fieldguard::replay::WIDGET_CRD;
    let s = load_document(crd_text, "widget").unwrap();
    let t = s
        .type_for(&Gvk::new("example.fieldguard.dev", "v1", "Widget"))
        .unwrap()
        .to_string();
    let tmpl_tr = field(&s, &t, &["spec", "template"]);
    let tmpl = s.resolve(&tmpl_tr).unwrap();
    let m = tmpl.map.unwrap();
    assert!(m.find_field("metadata").is_some());
    assert!(m.find_field("apiVersion").is_some());
    assert_eq!(m.element_type.name(), Some("__untyped_deduced_"));
    let items_tr = field(&s, &t, &["spec", "items"]);
    let items = s.resolve(&items_tr).unwrap();
    assert_eq!(items.list.unwrap().keys, vec!["name", "zone"]);
    let sel_tr = field(&s, &t, &["spec", "selector"]);
    let sel = s.resolve(&sel_tr).unwrap();
    assert_eq!(sel.map_er(), ElementRelationship::Atomic);
    let tags_tr = field(&s, &t, &["spec", "tags"]);
    let tags = s.resolve(&tags_tr).unwrap();
    assert_eq!(tags.list_er(), ElementRelationship::Associative);
    assert!(tags.list.unwrap().keys.is_empty());
}

#[test]
fn bad_schema_documents_are_reported() {
    assert!(load_document("{\"hello\": 1}", "x").is_err());
    let bad_list = r#"{"components":{"schemas":{"a":{"type":"array","x-kubernetes-list-type":"map","items":{"type":"object"}}}}}"#;
    let e = load_document(bad_list, "x").unwrap_err();
    assert!(e.to_string().contains("missing map keys"), "{e}");
}
