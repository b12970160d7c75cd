//! The service under load, over loopback: PredictConflicts for one Deployment at a steady
//! 500 requests/s (open loop: requests are sent on schedule whether or not earlier ones have
//! returned), latency percentiles; and a 1,002-object release predicted in one call against a
//! 10,003-object snapshot; then health checks and the one-Deployment prediction (200/s each,
//! open loop) with and without a `Managers` call over 100,000 objects running all the while.
//! The load generator is this file. Run: `cargo bench --bench service`.

mod common;

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::live::state::SnapshotState;
use fieldguard::manifest::Input;
use fieldguard::service::proto::{self as pb, analysis_client::AnalysisClient};
use fieldguard::service::{self, Stores};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RATE: u64 = 500;
const SECONDS: u64 = 20;

fn store(paths: &[&Path]) -> Arc<SnapshotState> {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::Path(p.to_path_buf())).collect();
    let snap = Snapshot::load(&inputs, &mut std::io::empty()).unwrap();
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    snap.extend_catalog(&mut c).unwrap();
    Arc::new(SnapshotState::new(snap, c))
}

async fn start(store: Arc<SnapshotState>) -> AnalysisClient<tonic::transport::Channel> {
    AnalysisClient::new(start_channel(store).await).max_decoding_message_size(256 * 1024 * 1024)
}

async fn start_channel(store: Arc<SnapshotState>) -> tonic::transport::Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(service::serve_on(
        listener,
        Stores::single("bench", store),
        async {},
        std::future::pending(),
    ));
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
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
    under_managers(request).await;
}

/// 100,000 ConfigMaps (two managers each) beside the bundled cluster, as one snapshot file.
fn big_snapshot(dir: &Path) -> std::path::PathBuf {
    use std::io::Write;
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("configmaps.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    write!(f, r#"{{"apiVersion":"v1","kind":"List","items":["#).unwrap();
    for i in 0..100_000 {
        if i > 0 {
            write!(f, ",").unwrap();
        }
        write!(
            f,
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i}","namespace":"team-{}","resourceVersion":"{}","managedFields":[{{"manager":"helm","operation":"Apply","apiVersion":"v1","time":"2026-11-20T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{"f:a":{{}},"f:b":{{}}}}}}}},{{"manager":"kubectl-edit","operation":"Update","apiVersion":"v1","time":"2026-11-21T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{"f:c":{{}}}}}}}}]}},"data":{{"a":"1","b":"2","c":"3"}}}}"#,
            i % 50,
            1000 + i
        )
        .unwrap();
    }
    write!(f, "]}}").unwrap();
    f.flush().unwrap();
    p
}

/// Open loop at `rate`/s for `secs`: latencies of `call`.
async fn open_loop<F, Fut>(rate: u64, secs: u64, call: F) -> (Vec<Duration>, usize)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    for _ in 0..rate * secs {
        tick.tick().await;
        let f = call();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let ok = f.await;
            (t.elapsed(), ok)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (d, ok) = t.await.unwrap();
        errors += usize::from(!ok);
        lat.push(d);
    }
    lat.sort();
    (lat, errors)
}

async fn under_managers(request: pb::PredictRequest) {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let dir =
        std::env::temp_dir().join(format!("fieldguard-bench-managers-{}", std::process::id()));
    let big = big_snapshot(&dir);
    let root = common::root();
    let channel = start_channel(store(&[&root.join("examples/cluster"), &big])).await;
    let analysis = AnalysisClient::new(channel.clone());
    let health = HealthClient::new(channel.clone());
    let own = fieldguard::service::proto::ownership_client::OwnershipClient::new(channel)
        .max_decoding_message_size(256 * 1024 * 1024);
    println!(
        "  while Managers runs over 100,000 + 15 objects (health checks and predictions at 200/s each, 10 s):"
    );
    for busy in [false, true] {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let managers = busy.then(|| {
            let (stop, own) = (stop.clone(), own.clone());
            tokio::spawn(async move {
                let mut times = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    own.clone()
                        .managers(pb::ManagersRequest::default())
                        .await
                        .unwrap();
                    times.push(t.elapsed());
                }
                times
            })
        });
        let h = health.clone();
        let checks = tokio::spawn(open_loop(200, 10, move || {
            let mut h = h.clone();
            async move {
                h.check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .is_ok()
            }
        }));
        let (a, r) = (analysis.clone(), request.clone());
        let (lat, errors) = open_loop(200, 10, move || {
            let (mut a, r) = (a.clone(), r.clone());
            async move { a.predict_conflicts(r).await.is_ok() }
        })
        .await;
        let (hlat, herrors) = checks.await.unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let calls = match managers {
            Some(m) => {
                let mut t = m.await.unwrap();
                t.sort();
                format!(
                    "{} Managers calls meanwhile, median {}",
                    t.len(),
                    ms(t[t.len() / 2])
                )
            }
            None => "idle".to_string(),
        };
        println!(
            "    {calls}: health p50 {} p99 {} ({herrors} errors); prediction p50 {} p99 {} ({errors} errors) — target p99 ≤ 5 ms",
            ms(pct(&hlat, 0.5)),
            ms(pct(&hlat, 0.99)),
            ms(pct(&lat, 0.5)),
            ms(pct(&lat, 0.99)),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
