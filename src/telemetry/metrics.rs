//! Prometheus metrics (OpenMetrics text on `GET /metrics`): cached objects per kind, watch
//! restarts, relists and lag, prediction latency, conflicts found, applies by result, gRPC
//! requests by method and code, fields taken over and fields fighting.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub cluster: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcCodeLabels {
    pub method: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub method: String,
    pub result: String,
}

/// Refreshes gauges just before a scrape (e.g. from the caches).
pub type Refresh = Box<dyn Fn(&Metrics) + Send + Sync>;

/// Every metric fieldguard exports.
pub struct Metrics {
    registry: Mutex<Registry>,
    refresh: Mutex<Vec<Refresh>>,
    pub cached_objects: Family<KindLabels, Gauge>,
    pub watch_lag_seconds: Family<KindLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub watch_restarts: Family<ClusterLabels, Gauge>,
    pub watch_task_restarts: Family<ClusterLabels, Gauge>,
    pub kinds_out_of_sync: Family<ClusterLabels, Gauge>,
    pub relists: Family<ClusterLabels, Gauge>,
    pub skipped_objects: Family<ClusterLabels, Gauge>,
    pub prediction_seconds: Family<RpcLabels, Histogram>,
    pub conflicts_found: Counter,
    pub applies: Family<ResultLabels, Counter>,
    pub requests: Family<RpcCodeLabels, Counter>,
    /// TokenReviews answered by the apiserver.
    pub token_reviews: Counter,
    /// Unknown tokens refused because their peer's review budget was spent.
    pub token_reviews_refused: Counter,
    /// Fields taken over (ownership history), per cluster and kind.
    pub ownership_transfers: Family<KindLabels, Counter>,
    /// Fields fighting now, per cluster and kind.
    pub active_fights: Family<KindLabels, Gauge>,
}

fn latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0005, 2.0, 16,
    ))
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("fieldguard")),
            refresh: Mutex::new(Vec::new()),
            cached_objects: Family::default(),
            watch_lag_seconds: Family::default(),
            watch_restarts: Family::default(),
            watch_task_restarts: Family::default(),
            kinds_out_of_sync: Family::default(),
            relists: Family::default(),
            skipped_objects: Family::default(),
            prediction_seconds: Family::new_with_constructor(latency_histogram),
            conflicts_found: Counter::default(),
            applies: Family::default(),
            requests: Family::default(),
            token_reviews: Counter::default(),
            token_reviews_refused: Counter::default(),
            ownership_transfers: Family::default(),
            active_fights: Family::default(),
        };
        {
            let mut r = m.registry.lock().unwrap_or_else(|p| p.into_inner());
            r.register(
                "cached_objects",
                "Objects in the watch cache, per cluster and kind",
                m.cached_objects.clone(),
            );
            r.register(
                "watch_lag_seconds",
                "Seconds since the apiserver was last heard from (list, event or bookmark), per kind",
                m.watch_lag_seconds.clone(),
            );
            r.register(
                "watch_restarts",
                "Watches re-opened (dropped streams, timeouts), per cluster",
                m.watch_restarts.clone(),
            );
            r.register(
                "watch_task_restarts",
                "Watch tasks that died (a panic) and were started again, per cluster",
                m.watch_task_restarts.clone(),
            );
            r.register(
                "kinds_out_of_sync",
                "Kinds whose list or watch is failing or being restarted now, per cluster",
                m.kinds_out_of_sync.clone(),
            );
            r.register(
                "relists",
                "Full relists (410 Gone, restarts), per cluster",
                m.relists.clone(),
            );
            r.register(
                "skipped_objects",
                "Undecodable objects skipped by the cache, per cluster",
                m.skipped_objects.clone(),
            );
            r.register(
                "prediction_seconds",
                "Time to answer a prediction, per RPC",
                m.prediction_seconds.clone(),
            );
            r.register(
                "conflicts_found",
                "Conflicts found by predictions",
                m.conflicts_found.clone(),
            );
            r.register(
                "applies",
                "Objects applied, by method (ssa, csa) and result",
                m.applies.clone(),
            );
            r.register(
                "grpc_requests",
                "gRPC requests, by method and status code",
                m.requests.clone(),
            );
            r.register(
                "token_reviews",
                "TokenReviews the apiserver answered",
                m.token_reviews.clone(),
            );
            r.register(
                "token_reviews_refused",
                "Unknown bearer tokens refused without a review: their peer's budget was spent",
                m.token_reviews_refused.clone(),
            );
            r.register(
                "ownership_transfers",
                "Fields taken over from one manager by another, per cluster and kind",
                m.ownership_transfers.clone(),
            );
            r.register(
                "active_fights",
                "Fields changing hands back and forth now (fights), per cluster and kind",
                m.active_fights.clone(),
            );
        }
        m
    }

    /// Adds a refresh hook run before each scrape.
    pub fn on_scrape(&self, f: Refresh) {
        self.refresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(f);
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        for f in self
            .refresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            f(self);
        }
        let mut out = String::new();
        let r = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        out
    }
}

/// The process-wide metrics.
pub fn global() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::new)
}

/// Serves `GET /metrics` (and `GET /healthz`) on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        |req: hyper::Request<hyper::body::Incoming>| async move {
                            let (code, ctype, body) = match (req.method(), req.uri().path()) {
                                (&hyper::Method::GET, "/metrics") => (
                                    200,
                                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                                    global().encode(),
                                ),
                                (&hyper::Method::GET, "/healthz") => {
                                    (200, "text/plain", "ok\n".to_string())
                                }
                                _ => (404, "text/plain", "not found\n".to_string()),
                            };
                            let resp = hyper::Response::builder()
                                .status(code)
                                .header(hyper::header::CONTENT_TYPE, ctype)
                                .body(Full::new(Bytes::from(body)))
                                .unwrap_or_default();
                            Ok::<_, std::convert::Infallible>(resp)
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        }
    }
}
