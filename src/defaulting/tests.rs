//! Defaults of built-in kinds: each case is what kube-apiserver 1.36 stored for the manifest
//! (read back from the real server, `tests/real/builtin.rs` judges the rest at random).

use super::apply;
use crate::value::json;

fn defaulted(type_name: &str, obj: &str) -> (String, bool) {
    let mut v = json::parse_str(obj).unwrap();
    let changed = apply(type_name, &mut v);
    (json::to_string(&v, json::Style::PLAIN), changed)
}

fn same_json(a: &str, b: &str) -> bool {
    json::parse_str(a).unwrap() == json::parse_str(b).unwrap()
}

#[test]
fn a_deployment_as_the_server_stored_it() {
    let (out, changed) = defaulted(
        "io.k8s.api.apps.v1.Deployment",
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}"#,
    );
    assert!(changed);
    let want = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "default-scheduler"}}, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}}"#;
    assert!(same_json(&out, want), "{out}");
    // Defaulted again: nothing more to fill in.
    let (again, changed) = defaulted("io.k8s.api.apps.v1.Deployment", &out);
    assert!(!changed);
    assert_eq!(again, out);
}

#[test]
fn go_notions_of_unset() {
    // A null pointer is unset; an explicit zero integer pointer is not; an empty string is.
    let (out, _) = defaulted(
        "io.k8s.api.apps.v1.Deployment",
        r#"{"spec":{"replicas":null,"revisionHistoryLimit":0,"strategy":{"type":""}}}"#,
    );
    let v = json::parse_str(&out).unwrap();
    assert_eq!(v.get_path(&["spec", "replicas"]), Some(&1.into()));
    assert_eq!(
        v.get_path(&["spec", "revisionHistoryLimit"]),
        Some(&0.into())
    );
    assert_eq!(
        v.str_at(&["spec", "strategy", "type"]),
        Some("RollingUpdate")
    );
    // A Recreate strategy gets no rolling update.
    let (out, _) = defaulted(
        "io.k8s.api.apps.v1.Deployment",
        r#"{"spec":{"strategy":{"type":"Recreate"}}}"#,
    );
    assert!(!out.contains("rollingUpdate"), "{out}");
}

#[test]
fn services_secrets_bindings_claims() {
    let (out, _) = defaulted(
        "io.k8s.api.core.v1.Service",
        r#"{"spec":{"ports":[{"port":80},{"port":53,"protocol":"UDP","targetPort":"dns"}],"sessionAffinity":"ClientIP"}}"#,
    );
    assert!(
        same_json(
            &out,
            r#"{"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":80},{"port":53,"protocol":"UDP","targetPort":"dns"}],"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":10800}},"type":"ClusterIP","internalTrafficPolicy":"Cluster"}}"#
        ),
        "{out}"
    );
    let (out, _) = defaulted("io.k8s.api.core.v1.Secret", r#"{"data":{}}"#);
    assert!(same_json(&out, r#"{"data":{},"type":"Opaque"}"#), "{out}");
    let (out, _) = defaulted(
        "io.k8s.api.rbac.v1.RoleBinding",
        r#"{"roleRef":{"kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"a"},{"kind":"ServiceAccount","name":"b"}]}"#,
    );
    assert!(
        same_json(
            &out,
            r#"{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"a","apiGroup":"rbac.authorization.k8s.io"},{"kind":"ServiceAccount","name":"b"}]}"#
        ),
        "{out}"
    );
    let (out, _) = defaulted(
        "io.k8s.api.core.v1.PersistentVolumeClaim",
        r#"{"spec":{"accessModes":["ReadWriteOnce"]}}"#,
    );
    assert!(
        same_json(
            &out,
            r#"{"spec":{"accessModes":["ReadWriteOnce"],"volumeMode":"Filesystem"},"status":{"phase":"Pending"}}"#
        ),
        "{out}"
    );
}

#[test]
fn jobs_take_their_labels_from_the_template() {
    let (out, _) = defaulted(
        "io.k8s.api.batch.v1.Job",
        r#"{"metadata":{"name":"j"},"spec":{"template":{"metadata":{"labels":{"app":"j"}},"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox:1"}]}}}}"#,
    );
    let v = json::parse_str(&out).unwrap();
    assert_eq!(v.str_at(&["metadata", "labels", "app"]), Some("j"));
    assert_eq!(v.get_path(&["spec", "backoffLimit"]), Some(&6.into()));
    assert_eq!(v.get_path(&["spec", "completions"]), Some(&1.into()));
    assert_eq!(
        v.str_at(&["spec", "podReplacementPolicy"]),
        Some("TerminatingOrFailed")
    );
    assert_eq!(
        v.str_at(&[
            "spec",
            "template",
            "spec",
            "containers",
            "0",
            "imagePullPolicy"
        ]),
        None,
        "a list is not walked by get_path"
    );
    assert!(out.contains(r#""imagePullPolicy":"IfNotPresent""#), "{out}");
}

#[test]
fn secret_string_data_is_folded_into_data() {
    let mut v =
        json::parse_str(r#"{"data":{"a":"eA==","b":"eQ=="},"stringData":{"b":"z"}}"#).unwrap();
    assert!(super::stored::apply(
        "io.k8s.api.core.v1.Secret",
        &mut v,
        None
    ));
    assert_eq!(
        json::to_string(&v, json::Style::PLAIN),
        r#"{"data":{"a":"eA==","b":"eg=="}}"#
    );
    let mut other = json::parse_str(r#"{"stringData":{"b":"z"}}"#).unwrap();
    assert!(!super::stored::apply(
        "io.k8s.api.core.v1.ConfigMap",
        &mut other,
        None
    ));
}
