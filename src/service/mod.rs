//! The gRPC service (`proto/fieldguard/v1/fieldguard.proto`): predictions and ownership
//! queries over one or more live states ([`LiveState`]: a snapshot, or clusters' watch-fed
//! caches), with standard health (`grpc.health.v1`: serving once every store has synced),
//! server reflection (v1 and v1alpha, `google/rpc/error_details.proto` included so clients
//! such as grpcurl can decode them) and rich error details (`google.rpc.BadRequest`,
//! `ErrorInfo`).
//!
//! Work that computes (parsing, predicting, walking field sets) runs on the blocking pool, so
//! a slow request never stalls the others (a prediction of at most 16 KiB of manifests, tens of
//! microseconds, runs where it is: the hand-off would cost more); a request's deadline (`grpc-timeout`) is answered
//! with DEADLINE_EXCEEDED and stops the work it started ([`deadline`]). Requests are bounded
//! in size (the message, and the manifests in it: [`Stores::limits`]).

pub mod analysis;
pub mod auth;
pub mod codec;
pub mod convert;
pub mod deadline;
pub mod fair;
pub mod history;
pub mod ownership;
pub mod releases;

/// The generated API.
pub mod proto {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("fieldguard.v1");
    /// The encoded descriptor set (for reflection).
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("fieldguard_descriptor");
}

use crate::live::state::{LiveError, LiveState};

use crate::live::ObjectRef;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The stores a service answers from, by cluster name.
#[derive(Clone)]
pub struct Stores {
    pub by_name: BTreeMap<String, Arc<dyn LiveState>>,
    /// Used when a request names no cluster.
    pub default: String,
    /// `Releases.Apply` is served (off by default).
    pub allow_apply: bool,
    /// Who may call, and what they may read.
    pub auth: Arc<auth::Auth>,
    /// TLS (with client certificates when a client CA is set); None: plaintext.
    pub tls: Option<tonic::transport::ServerTlsConfig>,
    /// Where every apply is recorded.
    pub audit: Arc<releases::AuditLog>,
    /// What a request's manifests may hold (the message size follows the total).
    pub limits: crate::manifest::Limits,
}

impl Stores {
    /// Authenticates a request's caller.
    pub async fn caller<T>(&self, req: &tonic::Request<T>) -> Result<auth::Caller, Status> {
        self.auth.authenticate(req).await
    }

    /// May `caller` read object `r` of `store`? The resource asked about comes from the
    /// cluster's discovery; a kind it does not serve cannot be authorized, so it is not
    /// readable (never a guessed plural).
    pub async fn may_read(
        &self,
        caller: &auth::Caller,
        store: &dyn LiveState,
        r: &ObjectRef,
    ) -> bool {
        if self.auth.reads_everything(caller) {
            return true;
        }
        let Some(resource) = store.resource_of(r) else {
            tracing::warn!(object = %r, "no served resource for this kind: not readable");
            return false;
        };
        self.auth.can_get(caller, r, &resource).await
    }

    /// The objects among `refs` the caller may not read (empty: all readable).
    pub async fn unreadable(
        &self,
        caller: &auth::Caller,
        store: &dyn LiveState,
        refs: impl IntoIterator<Item = ObjectRef>,
    ) -> Vec<ObjectRef> {
        let mut out = Vec::new();
        for r in refs {
            if !self.may_read(caller, store, &r).await {
                out.push(r);
            }
        }
        out
    }
}

/// The object a response names.
pub fn object_ref_of(o: Option<&proto::ObjectRef>) -> ObjectRef {
    let o = o.cloned().unwrap_or_default();
    ObjectRef {
        group: o
            .api_version
            .rsplit_once('/')
            .map_or("", |(g, _)| g)
            .to_string(),
        kind: o.kind,
        namespace: o.namespace,
        name: o.name,
    }
}

/// PERMISSION_DENIED naming the objects a caller may not read.
pub fn forbidden(caller: &auth::Caller, objects: &[ObjectRef]) -> Status {
    let names: Vec<String> = objects.iter().map(|r| r.to_string()).collect();
    error(
        Code::PermissionDenied,
        "FORBIDDEN",
        &format!("{} may not get {}", caller.user, names.join(", ")),
        &[],
    )
}

impl Stores {
    /// One store under one name (the default).
    pub fn single(name: &str, store: Arc<dyn LiveState>) -> Stores {
        Stores {
            by_name: [(name.to_string(), store)].into(),
            default: name.to_string(),
            allow_apply: false,
            auth: Arc::new(auth::Auth::open()),
            tls: None,
            audit: Arc::new(releases::AuditLog::default()),
            limits: crate::manifest::Limits::REQUESTS,
        }
    }

    /// The store a request names (`""`: the default).
    #[allow(clippy::result_large_err)]
    pub fn get(&self, name: &str) -> Result<(String, Arc<dyn LiveState>), Status> {
        let name = if name.is_empty() { &self.default } else { name };
        match self.by_name.get(name) {
            Some(s) => Ok((name.to_string(), s.clone())),
            None => Err(error(
                Code::NotFound,
                "UNKNOWN_CLUSTER",
                &format!(
                    "no cluster {}; this service knows {}",
                    crate::value::gofmt::quote_bounded(name, 128),
                    self.by_name.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
                &[],
            )),
        }
    }
}

/// The most bytes of field violations one status carries. The details travel in a trailer
/// (`grpc-status-details-bin`, base64: 4/3 of this), which has to fit, beside the message, the
/// header-list limit of the clients' HTTP/2 stacks (hyper's, tonic's client: 16 KiB).
pub const DETAILS_BUDGET: usize = 8 * 1024;
/// The longest violation description or message kept whole (longer ones end in `…`).
pub const DESCRIPTION_BYTES: usize = 1024;

/// A status with `ErrorInfo` (domain `fieldguard.dev`) and, when there are located problems,
/// a `BadRequest` with one field violation each — as many as fit [`DETAILS_BUDGET`]; the
/// rest are counted in a last violation, and ErrorInfo's metadata says `problems` (all of
/// them) and `listed`.
pub fn error(code: Code, reason: &str, message: &str, violations: &[(String, String)]) -> Status {
    let mut d = ErrorDetails::new();
    let mut used = 0usize;
    let mut listed = 0usize;
    // Room kept for the summary violation.
    let budget = DETAILS_BUDGET - 256;
    for (field, description) in violations {
        let field = clipped(field, 256);
        let description = clipped(description, DESCRIPTION_BYTES);
        // A violation's encoding: two length-prefixed strings in a length-prefixed message.
        let cost = field.len() + description.len() + 12;
        if used + cost > budget {
            break;
        }
        used += cost;
        listed += 1;
        d.add_bad_request_violation(field, description);
    }
    let mut info = std::collections::HashMap::new();
    if !violations.is_empty() {
        info.insert("problems".to_string(), violations.len().to_string());
        info.insert("listed".to_string(), listed.to_string());
    }
    if listed < violations.len() {
        d.add_bad_request_violation(
            "",
            format!(
                "{} more problem(s) not listed here (an error's details are limited to {} KiB); \
                 `fieldguard check` on the same files lists every one",
                violations.len() - listed,
                DETAILS_BUDGET / 1024
            ),
        );
    }
    d.set_error_info(reason, "fieldguard.dev", info);
    Status::with_error_details(code, clipped(message, DESCRIPTION_BYTES), d)
}

/// `s`, cut at a character boundary to at most `max` bytes (then ending in `…`).
fn clipped(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut at = max - '…'.len_utf8();
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    format!("{}…", &s[..at])
}

/// UNAVAILABLE for objects whose live state cannot be read now (`(object, why)`): the
/// prediction is not made rather than guessed. ErrorInfo `LIVE_STATE_UNAVAILABLE`, its
/// metadata `objects` the objects, one per line.
pub fn live_state_unavailable(objects: &[(String, String)]) -> Status {
    let mut d = ErrorDetails::new();
    let names: Vec<&str> = objects.iter().map(|(o, _)| o.as_str()).collect();
    d.set_error_info(
        "LIVE_STATE_UNAVAILABLE",
        "fieldguard.dev",
        std::collections::HashMap::from([("objects".to_string(), names.join("\n"))]),
    );
    let why: Vec<&str> = objects.iter().map(|(_, w)| w.as_str()).collect();
    Status::with_error_details(
        Code::Unavailable,
        format!(
            "live state unavailable, nothing predicted: {}",
            why.join("; ")
        ),
        d,
    )
}

/// The status for live state that could not be had: UNAVAILABLE when the cluster did not
/// answer (ErrorInfo `CLUSTER_UNAVAILABLE`, with the apiserver's code and reason when it
/// refused) or objects could not be read (`LIVE_STATE_UNAVAILABLE`); an unknown kind is a
/// FAILED_PRECONDITION.
pub fn live_error(e: LiveError) -> Status {
    match e {
        LiveError::Unavailable(objects) => {
            let objects: Vec<(String, String)> = objects
                .into_iter()
                .map(|(r, why)| (r.to_string(), format!("{r}: {why}")))
                .collect();
            live_state_unavailable(&objects)
        }
        LiveError::Cluster(c) => {
            let mut d = ErrorDetails::new();
            let mut meta = std::collections::HashMap::new();
            if let Some(code) = c.code {
                meta.insert("code".to_string(), code.to_string());
            }
            if let Some(reason) = &c.reason {
                meta.insert("reason".to_string(), reason.clone());
            }
            d.set_error_info("CLUSTER_UNAVAILABLE", "fieldguard.dev", meta);
            Status::with_error_details(Code::Unavailable, c.message, d)
        }
        e @ LiveError::UnknownKind(_) => error(
            Code::FailedPrecondition,
            "UNKNOWN_KIND",
            &e.to_string(),
            &[],
        ),
        e @ (LiveError::Invalid(_) | LiveError::Options(_) | LiveError::Internal(_)) => {
            error(Code::Internal, "LIVE_STATE_INVALID", &e.to_string(), &[])
        }
    }
}

/// How often readiness is checked against the stores.
const READINESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs the service on `addr` until `shutdown` resolves (then drains in-flight requests).
/// `ready` resolves when every store has completed its initial sync: health turns SERVING.
pub async fn serve(
    addr: SocketAddr,
    stores: Stores,
    ready: impl std::future::Future<Output = ()> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    if let Some(tx) = bound {
        let _ = tx.send(listener.local_addr()?);
    }
    serve_on(listener, stores, ready, shutdown).await
}

/// [`serve`] on a bound listener.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    stores: Stores,
    ready: impl std::future::Future<Output = ()> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use proto::analysis_server::AnalysisServer;
    use proto::ownership_server::OwnershipServer;
    use proto::releases_server::ReleasesServer;
    use tonic::service::interceptor::InterceptedService;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_not_serving::<AnalysisServer<analysis::AnalysisService>>()
        .await;
    reporter
        .set_not_serving::<OwnershipServer<ownership::OwnershipService>>()
        .await;
    reporter
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    // Liveness (the process answers) is separate from readiness (the initial sync is done), so
    // a long first sync never gets the pod restarted.
    reporter
        .set_service_status("liveness", tonic_health::ServingStatus::Serving)
        .await;
    let readiness_stores = stores.clone();
    tokio::spawn(async move {
        ready.await;
        reporter
            .set_serving::<AnalysisServer<analysis::AnalysisService>>()
            .await;
        reporter
            .set_serving::<OwnershipServer<ownership::OwnershipService>>()
            .await;
        reporter
            .set_service_status("", tonic_health::ServingStatus::Serving)
            .await;
        tracing::info!("ready (health SERVING)");
        // Readiness follows the stores from now on: a kind out of sync (a failing or silent
        // watch being restarted) makes the service NOT_SERVING until it is back.
        let mut serving = true;
        loop {
            tokio::time::sleep(READINESS_EVERY).await;
            let behind: Vec<String> = readiness_stores
                .by_name
                .values()
                .filter_map(|s| s.in_sync().err())
                .collect();
            if behind.is_empty() != serving {
                serving = behind.is_empty();
                let status = if serving {
                    tracing::info!("in sync again (health SERVING)");
                    tonic_health::ServingStatus::Serving
                } else {
                    tracing::warn!(reasons = %behind.join("; "), "out of sync (health NOT_SERVING)");
                    tonic_health::ServingStatus::NotServing
                };
                for svc in [
                    "",
                    <AnalysisServer<analysis::AnalysisService> as tonic::server::NamedService>::NAME,
                    <OwnershipServer<ownership::OwnershipService> as tonic::server::NamedService>::NAME,
                ] {
                    reporter.set_service_status(svc, status).await;
                }
            }
        }
    });
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    // Nagle's algorithm off: a response written in two parts must not wait for the client's
    // delayed ACK of the first (40 ms a request on Linux).
    // A request's message holds its manifests and a little more.
    let max_message = usize::try_from(stores.limits.total_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(64 * 1024);
    let incoming = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        |s| {
            if let Ok(s) = &s {
                let _ = s.set_nodelay(true);
            }
            s
        },
    );
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = stores.tls.clone() {
        builder = builder.tls_config(tls)?;
    }
    builder
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(InterceptedService::new(
            AnalysisServer::new(analysis::AnalysisService::new(stores.clone()))
                .max_decoding_message_size(max_message),
            deadline::arrived,
        ))
        .add_service(InterceptedService::new(
            OwnershipServer::new(ownership::OwnershipService::new(stores.clone())),
            deadline::arrived,
        ))
        .add_service(InterceptedService::new(
            ReleasesServer::new(releases::ReleasesService::new(stores))
                .max_decoding_message_size(max_message),
            deadline::arrived,
        ))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::StatusExt;

    #[test]
    fn many_violations_fit_the_trailer_and_are_counted() {
        let violations: Vec<(String, String)> = (0..5000)
            .map(|i| {
                (
                    format!("manifests[{i}]"),
                    format!("doc {i}: {}", "x".repeat(200)),
                )
            })
            .collect();
        let s = error(
            Code::InvalidArgument,
            "INVALID_MANIFEST",
            "5000 problems",
            &violations,
        );
        let d = s.get_error_details();
        let br = d.bad_request().unwrap();
        let listed = br.field_violations.len() - 1;
        assert!(listed > 10 && listed < 100, "{listed}");
        let last = br.field_violations.last().unwrap();
        assert!(
            last.description
                .starts_with(&format!("{} more problem(s) not listed", 5000 - listed)),
            "{}",
            last.description
        );
        let info = d.error_info().unwrap();
        assert_eq!(info.metadata["problems"], "5000");
        assert_eq!(info.metadata["listed"], listed.to_string());
        assert!(
            s.details().len() <= DETAILS_BUDGET + 512,
            "{}",
            s.details().len()
        );
    }

    #[test]
    fn few_violations_are_all_listed_and_long_ones_clipped() {
        let long = "é".repeat(2000);
        let s = error(
            Code::InvalidArgument,
            "R",
            &long,
            &[("a".into(), "one".into()), ("b".into(), long.clone())],
        );
        let d = s.get_error_details();
        let br = d.bad_request().unwrap();
        assert_eq!(br.field_violations.len(), 2);
        assert_eq!(br.field_violations[0].description, "one");
        let clipped = &br.field_violations[1].description;
        assert!(clipped.len() <= DESCRIPTION_BYTES && clipped.ends_with('…'));
        assert!(s.message().len() <= DESCRIPTION_BYTES);
        assert_eq!(d.error_info().unwrap().metadata["listed"], "2");
    }
}
