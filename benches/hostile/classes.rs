//! The amplification classes of the hostile-input review, each measured beside the bound that
//! stops it: an input small on the wire whose work or memory would grow without one. Each row
//! is one refusal (or a bounded answer): its time and peak memory, and the limit it hits.

use super::{MB, check_args, cpu, ms, status_kib};
use fieldguard::service::proto::{self as pb, analysis_client::AnalysisClient};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

/// A row of the class table.
fn row(class: &str, input: &str, took: Duration, peak_mib: u64, bound: &str, outcome: &str) {
    println!(
        "{class:<22} {input:>10} {:>9} {peak_mib:>7} MiB  {bound:<34} {outcome}",
        ms(took)
    );
}

/// The CLI classes: each a `check` (or `blame`) process, peak memory from GNU time.
pub fn cli(dir: &Path) {
    println!(
        "\namplification classes through the CLI (a process each; peak: GNU time's)\n{:<22} {:>10} {:>9} {:>11}  {:<34} outcome",
        "class", "input", "time", "peak", "bound"
    );
    // 1. An anchor of 1 MB and 2,000 aliases of it: 2 GB once expanded.
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb, namespace: shop}\ndata:\n  a: &big ",
    );
    bomb.push_str(&"x".repeat(MB));
    bomb.push_str("\nbinaryData: [");
    for i in 0..2000 {
        bomb.push_str(if i == 0 { "*big" } else { ", *big" });
    }
    bomb.push_str("]\n");
    let f = dir.join("bomb.yaml");
    std::fs::write(&f, &bomb).unwrap();
    let (t, peak, first) = check_args(&["check", "--snapshot", "examples/cluster"], &f);
    row(
        "YAML aliases",
        &format!("{:.1} MB", bomb.len() as f64 / 1e6),
        t,
        peak / 1024,
        "3 MiB a document after expansion",
        &first,
    );

    // 2. CEL: three nested all() over 1,000 items (10^9 steps), from a 6 KB manifest.
    let ints: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: widgets.example.com}}\nspec:\n  group: example.com\n  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-validations:\n            - rule: 'self.ints.all(a, self.ints.all(b, self.ints.all(c, a + b + c >= 0)))'\n            properties:\n              ints: {{type: array, items: {{type: integer}}}}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w, namespace: shop}}\nspec:\n  ints: [{}]\n",
        ints.join(",")
    );
    let f = dir.join("cel.yaml");
    std::fs::write(&f, &crd).unwrap();
    let (t, peak, first) = check_args(&["check", "--snapshot", "examples/cluster"], &f);
    row(
        "CEL cost",
        &format!("{:.1} KB", crd.len() as f64 / 1e3),
        t,
        peak / 1024,
        "1,000,000 a call (the apiserver's)",
        &first_or(&first, "not evaluated"),
    );

    // 3. Special files: a device and a link out of the directory.
    for (class, path) in [
        ("snapshot /dev/zero", "/dev/zero"),
        ("snapshot /proc/self", "/proc/self"),
    ] {
        let (t, peak, first) = check_args(&["check", "--snapshot", path], &f);
        row(class, "-", t, peak / 1024, "refused by file type", &first);
    }

    // 4. An apiserver whose answer never ends.
    let (addr, stop) = endless_apiserver();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://{addr}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let cm = dir.join("cm.yaml");
    std::fs::write(
        &cm,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n",
    )
    .unwrap();
    let k = kubeconfig.to_str().unwrap().to_string();
    let (t, peak, first) = check_args(&["check", "--kubeconfig", &k], &cm);
    row(
        "endless apiserver body",
        "-",
        t,
        peak / 1024,
        "16 MiB an object, 256 MiB a page",
        &first,
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn first_or(first: &str, empty: &str) -> String {
    if first.is_empty() {
        empty.to_string()
    } else {
        first.to_string()
    }
}

/// An HTTP server on loopback that answers every request with headers and then an endless
/// chunked body of one JSON string (bounded: it stops after 4 GiB or when told).
fn endless_apiserver() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            let s = s.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n");
                let chunk = format!("{:x}\r\n{}\r\n", 65536, "x".repeat(65536));
                let _ = conn.write_all(b"1\r\n\"\r\n");
                for _ in 0..(1 << 16) {
                    if s.load(std::sync::atomic::Ordering::Relaxed)
                        || conn.write_all(chunk.as_bytes()).is_err()
                    {
                        break;
                    }
                }
            });
        }
    });
    (addr, stop)
}

/// The service classes: each request's time to its answer, the server's CPU for it and its
/// peak memory.
pub async fn service(client: &AnalysisClient<tonic::transport::Channel>, pid: u32) {
    println!(
        "\namplification classes over gRPC (one `serve`; peak: the server's VmHWM, reset before each)\n{:<22} {:>10} {:>9} {:>11}  {:<34} answer",
        "class", "input", "time", "peak", "bound"
    );
    let base = || pb::PredictRequest {
        field_manager: "helm".into(),
        default_namespace: "shop".into(),
        manifests: vec![pb::Manifest {
            name: "cm.yaml".into(),
            content: b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n".to_vec(),
        }],
        ..Default::default()
    };
    let mut patterns = base();
    patterns.force = Some(pb::ForcePolicy {
        mode: pb::ForceMode::Selective as i32,
        against: (0..60_000).map(|i| format!("m{i}")).collect(),
    });
    let mut clusters = base();
    clusters.clusters = vec![String::new(); 1_000_000];
    let mut names = String::new();
    for i in 0..2_000 {
        names.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: \"Bad_{i}\"}}\n"
        ));
    }
    let mut invalid = base();
    invalid.manifests[0].content = names.into_bytes();
    for (class, req, bound) in [
        ("force patterns", patterns, "64 patterns, 4 KiB each"),
        ("clusters", clusters, "the clusters served, each once"),
        (
            "error details",
            invalid,
            "8 KiB of violations, then counted",
        ),
    ] {
        let size = prost::Message::encoded_len(&req);
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let t = Instant::now();
        let r = client.clone().predict_conflicts(req).await;
        let took = t.elapsed();
        let answer = match r {
            Ok(_) => "accepted!".to_string(),
            Err(s) => format!(
                "{:?} ({} B of details): {}",
                s.code(),
                s.details().len(),
                s.message().chars().take(60).collect::<String>()
            ),
        };
        row(
            class,
            &format!("{:.1} MB", size as f64 / 1e6),
            took,
            status_kib(pid, "VmHWM") / 1024,
            bound,
            &answer,
        );
    }
}

/// A prediction big enough to go through the CPU gate (over 16 KiB): `n` Deployments.
pub fn release(n: usize) -> Vec<u8> {
    let mut release = String::new();
    for i in 0..n {
        release.push_str(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d{i}, namespace: shop}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: d{i}}}}}\n  template:\n    metadata: {{labels: {{app: d{i}}}}}\n    spec: {{containers: [{{name: app, image: 'app:1', env: [{{name: A, value: '1'}}]}}]}}\n---\n"
        ));
    }
    release.into_bytes()
}

/// Fairness: one caller (127.0.0.2) keeps 8 heavy predictions in flight; another (127.0.0.3)
/// sends a light one. Its latency idle and under the load, and a health check's.
pub async fn fairness(addr: SocketAddr, pid: u32) {
    let request = |n: usize| {
        prost::Message::encode_to_vec(&pb::PredictRequest {
            field_manager: "helm".into(),
            default_namespace: "shop".into(),
            manifests: vec![pb::Manifest {
                name: "release.yaml".into(),
                content: release(n),
            }],
            ..Default::default()
        })
    };
    let heavy = std::sync::Arc::new(request(3000));
    let light = request(100);
    let path = "/fieldguard.v1.Analysis/PredictConflicts";
    let from = |last: u8| IpAddr::from([127, 0, 0, last]);
    let timed = |src: IpAddr, msg: Vec<u8>| async move {
        let t = Instant::now();
        let (code, _) = super::grpc_raw::unary_from(Some(src), addr, path, &msg, "60S").await;
        (t.elapsed(), code)
    };
    let (idle, _) = timed(from(3), light.clone()).await;
    let (heavy_alone, _) = timed(from(2), (*heavy).clone()).await;
    let cpu_before = cpu(pid);
    let mut load = Vec::new();
    for _ in 0..8 {
        let h = heavy.clone();
        load.push(tokio::spawn(async move {
            super::grpc_raw::unary_from(Some(from(2)), addr, path, &h, "120S").await
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (loaded, code) = timed(from(3), light).await;
    let health = Instant::now();
    let (hcode, _) = super::grpc_raw::unary_from(
        Some(from(4)),
        addr,
        "/grpc.health.v1.Health/Check",
        &[],
        "10S",
    )
    .await;
    let health = health.elapsed();
    for l in load {
        let _ = l.await;
    }
    println!(
        "\nfairness: a light prediction (100 objects) from one caller while another keeps 8 heavy ones (3,000 objects, {} each alone) in flight, 4 at a time\n  light alone {}; under the load {} ({:.2}x a heavy one alone; served first in turn, not behind the other caller's 4 queued), answer {:?}; health check {} ({:?}); server CPU over the run {}",
        ms(heavy_alone),
        ms(idle),
        ms(loaded),
        loaded.as_secs_f64() / heavy_alone.as_secs_f64().max(1e-9),
        tonic::Code::from(code),
        ms(health),
        tonic::Code::from(hcode),
        ms(cpu(pid).saturating_sub(cpu_before)),
    );
}
