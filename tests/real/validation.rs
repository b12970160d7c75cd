//! Validation judged by the real apiserver (`../shared/realapi`, Kubernetes 1.36), which
//! validates custom resources itself: the stored object against its structural schema, object
//! metadata, and `x-kubernetes-validations` (CEL) rules — fieldguard's predicted 422s must be
//! the server's, cause for cause.

use crate::support;

use support::judge::{causes, predict};
use support::realapi::{delete, get, with_crd, write};

use fieldguard::predict::Verdict;
use serde_json::{Value, json};

const GROUP_VERSION: &str = "fieldguard.test/v1";
const NAMESPACE: &str = "default";

/// Validation of the stored object, message for message: each object is created on the real
/// server against `tests/data/realapi/probe-crd.json` (limits, enums, required, nullable,
/// int-or-string, a CEL rule) and fieldguard's prediction must name the same causes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_equals_the_servers() {
    let Some((api, mut catalog)) = with_crd(module_path!(), "probe-crd.json", "p.test/v1").await
    else {
        return;
    };
    let url = format!("/apis/p.test/v1/namespaces/{NAMESPACE}/probes/v");
    let cases = [
        r#"{"e":"c","ei":3,"n":11,"nx":10,"s":"ABCDEF","l":["a","b","c"],"m":{"a":"1","b":"2","c":"3"},"mo":7,"ios":1.5}"#,
        r#"{"must":"x","n":0,"nx":1,"s":"a","l":[],"m":{}}"#,
        r#"{"must":"x","s":"AB"}"#,
        r#"{"must":null,"e":null,"n":null,"nn":null}"#,
        r#"{"must":"x","ios":true}"#,
        r#"{"must":"x","mo":10,"nx":5.5,"s":"ab","ios":"http","nn":{"a":"b"}}"#,
    ];
    let mut checked = 0;
    for spec in cases {
        delete(&api, &url).await;
        let m: Value = serde_json::from_str(&format!(
            r#"{{"apiVersion":"p.test/v1","kind":"Probe","metadata":{{"name":"v","namespace":"{NAMESPACE}"}},"spec":{spec}}}"#
        ))
        .unwrap();
        let p = predict(&mut catalog, NAMESPACE, None, &m, "probe", false, 0);
        let answer = write(
            &api,
            http::Method::PATCH,
            &format!("{url}?fieldManager=probe"),
            "application/apply-patch+yaml",
            &m,
        )
        .await;
        match (&answer, &p.verdict) {
            (Ok(_), Verdict::Created) => {}
            (Err(r), Verdict::Rejected) if r.code == 422 => {
                let predicted = causes(&p);
                assert_eq!(predicted, r.causes, "{spec}");
                checked += predicted.len();
            }
            (a, v) => panic!("{spec}: predicted {v:?} {:?}, server {a:?}", p.message),
        }
    }
    println!("validation: {checked} causes equal to the server's");
}

/// Metadata the apiserver refuses, message for message (fieldguard refuses it before any
/// request): names by a custom resource's rule, label keys and values, annotation keys and
/// their total size — each object created on the real server, whose 422 must equal what
/// `validation::meta` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_refusals_equal_the_servers() {
    let Some((api, _)) = with_crd(module_path!(), "widget-crd.yaml", GROUP_VERSION).await else {
        return;
    };
    let big = "v".repeat(300 * 1024);
    let cases: Vec<(String, Value)> = vec![
        ("Foo_Bar".into(), json!({})),
        ("a".repeat(254), json!({})),
        ("ok".into(), json!({"labels": {"bad key!": "x"}})),
        ("ok".into(), json!({"labels": {"a/b/c": "x"}})),
        ("ok".into(), json!({"labels": {"/x": "x"}})),
        ("ok".into(), json!({"labels": {"BAD_prefix!/x": "x"}})),
        ("ok".into(), json!({"labels": {"k".repeat(64): "x"}})),
        ("ok".into(), json!({"labels": {"k": "-bad"}})),
        ("ok".into(), json!({"labels": {"k": "v".repeat(64)}})),
        (
            "ok".into(),
            json!({"annotations": {"Example.com/Fine": "x", "bad key": "y"}}),
        ),
        ("ok".into(), json!({"annotations": {"big": big}})),
    ];
    let collection = format!("/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/widgets");
    for (name, extra) in cases {
        let mut meta = json!({"name": name, "namespace": NAMESPACE});
        for (k, v) in extra.as_object().unwrap() {
            meta[k] = v.clone();
        }
        let obj = json!({"apiVersion": GROUP_VERSION, "kind": "Widget", "metadata": meta});
        let ours: Vec<fieldguard::validation::FieldError> =
            fieldguard::validation::meta::object_meta(
                &fieldguard::value::json::parse_str(&obj.to_string()).unwrap(),
                "fieldguard.test",
                "Widget",
                true,
            )
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        assert_eq!(ours.len(), 1, "{name}: {ours:?}");
        let answer = write(
            &api,
            http::Method::POST,
            &collection,
            "application/json",
            &obj,
        )
        .await;
        let refusal = answer.expect_err("the server accepted invalid metadata");
        assert_eq!(refusal.code, 422, "{refusal:?}");
        assert_eq!(
            fieldguard::validation::invalid_message("Widget", "fieldguard.test", &name, &ours),
            refusal.message,
            "{name}"
        );
        assert_eq!(
            refusal.causes,
            vec![(
                ours[0].field.clone(),
                ours[0].reason.clone(),
                ours[0].message.clone()
            )]
        );
    }
}

/// `x-kubernetes-validations` rules, evaluated by the server: one object changed step by step
/// (`tests/data/realapi/rules-crd.yaml`: transition rules, message, messageExpression, reason,
/// fieldPath, list-map items correlated by key, atomic-list items, map values, an object
/// rule reading an absent field, a root rule), each step's apply predicted from the live object
/// and the server's `/openapi/v3` as `check` does. The prediction must equal the server's
/// answer — created or configured, or refused with the same causes — every rule evaluated
/// (`isURL`, a Kubernetes CEL library function, included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_rules_equal_the_servers() {
    let Some((api, mut catalog)) =
        with_crd(module_path!(), "rules-crd.yaml", "rules.fieldguard.test/v1").await
    else {
        return;
    };
    let url = format!("/apis/rules.fieldguard.test/v1/namespaces/{NAMESPACE}/rulebooks/rules");
    delete(&api, &url).await;
    let mut spec = json!({
        "tier": "gold", "selector": "a", "owner": "ann", "size": 3, "name": "abc",
        "url": "https://example.com/x", "limits": {"min": 1, "max": 2},
        "ports": [{"name": "http", "protocol": "TCP"}], "tags": ["x"], "labels": {"a": "1"}
    });
    // (what changes, JSON merge patch of the last accepted spec)
    let steps: Vec<(&str, Value)> = vec![
        ("create", json!({})),
        (
            "selector changed (self == oldSelf)",
            json!({"selector": "b"}),
        ),
        ("owner changed (messageExpression)", json!({"owner": "bob"})),
        ("size shrinks (reason Forbidden)", json!({"size": 2})),
        ("size grows", json!({"size": 5})),
        ("name not lower-case (matches)", json!({"name": "ABC"})),
        ("min above max (fieldPath)", json!({"limits": {"min": 5}})),
        (
            "min dropped (no such key)",
            json!({"limits": {"min": null}}),
        ),
        (
            "a port's protocol changed (list-map item by key)",
            json!({"ports": [{"name": "http", "protocol": "UDP"}]}),
        ),
        (
            "the port renamed (a new item: no oldSelf)",
            json!({"ports": [{"name": "web", "protocol": "UDP"}]}),
        ),
        (
            "a tag changed (atomic-list item: no oldSelf)",
            json!({"tags": ["y"]}),
        ),
        (
            "a label value changed (map value)",
            json!({"labels": {"a": "2"}}),
        ),
        ("a label added", json!({"labels": {"b": "3"}})),
        (
            "tier removed (object rule on oldSelf)",
            json!({"tier": null}),
        ),
        ("two rules at once", json!({"selector": "c", "size": 1})),
        (
            "not a URL (isURL, a Kubernetes CEL library function)",
            json!({"url": "::"}),
        ),
    ];
    let (mut refused, mut accepted) = (0, 0);
    for (what, patch) in steps {
        let mut next = spec.clone();
        merge(&mut next, &patch);
        let m = json!({"apiVersion": "rules.fieldguard.test/v1", "kind": "Rulebook",
                       "metadata": {"name": "rules", "namespace": NAMESPACE}, "spec": next});
        let (p, answer) = predict_and_apply(&api, &mut catalog, &url, &m).await;
        assert!(p.not_evaluated.is_empty(), "{what}: {:?}", p.not_evaluated);
        match (&answer, &p.verdict) {
            (Ok(_), Verdict::Created | Verdict::Configured) => {
                accepted += 1;
                spec = next;
            }
            (Err(r), Verdict::Rejected) if r.code == 422 => {
                let ours = causes(&p);
                assert_eq!(ours, r.causes, "{what}");
                // Several causes come in Go's map order, which varies between requests.
                if r.causes.len() == 1 {
                    assert_eq!(p.message.as_deref(), Some(r.message.as_str()), "{what}");
                }
                refused += 1;
            }
            (a, v) => panic!(
                "{what}: predicted {v:?} {:?} {:?}, server {a:?}",
                p.message, p.not_evaluated
            ),
        }
    }
    assert!(
        refused >= 10 && accepted >= 5,
        "{refused} refused, {accepted} accepted"
    );
    println!(
        "CEL rules: {refused} refusals and {accepted} acceptances equal to the server's, none unevaluated"
    );
    // ValidateObjectMetaUpdate: a uid the manifest sets that is not the object's.
    let m = json!({"apiVersion": "rules.fieldguard.test/v1", "kind": "Rulebook",
                   "metadata": {"name": "rules", "namespace": NAMESPACE,
                                "uid": "00000000-0000-4000-8000-000000000000"},
                   "spec": spec});
    let live = get(&api, &url).await;
    let p = predict(
        &mut catalog,
        NAMESPACE,
        live.as_ref(),
        &m,
        "author",
        false,
        0,
    );
    let r = apply(&api, &url, &m)
        .await
        .expect_err("the server accepted another uid");
    assert_eq!(p.verdict, Verdict::Rejected, "{:?}", p.message);
    assert_eq!(
        (r.code, Some(r.message.as_str())),
        (422, p.message.as_deref())
    );
}

/// Structural defaulting, step by step against the real server (`sprocket-crd.yaml`: `spec`
/// defaulted whole, a required `mode` with a default, a defaulted object and its own defaults,
/// a port's `protocol` key and `weight` defaulted in list items). Each apply is predicted from
/// the live object and compared with what the server does (verdict, stored object,
/// managedFields, whether it wrote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_are_filled_in_as_the_server_does() {
    let Some((api, mut catalog)) =
        with_crd(module_path!(), "sprocket-crd.yaml", GROUP_VERSION).await
    else {
        return;
    };
    let url = format!("/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/sprockets/defaulted");
    delete(&api, &url).await;
    let sprocket = |spec: Value| {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "app", "ports": [{"containerPort": 80}]}]);
        json!({"apiVersion": GROUP_VERSION, "kind": "Sprocket",
               "metadata": {"name": "defaulted", "namespace": NAMESPACE}, "spec": spec})
    };
    let steps: [(&str, Value, Verdict); 8] = [
        // The required `mode` left out: defaulted, not refused.
        (
            "created without mode",
            sprocket(json!({})),
            Verdict::Created,
        ),
        (
            "mode set",
            sprocket(json!({"mode": "slow"})),
            Verdict::Configured,
        ),
        // Dropped: not removed but reset to the default.
        ("mode dropped", sprocket(json!({})), Verdict::Configured),
        (
            "mode set to its default",
            sprocket(json!({"mode": "fast"})),
            Verdict::OwnershipOnly,
        ),
        (
            "mode dropped again",
            sprocket(json!({})),
            Verdict::OwnershipOnly,
        ),
        (
            "mode null",
            sprocket(json!({"mode": null})),
            Verdict::OwnershipOnly,
        ),
        // Null items and map values become their default, then get its fields' defaults.
        (
            "null items and values",
            sprocket(json!({"slots": [null, {"size": 5}], "extras": {"a": null, "b": {}}})),
            Verdict::Configured,
        ),
        // A null where no default exists is refused.
        (
            "cpu null",
            sprocket(json!({"limits": {"cpu": null}})),
            Verdict::Rejected,
        ),
    ];
    for (what, m, want) in steps {
        let live = get(&api, &url).await;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let p = predict(
            &mut catalog,
            NAMESPACE,
            live.as_ref(),
            &m,
            "bob",
            false,
            now,
        );
        let answer = write(
            &api,
            http::Method::PATCH,
            &format!("{url}?fieldManager=bob"),
            "application/apply-patch+yaml",
            &m,
        )
        .await;
        let found = support::judge::compare(&p, live.as_ref(), &answer);
        assert!(found.is_empty(), "{what}: {found:?}");
        assert_eq!(p.verdict, want, "{what}: {:?}", p.message);
        if what == "created without mode" {
            let spec = &answer.as_ref().unwrap()["spec"];
            assert_eq!(spec["mode"], "fast");
            assert_eq!(spec["limits"], json!({"cpu": "1", "memory": "1Gi"}));
            assert_eq!(
                spec["containers"][0]["ports"][0],
                json!({"containerPort": 80, "protocol": "TCP", "weight": 5})
            );
        }
        if what == "null items and values" {
            let spec = &answer.as_ref().unwrap()["spec"];
            assert_eq!(
                spec["slots"],
                json!([{"size": 1, "zone": 2}, {"size": 5, "zone": 2}])
            );
            assert_eq!(
                spec["extras"],
                json!({"a": {"size": 1, "zone": 2}, "b": {"zone": 2}})
            );
        }
        if what == "mode dropped" {
            assert!(p.removed.is_empty(), "{:?}", p.removed);
            assert!(
                p.notes.iter().any(|n| n
                    == ".spec.mode: dropped by this apply, and the server fills in its default (\"fast\")"),
                "{:?}",
                p.notes
            );
        }
    }
}

/// A group-version's schema document read through an index taken before the document
/// changed (a CRD of the group installed meanwhile, as during a release that installs CRDs):
/// the index's hash URL then answers `301` to the new hash, and the current document is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_openapi_index_reads_the_current_document() {
    let Some((api, _)) = with_crd(module_path!(), "widget-crd.yaml", GROUP_VERSION).await else {
        return;
    };
    let hash_url = |i: &Option<fieldguard::value::Value>| {
        i.as_ref()
            .and_then(|i| i.str_at(&["paths", "apis/fieldguard.test/v1", "serverRelativeURL"]))
            .map(str::to_string)
    };
    let stale = api.openapi_index().await.unwrap();
    let before = hash_url(&stale);
    assert!(
        before.as_deref().is_some_and(|u| u.contains("?hash=")),
        "{before:?}"
    );
    // A kind of the same group, new to this server.
    let kind = format!("Stale{}", std::process::id());
    let plural = format!("{}s", kind.to_lowercase());
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.fieldguard.test")},
        "spec": {"group": "fieldguard.test", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    support::realapi::install_crd(&api, &crd.to_string()).await;
    // The stale index's hash URL now answers 301 (the document changed): read through it
    // until the document has the new kind (a hang guard; other tests of this binary install
    // CRDs of the group too).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let read = api
            .gv_types(&stale, GROUP_VERSION)
            .await
            .expect("read through the stale index")
            .expect("the group-version is served");
        assert!(read.schema.is_some());
        if read.validations.iter().any(|(gvk, _)| gvk.kind == kind) {
            break;
        }
        assert!(std::time::Instant::now() < until, "{kind} never published");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_ne!(hash_url(&api.openapi_index().await.unwrap()), before);
    delete(
        &api,
        &format!(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.fieldguard.test"
        ),
    )
    .await;
}

/// A server-side apply of `m` at `url` by the manager `author`.
async fn apply(api: &fieldguard::live::api::Api, url: &str, m: &Value) -> support::realapi::Answer {
    let url = format!("{url}?fieldManager=author");
    write(
        api,
        http::Method::PATCH,
        &url,
        "application/apply-patch+yaml",
        m,
    )
    .await
}

/// One step of a rule test: `m` predicted by `author` from the live object at `url` (as `check`
/// does against a cluster), then applied; the prediction and the server's answer.
pub(crate) async fn predict_and_apply(
    api: &fieldguard::live::api::Api,
    catalog: &mut fieldguard::catalog::Catalog,
    url: &str,
    m: &Value,
) -> (fieldguard::predict::Prediction, support::realapi::Answer) {
    let live = get(api, url).await;
    let p = predict(catalog, NAMESPACE, live.as_ref(), m, "author", false, 0);
    (p, apply(api, url, m).await)
}

/// JSON merge patch (`null` removes).
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if let Some(tv) = t.get_mut(k).filter(|tv| tv.is_object() && v.is_object()) {
                    merge(tv, v);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}
