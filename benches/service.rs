//! The service under load, over loopback: PredictConflicts for one Deployment at a steady
//! 500 requests/s (open loop: requests are sent on schedule whether or not earlier ones have
//! returned), latency percentiles; and a 1,002-object release predicted in one call against a
//! 10,003-object snapshot. The load generator is this file. Run: `cargo bench --bench service`.

mod common;

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::manifest::Input;
use fieldguard::service::proto::{self as pb, analysis_client::AnalysisClient};
use fieldguard::service::{self, SnapshotStore, Stores};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RATE: u64 = 500;
const SECONDS: u64 = 20;

fn store(paths: &[&Path]) -> Arc<SnapshotStore> {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::Path(p.to_path_buf())).collect();
    let snap = Snapshot::load(&inputs, &mut std::io::empty()).unwrap();
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    snap.extend_catalog(&mut c).unwrap();
    Arc::new(SnapshotStore::new(snap, c))
}

async fn start(store: Arc<SnapshotStore>) -> AnalysisClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(service::serve_on(
        listener,
        Stores::single("bench", store),
        async {},
        std::future::pending(),
    ));
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    AnalysisClient::new(ch).max_decoding_message_size(256 * 1024 * 1024)
}

/// The bundled release's Deployment alone.
fn one_deployment() -> Vec<u8> {
    let text =
        std::fs::read_to_string(common::root().join("examples/release/checkout.yaml")).unwrap();
    let doc = text
        .split("\n---\n")
        .find(|d| d.contains("kind: Deployment"))
        .unwrap()
        .to_string();
    doc.into_bytes()
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let root = common::root();
    let client = start(store(&[&root.join("examples/cluster")])).await;
    let request = pb::PredictRequest {
        field_manager: "helm".into(),
        default_namespace: "shop".into(),
        manifests: vec![pb::Manifest {
            name: "deployment.yaml".into(),
            content: one_deployment(),
        }],
        ..Default::default()
    };
    // Warm up.
    for _ in 0..200 {
        client
            .clone()
            .predict_conflicts(request.clone())
            .await
            .unwrap();
    }
    let total = RATE * SECONDS;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for _ in 0..total {
        tick.tick().await;
        let mut c = client.clone();
        let r = request.clone();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let ok = c.predict_conflicts(r).await.is_ok();
            (t.elapsed(), ok)
        }));
    }
    let mut lat = Vec::with_capacity(tasks.len());
    let mut errors = 0;
    for t in tasks {
        let (d, ok) = t.await.unwrap();
        if !ok {
            errors += 1;
        }
        lat.push(d);
    }
    let wall = started.elapsed();
    lat.sort();
    println!(
        "service: PredictConflicts (one Deployment, 3 conflicts) at {RATE} requests/s for {SECONDS} s over loopback: {} requests in {:.1} s ({:.0}/s achieved), {errors} errors",
        lat.len(),
        wall.as_secs_f64(),
        lat.len() as f64 / wall.as_secs_f64()
    );
    println!(
        "  latency p50 {}  p90 {}  p99 {}  max {} — target p99 ≤ 5 ms",
        ms(pct(&lat, 0.50)),
        ms(pct(&lat, 0.90)),
        ms(pct(&lat, 0.99)),
        ms(*lat.last().unwrap())
    );

    // A 1,000-object release in one call.
    let dir = std::env::temp_dir().join(format!("fieldguard-bench-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (rel, snap) = common::generate(&dir);
    let client = start(store(&[&snap])).await;
    let content = std::fs::read(rel.join("release.yaml")).unwrap();
    let big = pb::PredictRequest {
        field_manager: "helm".into(),
        manifests: vec![pb::Manifest {
            name: "release.yaml".into(),
            content,
        }],
        ..Default::default()
    };
    let mut times = Vec::new();
    let mut objects = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let r = client
            .clone()
            .predict_conflicts(big.clone())
            .await
            .unwrap()
            .into_inner();
        times.push(t.elapsed());
        objects = r.clusters[0].objects.len();
    }
    times.sort();
    println!(
        "  a {objects}-object release against a 10,003-object snapshot, one call: median {} (min {}) — target ≤ 1 s",
        ms(times[2]),
        ms(times[0])
    );
    let _ = std::fs::remove_dir_all(&dir);
}
