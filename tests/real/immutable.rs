//! The immutable-field rules of built-in kinds (`src/validation/immutable/`) judged by
//! kube-apiserver itself: every case of `tests/data/kubeapi/immutable.yaml` — for each rule,
//! the change it refuses and a look-alike it allows — sent to the server as a forced
//! server-side apply over the object the case creates, with fieldguard's prediction made first
//! from what a `check` against the cluster sees (the live object, the published schemas). The
//! server must still answer as the file recorded (422 with those causes, or success), and the
//! prediction must equal the answer: verdict, the 422's causes word for word (as a set: the
//! server reports each metadata error twice), the stored object and its managedFields.
//! Every rule of the table has a case.

use crate::support;

use fieldguard::live::api::Api;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::judge::{Judged, apply_judged, compare};
use support::kubeapi::shared_server;
use support::realapi::{get, write};

const NAMESPACE: &str = "immutable";

/// The cases, as JSON.
fn cases() -> Vec<Value> {
    let path = support::realapi::root().join("tests/data/kubeapi/immutable.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let v = fieldguard::value::yaml::parse_one(&text).unwrap();
    support::judge::to_json(&v).as_array().unwrap().clone()
}

/// The URL of the object a manifest names (its plural from the discovery of its own group
/// version, which need not be the group's preferred one).
async fn url_of(api: &Api, m: &Value) -> Option<String> {
    let av = m["apiVersion"].as_str()?;
    let kind = m["kind"].as_str()?;
    let base = if av.contains('/') {
        format!("/apis/{av}")
    } else {
        format!("/api/{av}")
    };
    let list = get(api, &base).await?;
    let r = list["resources"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("/").contains('/'))?;
    let ns = if r["namespaced"] == true {
        NAMESPACE
    } else {
        ""
    };
    Some(fieldguard::live::api::resource_path(
        av,
        r["name"].as_str()?,
        ns,
        m["metadata"]["name"].as_str(),
    ))
}

/// A server-side apply by `manager` (forced), retried while the kind is not served yet (a
/// custom resource right after its CRD).
async fn apply(api: &Api, m: &Value, manager: &str) -> String {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(url) = url_of(api, m).await {
            let answer = write(
                api,
                http::Method::PATCH,
                &format!("{url}?fieldManager={manager}&force=true"),
                "application/apply-patch+yaml",
                m,
            )
            .await;
            match answer {
                Ok(_) => return url,
                Err(e) if e.code == 404 && Instant::now() < until => {}
                Err(e) => panic!("applying {m}: {e:?}"),
            }
        }
        assert!(Instant::now() < until, "{m}: its kind is never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What fieldguard does not model yet of what the server stores after an allowed change,
/// each seen in these cases (the test fails when one is no longer seen): case → (why, the
/// paths of the stored object where the prediction differs).
static DOCUMENTED: std::sync::LazyLock<BTreeMap<&str, (&str, Vec<&str>)>> =
    std::sync::LazyLock::new(|| {
        let quantity = "a quantity is stored in its canonical form (1024Mi as 1Gi): resource.Quantity's encoding, not rewritten by the Go round trip (src/defaulting/shapes.rs)";
        let time = "a zero metav1.Time without omitzero encodes as null (omitempty does not omit a struct): the Go shapes do not tell a time from other custom types";
        let allocated = "a Service that becomes NodePort or LoadBalancer is allocated node ports by the REST layer: random, as a create's cluster IPs";
        let dropped = "a Service's type-dependent fields the REST layer drops when its type changes (dropTypeDependentFields: cluster IPs and families for ExternalName, the load-balancer class and allocateLoadBalancerNodePorts off LoadBalancer, healthCheckNodePort when no longer needed)";
        let dra = "resource.k8s.io's defaulters (a device request's allocationMode ExactCount and count 1) are not written yet (src/defaulting/)";
        BTreeMap::from([
            (
                "statefulset-volume-claim-templates",
                (
                    quantity,
                    vec![".spec.volumeClaimTemplates[0].spec.resources.requests.storage"],
                ),
            ),
            (
                "pvc-volume-mode",
                (quantity, vec![".spec.resources.requests.storage"]),
            ),
            (
                "pod-scheduling-gates",
                (time, vec![".status.conditions[0].lastProbeTime"]),
            ),
            (
                "pod-gated-node-selector",
                (time, vec![".status.conditions[0].lastProbeTime"]),
            ),
            (
                "event-note",
                (
                    "as for Pods' conditions, a zero time encodes as null; and the applier's entry at events.k8s.io/v1 is gone from the server's managedFields once another manager's forced apply through v1 took its fields (an entry of another API version, converted: not modelled)",
                    vec![".firstTimestamp", ".lastTimestamp", "managedFields"],
                ),
            ),
            (
                "csinode-drivers",
                (
                    "a nil list without omitempty encodes as null (CSINodeDriver.topologyKeys): absent is kept absent by the round trip",
                    vec![".spec.drivers[1].topologyKeys"],
                ),
            ),
            (
                "service-cluster-ips",
                (allocated, vec![".spec.ports[0].nodePort"]),
            ),
            (
                "service-load-balancer-class-set",
                (allocated, vec![".spec.ports[1].nodePort"]),
            ),
            (
                "service-external-name",
                (
                    dropped,
                    vec![
                        ".spec.clusterIP",
                        ".spec.clusterIPs",
                        ".spec.internalTrafficPolicy",
                        ".spec.ipFamilies",
                        ".spec.ipFamilyPolicy",
                    ],
                ),
            ),
            (
                "service-load-balancer-class",
                (
                    dropped,
                    vec![
                        ".spec.allocateLoadBalancerNodePorts",
                        ".spec.loadBalancerClass",
                    ],
                ),
            ),
            (
                "service-health-check-node-port-cluster",
                (dropped, vec![".spec.healthCheckNodePort"]),
            ),
            (
                "resourceclaim-spec",
                (
                    dra,
                    vec![
                        ".spec.devices.requests[0].exactly.allocationMode",
                        ".spec.devices.requests[0].exactly.count",
                    ],
                ),
            ),
            (
                "resourceclaimtemplate-spec",
                (
                    dra,
                    vec![
                        ".spec.spec.devices.requests[0].exactly.allocationMode",
                        ".spec.spec.devices.requests[0].exactly.count",
                    ],
                ),
            ),
            (
                "crd-stored-versions",
                (
                    "the CRD strategy appends a new storage version to status.storedVersions (PrepareForUpdate)",
                    vec![".status.storedVersions"],
                ),
            ),
        ])
    });

/// The paths where two objects differ (`.a.b[0].c`): a key on one side only, or a different
/// value (lists of different lengths differ as a whole).
fn differences(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: Option<&Value>, b: Option<&Value>, at: String, out: &mut Vec<String>) {
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    walk(x.get(k), y.get(k), format!("{at}.{k}"), out);
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(Some(p), Some(q), format!("{at}[{i}]"), out);
                }
            }
            (p, q) if p != q => out.push(at),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(Some(a), Some(b), String::new(), &mut out);
    out
}

/// The object at `url` once its controller is done with it (a Deployment's revision and
/// status, a CRD's conditions): the same resourceVersion over two reads 200 ms apart.
async fn settled(api: &Api, url: &str) -> Option<Value> {
    let until = Instant::now() + Duration::from_secs(30);
    let mut last = get(api, url).await;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = get(api, url).await;
        let rv = |o: &Option<Value>| o.as_ref().map(|o| o["metadata"]["resourceVersion"].clone());
        if rv(&now) == rv(&last) || Instant::now() > until {
            return now;
        }
        last = now;
    }
}

/// The upstream function a rule reproduces first (its `source` up to a comma or space).
fn first_function(source: &str) -> &str {
    source.split([',', ' ']).next().unwrap_or(source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_immutable_rule_is_judged_by_kube_apiserver() {
    let cases = cases();
    let rules: BTreeSet<&str> = cases.iter().filter_map(|c| c["rule"].as_str()).collect();
    let uncovered: Vec<&str> = fieldguard::validation::immutable::rules()
        .map(|r| first_function(r.source))
        .filter(|f| !rules.contains(f))
        .collect();
    assert!(uncovered.is_empty(), "rules without a case: {uncovered:?}");
    let Some(server) = shared_server(module_path!()) else {
        return;
    };
    let api = server.api().await;
    support::realapi::create_namespace(&api, NAMESPACE).await;
    let mut failures = Vec::new();
    let mut counts = BTreeMap::<&str, usize>::new();
    let mut seen = BTreeSet::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        for m in case["before"].as_array().into_iter().flatten() {
            apply(&api, m, "base").await;
        }
        let url = apply(&api, &case["base"], "base").await;
        if let Some(status) = case.get("status") {
            write(
                &api,
                http::Method::PATCH,
                &format!("{url}/status"),
                "application/merge-patch+json",
                &json!({"status": status}),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: status: {e:?}"));
        }
        let versions: BTreeSet<String> = [&case["refused"], &case["allowed"]]
            .iter()
            .filter_map(|m| m["apiVersion"].as_str().map(String::from))
            .collect();
        // A custom resource's schema is published a moment after its CRD is established.
        let until = Instant::now() + Duration::from_secs(30);
        let mut catalog = loop {
            let catalog = api.catalog_for(&versions).await.unwrap();
            let m = &case["refused"];
            let (av, kind) = (
                m["apiVersion"].as_str().unwrap(),
                m["kind"].as_str().unwrap(),
            );
            if catalog.lookup(av, kind).is_ok() || Instant::now() > until {
                break catalog;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for (which, manifest) in [("refused", &case["refused"]), ("allowed", &case["allowed"])] {
            // At the manifest's own apiVersion (an Event's change through events.k8s.io/v1
            // is refused, the same through v1 is not).
            let url = url_of(&api, manifest).await.unwrap();
            let live = settled(&api, &url).await;
            let Judged {
                prediction, answer, ..
            } = apply_judged(
                &api,
                &mut catalog,
                NAMESPACE,
                &url,
                live.as_ref(),
                manifest,
                "change",
                true,
            )
            .await;
            // The server still answers as recorded.
            let recorded: BTreeSet<(String, String, String)> = case["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let mut p = c.as_str()?.splitn(3, '|');
                    Some((p.next()?.into(), p.next()?.into(), p.next()?.into()))
                })
                .collect();
            match (which, &answer) {
                ("refused", Err(r)) if r.code == 422 => {
                    let got: BTreeSet<_> = r.causes.iter().cloned().collect();
                    if got != recorded {
                        failures.push(format!(
                            "{name}: the server's causes changed: recorded {recorded:?}, now {got:?}"
                        ));
                    }
                }
                ("allowed", Ok(_)) => {}
                _ => failures.push(format!(
                    "{name}: {which}: the server answered {}",
                    match &answer {
                        Ok(_) => "success".to_string(),
                        Err(r) => format!("{} {:?}", r.code, r.causes),
                    }
                )),
            }
            let found = compare(&prediction, live.as_ref(), &answer);
            // The documented differences: only the stored object's, only at these paths.
            if let (Some(known), Ok(stored), Some(predicted)) =
                (DOCUMENTED.get(name), &answer, &prediction.object)
                && found.iter().all(|f| {
                    f.starts_with("object:")
                        || (f.starts_with("managedFields:") && known.1.contains(&"managedFields"))
                })
            {
                let predicted = support::judge::contents(&support::judge::to_json(predicted));
                let paths = differences(&predicted, &support::judge::contents(stored));
                if paths.iter().all(|p| known.1.contains(&p.as_str())) {
                    seen.insert(name);
                    *counts.entry("documented").or_default() += 1;
                    continue;
                }
            }
            *counts
                .entry(if found.is_empty() {
                    "agreed"
                } else {
                    "disagreed"
                })
                .or_default() += 1;
            if !found.is_empty() {
                failures.push(format!("{name} ({which}): {}", found.join("\n    ")));
            }
        }
    }
    println!(
        "immutable rules on kube-apiserver: {} cases of {} rules, predictions {counts:?}",
        cases.len(),
        rules.len()
    );
    let stale: Vec<&&str> = DOCUMENTED.keys().filter(|k| !seen.contains(*k)).collect();
    if !stale.is_empty() {
        failures.push(format!(
            "documented differences no longer seen (right now, or wrong otherwise: take them out): {stale:?}"
        ));
    }
    assert!(
        failures.is_empty(),
        "{} disagreement(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
