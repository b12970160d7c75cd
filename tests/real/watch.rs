//! The watch-fed cache (what `serve` answers from) against the real apiserver
//! (`../shared/realapi`): initial sync, steady churn, an apiserver restart with etcd kept, and
//! etcd compaction forcing `410 Gone` on re-watch. After each, the cache must equal a fresh
//! list from the server — every object at its resourceVersion, no delete missed.
//!
//! fieldguard reaches the server through a proxy the test can cut ([`support::proxy`]), so the
//! changes it must not see happen while it is cut off, by construction rather than by timing.
//! The test's own writes go to the server directly. Waits are for the event itself (the cache
//! reaching the server's state), with a hang guard of 60 s.
//!
//! This binary restarts its server: it has this one test only.

use crate::support;

use fieldguard::cache::{CacheConfig, ClusterCache};
use fieldguard::live::api::Api;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::proxy::{Mode, Proxy};
use support::realapi::{RealApi, get, install_crd, write};

const NS: &str = "default";
const LIST: &str = "/apis/fieldguard.test/v1/namespaces/default/widgets";

fn url(name: &str) -> String {
    format!("{LIST}/{name}")
}

fn widget(name: &str, note: &str) -> Value {
    json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"note": note, "labels": {"app": name}}})
}

async fn create(api: &Api, name: &str, note: &str) {
    let r = write(
        api,
        http::Method::POST,
        LIST,
        "application/json",
        &widget(name, note),
    )
    .await;
    if let Err(e) = r {
        assert_eq!(e.code, 409, "create {name}: {e:?}");
    }
}

async fn update(api: &Api, name: &str, note: &str) {
    let body = json!({"spec": {"note": note}});
    let r = write(
        api,
        http::Method::PATCH,
        &format!("{}?fieldManager=churn", url(name)),
        "application/merge-patch+json",
        &body,
    )
    .await;
    if let Err(e) = r {
        assert_eq!(e.code, 404, "update {name}: {e:?}");
    }
}

async fn delete(api: &Api, name: &str) {
    let r = write(
        api,
        http::Method::DELETE,
        &url(name),
        "application/json",
        &json!({}),
    )
    .await;
    if let Err(e) = r {
        assert_eq!(e.code, 404, "delete {name}: {e:?}");
    }
}

/// The server's widgets now: name → resourceVersion.
async fn truth(api: &Api) -> BTreeMap<String, String> {
    let list = get(api, LIST).await.expect("the widget list");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// The cache's widgets: name → resourceVersion.
fn cached(cache: &ClusterCache) -> BTreeMap<String, String> {
    cache
        .versions()
        .into_iter()
        .filter(|(r, _)| r.kind == "Widget")
        .map(|(r, v)| (r.name, v))
        .collect()
}

/// Waits until the cache holds exactly the server's widgets (and the server's state did not
/// move meanwhile: the test's writers are stopped when this is called).
async fn converged(cache: &ClusterCache, api: &Api, phase: &str) -> BTreeMap<String, String> {
    let want = truth(api).await;
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let have = cached(cache);
        if have == want {
            return want;
        }
        if std::time::Instant::now() > until {
            let missing: Vec<_> = want.keys().filter(|k| !have.contains_key(*k)).collect();
            let extra: Vec<_> = have.keys().filter(|k| !want.contains_key(*k)).collect();
            let stale: Vec<_> = want
                .iter()
                .filter(|(k, v)| have.get(*k).is_some_and(|h| h != *v))
                .map(|(k, _)| k)
                .collect();
            panic!(
                "{phase}: the cache did not converge in 60 s: {} objects on the server, {} cached; \
                 missing {missing:?}, not deleted {extra:?}, stale {stale:?}",
                want.len(),
                have.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `n` random writes: creates, updates and deletes over `names`.
async fn churn(api: &Api, rng: &mut StdRng, names: &[String], n: usize) -> [usize; 3] {
    let mut done = [0; 3];
    for i in 0..n {
        let name = &names[rng.gen_range(0..names.len())];
        match rng.gen_range(0..3) {
            0 => create(api, name, &format!("c{i}")).await,
            1 => update(api, name, &format!("u{i}")).await,
            _ => delete(api, name).await,
        }
        done[i % 3] += 1;
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_follows_the_real_apiserver_through_restarts_and_compaction() {
    let Some(server) = support::realapi::shared_server(module_path!()) else {
        return;
    };
    let api = server.api().await;
    let crd = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/realapi/widget-crd.yaml"),
    )
    .unwrap();
    install_crd(&api, &crd).await;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1);
    println!("real watch: seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let names: Vec<String> = (0..400).map(|i| format!("w{i:03}")).collect();

    // 1. Initial sync of 300 objects, listed 64 a page (5 pages, each asked for while the
    //    one before is decoded); so are the relists after a compaction below.
    for n in &names[..300] {
        create(&api, n, "initial").await;
    }
    let proxy = Proxy::start(server.addr()).await;
    let via = RealApi::api_of(&server.kubeconfig_via(proxy.addr)).await;
    let config = CacheConfig {
        include_groups: vec![
            "fieldguard.test".into(),
            "p.test".into(),
            "apiextensions.k8s.io".into(),
        ],
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_secs(1),
        page_size: 64,
        ..CacheConfig::default()
    };
    let cache: Arc<ClusterCache> = ClusterCache::start("real", via, config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .expect("initial sync");
    let synced = converged(&cache, &api, "initial sync").await;
    assert_eq!(synced.len(), 300);
    println!("real watch: initial sync: {} widgets", synced.len());

    // 2. Steady churn while it watches: the events arrive, nothing is relisted.
    let relists = cache.stats.relists.load(Ordering::SeqCst);
    let done = churn(&api, &mut rng, &names, 600).await;
    let after_churn = converged(&cache, &api, "churn").await;
    assert_eq!(
        cache.stats.relists.load(Ordering::SeqCst),
        relists,
        "steady churn needed a relist"
    );
    println!(
        "real watch: churn of {done:?} creates/updates/deletes: {} widgets, followed by events",
        after_churn.len()
    );

    // 3. The apiserver restarts (etcd kept) while fieldguard is cut off and objects change,
    //    some deleted: its watches must resume or relist, and miss no delete.
    proxy.set(Mode::Refuse);
    let victims: Vec<String> = after_churn.keys().take(25).cloned().collect();
    for v in &victims {
        delete(&api, v).await;
    }
    churn(&api, &mut rng, &names, 100).await;
    let relists = cache.stats.relists.load(Ordering::SeqCst);
    server.restart_apiserver(&[]).await;
    proxy.set(Mode::Forward);
    let after_restart = converged(&cache, &api, "apiserver restart").await;
    for v in &victims {
        assert!(
            !after_restart.contains_key(v) || after_churn.get(v) != after_restart.get(v),
            "{v} deleted during the outage is still cached at its old version"
        );
    }
    println!(
        "real watch: apiserver restart: {} widgets, {} relist(s)",
        after_restart.len(),
        cache.stats.relists.load(Ordering::SeqCst) - relists
    );

    // 4. Compaction. The apiserver runs without its watch cache (watches read etcd directly,
    //    as for resources whose cache is off), fieldguard is cut off, objects change and are
    //    deleted, etcd's history is compacted past what fieldguard saw: the re-watch must be
    //    refused with 410 and answered by a relist.
    server.restart_apiserver(&["--watch-cache=false"]).await;
    let settled = converged(&cache, &api, "restart without watch cache").await;
    proxy.set(Mode::Refuse);
    let victims: Vec<String> = settled.keys().rev().take(25).cloned().collect();
    for v in &victims {
        delete(&api, v).await;
    }
    churn(&api, &mut rng, &names, 100).await;
    let relists = cache.stats.relists.load(Ordering::SeqCst);
    let rev = server.compact_etcd();
    proxy.set(Mode::Forward);
    let after_compaction = converged(&cache, &api, "compaction").await;
    let relisted = cache.stats.relists.load(Ordering::SeqCst) - relists;
    assert!(
        relisted >= 1,
        "no relist after compaction to revision {rev}: the re-watch was not refused with 410"
    );
    for v in &victims {
        assert!(
            !after_compaction.contains_key(v) || settled.get(v) != after_compaction.get(v),
            "{v} deleted before the compaction is still cached at its old version"
        );
    }
    println!(
        "real watch: compaction to revision {rev}: {} widgets, {relisted} relist(s), {} proxy connections",
        after_compaction.len(),
        proxy.accepted()
    );

    // 5. A CRD created, deleted and created again: its kind is watched when it appears, its
    //    table goes with it, and the new one is watched again.
    proxy.set(Mode::Forward);
    let probe_crd = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/realapi/probe-crd.json"),
    )
    .unwrap();
    let probes = "/apis/p.test/v1/namespaces/default/probes";
    let probe = |name: &str| {
        json!({"apiVersion": "p.test/v1", "kind": "Probe",
               "metadata": {"name": name, "namespace": NS}, "spec": {"must": "x"}})
    };
    let cached_probes = |cache: &ClusterCache| -> Vec<String> {
        cache
            .versions()
            .into_keys()
            .filter(|r| r.kind == "Probe")
            .map(|r| r.name)
            .collect()
    };
    let probe_table = |cache: &ClusterCache| cache.tables().iter().any(|t| t.kind == "Probe");
    let wait = async |what: &str, done: &dyn Fn() -> bool| {
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(std::time::Instant::now() < until, "{what}: not within 60 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    install_crd(&api, &probe_crd).await;
    for n in ["p1", "p2", "p3"] {
        write(
            &api,
            http::Method::POST,
            probes,
            "application/json",
            &probe(n),
        )
        .await
        .unwrap();
    }
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while cached_probes(&cache) != ["p1", "p2", "p3"] {
        let kinds: Vec<String> = cache
            .tables()
            .iter()
            .map(|t| format!("{}:{}", t.kind, t.read().objects.len()))
            .collect();
        assert!(
            std::time::Instant::now() < until,
            "not cached: tables {kinds:?}, probes {:?}, CRD names {:?}",
            cached_probes(&cache),
            cache
                .tables()
                .iter()
                .find(|t| t.kind == "CustomResourceDefinition")
                .map(|t| t.read().objects.keys().cloned().collect::<Vec<_>>())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let crd_url = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/probes.p.test";
    write(
        &api,
        http::Method::DELETE,
        crd_url,
        "application/json",
        &json!({}),
    )
    .await
    .unwrap();
    wait("the deleted CRD's table forgotten", &|| {
        !probe_table(&cache)
    })
    .await;
    assert!(cached_probes(&cache).is_empty());
    // Discovery may still list it while the CRD finishes terminating: wait until it is gone.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while get(&api, crd_url).await.is_some() {
        assert!(
            std::time::Instant::now() < until,
            "the CRD is never deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    install_crd(&api, &probe_crd).await;
    write(
        &api,
        http::Method::POST,
        probes,
        "application/json",
        &probe("again"),
    )
    .await
    .unwrap();
    wait("the re-created CRD watched again", &|| {
        cached_probes(&cache) == ["again"]
    })
    .await;
    println!("real watch: a CRD deleted (its table forgotten) and re-created (watched again)");
    cache.stop();
}
