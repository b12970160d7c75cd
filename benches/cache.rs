//! The ownership cache at scale: 100,000 same-shaped Pods (300 ReplicaSets in 20 namespaces)
//! arriving as a synthetic metadata-only watch stream — ingest rate (decode + index), memory
//! per cached object in steady state, and the peak during a full relist (the new table is built
//! while the old one still serves); then steady churn without a relist — 1,000,000 events over
//! 10,000 live Pods (replaced, their IPs and managers changing) — memory and interned strings
//! with the interner's sweep on growth and without it; then the cost of recording ownership
//! history on ingest, side by side with it off, and memory per recorded transition. Run:
//! `cargo bench --bench cache` (only the history section: `FIELDGUARD_BENCH_ONLY=history`).

use fieldguard::cache::fields::Fields;
use fieldguard::cache::relist::Relist;
use fieldguard::cache::table::{self, Entry, Table};
use fieldguard::cache::{Interner, Stats, apply_event_recorded, apply_event_to, list_page};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Counts live and peak heap bytes (as requested: the figures do not depend on the allocator)
/// over the allocator the shipped binary uses (`src/main.rs`: mimalloc), so that the speeds
/// measured are the ones it has.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static HEAP: fieldguard::allocator::Mimalloc = fieldguard::allocator::Mimalloc;

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { HEAP.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { HEAP.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { HEAP.realloc(p, l, new_size) };
        if !q.is_null() {
            // Counted as a new block and then the old one freed (what the default `realloc`
            // does), so peaks are those measured before this wrapped mimalloc.
            grew(new_size);
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

const PODS: usize = 100_000;
const REPLICASETS: usize = 300;

/// A Pod as a metadata-only watch event (what the cache's watches receive).
fn pod_event(i: usize, rv: usize) -> String {
    let rs = i % REPLICASETS;
    let ns = format!("team-{}", rs % 20);
    let hash = format!("{:010x}", rs * 7919 + 12345);
    let app = format!("svc-{rs}");
    let name = format!("{app}-{hash}-{:05x}", i);
    let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    let rs_uid = format!("6f1c7a52-3e0b-4d8e-9a61-{:012x}", rs);
    format!(
        concat!(
            r#"{{"type":"ADDED","object":{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"#,
            r#""name":"{name}","generateName":"{app}-{hash}-","namespace":"{ns}","uid":"{uid}","resourceVersion":"{rv}","creationTimestamp":"2026-11-20T10:00:00Z","#,
            r#""labels":{{"app":"{app}","pod-template-hash":"{hash}"}},"#,
            r#""ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"{app}-{hash}","uid":"{rsuid}","controller":true,"blockOwnerDeletion":true}}],"#,
            r#""managedFields":["#,
            r#"{{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-11-20T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:generateName":{{}},"f:labels":{{".":{{}},"f:app":{{}},"f:pod-template-hash":{{}}}},"f:ownerReferences":{{".":{{}},"k:{{\"uid\":\"{rsuid}\"}}":{{}}}}}},"f:spec":{{"f:containers":{{"k:{{\"name\":\"app\"}}":{{".":{{}},"f:image":{{}},"f:imagePullPolicy":{{}},"f:name":{{}},"f:ports":{{".":{{}},"k:{{\"containerPort\":8080,\"protocol\":\"TCP\"}}":{{".":{{}},"f:containerPort":{{}},"f:name":{{}},"f:protocol":{{}}}}}},"f:resources":{{".":{{}},"f:requests":{{".":{{}},"f:cpu":{{}},"f:memory":{{}}}}}}}}}},"f:dnsPolicy":{{}},"f:enableServiceLinks":{{}},"f:restartPolicy":{{}},"f:schedulerName":{{}},"f:securityContext":{{}},"f:terminationGracePeriodSeconds":{{}}}}}}}},"#,
            r#"{{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-20T10:00:07Z","fieldsType":"FieldsV1","fieldsV1":{{"f:status":{{"f:conditions":{{"k:{{\"type\":\"ContainersReady\"}}":{{".":{{}},"f:lastProbeTime":{{}},"f:lastTransitionTime":{{}},"f:status":{{}},"f:type":{{}}}},"k:{{\"type\":\"Initialized\"}}":{{".":{{}},"f:lastProbeTime":{{}},"f:lastTransitionTime":{{}},"f:status":{{}},"f:type":{{}}}},"k:{{\"type\":\"Ready\"}}":{{".":{{}},"f:lastProbeTime":{{}},"f:lastTransitionTime":{{}},"f:status":{{}},"f:type":{{}}}}}},"f:containerStatuses":{{}},"f:hostIP":{{}},"f:hostIPs":{{}},"f:phase":{{}},"f:podIP":{{}},"f:podIPs":{{".":{{}},"k:{{\"ip\":\"{ip}\"}}":{{".":{{}},"f:ip":{{}}}}}},"f:startTime":{{}}}}}},"subresource":"status"}}"#,
            r#"]}}}}}}"#
        ),
        name = name,
        app = app,
        hash = hash,
        ns = ns,
        uid = format!("{:08x}-0000-4000-8000-{:012x}", i, i),
        rv = rv,
        rsuid = rs_uid,
        ip = ip,
    )
}

/// One size's figures.
struct Row {
    ingest_per_s: f64,
    sync_s: f64,
    bytes_per_object: f64,
    relist_peak: f64,
    relist_s: f64,
    unchanged_peak: f64,
    unchanged_s: f64,
    managers_s: f64,
    managers_listed_s: f64,
    managed_by_s: f64,
}

/// The object of a watch event's text.
fn object_of(event: &str) -> &str {
    let start = event.find(r#""object":"#).unwrap() + r#""object":"#.len();
    &event[start..event.len() - 1]
}

/// `n` Pods as a recorded metadata list, 500 per page (as the cache lists).
fn list_pages(n: usize, rv: usize) -> Vec<String> {
    let pages = n.div_ceil(500);
    (0..pages)
        .map(|p| {
            let items: Vec<String> = (p * 500..((p + 1) * 500).min(n))
                .map(|i| object_of(&pod_event(i, rv + i)).to_string())
                .collect();
            let cont = if p + 1 < pages {
                format!("page-{}", p + 1)
            } else {
                String::new()
            };
            format!(
                r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"{}","continue":"{cont}"}},"items":[{}]}}"#,
                rv + n,
                items.join(",")
            )
        })
        .collect()
}

/// A list (its pages) into the table, as the cache's watch task applies one.
fn sync(interner: &Interner, stats: &Stats, table: &Table, pages: &[String]) {
    let mut relist = Relist::new(None);
    for p in pages {
        list_page(interner, stats, table, &mut relist, p).unwrap();
    }
    relist.finish(table);
    interner.sweep();
}

/// Peak heap above `base` while `f` runs, as a multiple of `steady`, and its time.
fn peak_of(base: usize, steady: usize, f: impl FnOnce()) -> (f64, f64) {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let t = Instant::now();
    f();
    let secs = t.elapsed().as_secs_f64();
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (peak as f64 / steady as f64, secs)
}

/// Every figure at one size.
fn at_scale(n: usize) -> Row {
    use fieldguard::ownership::{inventory, managed_of, owner_of};
    let interner = Interner::default();
    let stats = Stats::default();
    let table = Table::new("v1", "Pod", false);
    let pages = list_pages(n, 1000);

    // Initial sync from the recorded list; memory at rest after it.
    let base = LIVE.load(Ordering::Relaxed);
    let t = Instant::now();
    sync(&interner, &stats, &table, &pages);
    let sync_s = t.elapsed().as_secs_f64();
    let steady = LIVE.load(Ordering::Relaxed) - base;
    assert_eq!(table.read().objects.len(), n);
    let tables = [std::sync::Arc::new(table)];

    // The queries over every object, as the service runs them: `Managers` counted in the cache
    // (a caller who may read everything), and every object rebuilt and decoded (one who may
    // not: each object is authorized), the same answer.
    let t = Instant::now();
    let counted = fieldguard::cache::inventory::inventory(&tables, None);
    let managers_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let all = table::list(&tables, None);
    let inv = inventory::inventory(all.iter().map(|(r, o)| (r, &**o)));
    let managers_listed_s = t.elapsed().as_secs_f64();
    assert_eq!(inv.managers.len(), 2, "{:?}", inv.managers.len());
    assert_eq!(
        serde_json::to_string(&counted).unwrap(),
        serde_json::to_string(&inv).unwrap()
    );
    drop((all, inv, counted));
    let t = Instant::now();
    let mut paths = 0;
    for (_, o) in table::managed_by(&tables, "kubelet") {
        let m = managed_of(&o).unwrap();
        for (key, vs) in m.fields.iter() {
            if owner_of(key, &m).manager == "kubelet" {
                vs.set.leaves().iterate(|_| paths += 1);
            }
        }
    }
    let managed_by_s = t.elapsed().as_secs_f64();
    assert!(paths >= n, "{paths}");

    // Relists: every object changed (a new resourceVersion), then nothing changed.
    let changed = list_pages(n, 10_000_000);
    let base_now = LIVE.load(Ordering::Relaxed) - steady;
    let (relist_peak, relist_s) = peak_of(base_now, steady, || {
        sync(&interner, &stats, &tables[0], &changed)
    });
    let (unchanged_peak, unchanged_s) = peak_of(base_now, steady, || {
        sync(&interner, &stats, &tables[0], &changed)
    });
    drop((changed, pages, tables));

    // Ingest: the same Pods as ADDED watch events into an empty table.
    let events: Vec<String> = (0..n).map(|i| pod_event(i, 1000 + i)).collect();
    let table = Table::new("v1", "Pod", false);
    let t = Instant::now();
    for e in &events {
        apply_event_to(&interner, &stats, &table, e.as_bytes());
    }
    let ingest_per_s = n as f64 / t.elapsed().as_secs_f64();
    assert_eq!(table.read().objects.len(), n);
    Row {
        ingest_per_s,
        sync_s,
        bytes_per_object: steady as f64 / n as f64,
        relist_peak,
        relist_s,
        unchanged_peak,
        unchanged_s,
        managers_s,
        managers_listed_s,
        managed_by_s,
    }
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    // `FIELDGUARD_BENCH_ONLY=history cargo bench --bench cache`: only the history section.
    if std::env::var("FIELDGUARD_BENCH_ONLY").as_deref() == Ok("history") {
        history();
        return;
    }
    // `FIELDGUARD_BENCH_ONLY=ingest`: only the watch ingest at 100,000 Pods, five rounds.
    if std::env::var("FIELDGUARD_BENCH_ONLY").as_deref() == Ok("ingest") {
        ingest_rounds(5);
        return;
    }
    let sizes: Vec<usize> = match std::env::var("FIELDGUARD_BENCH_SIZES") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) => vec![10_000, PODS, 1_000_000],
    };
    println!(
        "cache: same-shaped Pods of {REPLICASETS} ReplicaSets, metadata-only ({:.0} bytes per watch event)",
        pod_event(0, 1000).len()
    );
    println!(
        "  {:>9} | {:>10} | {:>9} | {:>9} | {:>12} | {:>12} | {:>8} | {:>8} | {:>8}",
        "objects",
        "ingest/s",
        "sync",
        "B/object",
        "relist peak",
        "(unchanged)",
        "Managers",
        "(listed)",
        "ManagedBy"
    );
    let mut rows = Vec::new();
    for &n in &sizes {
        let row = at_scale(n);
        println!(
            "  {:>9} | {:>10.0} | {:>7.2} s | {:>9.0} | {:>5.2}× {:>4.1}s | {:>5.2}× {:>4.1}s | {:>6.2} s | {:>6.2} s | {:>6.2} s",
            n,
            row.ingest_per_s,
            row.sync_s,
            row.bytes_per_object,
            row.relist_peak,
            row.relist_s,
            row.unchanged_peak,
            row.unchanged_s,
            row.managers_s,
            row.managers_listed_s,
            row.managed_by_s
        );
        rows.push((n, row));
    }
    println!(
        "  (ingest: ADDED watch events decoded and indexed one at a time; sync: the same objects from a recorded list, 500 per page; relist: every object changed, then none, applied in place; Managers: counted in the cache, each distinct FieldsV1 text decoded once; (listed): every object rebuilt and decoded, the same answer; ManagedBy: the kubelet's objects and fields)"
    );
    for w in rows.windows(2) {
        let ((a, ra), (b, rb)) = (&w[0], &w[1]);
        let k = *b as f64 / *a as f64;
        println!(
            "  {a} → {b} objects ({k:.0}×): sync {:.1}×, memory {:.1}×, Managers {:.1}× (listed {:.1}×), ManagedBy {:.1}×",
            rb.sync_s / ra.sync_s,
            rb.bytes_per_object * *b as f64 / (ra.bytes_per_object * *a as f64),
            rb.managers_s / ra.managers_s,
            rb.managers_listed_s / ra.managers_listed_s,
            rb.managed_by_s / ra.managed_by_s
        );
    }
    if let Some((_, r)) = rows.iter().find(|(n, _)| *n == PODS) {
        println!(
            "  {PODS} Pods: ingest {:.0} events/s — target ≥ 300,000; memory {:.0} bytes per cached object — target ≤ 600; relist peak {:.2}× steady state (every object changed) — target ≤ 1.25×",
            r.ingest_per_s, r.bytes_per_object, r.relist_peak
        );
    }

    let events: Vec<String> = (0..PODS).map(|i| pod_event(i, 1000 + i)).collect();
    kube_runtime_decoding(&events);
    churn();
    history();
}

/// The watch ingest alone, `rounds` times over the same 100,000 events into a fresh table:
/// each round's rate and their median.
fn ingest_rounds(rounds: usize) {
    let events: Vec<String> = (0..PODS).map(|i| pod_event(i, 1000 + i)).collect();
    let mut rates: Vec<f64> = (0..rounds)
        .map(|_| {
            let interner = Interner::default();
            let stats = Stats::default();
            let table = Table::new("v1", "Pod", false);
            let t = Instant::now();
            for e in &events {
                apply_event_to(&interner, &stats, &table, e.as_bytes());
            }
            let rate = events.len() as f64 / t.elapsed().as_secs_f64();
            assert_eq!(table.read().objects.len(), events.len());
            rate
        })
        .collect();
    let each: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    rates.sort_by(f64::total_cmp);
    println!(
        "  ingest of {PODS} ADDED Pod events: median {:.0} events/s (rounds: {}) — target ≥ 300,000",
        rates[rates.len() / 2],
        each.join(", ")
    );
}

/// What kube-runtime's `watcher`/`metadata_watcher` would cost in the same place: each event
/// decoded by serde into `WatchEvent<PartialObjectMetadata<Pod>>` (kube-core's types, as the
/// watcher yields them), then turned into the same compact table entry; side by side with the
/// hand-written path (borrowed decode straight into the entry), same events, same run.
fn kube_runtime_decoding(events: &[String]) {
    use fieldguard::cache::table::{EntryHead, ManagedEntry};
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::{PartialObjectMeta as PartialObjectMetadata, WatchEvent};
    let run = |typed: bool| {
        let interner = Interner::default();
        let stats = Stats::default();
        let table = Table::new("v1", "Pod", false);
        let base = LIVE.load(Ordering::Relaxed);
        let t = Instant::now();
        for e in events {
            if !typed {
                apply_event_to(&interner, &stats, &table, e.as_bytes());
                continue;
            }
            let ev: WatchEvent<PartialObjectMetadata<Pod>> = serde_json::from_str(e).unwrap();
            let WatchEvent::Added(o) = ev else { continue };
            let m = o.metadata;
            let managed = m
                .managed_fields
                .unwrap_or_default()
                .into_iter()
                .map(|f| ManagedEntry {
                    head: interner.head(EntryHead {
                        manager: f.manager.unwrap_or_default().into(),
                        operation: f.operation.unwrap_or_default().into(),
                        api_version: f.api_version.unwrap_or_default().into(),
                        subresource: f.subresource.unwrap_or_default().into(),
                    }),
                    fields: Fields::intern(
                        &f.fields_v1
                            .map(|v| serde_json::to_string(&v.0).unwrap())
                            .unwrap_or_else(|| "{}".into()),
                        &interner,
                    ),
                    time: f.time.map(|t| t.0.as_second()),
                })
                .collect::<Vec<_>>()
                .into_boxed_slice();
            let labels = m
                .labels
                .filter(|l| !l.is_empty())
                .map(|l| interner.text(&serde_json::to_string(&l).unwrap()));
            table.write().upsert(Entry {
                name: m.name.unwrap_or_default().into(),
                namespace: interner.text(&m.namespace.unwrap_or_default()),
                resource_version: m.resource_version.unwrap_or_default().into(),
                labels,
                managed,
                full: None,
            });
        }
        let secs = t.elapsed().as_secs_f64();
        let bytes = LIVE.load(Ordering::Relaxed) - base;
        assert_eq!(table.read().objects.len(), events.len());
        (
            events.len() as f64 / secs,
            bytes as f64 / events.len() as f64,
        )
    };
    let (ours, ours_bytes) = run(false);
    let (kube, kube_bytes) = run(true);
    println!(
        "  kube-runtime's decoding (serde into WatchEvent<PartialObjectMetadata<Pod>>) into the same table: {kube:.0} events/s, {kube_bytes:.0} bytes/object; hand-written: {ours:.0} events/s, {ours_bytes:.0} bytes/object — kube-runtime costs {:.0}% of ingest",
        (1.0 - kube / ours) * 100.0
    );
}

/// 1,000,000 watch events over 10,000 live Pods: each replaces a Pod (deleted, created under a
/// new name and IP) or modifies one under a renamed manager: no relist ever happens.
fn churn() {
    const LIVE_PODS: usize = 10_000;
    const EVENTS: usize = 1_000_000;
    println!("  churn: {EVENTS} events over {LIVE_PODS} live Pods, no relist");
    for (label, interner) in [
        ("sweep on growth", Interner::default()),
        ("relist-only sweep (before)", Interner::without_auto_sweep()),
    ] {
        let stats = Stats::default();
        let table = Table::new("v1", "Pod", false);
        let base = LIVE.load(Ordering::Relaxed);
        for i in 0..LIVE_PODS {
            apply_event_to(&interner, &stats, &table, pod_event(i, i).as_bytes());
        }
        let t = Instant::now();
        let mut samples = Vec::new();
        // The Pod each slot holds now (names and IPs follow the index).
        let mut current: Vec<usize> = (0..LIVE_PODS).collect();
        for e in 0..EVENTS {
            let slot = e % LIVE_PODS;
            if (e / LIVE_PODS) % 2 == 0 {
                // Replaced: deleted, and a new Pod (new name, new IP) created.
                let gone = pod_event(current[slot], e).replacen("ADDED", "DELETED", 1);
                apply_event_to(&interner, &stats, &table, gone.as_bytes());
                current[slot] += LIVE_PODS;
                let made = pod_event(current[slot], e);
                apply_event_to(&interner, &stats, &table, made.as_bytes());
            } else {
                // The same Pod, written by a manager with a new name each time.
                let changed = pod_event(current[slot], e)
                    .replacen("ADDED", "MODIFIED", 1)
                    .replace(
                        "\"manager\":\"kubelet\"",
                        &format!("\"manager\":\"kubelet-{e}\""),
                    );
                apply_event_to(&interner, &stats, &table, changed.as_bytes());
            }
            if (e + 1) % (EVENTS / 5) == 0 {
                samples.push((e + 1, LIVE.load(Ordering::Relaxed) - base, interner.len()));
            }
        }
        let secs = t.elapsed().as_secs_f64();
        let objects = table.read().objects.len();
        println!(
            "    {label}: {:.0} events/s; {objects} objects cached",
            EVENTS as f64 / secs
        );
        for (n, heap, strings) in samples {
            println!(
                "      after {n:>9} events: {:>7.1} MiB, {strings:>9} interned strings",
                mib(heap)
            );
        }
        drop(table);
    }
}

/// Recording ownership history on ingest: 200,000 MODIFIED events over 10,000 Pods, the same
/// stream with history off and on, in one run. Three streams: the kubelet's status entry
/// changes hands on every event (the worst case: about ten fields taken over per event), on one
/// event in a hundred, and events whose managedFields do not change (a status rewrite: the
/// common case).
fn history() {
    const LIVE_PODS: usize = 10_000;
    const EVENTS: usize = 200_000;
    println!("  history: {EVENTS} MODIFIED events over {LIVE_PODS} Pods, recording off and on");
    let config = fieldguard::history::HistoryConfig {
        max_entries: 1_000_000,
        max_bytes: 1 << 31,
        ..Default::default()
    };
    // Every `n`-th Pod's status entry changes hands on each of its events (0: none does).
    for (label, every) in [
        ("ownership moves every event", 1),
        ("ownership moves on 1 event in 100", 100),
        ("managedFields unchanged", 0),
    ] {
        let stream: Vec<String> = (0..EVENTS)
            .map(|e| {
                let pod = e % LIVE_PODS;
                let ev = pod_event(pod, LIVE_PODS + e).replacen("ADDED", "MODIFIED", 1);
                if every > 0 && pod % every == 0 && (e / LIVE_PODS) % 2 == 0 {
                    ev.replace("\"manager\":\"kubelet\"", "\"manager\":\"kubelet-b\"")
                } else {
                    ev
                }
            })
            .collect();
        // Off and on alternate, three times each: the medians are compared (noisy machines).
        let (mut off, mut on_rates) = (Vec::new(), Vec::new());
        for run in 0..6 {
            let on = run % 2 == 1;
            let interner = Interner::default();
            let stats = Stats::default();
            let table = Table::new("v1", "Pod", false);
            let h = on.then(|| fieldguard::history::History::new("bench", &config));
            for i in 0..LIVE_PODS {
                apply_event_to(&interner, &stats, &table, pod_event(i, i).as_bytes());
            }
            let base = LIVE.load(Ordering::Relaxed);
            let t = Instant::now();
            for e in &stream {
                apply_event_recorded(&interner, &stats, &table, e.as_bytes(), h.as_deref());
            }
            let secs = t.elapsed().as_secs_f64();
            if on { &mut on_rates } else { &mut off }.push(EVENTS as f64 / secs);
            if let (Some(h), 1) = (&h, run) {
                let (kept, approx, _) = h.usage();
                let heap = LIVE.load(Ordering::Relaxed).saturating_sub(base);
                println!(
                    "    {label}: {kept} transitions recorded, {:.0} bytes each on the heap ({:.0} by the ring's estimate)",
                    heap as f64 / kept.max(1) as f64,
                    approx as f64 / kept.max(1) as f64
                );
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (off, on) = (median(&mut off), median(&mut on_rates));
        println!(
            "    {label}: off {off:.0} events/s, on {on:.0} events/s (medians of 3) — recording costs {:.1}% of ingest, {:.2} µs per event",
            (1.0 - on / off) * 100.0,
            (1.0 / on - 1.0 / off) * 1e6
        );
    }
}
