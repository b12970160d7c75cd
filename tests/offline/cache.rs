//! The watch-fed cache against a fake apiserver with injected faults: after every fault the
//! cache must converge to the apiserver's truth — no missed deletes, no phantom objects.

use crate::support;

use fieldguard::cache::{CacheConfig, ClusterCache};
use fieldguard::live::state::LiveState;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::fake_apiserver::{FakeApiServer, Resource, State};

fn resources() -> Vec<Resource> {
    vec![
        Resource::new("v1", "ConfigMap", "configmaps", true, &[]),
        Resource::new(
            "apps/v1",
            "Deployment",
            "deployments",
            true,
            &["status", "scale"],
        ),
        Resource::new("v1", "Namespace", "namespaces", false, &["status"]),
    ]
}

fn configmap(ns: &str, name: &str, generation: u64) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": {"app": "demo"},
                        "managedFields": [{"manager": "helm", "operation": "Apply", "apiVersion": "v1",
                                           "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                                           "fieldsV1": {"f:data": {"f:gen": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}}]},
           "data": {"gen": generation.to_string()}})
}

fn deployment(ns: &str, name: &str, replicas: u64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": ns,
                        "managedFields": [
                            {"manager": "helm", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                             "fieldsV1": {"f:spec": {"f:selector": {}}}},
                            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
                             "subresource": "scale", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}}})
}

async fn start(st: State) -> (FakeApiServer, Arc<ClusterCache>) {
    let server = FakeApiServer::start(st);
    let api = server.api("default").await;
    let config = CacheConfig {
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(100),
        watch_timeout_secs: 30,
        ..CacheConfig::default()
    };
    let cache = ClusterCache::start("fake", api, config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .unwrap();
    (server, cache)
}

fn cached(cache: &ClusterCache) -> BTreeMap<(String, String, String, String), String> {
    cache
        .versions()
        .into_iter()
        .map(|(r, v)| ((r.group, r.kind, r.namespace, r.name), v))
        .collect()
}

/// Waits until the cache holds exactly the fake's objects at their resourceVersions.
async fn converge(server: &FakeApiServer, cache: &ClusterCache, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let truth = server.state.lock().unwrap().versions();
        let got = cached(cache);
        if truth == got {
            return;
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = truth
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(*v))
                .take(5)
                .collect();
            let phantom: Vec<_> = got
                .iter()
                .filter(|(k, _)| !truth.contains_key(*k))
                .take(5)
                .collect();
            panic!("no convergence after {what}: missing/stale {missing:?}, phantom {phantom:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_converges_after_a_thousand_injected_faults() {
    let mut st = State::new(resources());
    st.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    for i in 0..20 {
        st.seed(configmap("default", &format!("cm-{i}"), 0));
        st.seed(deployment("default", &format!("web-{i}"), 1));
    }
    let (server, cache) = start(st).await;
    converge(&server, &cache, "the initial sync").await;

    let mut rng = StdRng::seed_from_u64(20261122);
    let faults = 1000;
    let mut counts = BTreeMap::new();
    for n in 0..faults {
        // Some changes between faults.
        {
            let mut s = server.state.lock().unwrap();
            for _ in 0..rng.gen_range(0..4) {
                mutate(&mut s, &mut rng, n as u64);
            }
        }
        let fault = rng.gen_range(0..7);
        let name = [
            "drop",
            "gone",
            "restart",
            "outage-with-deletes",
            "bookmark",
            "outage-then-gone",
            "slow-stream",
        ][fault];
        *counts.entry(name).or_insert(0) += 1;
        match fault {
            0 => server.state.lock().unwrap().drop_watches(),
            1 => {
                let mut s = server.state.lock().unwrap();
                s.compact();
                s.drop_watches();
            }
            2 => server.state.lock().unwrap().restart(),
            3 | 5 => {
                {
                    let mut s = server.state.lock().unwrap();
                    s.refuse_watches = true;
                    s.drop_watches();
                    for _ in 0..rng.gen_range(1..5) {
                        mutate(&mut s, &mut rng, n as u64);
                    }
                    if fault == 5 {
                        s.compact();
                    }
                }
                tokio::time::sleep(Duration::from_millis(rng.gen_range(1..15))).await;
                server.state.lock().unwrap().refuse_watches = false;
            }
            4 => server.state.lock().unwrap().bookmark(),
            _ => {
                // The next watches deliver each event late; changes arrive through them.
                let mut s = server.state.lock().unwrap();
                s.slow = Some(Duration::from_millis(rng.gen_range(1..8)));
                s.drop_watches();
                for _ in 0..rng.gen_range(1..4) {
                    mutate(&mut s, &mut rng, n as u64);
                }
            }
        }
        converge(&server, &cache, &format!("fault {n} ({name})")).await;
        server.state.lock().unwrap().slow = None;
    }
    let relists = cache
        .stats
        .relists
        .load(std::sync::atomic::Ordering::Relaxed);
    let restarts = cache
        .stats
        .watch_restarts
        .load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{faults} faults injected {counts:?}; cache relisted {relists} times, re-watched {restarts} times; converged after every one"
    );
    assert!(
        relists > 100 && restarts > 100,
        "faults really exercised both paths"
    );
    cache.stop();
}

fn mutate(s: &mut State, rng: &mut StdRng, generation: u64) {
    let i = rng.gen_range(0..30);
    match rng.gen_range(0..4) {
        0 => {
            let key = (
                "".to_string(),
                "configmaps".to_string(),
                "default".to_string(),
                format!("cm-{i}"),
            );
            s.delete(&key);
        }
        1 => s.put(deployment("default", &format!("web-{i}"), generation % 7)),
        2 => {
            let key = (
                "apps".to_string(),
                "deployments".to_string(),
                "default".to_string(),
                format!("web-{i}"),
            );
            s.delete(&key);
        }
        _ => s.put(configmap("default", &format!("cm-{i}"), generation)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_objects_are_skipped_and_counted_and_the_store_answers() {
    let mut st = State::new(resources());
    st.seed(configmap("default", "good", 1));
    let mut bad = configmap("default", "bad", 1);
    bad["metadata"]["managedFields"] = json!("not a list");
    st.seed(bad);
    st.seed(deployment("default", "web", 3));
    let (server, cache) = start(st).await;
    let got = cached(&cache);
    assert!(got.contains_key(&(
        "".into(),
        "ConfigMap".into(),
        "default".into(),
        "good".into()
    )));
    assert!(!got.contains_key(&(
        "".into(),
        "ConfigMap".into(),
        "default".into(),
        "bad".into()
    )));
    assert!(
        cache
            .stats
            .skipped
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );

    // The store interface: objects with resourceVersions, managers, full content fetched.
    let c2 = cache.clone();
    let oref = |kind: &str, name: &str| fieldguard::live::ObjectRef {
        group: if kind == "Deployment" { "apps" } else { "" }.into(),
        kind: kind.into(),
        namespace: "default".into(),
        name: name.into(),
    };
    let all = c2.list(None).await.unwrap();
    let web = c2.get(&oref("Deployment", "web")).await;
    let bad = c2.get(&oref("ConfigMap", "bad")).await;
    let absent = c2.get(&oref("ConfigMap", "absent")).await;
    assert_eq!(all.len(), 2);
    // The unreadable object exists: asking for it is an error, never "absent" (a creation).
    let bad = bad
        .expect_err("an unreadable object is not absent")
        .to_string();
    assert!(
        bad.contains("ConfigMap default/bad") && bad.contains("cannot read"),
        "{bad}"
    );
    assert!(absent.unwrap().is_none());
    let web = web.unwrap().unwrap();
    assert_eq!(
        web.get_path(&["spec", "replicas"]),
        Some(&fieldguard::value::Value::Int(3)),
        "full object fetched"
    );
    let dep = all.iter().find(|(r, _)| r.kind == "Deployment").unwrap();
    let mf = dep
        .1
        .get_path(&["metadata", "managedFields"])
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(mf.len(), 2);
    // Same-shaped objects share their FieldsV1 text.
    let before = cache.interner.len();
    {
        let mut s = server.state.lock().unwrap();
        s.delete(&(
            "".into(),
            "configmaps".into(),
            "default".into(),
            "bad".into(),
        ));
        for i in 0..50 {
            s.put(configmap("default", &format!("same-{i}"), 1));
        }
    }
    converge(&server, &cache, "50 same-shaped objects").await;
    // Deleted, it is absent again.
    let bad = cache
        .get(&fieldguard::live::ObjectRef {
            group: "".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "bad".into(),
        })
        .await;
    assert!(bad.unwrap().is_none());
    assert!(
        cache.interner.len() <= before + 2,
        "interned: {before} -> {}",
        cache.interner.len()
    );
    cache.stop();
}

/// A half-open connection (a load balancer that lost its state: nothing passes, nothing ends):
/// the watch hears nothing for its idle timeout, is restarted on a new connection, and the
/// cache catches up; meanwhile the kinds are reported out of sync (readiness).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_restarted_and_reported() {
    use support::proxy::{Mode, Proxy};
    let mut st = State::new(resources());
    st.seed(configmap("default", "before", 0));
    let server = FakeApiServer::start(st);
    let proxy = Proxy::start(server.addr).await;
    let api = server.api_via(proxy.addr).await;
    let config = CacheConfig {
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        watch_idle_timeout: Duration::from_secs(2),
        ..CacheConfig::default()
    };
    let cache = ClusterCache::start("fake", api, config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .unwrap();
    // The apiserver sends bookmarks (as a real one does about every minute; here every 50 ms
    // against an idle timeout of 2 s): a healthy watch is never idle.
    let state = server.state.clone();
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            state.lock().unwrap().bookmark();
        }
    });
    converge(&server, &cache, "the initial sync").await;
    let until = Instant::now() + Duration::from_secs(60);
    while cache.in_sync().is_err() {
        assert!(Instant::now() < until, "{:?}", cache.in_sync());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A healthy watch stays in sync well past its idle timeout.
    let restarts = cache
        .stats
        .watch_restarts
        .load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(cache.in_sync().is_ok());
    assert_eq!(
        cache
            .stats
            .watch_restarts
            .load(std::sync::atomic::Ordering::SeqCst),
        restarts,
        "bookmarks keep a quiet watch alive"
    );
    // Every connection goes silent; a change happens that only a new watch can see.
    proxy.set(Mode::Blackhole);
    server
        .state
        .lock()
        .unwrap()
        .put(configmap("default", "during", 1));
    // Each kind's watch notices on its own (its idle timeout runs from its last bookmark):
    // wait for the ConfigMaps', whose change is missed.
    let until = Instant::now() + Duration::from_secs(60);
    while !cache
        .in_sync()
        .is_err_and(|why| why.contains("v1/ConfigMap"))
    {
        assert!(
            Instant::now() < until,
            "a silent watch was never noticed: {:?}",
            cache.in_sync()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The service over this cache says so: health NOT_SERVING while it stays silent.
    let channel = support::serve(fieldguard::service::Stores::single(
        "fake",
        cache.clone() as Arc<dyn LiveState>,
    ))
    .await;
    let health = async |want: tonic_health::pb::health_check_response::ServingStatus| {
        let mut h = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let got = h
                .check(tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .unwrap()
                .into_inner()
                .status();
            if got == want {
                return;
            }
            assert!(Instant::now() < until, "health stays {got:?}, not {want:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    use tonic_health::pb::health_check_response::ServingStatus;
    health(ServingStatus::NotServing).await;
    // New connections work again (the silent ones stay silent, as after a lost LB state).
    proxy.set(Mode::Forward);
    converge(&server, &cache, "the restarted watch").await;
    let until = Instant::now() + Duration::from_secs(60);
    while cache.in_sync().is_err() {
        assert!(Instant::now() < until, "{:?}", cache.in_sync());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    health(ServingStatus::Serving).await;
    assert!(
        cache
            .stats
            .watch_restarts
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
    );
    ticker.abort();
    cache.stop();
}

/// A watch task that dies (a panic) is started again, counted, and its kind catches up.
#[cfg(feature = "fault-injection")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_watch_task_is_restarted() {
    let mut st = State::new(resources());
    st.seed(configmap("default", "a", 0));
    let (server, cache) = start(st).await;
    converge(&server, &cache, "the initial sync").await;
    cache.inject_panic("ConfigMap");
    // The next event kills the task: the one after must still arrive.
    server
        .state
        .lock()
        .unwrap()
        .put(configmap("default", "b", 1));
    let until = Instant::now() + Duration::from_secs(60);
    while cache
        .stats
        .task_restarts
        .load(std::sync::atomic::Ordering::SeqCst)
        == 0
    {
        assert!(Instant::now() < until, "the task was not restarted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server
        .state
        .lock()
        .unwrap()
        .put(configmap("default", "c", 2));
    converge(&server, &cache, "the restarted task").await;
    cache.stop();
}

/// After an outage, the watches of many kinds do not reconnect in lockstep: each waits its own
/// jittered, growing backoff, so their first requests once the server is back are spread out
/// (with a fixed retry interval they would arrive within a few milliseconds of each other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_many_kinds_reconnect_spread_out() {
    use support::proxy::{Mode, Proxy};
    const KINDS: usize = 20;
    let resources: Vec<Resource> = (0..KINDS)
        .map(|i| {
            Resource::new(
                "spread.test/v1",
                &format!("Kind{i}"),
                &format!("kind{i}s"),
                true,
                &[],
            )
        })
        .collect();
    let server = FakeApiServer::start(State::new(resources));
    let proxy = Proxy::start(server.addr).await;
    let api = server.api_via(proxy.addr).await;
    let config = CacheConfig {
        backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(2),
        ..CacheConfig::default()
    };
    let cache = ClusterCache::start("fake", api, config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .unwrap();
    assert_eq!(cache.tables().len(), KINDS);
    // The server goes away: every watch fails, again and again (four times each, at least).
    let failed = cache
        .stats
        .watch_restarts
        .load(std::sync::atomic::Ordering::SeqCst);
    proxy.set(Mode::Refuse);
    let until = Instant::now() + Duration::from_secs(60);
    while cache
        .stats
        .watch_restarts
        .load(std::sync::atomic::Ordering::SeqCst)
        < failed + 4 * KINDS as u64
    {
        assert!(Instant::now() < until, "the watches never failed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let back = Instant::now();
    let seen = server.state.lock().unwrap().requests.len();
    proxy.set(Mode::Forward);
    let until = Instant::now() + Duration::from_secs(60);
    while cache.in_sync().is_err() {
        assert!(Instant::now() < until, "{:?}", cache.in_sync());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Each kind's first request once the server is back.
    let first: BTreeMap<String, Instant> = {
        let s = server.state.lock().unwrap();
        let mut first = BTreeMap::new();
        for (r, t) in s.requests[seen..].iter().zip(&s.request_times[seen..]) {
            if let Some(kind) = r.split('/').find(|p| p.starts_with("kind")) {
                let kind = kind.split('?').next().unwrap().to_string();
                first.entry(kind).or_insert(*t);
            }
        }
        first
    };
    assert_eq!(first.len(), KINDS, "{first:?}");
    let earliest = first.values().min().unwrap();
    let latest = first.values().max().unwrap();
    let spread = latest.duration_since(*earliest);
    println!(
        "reconnect: {KINDS} kinds back within {:?} of the server, spread over {spread:?}",
        latest.duration_since(back)
    );
    assert!(
        spread >= Duration::from_millis(50),
        "the kinds reconnected in lockstep: all within {spread:?}"
    );
    cache.stop();
}
