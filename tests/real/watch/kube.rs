//! The watch cache on kube-apiserver (`controlplane/`): every built-in group discovered and
//! watched (the resources that can be listed and watched, at each group's preferred
//! version, Events excepted), then [`super::follows`] on a mix of built-in kinds in one namespace: ConfigMaps,
//! Secrets, Services (their cluster IPs allocated as they are created), ServiceAccounts and
//! Roles, beside what the controllers make there themselves (the namespace's `default`
//! ServiceAccount, its `kube-root-ca.crt` ConfigMap).

use super::{Kind, Population, follows};
use crate::support;

use fieldguard::cache::CacheConfig;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use support::realapi::get;

const NS: &str = "mixed";

fn config_map(name: &str, namespace: &str, note: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace}, "data": {"note": note}})
}

fn secret(name: &str, namespace: &str, note: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": namespace}, "stringData": {"note": note}})
}

fn service(name: &str, namespace: &str, note: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": namespace, "annotations": {"note": note}},
           "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}})
}

fn service_account(name: &str, namespace: &str, note: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": name, "namespace": namespace, "annotations": {"note": note}}})
}

fn role(name: &str, namespace: &str, note: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": namespace, "annotations": {"note": note}},
           "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})
}

/// What the server's discovery says can be listed and watched, read here without
/// fieldguard: (apiVersion, kind) of every resource (not subresource) whose verbs include
/// `list` and `watch`, at the core group's `v1` and every group's preferred version.
async fn watchable(api: &fieldguard::live::api::Api) -> BTreeSet<(String, String)> {
    let mut versions = vec!["v1".to_string()];
    let groups = get(api, "/apis").await.expect("/apis");
    for g in groups["groups"].as_array().unwrap() {
        versions.push(
            g["preferredVersion"]["groupVersion"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut out = BTreeSet::new();
    for v in versions {
        let base = if v.contains('/') {
            format!("/apis/{v}")
        } else {
            format!("/api/{v}")
        };
        let list = get(api, &base).await.expect("a group version's resources");
        for r in list["resources"].as_array().unwrap() {
            let verbs: Vec<&str> = r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if !r["name"].as_str().unwrap().contains('/')
                && verbs.contains(&"list")
                && verbs.contains(&"watch")
            {
                out.insert((v.clone(), r["kind"].as_str().unwrap().to_string()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_follows_kube_apiserver_through_restarts_and_compaction() {
    let Some(server) = support::kubeapi::shared_server(module_path!()) else {
        return;
    };
    let api = server.api().await;
    support::realapi::create_namespace(&api, NS).await;
    let core = |plural: &str| format!("/api/v1/namespaces/{NS}/{plural}");
    let pop = Population {
        namespace: NS,
        kinds: vec![
            Kind {
                group: "",
                kind: "ConfigMap",
                list: core("configmaps"),
                object: config_map,
            },
            Kind {
                group: "",
                kind: "Secret",
                list: core("secrets"),
                object: secret,
            },
            Kind {
                group: "",
                kind: "Service",
                list: core("services"),
                object: service,
            },
            Kind {
                group: "",
                kind: "ServiceAccount",
                list: core("serviceaccounts"),
                object: service_account,
            },
            Kind {
                group: "rbac.authorization.k8s.io",
                kind: "Role",
                list: format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles"),
                object: role,
            },
        ],
        names: 80,
    };
    // Every group, as `serve` watches a cluster by default.
    let (cache, _proxy) =
        follows(server, &pop, CacheConfig::default(), "kube-apiserver watch").await;

    // Events excepted, which the cache never watches unless told to (`CacheConfig`'s
    // default `exclude_kinds`: high churn, no ownership questions).
    let mut want = watchable(&api).await;
    let events: Vec<_> = want.iter().filter(|(_, k)| k == "Event").cloned().collect();
    assert!(!events.is_empty(), "kube-apiserver serves no Event?");
    for e in events {
        want.remove(&e);
    }
    let have: BTreeSet<(String, String)> = cache
        .tables()
        .iter()
        .map(|t| (t.api_version.clone(), t.kind.clone()))
        .collect();
    assert_eq!(
        have,
        want,
        "the cache's tables are not every watchable resource: missing {:?}, not watchable {:?}",
        want.difference(&have).collect::<Vec<_>>(),
        have.difference(&want).collect::<Vec<_>>()
    );
    // Aggregated discovery (what the cache asks) says what asking per group-version says.
    let described = |r: &[fieldguard::live::discovery::ServedResource]| {
        r.iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {:?} ns={} list={} watch={}",
                    r.api_version,
                    r.kind,
                    r.plural,
                    r.singular,
                    r.short_names,
                    r.namespaced,
                    r.listable,
                    r.watchable
                )
            })
            .collect::<BTreeSet<String>>()
    };
    let aggregated = described(&api.resources().await.unwrap());
    let per_version = described(&api.resources_per_version().await.unwrap());
    assert_eq!(
        aggregated,
        per_version,
        "aggregated discovery differs: only there {:?}, only per version {:?}",
        aggregated.difference(&per_version).collect::<Vec<_>>(),
        per_version.difference(&aggregated).collect::<Vec<_>>()
    );
    let groups: BTreeSet<&str> = want
        .iter()
        .map(|(v, _)| v.rsplit_once('/').map_or("", |(g, _)| g))
        .collect();
    println!(
        "kube-apiserver watch: {} resources of {} groups watched, as discovery lists them",
        want.len(),
        groups.len()
    );
    // Every kind back in sync after the compaction's relists (each in its own backoff).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cache.out_of_sync().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "out of sync 60 s after the compaction: {:?}",
            cache.out_of_sync()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    cache.stop();
}
