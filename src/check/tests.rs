use super::*;
use crate::catalog::DEFAULT_KUBERNETES;
use crate::manifest::{Loaded, parse_into};
use crate::value::yaml::parse_one;
use std::sync::Arc;

fn docs(text: &str) -> Vec<Document> {
    let mut l: Loaded = crate::manifest::load(&[], &mut std::io::empty());
    parse_into(&Arc::from("m.yaml"), text.as_bytes(), &mut l);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    l.documents
}

fn opts(force: Force) -> Options {
    Options {
        field_manager: "ci".into(),
        force,
        namespace: "team".into(),
        now: 1_700_000_000,
    }
}

#[test]
fn namespaces_default_like_kubectl_and_duplicates_are_rejected() {
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let t = resolve(
        docs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team, namespace: oops}\n"),
        &mut c,
        "team",
    )
    .unwrap();
    assert_eq!(t[0].object_ref.namespace, "team");
    assert_eq!(
        t[0].doc.object.str_at(&["metadata", "namespace"]),
        Some("team")
    );
    assert_eq!(t[1].object_ref.namespace, "");
    assert_eq!(t[1].doc.object.str_at(&["metadata", "namespace"]), None);

    let e = resolve(
        docs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team}\n"),
        &mut c,
        "team",
    )
    .unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(
        e[0].message
            .contains("already defined at m.yaml:1: document 1"),
        "{}",
        e[0]
    );
    assert_eq!(e[0].doc, Some(2));
}

#[test]
fn custom_resources_use_crds_from_the_same_manifest_set() {
    let text = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [id]
                items: {type: object, properties: {id: {type: string}, size: {type: integer}}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec:
  parts:
  - {id: a, size: 2}
";
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let t = resolve(docs(text), &mut c, "team").unwrap();
    // The live widget: another manager owns part `a`'s size (a list-map item by key).
    let live = parse_one(
        "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: team
  managedFields:
  - manager: operator
    operation: Update
    apiVersion: example.com/v1
    fieldsType: FieldsV1
    fieldsV1: {f:spec: {f:parts: {'k:{\"id\":\"a\"}': {.: {}, f:id: {}, f:size: {}}}}}
spec:
  parts:
  - {id: a, size: 3}
",
    )
    .unwrap();
    let r = check_one(&t[1], Some(&live), &opts(Force::None));
    assert_eq!(r.verdict, Verdict::Conflict, "{r:?}");
    assert_eq!(r.conflicts.len(), 1);
    assert_eq!(r.conflicts[0].field.path, ".spec.parts[id=\"a\"].size");
    assert_eq!(r.conflicts[0].line, 30);
    let s = &r.conflicts[0].suggestions;
    assert_eq!(s[0].action, Action::ShareValue, "{s:?}");
    assert!(s[0].message.contains("live value 3"), "{s:?}");
    // Creating it instead: no conflicts, its fields counted.
    let r = check_one(&t[1], None, &opts(Force::None));
    assert_eq!(r.verdict, Verdict::Created);
    assert_eq!(r.owned_fields, 2, "parts[id=a].id and .size: {r:?}");
}

#[test]
fn selective_force_matches_whole_manager_names() {
    let f = Force::against(&["kubectl-edit|before-first-apply".into()]).unwrap();
    assert!(f.allows("kubectl-edit"));
    assert!(f.allows("before-first-apply"));
    assert!(!f.allows("kubectl-edit-2"));
    assert!(!f.allows("kubectl"));
    assert_eq!(f.patterns(), ["kubectl-edit|before-first-apply"]);
    assert!(Force::against(&["(".into()]).is_err());
}
