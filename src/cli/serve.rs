//! `fieldguard serve`: the gRPC service.

use super::{EXIT_INVALID, EXIT_UNREACHABLE, ExitCode, print_errors, usage_error};
use crate::cache::{CacheConfig, ClusterCache};
use crate::catalog::Catalog;
use crate::live::api::{Api, ClusterOptions};
use crate::live::snapshot::Snapshot;
use crate::live::state::LiveState;
use crate::live::state::SnapshotState;
use crate::manifest::Input;
use crate::service::{self, Stores};
use clap::Args;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Serve a snapshot instead of clusters (files or directories, as for `check`).
    #[arg(long, value_name = "PATH")]
    pub snapshot: Vec<String>,
    /// Kubernetes version whose built-in schemas a snapshot uses.
    #[arg(long, value_name = "VERSION", default_value = crate::catalog::DEFAULT_KUBERNETES)]
    pub kubernetes_version: String,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "FILE", conflicts_with = "snapshot")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Clusters to watch, by kubeconfig context (repeatable; requests name them; default: the
    /// current context, named `default`).
    #[arg(long = "context", value_name = "NAME", conflicts_with = "snapshot")]
    pub contexts: Vec<String>,
    /// Watch only these API groups (repeatable; `core` for the core group).
    #[arg(long, value_name = "GROUP")]
    pub include_group: Vec<String>,
    /// Never watch these API groups (repeatable).
    #[arg(long, value_name = "GROUP")]
    pub exclude_group: Vec<String>,
    /// Watch only these kinds (repeatable).
    #[arg(long, value_name = "KIND")]
    pub include_kind: Vec<String>,
    /// Never watch these kinds (repeatable; Event is always excluded).
    #[arg(long, value_name = "KIND")]
    pub exclude_kind: Vec<String>,
    /// Watch one namespace only (cluster-scoped kinds are still watched).
    #[arg(long, value_name = "NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// Keep whole objects of these kinds in memory (others are fetched when a prediction needs
    /// them; repeatable).
    #[arg(long, value_name = "KIND")]
    pub full_kind: Vec<String>,
    /// Remember ownership changes — who took which field from whom — and fields that fight
    /// (`Ownership.History`, `WatchTransitions`, `Fights`; `fieldguard history`, `fights`).
    #[arg(long, conflicts_with = "snapshot")]
    pub history: bool,
    /// Transitions kept in memory per cluster (the oldest go first).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100_000,
        requires = "history"
    )]
    pub history_entries: usize,
    /// Their approximate size in memory per cluster, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64, requires = "history")]
    pub history_mib: usize,
    /// Also append every transition to this JSON-lines file; read back on restart.
    #[arg(long, value_name = "FILE", requires = "history")]
    pub history_file: Option<std::path::PathBuf>,
    /// Past this size (MiB) the file is renamed FILE.1 (replacing the older one) and started anew.
    #[arg(long, value_name = "MIB", default_value_t = 256, requires = "history")]
    pub history_file_mib: u64,
    /// A fight: one field taken over back and forth at least this many times ...
    #[arg(long, value_name = "N", default_value_t = 3, requires = "history")]
    pub fight_flips: usize,
    /// ... within this window.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = super::apply::parse_duration, requires = "history")]
    pub fight_window: std::time::Duration,
    /// Serve `Releases.Apply` (writes to the clusters with the service's credentials; give its
    /// account only what releases need).
    #[arg(long, conflicts_with = "snapshot")]
    pub allow_apply: bool,
    /// Serve Prometheus metrics (`GET /metrics`, OpenMetrics text) on this address.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Log lines as text or JSON (stderr; level from FIELDGUARD_LOG, default info).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: crate::telemetry::LogFormat,
    /// Serve TLS with this certificate (PEM; with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM); the certificate's CN is the user,
    /// its O entries the groups (mTLS authentication).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// Authenticate bearer tokens with the cluster's TokenReview API.
    #[arg(long, conflicts_with = "snapshot")]
    pub token_review: bool,
    /// Audiences tokens must be issued for (repeatable; with --token-review).
    #[arg(
        long = "token-audience",
        value_name = "AUDIENCE",
        requires = "token_review"
    )]
    pub token_audiences: Vec<String>,
    /// TokenReviews one client address may cause per second (tokens already reviewed and
    /// cached cost nothing), after a burst of --token-review-burst.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 5.0,
        requires = "token_review"
    )]
    pub token_reviews_per_second: f64,
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20.0,
        requires = "token_review"
    )]
    pub token_review_burst: f64,
    /// Let callers without credentials read what system:anonymous may read (never apply).
    #[arg(long)]
    pub anonymous: bool,
    /// Append every apply (who, what, method, result) to this file as JSON lines.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<std::path::PathBuf>,
    /// Export traces with OpenTelemetry OTLP/gRPC to this endpoint (e.g. http://otel-collector:4317).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// What one request's manifests may hold (`--max-input-bytes` also bounds the gRPC
    /// message), and how large a served snapshot may be.
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
}

/// What `security` sets up: TLS, authentication, the audit log.
type Security = (
    Option<tonic::transport::ServerTlsConfig>,
    Arc<crate::service::auth::Auth>,
    Arc<crate::service::releases::AuditLog>,
);

/// TLS, authentication and the audit log, from the arguments.
fn security(args: &ServeArgs, api: Option<Api>) -> Result<Security, String> {
    use crate::service::auth::{Auth, AuthConfig};
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let read = |flag: &str, p: &std::path::Path| read(p).map_err(|e| format!("{flag} {e}"));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => {
            let mut t = tonic::transport::ServerTlsConfig::new().identity(
                tonic::transport::Identity::from_pem(read("--tls-cert", c)?, read("--tls-key", k)?),
            );
            if let Some(ca) = &args.tls_client_ca {
                t = t.client_ca_root(tonic::transport::Certificate::from_pem(read(
                    "--tls-client-ca",
                    ca,
                )?));
            }
            Some(t)
        }
        _ => None,
    };
    let config = AuthConfig {
        token_review: args.token_review,
        audiences: args.token_audiences.clone(),
        mtls: args.tls_client_ca.is_some(),
        anonymous: args.anonymous,
        reviews_per_second: args.token_reviews_per_second,
        review_burst: args.token_review_burst,
        ..AuthConfig::default()
    };
    let auth = Auth::new(config, api);
    if auth.is_open() {
        tracing::warn!(
            "no authentication configured (--tls-client-ca, --token-review): every caller reads everything, nobody applies"
        );
    }
    let audit = match &args.audit_log {
        Some(p) => crate::service::releases::AuditLog::to_file(p)
            .map_err(|e| format!("--audit-log {}: {e}", p.display()))?,
        None => Default::default(),
    };
    Ok((tls, Arc::new(auth), Arc::new(audit)))
}

/// Starts logs, traces and the metrics endpoint (inside the runtime); the returned guard
/// flushes traces, the sender stops the metrics endpoint.
async fn telemetry(
    args: &ServeArgs,
) -> Result<(crate::telemetry::Guard, tokio::sync::watch::Sender<bool>), String> {
    let guard = crate::telemetry::init(args.log_format, "info", args.otlp_endpoint.as_deref());
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    if let Some(addr) = args.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
        tracing::info!(addr = %listener.local_addr().map_err(|e| e.to_string())?, "serving metrics");
        tokio::spawn(crate::telemetry::metrics::serve(listener, async move {
            let _ = stopped.changed().await;
        }));
    }
    Ok((guard, stop))
}

/// Keeps the cache gauges current at each scrape.
fn watch_metrics(cache: Arc<ClusterCache>) {
    use crate::telemetry::metrics::{ClusterLabels, KindLabels, global};
    use std::sync::atomic::Ordering;
    global().on_scrape(Box::new(move |m| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        for t in cache.tables() {
            let labels = KindLabels {
                cluster: cache.name.clone(),
                kind: t.kind.clone(),
            };
            m.cached_objects
                .get_or_create(&labels)
                .set(t.read().objects.len() as i64);
            let seen = t.last_seen_ms.load(Ordering::Relaxed);
            if seen > 0 {
                m.watch_lag_seconds
                    .get_or_create(&labels)
                    .set(now.saturating_sub(seen) as f64 / 1000.0);
            }
        }
        let c = ClusterLabels {
            cluster: cache.name.clone(),
        };
        let st = &cache.stats;
        m.watch_restarts
            .get_or_create(&c)
            .set(st.watch_restarts.load(Ordering::Relaxed) as i64);
        m.watch_task_restarts
            .get_or_create(&c)
            .set(st.task_restarts.load(Ordering::Relaxed) as i64);
        m.kinds_out_of_sync
            .get_or_create(&c)
            .set(cache.out_of_sync().len() as i64);
        m.relists
            .get_or_create(&c)
            .set(st.relists.load(Ordering::Relaxed) as i64);
        m.skipped_objects
            .get_or_create(&c)
            .set(st.skipped.load(Ordering::Relaxed) as i64);
    }));
}

pub fn run(args: ServeArgs) -> ExitCode {
    if args.snapshot.is_empty() {
        return serve_clusters(args);
    }
    let mut catalog = match Catalog::kubernetes(&args.kubernetes_version) {
        Ok(c) => c,
        Err(e) => return usage_error(&format!("--kubernetes-version: {e}")),
    };
    let inputs: Vec<Input> = args.snapshot.iter().map(|s| Input::parse(s)).collect();
    let snap = match Snapshot::load_within(
        &inputs,
        &mut std::io::stdin().lock(),
        &args.limits.snapshot(),
    ) {
        Ok(s) => s,
        Err(e) => return print_errors(&e),
    };
    if let Err(e) = snap.extend_catalog(&mut catalog) {
        return print_errors(&e);
    }
    let n = snap.len();
    let mut stores = Stores::single(
        "snapshot",
        Arc::new(
            SnapshotState::new(snap, catalog)
                .keeping_prepared(crate::live::prepared::DEFAULT_ENTRIES),
        ),
    );
    stores.limits = args.limits.manifests(crate::manifest::Limits::REQUESTS);
    match security(&args, None) {
        Ok((tls, auth, audit)) => {
            stores.tls = tls;
            stores.auth = auth;
            stores.audit = audit;
        }
        Err(e) => return usage_error(&e),
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return usage_error(&format!("cannot start the runtime: {e}")),
    };
    let listen = args.listen;
    let result = rt.block_on(async move {
        let (_guard, stop_metrics) = telemetry(&args).await?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            if let Ok(addr) = rx.await {
                tracing::info!(%addr, objects = n, "serving a snapshot");
            }
        });
        let r = service::serve(listen, stores, async {}, shutdown_signal(), Some(tx))
            .await
            .map_err(|e| e.to_string());
        let _ = stop_metrics.send(true);
        tracing::info!("stopped");
        r
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// The history to keep, as asked (its file opened).
fn history_config(args: &ServeArgs) -> Result<Option<crate::history::HistoryConfig>, String> {
    if !args.history {
        return Ok(None);
    }
    let sink = match &args.history_file {
        Some(p) => Some((
            Arc::new(crate::history::sink::Sink::open(
                p,
                args.history_file_mib.saturating_mul(1 << 20),
            )?),
            p.clone(),
        )),
        None => None,
    };
    if args.fight_flips < 2 {
        return Err("--fight-flips must be at least 2".into());
    }
    Ok(Some(crate::history::HistoryConfig {
        max_entries: args.history_entries.max(1),
        max_bytes: args.history_mib.saturating_mul(1 << 20),
        sink,
        fights: crate::history::FightConfig {
            flips: args.fight_flips,
            window: args.fight_window.as_secs().max(1) as i64,
            ..crate::history::FightConfig::default()
        },
    }))
}

fn cache_config(args: &ServeArgs) -> CacheConfig {
    let groups = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|g| {
                if g == "core" {
                    String::new()
                } else {
                    g.clone()
                }
            })
            .collect()
    };
    let mut exclude_kinds = vec!["Event".to_string()];
    exclude_kinds.extend(args.exclude_kind.iter().cloned());
    CacheConfig {
        include_groups: groups(&args.include_group),
        exclude_groups: groups(&args.exclude_group),
        include_kinds: args.include_kind.clone(),
        exclude_kinds,
        namespace: args.watch_namespace.clone(),
        full_kinds: args.full_kind.clone(),
        ..CacheConfig::default()
    }
}

/// Watches the clusters and serves their caches; health turns SERVING once all have synced.
fn serve_clusters(args: ServeArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return usage_error(&format!("cannot start the runtime: {e}")),
    };
    let contexts: Vec<Option<String>> = if args.contexts.is_empty() {
        vec![None]
    } else {
        args.contexts.iter().cloned().map(Some).collect()
    };
    let mut config = cache_config(&args);
    config.history = match history_config(&args) {
        Ok(h) => h,
        Err(e) => return usage_error(&e),
    };
    let listen = args.listen;
    let kubeconfig = args.kubeconfig.clone();
    let result = rt.block_on(async move {
        let (_guard, stop_metrics) = telemetry(&args).await.map_err(|e| (EXIT_INVALID, e))?;
        let mut caches = Vec::new();
        let mut by_name: BTreeMap<String, Arc<dyn LiveState>> = BTreeMap::new();
        for ctx in &contexts {
            let opts = ClusterOptions {
                kubeconfig: kubeconfig.clone(),
                context: ctx.clone(),
            };
            let name = ctx.clone().unwrap_or_else(|| "default".into());
            let (api, _) = Api::connect(&opts)
                .await
                .map_err(|e| (EXIT_UNREACHABLE, e.to_string()))?;
            let cache = ClusterCache::start(&name, api, config.clone())
                .await
                .map_err(|e| (EXIT_UNREACHABLE, e.to_string()))?;
            tracing::info!(cluster = %name, source = %cache.describe(), "watching");
            watch_metrics(cache.clone());
            caches.push(cache.clone());
            by_name.insert(name, cache);
        }
        let default = by_name.keys().next().cloned().unwrap_or_default();
        let default_api = by_name.get(&default).and_then(|s| s.api());
        let (tls, auth, audit) = security(&args, default_api).map_err(|e| (EXIT_INVALID, e))?;
        let stores = Stores {
            by_name,
            default,
            allow_apply: args.allow_apply,
            auth,
            tls,
            audit,
            limits: args.limits.manifests(crate::manifest::Limits::REQUESTS),
        };
        let ready = async move {
            for c in &caches {
                c.wait_synced().await;
            }
            tracing::info!("initial sync complete");
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            if let Ok(addr) = rx.await {
                tracing::info!(%addr, "listening");
            }
        });
        let r = service::serve(listen, stores, ready, shutdown_signal(), Some(tx))
            .await
            .map_err(|e| (EXIT_INVALID, e.to_string()));
        let _ = stop_metrics.send(true);
        tracing::info!("stopped");
        r
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, e)) => {
            eprintln!("error: {e}");
            ExitCode::from(code)
        }
    }
}

/// Ctrl-C or SIGTERM: stop accepting, drain what is in flight.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down (draining in-flight requests)");
}
