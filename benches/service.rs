//! The service under load, over loopback, with the load generator in its own process: this
//! binary starts itself again as the server (`FIELDGUARD_BENCH_SERVER` names the snapshot it
//! serves; it prints its address and serves until its standard input closes), so client and
//! server never share a runtime or an allocator.
//!
//! * PredictConflicts for one Deployment, open loop at 500, 1,000 and 2,000 requests/s:
//!   request *i* is due at `start + i/rate` and sent then whether or not earlier ones have
//!   returned; its latency runs from when it was due (not from when it was sent), so a stall
//!   of the generator or the server counts against every request it delayed (no coordinated
//!   omission). Percentiles are exact (every latency kept and sorted). The server's CPU per
//!   request comes from its `/proc/PID/stat`.
//! * A 1,002-object release predicted in one call against a 10,003-object snapshot.
//! * Health checks and the one-Deployment prediction (200/s each, open loop) with and without
//!   a `Managers` call over 100,000 objects running all the while.
//!
//! Run: `cargo bench --bench service`. `FIELDGUARD_BENCH_ONLY=handler`: the in-process handler
//! figures alone; `=predict`: those and the open-loop predictions, at the rates in
//! `FIELDGUARD_BENCH_RATES` (comma-separated, default `500,1000,2000`).

mod common;

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::live::state::SnapshotState;
use fieldguard::manifest::Input;
use fieldguard::service::proto::{self as pb, analysis_client::AnalysisClient};
use fieldguard::service::{self, Stores};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: fieldguard::allocator::Mimalloc = fieldguard::allocator::Mimalloc;

const SERVER_ENV: &str = "FIELDGUARD_BENCH_SERVER";
/// Each rate runs this long.
const SECONDS: u64 = 10;

fn main() {
    if let Ok(paths) = std::env::var(SERVER_ENV) {
        return serve(&paths);
    }
    // The load generator: one thread sends on schedule, a runtime runs the calls (two
    // threads: a `Managers` answer being decoded must not hold up the predictions' answers).
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(generate());
}

/// The server process: the snapshot at `paths` (comma-separated) served on a free port, the
/// address printed, until standard input closes.
fn serve(paths: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let inputs: Vec<Input> = paths.split(',').map(|p| Input::Path(p.into())).collect();
        let store = snapshot_store(&inputs);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        tokio::spawn(service::serve_on(
            listener,
            Stores::single("bench", store),
            async {},
            std::future::pending(),
        ));
        // Serve until the generator closes our standard input.
        tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()))
            .await
            .unwrap()
            .unwrap();
    });
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// The snapshot at `inputs` as `fieldguard serve --snapshot` serves it.
fn snapshot_store(inputs: &[Input]) -> Arc<SnapshotState> {
    let snap = Snapshot::load(inputs, &mut std::io::empty()).unwrap();
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    snap.extend_catalog(&mut c).unwrap();
    Arc::new(
        SnapshotState::new(snap, c).keeping_prepared(fieldguard::live::prepared::DEFAULT_ENTRIES),
    )
}

/// A server process and a channel to it.
struct Server {
    child: Child,
    channel: tonic::transport::Channel,
}

impl Server {
    async fn start(paths: &[&Path]) -> Server {
        let joined: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(SERVER_ENV, joined.join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", line.trim()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Server { child, channel }
    }

    fn analysis(&self) -> AnalysisClient<tonic::transport::Channel> {
        AnalysisClient::new(self.channel.clone()).max_decoding_message_size(256 * 1024 * 1024)
    }

    /// CPU time the server has used (user + system).
    fn cpu(&self) -> Duration {
        cpu_of(&self.child.id().to_string())
    }
}

/// CPU time a process has used (user + system): `self` or a process id.
fn cpu_of(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses): utime is the 14th field
    // of the line, stime the 15th, in clock ticks.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|x| x.parse().unwrap())
        .collect();
    let tick = 1.0 / 100.0; // USER_HZ on Linux
    Duration::from_secs_f64((f[0] + f[1]) as f64 * tick)
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
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

/// Latencies of an open-loop run: each measured from when its request was due.
struct Run {
    latencies: Vec<Duration>,
    errors: usize,
    wall: Duration,
}

impl Run {
    fn summary(&self) -> String {
        let l = &self.latencies;
        format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}; {} errors",
            ms(pct(l, 0.50)),
            ms(pct(l, 0.90)),
            ms(pct(l, 0.99)),
            ms(pct(l, 0.999)),
            ms(*l.last().unwrap()),
            self.errors
        )
    }
}

/// Open loop: `rate` calls a second for `secs`, sent on schedule by a thread of their own
/// (precise to the OS's sleep, ~0.1 ms; lateness counts against the call).
///
/// The generator must not stall its own schedule: each call's task writes its latency into a
/// slot allocated (and touched) before the run and is then freed, so the sender's memory stays
/// flat. Keeping every task's handle until the end grew the generator's heap by a fresh 2 MB
/// page every ~400 calls, and the kernel clearing each one held the sender for ~5 ms: a
/// stall every 0.2 s at 2,000/s, counted against the server. `FIELDGUARD_BENCH_TRACE=FILE`
/// appends `rate index latency_µs` per call, to see when slow calls happened.
async fn open_loop<F, Fut>(rate: u64, secs: u64, call: F) -> Run
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    const FAILED: u64 = 1 << 63;
    let n = (rate * secs) as usize;
    // Nanoseconds from due to answered, `FAILED` set for an error; all touched now.
    let slots: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(u64::MAX)).collect());
    let done = Arc::new((AtomicUsize::new(0), tokio::sync::Notify::new()));
    let handle = tokio::runtime::Handle::current();
    let (s, d) = (slots.clone(), done.clone());
    let sender = std::thread::spawn(move || {
        let period = Duration::from_nanos(1_000_000_000 / rate);
        let start = Instant::now() + Duration::from_millis(10);
        for i in 0..n {
            let due = start + period * i as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let f = call();
            let (s, d) = (s.clone(), d.clone());
            drop(handle.spawn(async move {
                let ok = f.await;
                let ns = due.elapsed().as_nanos() as u64;
                s[i].store(if ok { ns } else { ns | FAILED }, Ordering::Release);
                if d.0.fetch_add(1, Ordering::AcqRel) + 1 == n {
                    d.1.notify_one();
                }
            }));
        }
        start
    });
    let start = tokio::task::spawn_blocking(move || sender.join().unwrap())
        .await
        .unwrap();
    // Bounded: a call that never finished would otherwise hang the run.
    if n > 0 && done.0.load(Ordering::Acquire) < n {
        tokio::time::timeout(Duration::from_secs(60), done.1.notified())
            .await
            .expect("every call finished within a minute of the last one's sending");
    }
    let mut latencies = Vec::with_capacity(n);
    let mut errors = 0;
    for slot in slots.iter() {
        let v = slot.load(Ordering::Acquire);
        errors += usize::from(v & FAILED != 0);
        latencies.push(Duration::from_nanos(v & !FAILED));
    }
    if let Ok(p) = std::env::var("FIELDGUARD_BENCH_TRACE") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        for (i, d) in latencies.iter().enumerate() {
            writeln!(f, "{rate} {i} {}", d.as_micros()).unwrap();
        }
    }
    latencies.sort();
    Run {
        latencies,
        errors,
        wall: start.elapsed(),
    }
}

async fn generate() {
    let root = common::root();
    let request = pb::PredictRequest {
        field_manager: "helm".into(),
        default_namespace: "shop".into(),
        manifests: vec![pb::Manifest {
            name: "deployment.yaml".into(),
            content: one_deployment(),
        }],
        ..Default::default()
    };
    handler_alone(&root.join("examples/cluster"), &request).await;
    // `FIELDGUARD_BENCH_ONLY=handler`: the in-process figures only (for a profiler).
    if std::env::var("FIELDGUARD_BENCH_ONLY").as_deref() == Ok("handler") {
        return;
    }
    {
        let server = Server::start(&[&root.join("examples/cluster")]).await;
        let client = server.analysis();
        // Warm up.
        for _ in 0..500 {
            client
                .clone()
                .predict_conflicts(request.clone())
                .await
                .unwrap();
        }
        println!(
            "service: PredictConflicts (one Deployment, 3 conflicts) over loopback, open loop, {SECONDS} s per rate, server in its own process:"
        );
        let rates: Vec<u64> = std::env::var("FIELDGUARD_BENCH_RATES")
            .map(|r| r.split(',').map(|x| x.parse().unwrap()).collect())
            .unwrap_or_else(|_| vec![500, 1_000, 2_000]);
        for rate in rates {
            let (cpu, own) = (server.cpu(), cpu_of("self"));
            let (c, r) = (client.clone(), request.clone());
            let run = open_loop(rate, SECONDS, move || {
                let (mut c, r) = (c.clone(), r.clone());
                async move { c.predict_conflicts(r).await.is_ok() }
            })
            .await;
            let (used, generator) = (server.cpu() - cpu, cpu_of("self") - own);
            let n = run.latencies.len();
            let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
            let cores = |d: Duration| d.as_secs_f64() / run.wall.as_secs_f64();
            println!(
                "  {rate}/s: {n} requests in {:.1} s; latency from due {} — target p99 ≤ 1 ms @ 2,000/s",
                run.wall.as_secs_f64(),
                run.summary(),
            );
            println!(
                "    CPU per request: server {:.0} µs ({:.2} cores), load generator {:.0} µs ({:.2} cores)",
                per(used),
                cores(used),
                per(generator),
                cores(generator),
            );
        }
        if std::env::var("FIELDGUARD_BENCH_ONLY").as_deref() == Ok("predict") {
            return;
        }
        // The floor beside it, on the same connection: a gRPC health check does no work of
        // its own, so its cost is the transport's (HTTP/2, tonic, the runtime, the kernel).
        for rate in [500, 2_000] {
            let (cpu, own) = (server.cpu(), cpu_of("self"));
            let h = tonic_health::pb::health_client::HealthClient::new(server.channel.clone());
            let run = open_loop(rate, SECONDS, move || {
                let mut h = h.clone();
                async move {
                    h.check(tonic_health::pb::HealthCheckRequest::default())
                        .await
                        .is_ok()
                }
            })
            .await;
            let (used, generator) = (server.cpu() - cpu, cpu_of("self") - own);
            let n = run.latencies.len() as f64;
            println!(
                "  floor, gRPC health check at {rate}/s: latency from due {}; CPU per request: server {:.0} µs, load generator {:.0} µs",
                run.summary(),
                used.as_secs_f64() * 1e6 / n,
                generator.as_secs_f64() * 1e6 / n,
            );
        }
    }

    // A 1,000-object release in one call.
    let dir = std::env::temp_dir().join(format!("fieldguard-bench-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (rel, snap) = common::generate(&dir);
    {
        let server = Server::start(&[&snap]).await;
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
            let r = server
                .analysis()
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
    }
    let _ = std::fs::remove_dir_all(&dir);
    under_managers(request).await;
}

/// The same prediction without the transport: the service's handler called in this process on
/// the same snapshot (parse, resolve, live objects, engine, response), one call at a time, and
/// the manifest's parse on its own. Beside the server's CPU per request, this splits the cost between
/// the handler and what carries it (HTTP/2, tonic, the runtime, the kernel).
async fn handler_alone(snapshot: &Path, request: &pb::PredictRequest) {
    use fieldguard::service::proto::analysis_server::Analysis;
    let store = snapshot_store(&[Input::Path(snapshot.into())]);
    let svc = fieldguard::service::analysis::AnalysisService::new(Stores::single("bench", store));
    const CALLS: u32 = 5_000;
    for _ in 0..500 {
        svc.predict_conflicts(tonic::Request::new(request.clone()))
            .await
            .unwrap();
    }
    let (t, cpu) = (Instant::now(), cpu_of("self"));
    for _ in 0..CALLS {
        let r = svc
            .predict_conflicts(tonic::Request::new(request.clone()))
            .await
            .unwrap();
        std::hint::black_box(r);
    }
    let (wall, cpu) = (t.elapsed() / CALLS, (cpu_of("self") - cpu) / CALLS);
    // The manifest's parse alone (YAML with line tracking), as the handler does it.
    let content = &request.manifests[0].content;
    let name: Arc<str> = Arc::from("deployment.yaml");
    let t = Instant::now();
    for _ in 0..CALLS {
        let mut loaded = fieldguard::manifest::Loaded::new(fieldguard::manifest::Limits::default());
        fieldguard::manifest::parse_into(&name, content, &mut loaded);
        std::hint::black_box(loaded);
    }
    let parse = t.elapsed() / CALLS;
    // The YAML reader alone, and yaml-rust2's events in its place, on the same text.
    use fieldguard::value::yaml::{YamlOptions, parse_documents, parse_documents_by_events};
    let opts = YamlOptions::default();
    let text = std::str::from_utf8(content).unwrap();
    let mut yaml = [Duration::ZERO; 2];
    for (i, f) in [parse_documents, parse_documents_by_events]
        .iter()
        .enumerate()
    {
        let t = Instant::now();
        for _ in 0..CALLS {
            std::hint::black_box(f(text, &opts).unwrap());
        }
        yaml[i] = t.elapsed() / CALLS;
    }
    println!(
        "service: the manifest's YAML ({} bytes) alone: {:.1} µs; through yaml-rust2's events instead: {:.1} µs ({:.1}×)",
        content.len(),
        yaml[0].as_secs_f64() * 1e6,
        yaml[1].as_secs_f64() * 1e6,
        yaml[1].as_secs_f64() / yaml[0].as_secs_f64(),
    );
    println!(
        "service: the same PredictConflicts handled in-process, no transport, {CALLS} calls one at a time: {:.0} µs per call (CPU {:.0} µs); of which parsing the manifest {:.0} µs",
        wall.as_secs_f64() * 1e6,
        cpu.as_secs_f64() * 1e6,
        parse.as_secs_f64() * 1e6,
    );
}

/// 100,000 ConfigMaps (two managers each) beside the bundled cluster, as one snapshot file.
fn big_snapshot(dir: &Path) -> PathBuf {
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

async fn under_managers(request: pb::PredictRequest) {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let dir =
        std::env::temp_dir().join(format!("fieldguard-bench-managers-{}", std::process::id()));
    let big = big_snapshot(&dir);
    let root = common::root();
    let server = Server::start(&[&root.join("examples/cluster"), &big]).await;
    let analysis = server.analysis();
    let health = HealthClient::new(server.channel.clone());
    let own = pb::ownership_client::OwnershipClient::new(server.channel.clone())
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
        let predictions = open_loop(200, 10, move || {
            let (mut a, r) = (a.clone(), r.clone());
            async move { a.predict_conflicts(r).await.is_ok() }
        })
        .await;
        let checks = checks.await.unwrap();
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
        println!("    {calls}:");
        println!("      health {}", checks.summary());
        println!(
            "      prediction {} — target p99 ≤ 5 ms",
            predictions.summary()
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
