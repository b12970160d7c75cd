//! Hostile input, measured: inputs of 10, 50 and 200 MB in each shape an attacker or a broken
//! pipeline produces — many keys in one map, a long list, a long string, many documents, deep
//! nesting — fed to `fieldguard check` (a process each: wall time and peak memory from the
//! kernel) and to a `fieldguard serve` over gRPC (time to the answer, the server's peak memory
//! during the request). Every one must be refused; the figures say how cheaply. Then the
//! deadline: a request whose work outlasts its `grpc-timeout`, and how much CPU the server
//! still spends after answering. Then every amplification class of the hostile-input review
//! beside the bound that stops it (`classes`), and fairness between callers.
//!
//! Run: `cargo bench --bench hostile`. Targets: each refusal ≤ 100 ms, peak memory ≤ 2× the
//! limit it hits; work stops within 10 ms of the deadline.

#[path = "hostile/classes.rs"]
mod classes;
#[path = "../tests/support/grpc_raw.rs"]
mod grpc_raw;

use fieldguard::service::proto::{self as pb, analysis_client::AnalysisClient};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MB: usize = 1_000_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fieldguard"))
}

/// A YAML or JSON text of about `size` bytes in `shape`.
fn input(shape: &str, size: usize) -> Vec<u8> {
    let head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hostile, namespace: shop}\n";
    let mut s = String::with_capacity(size + 1024);
    match shape {
        "many keys" => {
            s.push_str("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"h\"},\"data\":{");
            let mut i = 0;
            while s.len() < size {
                s.push_str(&format!("\"k{i}\":\"v\","));
                i += 1;
            }
            s.push_str("\"end\":\"v\"}}");
        }
        "long list" => {
            s.push_str("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"h\"},\"x\":[");
            while s.len() < size {
                s.push_str("{},");
            }
            s.push_str("{}]}");
        }
        "long string" => {
            s.push_str(head);
            s.push_str("data:\n  blob: ");
            s.push_str(&"x".repeat(size));
            s.push('\n');
        }
        "many documents" => {
            let mut i = 0;
            while s.len() < size {
                s.push_str(&format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: shop}}\n---\n"
                ));
                i += 1;
            }
        }
        "deep nesting" => {
            s.push_str(head);
            s.push_str("data: ");
            let depth = size / 2;
            s.push_str(&"[".repeat(depth));
            s.push_str(&"]".repeat(depth));
            s.push('\n');
        }
        _ => unreachable!("a shape of this file"),
    }
    s.into_bytes()
}

const SHAPES: [&str; 5] = [
    "many keys",
    "long list",
    "long string",
    "many documents",
    "deep nesting",
];

/// Runs `check` on `file`; wall time, peak RSS (KiB) and the first error line.
fn check(file: &Path) -> (Duration, u64, String) {
    check_args(&["check", "--snapshot", "examples/cluster"], file)
}

/// Runs fieldguard with `args`, then `-n shop --field-manager helm FILE`; wall time, peak RSS
/// (KiB) and the first line of its errors. Peak memory is GNU time's (`%M`): a child of this
/// process would inherit this process's high-water mark (the kernel keeps it across exec),
/// GNU time's children do not.
fn check_args(args: &[&str], file: &Path) -> (Duration, u64, String) {
    let t = Instant::now();
    let o = Command::new("/usr/bin/time")
        .args(["-f", "PEAK %M"])
        .arg(bin())
        .args(args)
        .args(["-n", "shop", "--field-manager", "helm"])
        .arg(file)
        .current_dir(root())
        .stdout(Stdio::null())
        .output()
        .expect("GNU time (/usr/bin/time, Debian package `time`)");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    let peak = err
        .lines()
        .find_map(|l| l.strip_prefix("PEAK "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let first = err
        .lines()
        .find(|l| !l.starts_with("PEAK "))
        .unwrap_or("")
        .chars()
        .take(110)
        .collect();
    (took, peak, first)
}

/// A `/proc/PID/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The process's CPU time (user + system).
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the state.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    // SAFETY: sysconf with a valid name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz.max(1))
}

fn serve() -> (std::process::Child, String) {
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--snapshot",
            "examples/cluster",
            "--listen",
            "127.0.0.1:0",
        ])
        .current_dir(root())
        .env("FIELDGUARD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut addr = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(i) = line.find("addr=") {
            addr = line[i + 5..].split_whitespace().next().unwrap().to_string();
        }
        if line.contains("ready (health SERVING)") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::temp_dir().join(format!("fieldguard-bench-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "hostile input through `fieldguard check` (limits: 64 MiB a file, 3 MiB a document, 20,000 documents)"
    );
    println!(
        "{:<16} {:>6} {:>9} {:>11}  refusal",
        "shape", "size", "time", "peak RSS"
    );
    for shape in SHAPES {
        for size in [10 * MB, 50 * MB, 200 * MB] {
            let f = dir.join("input");
            std::fs::File::create(&f)
                .unwrap()
                .write_all(&input(shape, size))
                .unwrap();
            let (t, rss, first) = check(&f);
            println!(
                "{shape:<16} {:>4}MB {:>9} {:>8} MiB  {first}",
                size / MB,
                ms(t),
                rss / 1024
            );
        }
    }
    let _ = std::fs::remove_file(dir.join("input"));
    classes::cli(&dir);

    let (mut server, addr) = serve();
    let pid = server.id();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = AnalysisClient::new(channel).max_encoding_message_size(usize::MAX);
    println!(
        "\nthe same over gRPC to `fieldguard serve` (limits: 32 MiB a request, 3 MiB a document, 10,000 documents); server RSS before: {} MiB",
        status_kib(pid, "VmRSS") / 1024
    );
    println!(
        "{:<16} {:>6} {:>9} {:>10} {:>14}  answer (time: the client's, building and sending the message included)",
        "shape", "size", "time", "server CPU", "server peak"
    );
    for shape in SHAPES {
        for size in [10 * MB, 50 * MB, 200 * MB] {
            let content = input(shape, size);
            // Resets the peak (VmHWM) to the current RSS, so the peak is this request's.
            let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
            let req = pb::PredictRequest {
                field_manager: "helm".into(),
                default_namespace: "shop".into(),
                manifests: vec![pb::Manifest {
                    name: "hostile".into(),
                    content,
                }],
                ..Default::default()
            };
            let cpu_before = cpu(pid);
            let t = Instant::now();
            let r = client.clone().predict_conflicts(req).await;
            let took = t.elapsed();
            let server_cpu = cpu(pid).saturating_sub(cpu_before);
            let answer = match r {
                Ok(_) => "accepted!".to_string(),
                Err(s) => format!(
                    "{:?}: {}",
                    s.code(),
                    s.message().chars().take(80).collect::<String>()
                ),
            };
            println!(
                "{shape:<16} {:>4}MB {:>9} {:>10} {:>10} MiB  {answer}",
                size / MB,
                ms(took),
                ms(server_cpu),
                status_kib(pid, "VmHWM") / 1024
            );
        }
    }

    classes::service(&client, pid).await;

    // The deadline: a release of 5,000 objects (accepted, long to predict) with 50 ms.
    let req = pb::PredictRequest {
        field_manager: "helm".into(),
        default_namespace: "shop".into(),
        manifests: vec![pb::Manifest {
            name: "release.yaml".into(),
            content: classes::release(5000),
        }],
        ..Default::default()
    };
    let t = Instant::now();
    let full = client.clone().predict_conflicts(req.clone()).await;
    let whole = t.elapsed();
    let encoded = prost::Message::encode_to_vec(&req);
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    for deadline_ms in [20u64, 50, 200] {
        // Over bare HTTP/2: no client-side timer races the server's answer.
        let t = Instant::now();
        let (code, _) = grpc_raw::unary(
            addr,
            "/fieldguard.v1.Analysis/PredictConflicts",
            &encoded,
            &format!("{deadline_ms}m"),
        )
        .await;
        let answered = t.elapsed();
        let cpu_at_answer = cpu(pid);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = cpu(pid).saturating_sub(cpu_at_answer);
        println!(
            "deadline {deadline_ms} ms on a 5,000-object release (whole prediction: {} {}): answered {:?} after {}; server CPU in the 500 ms after the answer: {}",
            ms(whole),
            if full.is_ok() { "ok" } else { "refused" },
            tonic::Code::from(code),
            ms(answered),
            ms(after)
        );
    }
    classes::fairness(addr, pid).await;
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
