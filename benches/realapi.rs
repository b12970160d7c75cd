//! Figures from the real servers, both built by `scripts/setup.sh`: everything here runs
//! against Kubernetes 1.36's own handlers over etcd, on loopback — the apiextensions-apiserver
//! (`../shared/realapi`, in `.realapi/`) on custom resources
//! (`tests/data/realapi/widget-crd.yaml`), and kube-apiserver (`controlplane/`, in
//! `.controlplane/`, its controller manager running) on a mix of built-in kinds: ConfigMaps,
//! Secrets, Services (each allocated a cluster IP), ServiceAccounts and Roles, in equal parts.
//! `FIELDGUARD_BENCH_TIER` picks one (`realapi`, `kubeapi`; default both, one after the other).
//!
//! - initial sync of 10,000 objects (`FIELDGUARD_BENCH_OBJECTS`) by the watch cache, beside the
//!   server's own paged metadata LIST of the same objects (the floor: the cache makes the same
//!   requests, a list per kind, the kinds side by side), alternated `FIELDGUARD_BENCH_ROUNDS` times (5), with the CPU this process and
//!   the server used in each;
//! - watch ingest while writers keep the server as busy as it goes (merge patches and creates
//!   from 8 concurrent clients): the server's write rate, the events the cache took in, the
//!   lag from a write's answer to the cache holding it (sampled), and the catch-up time after
//!   the writers stop;
//! - `PredictConflicts` with `fresh` (the live object read from the server for each request)
//!   and without (from the cache), one object, sequential calls: latency percentiles;
//! - 1,000 server-side applies through `fieldguard apply`'s write path (`apply::ssa`), one at
//!   a time: objects/s.
//!
//! Run: `cargo bench --bench realapi`. The machine is shared with the server: both figures of
//! a pair come from the same run. `FIELDGUARD_BENCH_KUBEAPI_RUN=DIR` measures a control plane
//! that `CONTROLPLANE_RUN=DIR controlplane/start.sh` started (and a restart of it keeps its
//! objects) instead of a fresh one: only the objects missing there are created.

#[path = "../tests/support/kubeapi.rs"]
#[allow(dead_code)]
mod kubeapi;
#[path = "../tests/support/realapi.rs"]
#[allow(dead_code)]
mod realapi;

use fieldguard::cache::{CacheConfig, ClusterCache};
use fieldguard::live::api::Api;
use fieldguard::service::proto::{self as pb, analysis_client::AnalysisClient};
use fieldguard::service::{self, Stores};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const NS: &str = "bench";

/// One kind of a tier's objects: its table's group and kind, where it is listed, and its
/// `i`th object.
struct Kind {
    group: &'static str,
    kind: &'static str,
    list: &'static str,
    object: fn(usize) -> serde_json::Value,
}

/// A server and the objects written to it: object `i` is of kind `i % kinds.len()`, named
/// [`name`]`(i)`.
struct Tier {
    name: &'static str,
    server: &'static realapi::RealApi,
    kinds: Vec<Kind>,
    /// The server's processes, by their pid files (their CPU is measured).
    processes: &'static [&'static str],
}

impl Tier {
    fn kind(&self, i: usize) -> &Kind {
        &self.kinds[i % self.kinds.len()]
    }

    fn url(&self, i: usize) -> String {
        format!("{}/{}", self.kind(i).list, name(i))
    }

    fn config(&self) -> CacheConfig {
        CacheConfig {
            include_groups: self.kinds.iter().map(|k| k.group.to_string()).collect(),
            include_kinds: self.kinds.iter().map(|k| k.kind.to_string()).collect(),
            namespace: Some(NS.into()),
            backoff: Duration::from_millis(50),
            ..CacheConfig::default()
        }
    }
}

fn name(i: usize) -> String {
    format!("o{i:06}")
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn widget(i: usize) -> serde_json::Value {
    json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
           "metadata": {"name": name(i), "namespace": NS,
                        "labels": {"app": "bench", "shard": format!("s{}", i % 16)}},
           "spec": {"replicas": 1 + i % 5, "note": "initial",
                    "labels": {"tier": "web"},
                    "containers": [{"name": "app", "image": "app:1",
                                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}})
}

fn labels(i: usize) -> serde_json::Value {
    json!({"app": "bench", "shard": format!("s{}", i % 16)})
}

fn config_map(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name(i), "namespace": NS, "labels": labels(i)},
           "data": {"app.properties": format!("replicas={}\nnote=initial\n", 1 + i % 5)}})
}

fn secret(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name(i), "namespace": NS, "labels": labels(i)},
           "type": "Opaque", "stringData": {"password": format!("pw-{i}")}})
}

fn service(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name(i), "namespace": NS, "labels": labels(i)},
           "spec": {"selector": {"app": name(i)},
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}})
}

fn service_account(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": name(i), "namespace": NS, "labels": labels(i)}})
}

fn role(i: usize) -> serde_json::Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name(i), "namespace": NS, "labels": labels(i)},
           "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                      "resourceNames": [name(i)], "verbs": ["get"]}]})
}

/// Runs `n` jobs with `width` in flight.
async fn concurrently<F, Fut>(n: usize, width: usize, job: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let job = Arc::new(job);
    let next = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..width {
        let (job, next) = (job.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                job(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    t.elapsed()
}

/// The server's paged metadata LIST of one kind's objects: the count.
async fn metadata_list(api: &Api, list: &str) -> usize {
    // Read as little as the floor needs: the items counted, the continue token.
    paged(api, list, |items: Vec<serde::de::IgnoredAny>| items.len())
        .await
        .into_iter()
        .sum()
}

/// The names of one kind's objects (a metadata LIST).
async fn metadata_names(api: &Api, list: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Item {
        metadata: Name,
    }
    #[derive(serde::Deserialize)]
    struct Name {
        name: String,
    }
    let pages = paged(api, list, |items: Vec<Item>| {
        items
            .into_iter()
            .map(|i| i.metadata.name)
            .collect::<Vec<_>>()
    });
    pages.await.into_iter().flatten().collect()
}

/// Every page of a paged metadata LIST (500 a page), its items read as `I` and handed to `each`.
async fn paged<I, T>(api: &Api, list: &str, each: impl Fn(Vec<I>) -> T) -> Vec<T>
where
    I: serde::de::DeserializeOwned,
{
    #[derive(serde::Deserialize)]
    struct Page<I> {
        /// `null` when the list is empty.
        items: Option<Vec<I>>,
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default, rename = "continue")]
        cont: String,
    }
    let mut out = Vec::new();
    let mut cont = String::new();
    loop {
        let mut url = format!("{list}?limit=500");
        if !cont.is_empty() {
            url.push_str("&continue=");
            url.push_str(&cont);
        }
        let text = api
            .get_text(
                &url,
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            )
            .await
            .unwrap()
            .unwrap();
        let page: Page<I> = serde_json::from_str(&text).unwrap();
        out.push(each(page.items.unwrap_or_default()));
        cont = page.metadata.cont;
        if cont.is_empty() {
            return out;
        }
    }
}

/// Every kind's paged metadata LIST, side by side (as the cache lists its tables): the time
/// and the objects counted.
async fn metadata_lists(api: &Api, tier: &Tier) -> (Duration, usize) {
    let t = Instant::now();
    let counts =
        futures::future::join_all(tier.kinds.iter().map(|k| metadata_list(api, k.list))).await;
    (t.elapsed(), counts.iter().sum())
}

async fn synced_cache(api: &Api, tier: &Tier) -> (Arc<ClusterCache>, Duration) {
    let t = Instant::now();
    let cache = ClusterCache::start("real", api.clone(), tier.config())
        .await
        .unwrap();
    cache.wait_synced().await;
    (cache, t.elapsed())
}

/// CPU seconds (user + system) used so far by process `pid` (`self` for this one), from
/// `/proc/PID/stat`; 0 when unreadable.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (in parentheses, which may hold spaces): utime is the 12th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i)?.parse::<f64>().ok())
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks / hz
}

/// CPU seconds of this process and of the server's (apiserver, etcd, shim) over `work`.
async fn with_cpu<T>(
    server: &[String],
    work: impl std::future::Future<Output = T>,
) -> (T, f64, f64) {
    let ours = cpu_seconds("self");
    let theirs: f64 = server.iter().map(|p| cpu_seconds(p)).sum();
    let out = work.await;
    (
        out,
        cpu_seconds("self") - ours,
        server.iter().map(|p| cpu_seconds(p)).sum::<f64>() - theirs,
    )
}

/// The server's automatic garbage collections (Go's), counted over the rounds of one side.
#[derive(Default)]
struct Gcs {
    count: u64,
    rounds: usize,
    /// A round in which the server did not say how many.
    unreported: bool,
    /// A round that did not start from a collected heap.
    unforced: bool,
}

impl Gcs {
    fn add(&mut self, (forced, before): (bool, Option<u64>), after: Option<u64>) {
        self.rounds += 1;
        self.unforced |= !forced;
        match (before, after) {
            (Some(b), Some(a)) => self.count += a.saturating_sub(b),
            _ => self.unreported = true,
        }
    }
}

impl std::fmt::Display for Gcs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.unreported {
            f.write_str("not reported by the server")
        } else {
            write!(f, "{} in {} rounds", self.count, self.rounds)
        }
    }
}

/// The server's automatic garbage collections so far (`go_gc_cycles_automatic_gc_cycles_total`
/// of its `/metrics`); `None` when it does not say.
async fn server_gcs(api: &Api) -> Option<u64> {
    let text = api.get_text("/metrics", "text/plain").await.ok()??;
    let line = text
        .lines()
        .find(|l| l.starts_with("go_gc_cycles_automatic_gc_cycles_total "))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<f64>()
        .ok()
        .map(|v| v as u64)
}

/// Makes the server collect its heap (Go's `runtime.GC`, which `/debug/pprof/heap?gc=1` runs
/// before it answers) and lets it rest a moment; returns whether it did and the automatic
/// collections so far.
async fn settle_server_heap(api: &Api) -> (bool, Option<u64>) {
    let forced = api
        .get_text("/debug/pprof/heap?gc=1&debug=1", "text/plain")
        .await
        .is_ok_and(|t| t.is_some());
    tokio::time::sleep(Duration::from_millis(300)).await;
    (forced, server_gcs(api).await)
}

/// The resourceVersion a cache holds for object `i` of a tier.
type CachedVersion = dyn Fn(&ClusterCache, usize) -> Option<u64> + Send + Sync;

/// A kind's list URL and its `i`th object.
type Bodies = Arc<Vec<(&'static str, fn(usize) -> serde_json::Value)>>;

/// [`cached_version`] for a tier's kinds, to move into a task.
fn cached_fn(tier: &Tier) -> Arc<CachedVersion> {
    let kinds: Vec<(&'static str, &'static str)> =
        tier.kinds.iter().map(|k| (k.group, k.kind)).collect();
    Arc::new(move |cache, i| {
        let (group, kind) = kinds[i % kinds.len()];
        version_in(cache, group, kind, i)
    })
}

/// The resourceVersion the cache holds for object `i` (a lookup, not a scan).
fn cached_version(cache: &ClusterCache, tier: &Tier, i: usize) -> Option<u64> {
    let kind = tier.kind(i);
    version_in(cache, kind.group, kind.kind, i)
}

fn version_in(cache: &ClusterCache, group: &str, kind: &str, i: usize) -> Option<u64> {
    let key = fieldguard::cache::table::key(NS, &name(i));
    cache.tables().iter().find_map(|t| {
        if t.kind != kind || t.group != group {
            return None;
        }
        t.read()
            .objects
            .get(&*key)
            .and_then(|e| e.resource_version.parse().ok())
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // FIELDGUARD_BENCH_OBJECTS: how many objects to sync (default 10,000).
    let objects: usize = std::env::var("FIELDGUARD_BENCH_OBJECTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let rounds: usize = std::env::var("FIELDGUARD_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let only = std::env::var("FIELDGUARD_BENCH_TIER").unwrap_or_default();
    if only.is_empty() || only == "realapi" {
        match realapi::shared_server("realapi") {
            Some(server) => {
                realapi::install_crd_file(&server.api().await, "widget-crd.yaml").await;
                let tier = Tier {
                    name: "realapi",
                    server,
                    kinds: vec![Kind {
                        group: "fieldguard.test",
                        kind: "Widget",
                        list: "/apis/fieldguard.test/v1/namespaces/bench/widgets",
                        object: widget,
                    }],
                    processes: &["apiserver", "etcd", "shim"],
                };
                run(&tier, objects, rounds).await;
            }
            None => {
                println!("realapi: the real apiserver is not built (scripts/setup.sh); skipped")
            }
        }
    }
    if only.is_empty() || only == "kubeapi" {
        match kept_control_plane().or_else(|| kubeapi::shared_server("kubeapi")) {
            Some(server) => {
                // A kept control plane has it already.
                let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
                let api = server.api().await;
                let made = realapi::write(
                    &api,
                    http::Method::POST,
                    "/api/v1/namespaces",
                    "application/json",
                    &ns,
                )
                .await;
                assert!(
                    made.is_ok() || made.as_ref().is_err_and(|e| e.code == 409),
                    "{made:?}"
                );
                let tier = Tier {
                    name: "kubeapi",
                    server,
                    kinds: vec![
                        Kind {
                            group: "",
                            kind: "ConfigMap",
                            list: "/api/v1/namespaces/bench/configmaps",
                            object: config_map,
                        },
                        Kind {
                            group: "",
                            kind: "Secret",
                            list: "/api/v1/namespaces/bench/secrets",
                            object: secret,
                        },
                        Kind {
                            group: "",
                            kind: "Service",
                            list: "/api/v1/namespaces/bench/services",
                            object: service,
                        },
                        Kind {
                            group: "",
                            kind: "ServiceAccount",
                            list: "/api/v1/namespaces/bench/serviceaccounts",
                            object: service_account,
                        },
                        Kind {
                            group: "rbac.authorization.k8s.io",
                            kind: "Role",
                            list: "/apis/rbac.authorization.k8s.io/v1/namespaces/bench/roles",
                            object: role,
                        },
                    ],
                    processes: &["apiserver", "etcd", "controller-manager"],
                };
                run(&tier, objects, rounds).await;
            }
            None => println!("kubeapi: kube-apiserver is not built (scripts/setup.sh); skipped"),
        }
    }
}

/// A control plane `controlplane/start.sh` started and the caller keeps running, by its run
/// directory (`FIELDGUARD_BENCH_KUBEAPI_RUN`, the script's `CONTROLPLANE_RUN`): 100,000 objects
/// are created once and measured by many runs.
fn kept_control_plane() -> Option<&'static kubeapi::KubeApi> {
    let run = std::path::PathBuf::from(std::env::var_os("FIELDGUARD_BENCH_KUBEAPI_RUN")?);
    let kubeconfig = run.join("kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig)
        .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
    let client: u16 = text
        .split("https://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("{}: no https://127.0.0.1:PORT server", kubeconfig.display()));
    println!(
        "kubeapi: the control plane kept in {} (port {client})",
        run.display()
    );
    Some(Box::leak(Box::new(kubeapi::KubeApi {
        run,
        kubeconfig,
        port: client - 2,
        client,
    })))
}

/// Every figure of one tier.
async fn run(tier: &Tier, objects: usize, rounds: usize) {
    let server = tier.server;
    let api = server.api().await;
    let label = tier.name;
    // The objects.
    let a = api.clone();
    let bodies: Bodies = Arc::new(tier.kinds.iter().map(|k| (k.list, k.object)).collect());
    let b = bodies.clone();
    // Objects already there (a kept control plane, `FIELDGUARD_BENCH_KUBEAPI_RUN`) are not
    // written again: their names are [`name`]'s, so only the missing ones are created.
    let mut there = std::collections::BTreeSet::new();
    for k in &tier.kinds {
        there.extend(metadata_names(&api, k.list).await);
    }
    let missing: Arc<Vec<usize>> = Arc::new(
        (0..objects)
            .filter(|&i| !there.contains(&name(i)))
            .collect(),
    );
    let m = missing.clone();
    let created = concurrently(missing.len(), 8, move |j| {
        let (a, b, i) = (a.clone(), b.clone(), m[j]);
        async move {
            let (list, object) = b[i % b.len()];
            let r =
                realapi::write(&a, http::Method::POST, list, "application/json", &object(i)).await;
            assert!(
                r.is_ok() || r.as_ref().is_err_and(|e| e.code == 409),
                "{r:?}"
            );
        }
    })
    .await;
    println!(
        "{label}: {objects} objects of {} kinds: {} already there, {} created in {:.1} s ({:.0} creates/s, 8 clients)",
        tier.kinds.len(),
        objects - missing.len(),
        missing.len(),
        created.as_secs_f64(),
        missing.len() as f64 / created.as_secs_f64().max(1e-9)
    );

    // Initial sync vs the server's own metadata LIST, alternated, with the CPU each side used
    // (the machine is shared: the server's CPU and ours add up).
    let server_pids: Vec<String> = tier
        .processes
        .iter()
        .filter_map(|p| std::fs::read_to_string(server.run.join(format!("{p}.pid"))).ok())
        .map(|p| p.trim().to_string())
        .collect();
    // Each side starts from a collected server heap: otherwise the server's garbage collection
    // (one cycle costs ~2 CPU seconds over 100,000 built-in objects, and comes about once per
    // two lists of them) falls on the same side of every alternated pair, and that side looks
    // twice as costly. The automatic collections inside each side are counted.
    let (mut lists, mut syncs) = (Vec::new(), Vec::new());
    let (mut list_cpu, mut sync_cpu) = (Vec::new(), Vec::new());
    let (mut list_gcs, mut sync_gcs) = (Gcs::default(), Gcs::default());
    for _ in 0..rounds {
        let before = settle_server_heap(&api).await;
        let ((d, n), ours, theirs) = with_cpu(&server_pids, metadata_lists(&api, tier)).await;
        list_gcs.add(before, server_gcs(&api).await);
        assert!(n >= objects, "{n} listed of {objects}");
        lists.push(d);
        list_cpu.push((ours, theirs));
        let before = settle_server_heap(&api).await;
        let ((cache, d), ours, theirs) = with_cpu(&server_pids, synced_cache(&api, tier)).await;
        sync_gcs.add(before, server_gcs(&api).await);
        assert_eq!(cache.len(), n);
        cache.stop();
        syncs.push(d);
        sync_cpu.push((ours, theirs));
    }
    let (list, sync) = (median(lists), median(syncs));
    let cpu = |v: &[(f64, f64)]| {
        let mut ours: Vec<f64> = v.iter().map(|c| c.0).collect();
        let mut theirs: Vec<f64> = v.iter().map(|c| c.1).collect();
        ours.sort_by(f64::total_cmp);
        theirs.sort_by(f64::total_cmp);
        (ours[ours.len() / 2], theirs[theirs.len() / 2])
    };
    let (lo, lt) = cpu(&list_cpu);
    let (so, st) = cpu(&sync_cpu);
    println!(
        "{label}: initial sync of {objects} objects: cache {} vs the server's paged metadata LIST {} (ratio {:.2}; medians of {rounds}); CPU seconds, this process / the server: sync {so:.2} / {st:.2}, LIST {lo:.2} / {lt:.2}; the server's own garbage collections during them (each side started from a collected heap: {}): sync {}, LIST {}",
        ms(sync),
        ms(list),
        sync.as_secs_f64() / list.as_secs_f64(),
        if list_gcs.unforced || sync_gcs.unforced {
            "not every time: the server refused"
        } else {
            "yes"
        },
        sync_gcs,
        list_gcs
    );

    // Watch ingest under churn.
    let (cache, _) = synced_cache(&api, tier).await;
    let events_before = cache.stats.events.load(Ordering::SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let newest = Arc::new(std::sync::Mutex::new((0u64, 0usize)));
    let lags = Arc::new(std::sync::Mutex::new(Vec::new()));
    let churn_for = Duration::from_secs(10);
    // Each run's writes change what a run before left on a kept control plane: its creates
    // new names, its patches new values (a patch that changes nothing is no event).
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as usize % 1000);
    let t = Instant::now();
    let mut writers = Vec::new();
    for w in 0..8usize {
        let (api, stop, writes, lags, cache, newest) = (
            api.clone(),
            stop.clone(),
            writes.clone(),
            lags.clone(),
            cache.clone(),
            newest.clone(),
        );
        let bodies = bodies.clone();
        let urls: Arc<Vec<&'static str>> = Arc::new(tier.kinds.iter().map(|k| k.list).collect());
        let cached = cached_fn(tier);
        writers.push(tokio::spawn(async move {
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                i += 8;
                // One write in five a create, the others a merge patch of an existing object.
                let n = if i % 5 == 0 {
                    objects + nonce * 10_000_000 + i
                } else {
                    (i * 7919) % objects
                };
                let (list, object) = bodies[n % bodies.len()];
                let answer = if i % 5 == 0 {
                    realapi::write(
                        &api,
                        http::Method::POST,
                        list,
                        "application/json",
                        &object(n),
                    )
                    .await
                } else {
                    realapi::write(
                        &api,
                        http::Method::PATCH,
                        &format!("{}/{}?fieldManager=churn", urls[n % urls.len()], name(n)),
                        "application/merge-patch+json",
                        &json!({"metadata": {"annotations": {"note": format!("n{i}-{nonce}")}}}),
                    )
                    .await
                };
                let answered = Instant::now();
                writes.fetch_add(1, Ordering::Relaxed);
                let Ok(obj) = answer else { continue };
                let rv: u64 = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                {
                    let mut newest = newest.lock().unwrap();
                    if rv > newest.0 {
                        *newest = (rv, n);
                    }
                }
                // One write in 20: how long until the cache holds it.
                if i % 20 == w {
                    let (cache, lags, cached) = (cache.clone(), lags.clone(), cached.clone());
                    tokio::spawn(async move {
                        while cached(&cache, n).is_none_or(|v| v < rv) {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        lags.lock().unwrap().push(answered.elapsed());
                    });
                }
            }
        }));
    }
    tokio::time::sleep(churn_for).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let wrote = t.elapsed();
    let n = writes.load(Ordering::SeqCst);
    // Caught up: the cache holds the newest write.
    let stopped = Instant::now();
    let (rv, newest) = *newest.lock().unwrap();
    while cached_version(&cache, tier, newest).is_none_or(|v| v < rv) {
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "the cache never caught up"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let caught_up = stopped.elapsed();
    let events = cache.stats.events.load(Ordering::SeqCst) - events_before;
    let mut lag = lags.lock().unwrap().clone();
    lag.sort();
    println!(
        "{label}: churn for {:.1} s by 8 clients: {n} writes ({:.0}/s, the server's pace), the cache took in {events} events ({:.0}/s); lag from a write's answer to the cache (1 in 20 sampled, {}): p50 {} p99 {} max {}; caught up {} after the writers stopped",
        wrote.as_secs_f64(),
        n as f64 / wrote.as_secs_f64(),
        events as f64 / wrote.as_secs_f64(),
        lag.len(),
        ms(pct(&lag, 0.5)),
        ms(pct(&lag, 0.99)),
        ms(*lag.last().unwrap()),
        ms(caught_up),
    );

    // PredictConflicts, fresh and from the cache.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(service::serve_on(
        listener,
        Stores::single("real", cache.clone()),
        async {},
        std::future::pending(),
    ));
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = AnalysisClient::new(ch);
    let mut manifest = (tier.kind(42).object)(42);
    manifest["metadata"]["annotations"] = json!({"note": "predicted"});
    let request = |fresh: bool| pb::PredictRequest {
        field_manager: "helm".into(),
        default_namespace: NS.into(),
        manifests: vec![pb::Manifest {
            name: "widget.json".into(),
            content: manifest.to_string().into_bytes(),
        }],
        fresh,
        ..Default::default()
    };
    for fresh in [true, false] {
        for _ in 0..50 {
            client
                .clone()
                .predict_conflicts(request(fresh))
                .await
                .unwrap();
        }
        let mut lat = Vec::new();
        for _ in 0..1000 {
            let t = Instant::now();
            client
                .clone()
                .predict_conflicts(request(fresh))
                .await
                .unwrap();
            lat.push(t.elapsed());
        }
        lat.sort();
        println!(
            "{label}: PredictConflicts of one {}, {}, 1,000 sequential calls: p50 {} p99 {} max {}",
            tier.kind(42).kind,
            if fresh {
                "fresh (live object read from the server)"
            } else {
                "from the cache (metadata-only: the object is read from the server too)"
            },
            ms(pct(&lat, 0.5)),
            ms(pct(&lat, 0.99)),
            ms(*lat.last().unwrap())
        );
    }
    cache.stop();

    // 1,000 applies through the write path.
    let opts = fieldguard::apply::ssa::SsaOptions {
        field_manager: "fieldguard".into(),
        force: fieldguard::check::Force::None,
        dry_run: false,
        expect_resource_version: None,
    };
    let t = Instant::now();
    for i in 0..1000 {
        // New names on a kept control plane too (the churn's nonce).
        let n = 900_000 + nonce * 10_000_000 + i;
        let mut m = (tier.kind(n).object)(n);
        m["metadata"]["annotations"] = json!({"note": "applied"});
        let m = fieldguard::value::json::parse_str(&m.to_string()).unwrap();
        let path = tier.url(n);
        fieldguard::apply::ssa::apply(&api, &path, &m, &opts)
            .await
            .unwrap();
    }
    let d = t.elapsed();
    println!(
        "{label}: 1,000 server-side applies (creates) through apply::ssa, one at a time: {:.1} s ({:.0} objects/s)",
        d.as_secs_f64(),
        1000.0 / d.as_secs_f64()
    );
}
