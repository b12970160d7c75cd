//! The watch-fed cache (what `serve` answers from) against real apiservers: initial sync,
//! steady churn, an apiserver restart with etcd kept, and etcd compaction forcing `410 Gone` on
//! re-watch. After each, the cache must equal a fresh list from the server — every object at
//! its resourceVersion, no delete missed. The same history ([`follows`]) runs on custom
//! resources against the apiextensions-apiserver (here, with a CRD deleted and re-created
//! after it) and on a mix of built-in kinds against kube-apiserver, which serves every
//! built-in group ([`kube`], with discovery of all of them).
//!
//! fieldguard reaches the server through a proxy the test can cut ([`support::proxy`]), so the
//! changes it must not see happen while it is cut off, by construction rather than by timing.
//! The test's own writes go to the server directly. Waits are for the event itself (the cache
//! reaching the server's state), with a hang guard of 60 s.
//!
//! Each module restarts its server: it has one test only.

mod kube;

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

/// One kind of the objects a history writes: where they are listed, and an object of it.
pub struct Kind {
    pub group: &'static str,
    pub kind: &'static str,
    /// The namespaced list URL.
    pub list: String,
    /// An object named `name` in `namespace`, created with `note`.
    pub object: fn(name: &str, namespace: &str, note: &str) -> Value,
}

/// The objects a history writes: its kinds, in one namespace, each with the same names.
pub struct Population {
    pub namespace: &'static str,
    pub kinds: Vec<Kind>,
    /// Names per kind.
    pub names: usize,
}

/// An object of the population: its kind's index and its name.
type Key = (usize, String);

impl Population {
    fn url(&self, k: &Key) -> String {
        format!("{}/{}", self.kinds[k.0].list, k.1)
    }

    fn keys(&self) -> Vec<Key> {
        (0..self.names)
            .flat_map(|i| (0..self.kinds.len()).map(move |k| (k, format!("o{i:04}"))))
            .collect()
    }

    async fn create(&self, api: &Api, k: &Key, note: &str) {
        let kind = &self.kinds[k.0];
        let body = (kind.object)(&k.1, self.namespace, note);
        let r = write(
            api,
            http::Method::POST,
            &kind.list,
            "application/json",
            &body,
        )
        .await;
        if let Err(e) = r {
            assert_eq!(e.code, 409, "create {k:?}: {e:?}");
        }
    }

    /// A merge patch of an annotation, as `kubectl annotate` sends.
    async fn update(&self, api: &Api, k: &Key, note: &str) {
        let body = json!({"metadata": {"annotations": {"note": note}}});
        let r = write(
            api,
            http::Method::PATCH,
            &format!("{}?fieldManager=churn", self.url(k)),
            "application/merge-patch+json",
            &body,
        )
        .await;
        if let Err(e) = r {
            assert_eq!(e.code, 404, "update {k:?}: {e:?}");
        }
    }

    async fn delete(&self, api: &Api, k: &Key) {
        let r = write(
            api,
            http::Method::DELETE,
            &self.url(k),
            "application/json",
            &json!({}),
        )
        .await;
        if let Err(e) = r {
            assert_eq!(e.code, 404, "delete {k:?}: {e:?}");
        }
    }

    /// The server's objects of these kinds in the namespace now: (kind, name) →
    /// resourceVersion (objects the server made itself included).
    async fn truth(&self, api: &Api) -> BTreeMap<(String, String), String> {
        let mut out = BTreeMap::new();
        for kind in &self.kinds {
            let list = get(api, &kind.list).await.expect("the list");
            for o in list["items"].as_array().unwrap() {
                out.insert(
                    (
                        kind.kind.to_string(),
                        o["metadata"]["name"].as_str().unwrap().to_string(),
                    ),
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
        out
    }

    /// The cache's objects of these kinds in the namespace: (kind, name) → resourceVersion.
    fn cached(&self, cache: &ClusterCache) -> BTreeMap<(String, String), String> {
        cache
            .versions()
            .into_iter()
            .filter(|(r, _)| {
                r.namespace == self.namespace
                    && self
                        .kinds
                        .iter()
                        .any(|k| k.group == r.group && k.kind == r.kind)
            })
            .map(|(r, v)| ((r.kind, r.name), v))
            .collect()
    }

    /// Waits until the cache holds exactly the server's objects (and the server's state did
    /// not move meanwhile: the test's writers are stopped when this is called).
    async fn converged(
        &self,
        cache: &ClusterCache,
        api: &Api,
        phase: &str,
    ) -> BTreeMap<(String, String), String> {
        let want = self.truth(api).await;
        let until = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let have = self.cached(cache);
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
                    "{phase}: the cache did not converge in 60 s: {} objects on the server, {} \
                     cached; missing {missing:?}, not deleted {extra:?}, stale {stale:?}",
                    want.len(),
                    have.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `n` random writes: creates, updates and deletes over every key.
    async fn churn(&self, api: &Api, rng: &mut StdRng, n: usize) -> [usize; 3] {
        let keys = self.keys();
        let mut done = [0; 3];
        for i in 0..n {
            let k = &keys[rng.gen_range(0..keys.len())];
            let what = rng.gen_range(0..3);
            match what {
                0 => self.create(api, k, &format!("c{i}")).await,
                1 => self.update(api, k, &format!("u{i}")).await,
                _ => self.delete(api, k).await,
            }
            done[what] += 1;
        }
        done
    }

    /// `n` of the objects in `objects`, as keys of this population.
    fn some(
        &self,
        objects: &BTreeMap<(String, String), String>,
        n: usize,
        from_end: bool,
    ) -> Vec<Key> {
        let ours = objects.keys().filter_map(|(kind, name)| {
            let k = self.kinds.iter().position(|x| x.kind == kind)?;
            name.starts_with('o').then(|| (k, name.clone()))
        });
        if from_end {
            ours.rev().take(n).collect()
        } else {
            ours.take(n).collect()
        }
    }
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1)
}

/// The history both servers go through, each phase ending with the cache equal to the
/// server: (1) initial sync of three quarters of the population, listed 64 a page (each page
/// asked for while the one before is decoded; so are the relists below); (2) steady churn,
/// followed by events without a relist; (3) the apiserver killed and started again on the
/// same etcd while fieldguard is cut off and objects change, some deleted: its watches resume
/// or relist and miss no delete; (4) compaction: the apiserver without its watch cache
/// (watches read etcd directly, as for resources whose cache is off), fieldguard cut off,
/// objects changed and deleted, etcd's history compacted past what fieldguard saw: the
/// re-watch is refused with 410 and answered by a relist. Returns the cache and the proxy.
async fn follows(
    server: &RealApi,
    pop: &Population,
    config: CacheConfig,
    what: &str,
) -> (Arc<ClusterCache>, Proxy) {
    let api = server.api().await;
    let seed = seed();
    println!("{what}: seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let keys = pop.keys();
    let initial = keys.len() * 3 / 4;

    for k in &keys[..initial] {
        pop.create(&api, k, "initial").await;
    }
    let proxy = Proxy::start(server.addr()).await;
    let via = RealApi::api_of(&server.kubeconfig_via(proxy.addr)).await;
    let config = CacheConfig {
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_secs(1),
        page_size: 64,
        ..config
    };
    let started = std::time::Instant::now();
    let cache: Arc<ClusterCache> = ClusterCache::start("real", via, config).await.unwrap();
    // A hang guard, not a goal: kube-apiserver's 57 kinds start listing at once, on a machine
    // that runs the other modules' control planes beside this one.
    if tokio::time::timeout(Duration::from_secs(180), cache.wait_synced())
        .await
        .is_err()
    {
        panic!(
            "initial sync: not in 180 s; out of sync: {:?}; watch restarts {}, relists {}",
            cache.out_of_sync(),
            cache.stats.watch_restarts.load(Ordering::SeqCst),
            cache.stats.relists.load(Ordering::SeqCst)
        );
    }
    let synced = pop.converged(&cache, &api, "initial sync").await;
    assert!(synced.len() >= initial, "{} of {initial}", synced.len());
    println!(
        "{what}: initial sync: {} objects of {} kinds in {:.1} s ({} tables, {} objects in all)",
        synced.len(),
        pop.kinds.len(),
        started.elapsed().as_secs_f64(),
        cache.tables().len(),
        cache.len()
    );

    let relists = cache.stats.relists.load(Ordering::SeqCst);
    let done = pop
        .churn(&api, &mut rng, pop.names * pop.kinds.len() * 3 / 2)
        .await;
    let after_churn = pop.converged(&cache, &api, "churn").await;
    assert_eq!(
        cache.stats.relists.load(Ordering::SeqCst),
        relists,
        "steady churn needed a relist"
    );
    println!(
        "{what}: churn of {done:?} creates/updates/deletes: {} objects, followed by events",
        after_churn.len()
    );

    proxy.set(Mode::Refuse);
    let victims = pop.some(&after_churn, 25, false);
    for v in &victims {
        pop.delete(&api, v).await;
    }
    pop.churn(&api, &mut rng, 100).await;
    let relists = cache.stats.relists.load(Ordering::SeqCst);
    server.restart_apiserver(&[]).await;
    proxy.set(Mode::Forward);
    let after_restart = pop.converged(&cache, &api, "apiserver restart").await;
    let gone = |before: &BTreeMap<(String, String), String>,
                after: &BTreeMap<(String, String), String>,
                v: &Key| {
        let k = (pop.kinds[v.0].kind.to_string(), v.1.clone());
        !after.contains_key(&k) || before.get(&k) != after.get(&k)
    };
    for v in &victims {
        assert!(
            gone(&after_churn, &after_restart, v),
            "{v:?} deleted during the outage is still cached at its old version"
        );
    }
    println!(
        "{what}: apiserver restart: {} objects, {} relist(s)",
        after_restart.len(),
        cache.stats.relists.load(Ordering::SeqCst) - relists
    );

    server.restart_apiserver(&["--watch-cache=false"]).await;
    let settled = pop
        .converged(&cache, &api, "restart without watch cache")
        .await;
    proxy.set(Mode::Refuse);
    let victims = pop.some(&settled, 25, true);
    for v in &victims {
        pop.delete(&api, v).await;
    }
    pop.churn(&api, &mut rng, 100).await;
    let relists = cache.stats.relists.load(Ordering::SeqCst);
    let rev = server.compact_etcd();
    proxy.set(Mode::Forward);
    let after_compaction = pop.converged(&cache, &api, "compaction").await;
    let relisted = cache.stats.relists.load(Ordering::SeqCst) - relists;
    assert!(
        relisted >= 1,
        "no relist after compaction to revision {rev}: the re-watch was not refused with 410"
    );
    for v in &victims {
        assert!(
            gone(&settled, &after_compaction, v),
            "{v:?} deleted before the compaction is still cached at its old version"
        );
    }
    println!(
        "{what}: compaction to revision {rev}: {} objects, {relisted} relist(s), {} proxy connections",
        after_compaction.len(),
        proxy.accepted()
    );
    (cache, proxy)
}

fn widget(name: &str, namespace: &str, note: &str) -> Value {
    json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"note": note, "labels": {"app": name}}})
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
    let pop = Population {
        namespace: NS,
        kinds: vec![Kind {
            group: "fieldguard.test",
            kind: "Widget",
            list: "/apis/fieldguard.test/v1/namespaces/default/widgets".into(),
            object: widget,
        }],
        names: 400,
    };
    let config = CacheConfig {
        include_groups: vec![
            "fieldguard.test".into(),
            "p.test".into(),
            "apiextensions.k8s.io".into(),
        ],
        ..CacheConfig::default()
    };
    let (cache, proxy) = follows(server, &pop, config, "real watch").await;

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
