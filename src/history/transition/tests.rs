use super::*;
use crate::value::yaml::parse_one;

fn owned<'a>(
    manager: &'a str,
    operation: &'a str,
    sub: &'a str,
    fields: &'a str,
    time: i64,
) -> Owned<'a> {
    Owned {
        manager,
        operation,
        subresource: sub,
        fields,
        time: Some(time),
    }
}

const HELM: &str = r#"{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#;
const HELM_NO_REPLICAS: &str = r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#;
const HPA: &str = r#"{"f:spec":{"f:replicas":{}}}"#;

fn deployment(replicas: i64) -> Value {
    parse_one(&format!(
        "{{spec: {{replicas: {replicas}, template: {{spec: {{containers: [{{name: app, image: 'app:1'}}]}}}}}}}}"
    ))
    .unwrap()
}

#[test]
fn an_autoscaler_takes_replicas_by_an_update_of_the_scale_subresource() {
    let (before, after) = (deployment(3), deployment(5));
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HELM, 100)],
        object: Some(&before),
    };
    let new = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", HELM_NO_REPLICAS, 100),
            owned("hpa", "Update", "scale", HPA, 200),
        ],
        object: Some(&after),
    };
    let c = diff(Some(&old), Some(&new)).unwrap();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].path.to_string(), ".spec.replicas");
    assert_eq!(c[0].change, Change::TakenOver);
    assert_eq!(
        (c[0].from.as_slice(), c[0].to.as_slice()),
        (&["helm".to_string()][..], &["hpa".to_string()][..])
    );
    assert_eq!(
        (c[0].operation.as_str(), c[0].subresource.as_str()),
        ("Update", "scale")
    );
    assert_eq!(c[0].time, Some(200));
    assert_eq!(c[0].old_value, Some(Value::Int(3)));
    assert_eq!(c[0].new_value, Some(Value::Int(5)));

    // Forced back by the applier: taken over the other way, by Apply.
    let c = diff(Some(&new), Some(&old)).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (
            c[0].from[0].as_str(),
            c[0].to[0].as_str(),
            c[0].operation.as_str()
        ),
        ("hpa", "helm", "Apply")
    );
}

#[test]
fn sharing_releasing_and_nothing_changed() {
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HPA, 1)],
        object: None,
    };
    let shared = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", HPA, 1),
            owned("ci", "Apply", "", HPA, 2),
        ],
        object: None,
    };
    let c = diff(Some(&old), Some(&shared)).unwrap();
    assert_eq!(
        (c.len(), c[0].change, c[0].to[0].as_str()),
        (1, Change::Shared, "ci")
    );
    assert!(c[0].from.is_empty());
    // helm drops it; ci still owns it: released by helm, ci remains.
    let released = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", "{}", 3),
            owned("ci", "Apply", "", HPA, 2),
        ],
        object: None,
    };
    let c = diff(Some(&shared), Some(&released)).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].change, c[0].from[0].as_str(), c[0].to[0].as_str()),
        (Change::Released, "helm", "ci")
    );
    // A new field nobody owned before changes no hands; neither does a time stamp.
    let grown = ObjectState {
        entries: vec![owned("helm", "Apply", "", HELM, 1)],
        object: None,
    };
    assert!(diff(Some(&old), Some(&grown)).unwrap().is_empty());
    let touched = ObjectState {
        entries: vec![owned("helm", "Apply", "", HPA, 99)],
        object: None,
    };
    assert!(diff(Some(&old), Some(&touched)).unwrap().is_empty());
    // Creation changes no hands.
    assert!(diff(None, Some(&old)).unwrap().is_empty());
}

#[test]
fn a_container_taken_whole_is_one_transition_and_deletion_removes_per_manager() {
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HELM, 1)],
        object: None,
    };
    let new = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", r#"{"f:spec":{"f:replicas":{}}}"#, 1),
            owned(
                "kubectl-edit",
                "Update",
                "",
                r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#,
                2,
            ),
        ],
        object: None,
    };
    let c = diff(Some(&old), Some(&new)).unwrap();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        c[0].path.to_string(),
        r#".spec.template.spec.containers[name="app"]"#
    );
    let gone = diff(Some(&new), None).unwrap();
    assert_eq!(gone.len(), 2);
    assert_eq!(
        (gone[0].from[0].as_str(), gone[0].fields, gone[0].change),
        ("helm", 1, Change::Removed)
    );
    assert_eq!(
        (gone[1].from[0].as_str(), gone[1].fields),
        ("kubectl-edit", 3)
    );
    assert!(gone[0].path.is_empty());
}

#[test]
fn unreadable_fields_are_an_error_not_a_guess() {
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HPA, 1)],
        object: None,
    };
    let bad = ObjectState {
        entries: vec![owned("helm", "Apply", "", "{\"f:spec\":", 1)],
        object: None,
    };
    assert!(
        diff(Some(&old), Some(&bad))
            .unwrap_err()
            .contains("managedFields of helm")
    );
}

#[test]
fn values_are_found_without_a_schema() {
    let v = parse_one(
        "{spec: {containers: [{name: a, image: x}, {name: b, image: 'y'}], finalizers: [p, q]}}",
    )
    .unwrap();
    let key = crate::fieldpath::PathElement::key(vec![crate::fieldpath::KeyField {
        name: "name".into(),
        value: Value::from("b"),
    }]);
    let path = [
        PathElement::field("spec"),
        PathElement::field("containers"),
        key,
        PathElement::field("image"),
    ];
    assert_eq!(value_at(&v, &path), Some(&Value::from("y")));
    let set = [
        PathElement::field("spec"),
        PathElement::field("finalizers"),
        PathElement::Value(Value::from("q")),
    ];
    assert_eq!(value_at(&v, &set), Some(&Value::from("q")));
    assert_eq!(value_at(&v, &[PathElement::field("nope")]), None);
}
