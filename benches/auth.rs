//! A flood of random bearer tokens against a service that reviews tokens: 100,000 distinct
//! tokens, first from one address, then spread over 200 addresses (127.0.1.x), with an
//! apiserver that answers every TokenReview "not authenticated". Printed: TokenReviews the
//! apiserver received, answers by code, the token cache's entries, and the heap before and
//! after (counting allocator) — bounded by the per-peer budget and the cache's size, not by the
//! number of tokens. Run: `cargo bench --bench auth`.

use fieldguard::live::state::SnapshotState;
use fieldguard::service::auth::{Auth, AuthConfig};
use fieldguard::service::proto::{self as pb, ownership_client::OwnershipClient};
use fieldguard::service::{self, Stores};
use http_body_util::Full;
use hyper::body::Bytes;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static A: Counting = Counting;

const TOKENS: usize = 100_000;
static REVIEWS: AtomicU64 = AtomicU64::new(0);

/// An apiserver that only answers TokenReviews (never authenticated), counting them.
async fn apiserver() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|_req| async {
                    REVIEWS.fetch_add(1, Ordering::Relaxed);
                    let body = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false,"error":"invalid bearer token"}}"#;
                    Ok::<_, std::convert::Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(body)))
                            .unwrap(),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

async fn flood(
    addr: std::net::SocketAddr,
    sources: &[std::net::IpAddr],
    tag: &str,
) -> BTreeMap<String, u64> {
    let mut clients = Vec::new();
    for ip in sources {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .local_address(Some(*ip))
            .connect()
            .await
            .unwrap();
        clients.push(OwnershipClient::new(ch));
    }
    let per = TOKENS / clients.len();
    let mut tasks = Vec::new();
    for (c, mut client) in clients.into_iter().enumerate() {
        let tag = tag.to_string();
        tasks.push(tokio::spawn(async move {
            let mut codes = BTreeMap::new();
            for i in 0..per {
                let mut req = tonic::Request::new(pb::ManagersRequest::default());
                let token = format!("Bearer {tag}-{c}-{i}-{:016x}", rand_u64(c, i));
                req.metadata_mut()
                    .insert("authorization", token.parse().unwrap());
                let code = match client.managers(req).await {
                    Ok(_) => tonic::Code::Ok,
                    Err(e) => e.code(),
                };
                *codes.entry(format!("{code:?}")).or_insert(0u64) += 1;
            }
            codes
        }));
    }
    let mut all = BTreeMap::new();
    for t in tasks {
        for (k, v) in t.await.unwrap() {
            *all.entry(k).or_insert(0) += v;
        }
    }
    all
}

fn rand_u64(a: usize, b: usize) -> u64 {
    let mut x = (a as u64) << 32 ^ b as u64 ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

fn kubeconfig(api: std::net::SocketAddr) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fieldguard-bench-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: b\n  cluster:\n    server: http://{api}\ncontexts:\n- name: b\n  context:\n    cluster: b\n    user: u\ncurrent-context: b\nusers:\n- name: u\n  user:\n    token: bench\n"),
    )
    .unwrap();
    p
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let api_addr = apiserver().await;
    let (api, _) = fieldguard::live::api::Api::connect(&fieldguard::live::api::ClusterOptions {
        kubeconfig: Some(kubeconfig(api_addr)),
        context: None,
    })
    .await
    .unwrap();
    let config = AuthConfig {
        token_review: true,
        ..AuthConfig::default()
    };
    println!(
        "auth flood: {TOKENS} distinct random bearer tokens; budget per address: burst {}, {}/s; token cache: {} entries, ttl {:?}",
        config.review_burst, config.reviews_per_second, config.cache_entries, config.cache_ttl
    );
    println!(
        "{:<26} {:>9} {:>12} {:>14} {:>12} {:>12} {:>10}",
        "scenario", "seconds", "reviews", "answers", "cached", "heap before", "heap after"
    );
    for (name, sources) in [
        ("one address", vec!["127.0.0.1".parse().unwrap()]),
        (
            "200 addresses",
            (1..=200)
                .map(|i| format!("127.0.1.{i}").parse().unwrap())
                .collect::<Vec<_>>(),
        ),
    ] {
        let auth = Arc::new(Auth::new(config.clone(), Some(api.clone())));
        let catalog =
            fieldguard::catalog::Catalog::kubernetes(fieldguard::catalog::DEFAULT_KUBERNETES)
                .unwrap();
        let store = Arc::new(SnapshotState::new(
            fieldguard::live::snapshot::Snapshot::default(),
            catalog,
        ));
        let mut stores = Stores::single("bench", store);
        stores.auth = auth.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(service::serve_on(
            listener,
            stores,
            async {},
            std::future::pending(),
        ));
        let heap_before = LIVE.load(Ordering::Relaxed);
        let reviews_before = REVIEWS.load(Ordering::Relaxed);
        let start = Instant::now();
        let codes = flood(addr, &sources, name).await;
        let secs = start.elapsed().as_secs_f64();
        let (cached, _) = auth.cached().await;
        let heap_after = LIVE.load(Ordering::Relaxed);
        let answers: Vec<String> = codes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{name:<26} {secs:>9.2} {:>12} {:>14} {cached:>12} {:>10.1} MiB {:>6.1} MiB",
            REVIEWS.load(Ordering::Relaxed) - reviews_before,
            answers.join(" "),
            heap_before as f64 / 1048576.0,
            heap_after as f64 / 1048576.0,
        );
    }
}
