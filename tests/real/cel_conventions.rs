//! What Kubernetes adds to CEL, judged by the real apiserver (`tests/data/realapi/
//! conventions-crd.yaml`): escaped property names, values typed by the schema (timestamps,
//! durations, bytes, doubles, int-or-string), set lists equal whatever their order, Go's
//! regular expressions, `optionalOldSelf` on create and update; and (`libraries-crd.yaml`)
//! Kubernetes' CEL libraries: quantity, ip, cidr, url, semver, format, sets, lists, the
//! strings extension and regex `find`. One object changed step by
//! step, each step predicted from the live object and the server's `/openapi/v3` as `check`
//! does; the prediction must equal the server's answer — accepted, or refused with the same
//! causes — and no rule may go unevaluated.

use crate::support;
use crate::validation::{merge, predict_and_apply};

use fieldguard::predict::Verdict;
use serde_json::{Value, json};
use support::judge::causes;
use support::realapi::{delete, with_crd};

const NAMESPACE: &str = "default";

/// (object, what, JSON merge patch of the last accepted spec, refused?)
type Step = (&'static str, &'static str, Value, bool);

/// Applies each step's spec to the object of `kind` in `collection`, predicting it first from
/// the live object; the prediction must equal the server's answer, every rule evaluated.
/// Returns the refusals and acceptances seen.
async fn run_steps(
    api: &fieldguard::live::api::Api,
    catalog: &mut fieldguard::catalog::Catalog,
    collection: &str,
    kind: &str,
    base: Value,
    steps: Vec<Step>,
) -> (usize, usize) {
    let mut spec = base;
    let (mut refused, mut accepted) = (0, 0);
    for (name, what, patch, refusal) in steps {
        let url = format!("{collection}/{name}");
        let mut next = spec.clone();
        merge(&mut next, &patch);
        let m = json!({"apiVersion": "rules.fieldguard.test/v1", "kind": kind,
                       "metadata": {"name": name, "namespace": NAMESPACE}, "spec": next});
        let (p, answer) = predict_and_apply(api, catalog, &url, &m).await;
        assert!(p.not_evaluated.is_empty(), "{what}: {:?}", p.not_evaluated);
        match (&answer, &p.verdict) {
            (Ok(_), Verdict::Created | Verdict::Configured | Verdict::Unchanged) => {
                assert!(!refusal, "{what}: the server accepted it");
                accepted += 1;
                spec = next;
            }
            (Err(r), Verdict::Rejected) if r.code == 422 => {
                assert!(refusal, "{what}: the server refused it: {r:?}");
                assert_eq!(causes(&p), r.causes, "{what}");
                refused += 1;
            }
            (a, v) => panic!(
                "{what}: predicted {v:?} {:?} {:?}, server {a:?}",
                p.message, p.not_evaluated
            ),
        }
    }
    (refused, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_cel_conventions_equal_the_servers() {
    let Some((api, mut catalog)) = with_crd(
        module_path!(),
        "conventions-crd.yaml",
        "rules.fieldguard.test/v1",
    )
    .await
    else {
        return;
    };
    let collection = format!("/apis/rules.fieldguard.test/v1/namespaces/{NAMESPACE}/conventions");
    let base = json!({
        "my-field": "xa", "namespace": "apps", "when": "2026-01-01T00:00:00Z", "every": "30m",
        "blob": "eHh4", "ratio": 1, "port": 80, "code": "123", "members": ["a", "b"], "level": 5
    });
    let steps: Vec<Step> = vec![
        (
            "first",
            "a create starting above 10 (optionalOldSelf, no old value)",
            json!({"level": 11}),
            true,
        ),
        (
            "first",
            "every typed rule broken at once (escaped names, timestamp, duration, bytes, double, int-or-string, \\d)",
            json!({"my-field": "ya", "namespace": "kube-system", "when": "2031-01-01T00:00:00Z",
                "every": "2h", "blob": "eHh4eHh4", "ratio": 2, "port": "http", "code": "١٢٣"}),
            true,
        ),
        ("first", "create", json!({}), false),
        (
            "first",
            "set reordered (equal)",
            json!({"members": ["b", "a"]}),
            false,
        ),
        ("first", "set changed", json!({"members": ["a", "c"]}), true),
        (
            "first",
            "level down (optionalOldSelf with an old value)",
            json!({"level": 4}),
            true,
        ),
        ("first", "level up past 10", json!({"level": 12}), false),
        (
            "first",
            "a number written as an integer",
            json!({"ratio": 3}),
            true,
        ),
        (
            "first",
            "int-or-string as a name",
            json!({"port": "p1"}),
            false,
        ),
        (
            "first",
            "a duration in seconds",
            json!({"every": "3600s"}),
            false,
        ),
    ];
    let (refused, accepted) =
        run_steps(&api, &mut catalog, &collection, "Convention", base, steps).await;
    println!(
        "Kubernetes' CEL conventions: {refused} refusals and {accepted} acceptances equal to the server's"
    );
    delete(&api, &format!("{collection}/first")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_cel_libraries_equal_the_servers() {
    let Some((api, mut catalog)) = with_crd(
        module_path!(),
        "libraries-crd.yaml",
        "rules.fieldguard.test/v1",
    )
    .await
    else {
        return;
    };
    let collection = format!("/apis/rules.fieldguard.test/v1/namespaces/{NAMESPACE}/libraries");
    let base = json!({
        "cpu": "500m", "limit": "1", "address": "10.0.0.5", "network": "10.0.0.0/24",
        "endpoint": "https://example.com/x?y=z", "version": "1.2.3", "name": "web",
        "tags": ["a", "b"], "weights": [1, 2, 3], "note": "a-b"
    });
    let steps: Vec<Step> = vec![
        ("lib", "create", json!({}), false),
        (
            "lib",
            "cpu over the limit (quantity)",
            json!({"cpu": "2"}),
            true,
        ),
        ("lib", "cpu not a quantity", json!({"cpu": "two"}), true),
        (
            "lib",
            "quantities with suffixes",
            json!({"cpu": "1Gi", "limit": "2Gi"}),
            false,
        ),
        (
            "lib",
            "an address outside the network (cidr)",
            json!({"address": "10.1.0.1"}),
            true,
        ),
        (
            "lib",
            "an IPv6 address (ip)",
            json!({"address": "::1"}),
            true,
        ),
        (
            "lib",
            "not an address",
            json!({"address": "10.0.0.256"}),
            true,
        ),
        (
            "lib",
            "plain http (url)",
            json!({"endpoint": "http://example.com"}),
            true,
        ),
        ("lib", "a relative URL", json!({"endpoint": "/x"}), true),
        (
            "lib",
            "a short version, normalized (semver)",
            json!({"version": "v1.2"}),
            false,
        ),
        ("lib", "an old version", json!({"version": "0.9.0"}), true),
        (
            "lib",
            "a name that is no DNS label (format, messageExpression)",
            json!({"name": "Web_1"}),
            true,
        ),
        (
            "lib",
            "a tag outside the set (sets)",
            json!({"tags": ["a", "z"]}),
            true,
        ),
        (
            "lib",
            "unsorted weights (lists)",
            json!({"weights": [3, 1]}),
            true,
        ),
        (
            "lib",
            "weights over 100 (lists)",
            json!({"weights": [50, 60]}),
            true,
        ),
        (
            "lib",
            "a note with digits (strings, regex)",
            json!({"note": "ab-1"}),
            true,
        ),
        ("lib", "a note in upper case", json!({"note": "Ab"}), true),
        (
            "lib",
            "a note of four words",
            json!({"note": "a-b-c-d"}),
            true,
        ),
    ];
    let (refused, accepted) =
        run_steps(&api, &mut catalog, &collection, "Library", base, steps).await;
    println!(
        "Kubernetes' CEL libraries: {refused} refusals and {accepted} acceptances equal to the server's"
    );
    delete(&api, &format!("{collection}/lib")).await;
}
