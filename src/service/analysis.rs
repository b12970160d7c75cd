//! `fieldguard.v1.Analysis`: predictions, unary and streamed.

use super::deadline::RequestDeadline;
use super::proto::analysis_server::Analysis;
use super::proto::{self as pb, ForceMode};
use super::{Stores, convert, error};
use crate::check::{self, Force, Options, Report};
use crate::live::ObjectRef;
use crate::live::state::LiveState;
use crate::manifest::{self, Loaded, ManifestError};
use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};

pub struct AnalysisService {
    stores: Stores,
}

impl AnalysisService {
    pub fn new(stores: Stores) -> AnalysisService {
        AnalysisService { stores }
    }

    /// A prediction shows live objects' owners and values: the caller must be allowed to `get`
    /// every object predicted.
    async fn authorize(
        &self,
        caller: &super::auth::Caller,
        resp: pb::PredictResponse,
    ) -> Result<pb::PredictResponse, Status> {
        for c in &resp.clusters {
            let (_, store) = self.stores.get(&c.cluster)?;
            let refs: Vec<crate::live::ObjectRef> = c
                .objects
                .iter()
                .map(|o| super::object_ref_of(o.object.as_ref()))
                .collect();
            let denied = self.stores.unreadable(caller, &*store, refs).await;
            if !denied.is_empty() {
                return Err(super::forbidden(caller, &denied));
            }
        }
        Ok(resp)
    }
}

/// INVALID_ARGUMENT with one `BadRequest` violation per problem, keyed by the manifest's
/// index in the request (`manifests[2]`), as the API documents; the description carries the
/// manifest's name, line, document and field.
pub(super) fn bad_request(errors: &[ManifestError], what: &str, names: &[&str]) -> Status {
    let violations: Vec<(String, String)> = errors
        .iter()
        .map(|e| {
            let field = match names.iter().position(|n| **n == *e.file) {
                Some(i) => format!("manifests[{i}]"),
                None => "manifests".to_string(),
            };
            (field, e.to_string())
        })
        .collect();
    error(
        Code::InvalidArgument,
        "INVALID_MANIFEST",
        &format!(
            "{} problem(s) in the {what}; nothing was predicted",
            errors.len()
        ),
        &violations,
    )
}

/// The force policy a request asks for; an unknown mode, or a selective one without managers,
/// is refused (never read as "no force").
#[allow(clippy::result_large_err)]
pub(super) fn force_of(f: Option<&pb::ForcePolicy>) -> Result<Force, Status> {
    let Some(f) = f else { return Ok(Force::None) };
    let invalid = |m: String| {
        error(
            Code::InvalidArgument,
            "INVALID_FORCE_POLICY",
            &m,
            &[("force".into(), m.clone())],
        )
    };
    match ForceMode::try_from(f.mode) {
        Err(_) => Err(invalid(format!(
            "force.mode {} is not a ForceMode (UNSPECIFIED, ALL, SELECTIVE)",
            f.mode
        ))),
        Ok(ForceMode::Unspecified) if !f.against.is_empty() => Err(invalid(
            "force.against is given but force.mode is UNSPECIFIED: set mode SELECTIVE".into(),
        )),
        Ok(ForceMode::Unspecified) => Ok(Force::None),
        Ok(ForceMode::All) => Ok(Force::All),
        Ok(ForceMode::Selective) if f.against.is_empty() => Err(invalid(
            "force.mode SELECTIVE needs force.against: the managers fields may be taken from"
                .into(),
        )),
        Ok(ForceMode::Selective) => Force::against(&f.against).map_err(|e| {
            error(
                Code::InvalidArgument,
                "INVALID_FORCE_POLICY",
                &e,
                &[("force.against".into(), e.clone())],
            )
        }),
    }
}

/// Everything a prediction needs, validated.
struct Job {
    clusters: Vec<String>,
    field_manager: String,
    force: Force,
    namespace: String,
    fresh: bool,
    allow_empty: bool,
    /// The operation Helm hooks are predicted for (`None`: inferred).
    operation: Option<check::hooks::Operation>,
    manifests: Vec<pb::Manifest>,
    /// Whose turn the job's CPU-bound work waits for (`fair`).
    turn: Arc<str>,
}

#[allow(clippy::result_large_err)]
fn job(req: pb::PredictRequest) -> Result<Job, Status> {
    if req.field_manager.is_empty() {
        return Err(error(
            Code::InvalidArgument,
            "MISSING_FIELD_MANAGER",
            "field_manager is required",
            &[("field_manager".into(), "must not be empty".into())],
        ));
    }
    field_manager_accepted(&req.field_manager)?;
    let force = force_of(req.force.as_ref())?;
    let operation = match req.operation.as_str() {
        "" => None,
        s => Some(check::hooks::Operation::parse(s).map_err(|m| {
            error(
                Code::InvalidArgument,
                "BAD_OPERATION",
                &m,
                &[("operation".into(), m.clone())],
            )
        })?),
    };
    let clusters = if req.clusters.is_empty() {
        vec![req.cluster]
    } else {
        req.clusters
    };
    Ok(Job {
        clusters,
        field_manager: req.field_manager,
        force,
        namespace: if req.default_namespace.is_empty() {
            "default".into()
        } else {
            req.default_namespace
        },
        fresh: req.fresh,
        allow_empty: req.allow_empty,
        operation,
        manifests: req.manifests,
        turn: Arc::from(""),
    })
}

/// INVALID_ARGUMENT for a field manager kube-apiserver refuses every write of, with the
/// server's own 422 message.
#[allow(clippy::result_large_err)]
pub(super) fn field_manager_accepted(manager: &str) -> Result<(), Status> {
    match crate::validation::meta::field_manager_refusal(manager) {
        None => Ok(()),
        Some(m) => {
            let m = format!("kube-apiserver refuses every write by this field manager: {m}");
            Err(error(
                Code::InvalidArgument,
                "INVALID_FIELD_MANAGER",
                &m,
                &[("field_manager".into(), m.clone())],
            ))
        }
    }
}

/// The longest manifest name a request may give (a path).
pub const MAX_MANIFEST_NAME: usize = 4096;

/// The name a manifest is reported under.
pub(super) fn manifest_name(m: &pb::Manifest) -> &str {
    if m.name.is_empty() {
        "<manifest>"
    } else {
        &m.name
    }
}

/// Reads a request's manifests within the service's limits, until `deadline`: the objects, or
/// INVALID_ARGUMENT naming every problem (DEADLINE_EXCEEDED when the deadline stopped it).
#[allow(clippy::result_large_err)]
pub(super) fn read_manifests(
    manifests: &[pb::Manifest],
    limits: &manifest::Limits,
    deadline: &crate::deadline::Deadline,
    allow_empty: bool,
) -> Result<Vec<manifest::Document>, Status> {
    // A name is echoed in every problem of its manifest: no control characters, bounded.
    let bad_names: Vec<(String, String)> = manifests
        .iter()
        .enumerate()
        .filter(|(_, m)| m.name.len() > MAX_MANIFEST_NAME || m.name.chars().any(char::is_control))
        .map(|(i, m)| {
            (
                format!("manifests[{i}].name"),
                format!(
                    "{}: a manifest's name is at most {MAX_MANIFEST_NAME} bytes without control characters",
                    crate::value::gofmt::quote_bounded(&m.name, 64)
                ),
            )
        })
        .collect();
    if !bad_names.is_empty() {
        return Err(error(
            Code::InvalidArgument,
            "INVALID_MANIFEST_NAME",
            &format!(
                "{} manifest name(s) refused; nothing was predicted",
                bad_names.len()
            ),
            &bad_names,
        ));
    }
    let mut loaded = Loaded::new(limits.clone()).until(deadline.clone());
    for m in manifests {
        manifest::parse_into(&Arc::from(manifest_name(m)), &m.content, &mut loaded);
    }
    if deadline.expired() {
        return Err(Status::deadline_exceeded(
            "the request's deadline passed while its manifests were read",
        ));
    }
    let names: Vec<&str> = manifests.iter().map(manifest_name).collect();
    if !loaded.errors.is_empty() {
        return Err(bad_request(&loaded.errors, "manifests", &names));
    }
    if loaded.documents.is_empty() && !allow_empty {
        return Err(error(
            Code::InvalidArgument,
            "NO_OBJECTS",
            "the manifests hold no object (empty, only comments, or an empty List); \
             set allow_empty to accept that",
            &[("manifests".into(), "no object".into())],
        ));
    }
    Ok(loaded.documents)
}

/// Parses, resolves and predicts, for one cluster, until `deadline`: parsing, resolving and
/// the engine run on the blocking pool, live state is read on the runtime.
#[allow(clippy::result_large_err)]
#[tracing::instrument(name = "predict_on_cluster", skip_all, fields(cluster = %store.describe(), manifests = job.manifests.len()))]
async fn predict_on(
    job: Arc<Job>,
    store: Arc<dyn LiveState>,
    limits: manifest::Limits,
    deadline: crate::deadline::Deadline,
) -> Result<Report, Status> {
    let r = predict_until(job, store, limits, &deadline).await;
    match r {
        Err(_) if deadline.expired() => Err(Status::deadline_exceeded(
            "the request's deadline passed; its work was stopped",
        )),
        r => r,
    }
}

/// Requests whose manifests are at most this large are parsed, resolved and predicted on the
/// runtime's worker (tens of microseconds for a few objects: a hand-off to the blocking pool
/// and back would cost more than the work); larger ones go to the blocking pool.
const INLINE_BYTES: usize = 16 * 1024;

/// Runs the work inline when it is small, else on the blocking pool (inside the caller's span),
/// at most [`crate::cores`]` × 2` such jobs at once, the others waiting their turn, callers
/// served in turn (`fair`): the runtime's workers stay free for health checks and small
/// requests, and one caller's heavy requests do not hold everyone else's back.
async fn offload<T: Send + 'static>(
    small: bool,
    turn: &str,
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    if small {
        return f();
    }
    static CPU: std::sync::OnceLock<Arc<super::fair::Gate>> = std::sync::OnceLock::new();
    let permit = CPU
        .get_or_init(|| super::fair::Gate::new(crate::cores::cores() * 2))
        .enter(turn)
        .await;
    let span = tracing::Span::current();
    // The permit goes with the work: a request given up on still holds its place until its
    // work has stopped.
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        span.in_scope(f)
    })
    .await
    .map_err(|e| Status::internal(format!("prediction failed: {e}")))?
}

#[allow(clippy::result_large_err)]
async fn predict_until(
    job: Arc<Job>,
    store: Arc<dyn LiveState>,
    limits: manifest::Limits,
    deadline: &crate::deadline::Deadline,
) -> Result<Report, Status> {
    let small = job.manifests.iter().map(|m| m.content.len()).sum::<usize>() <= INLINE_BYTES;
    let (j, d) = (job.clone(), deadline.clone());
    let documents = offload(small, &job.turn, move || {
        read_manifests(&j.manifests, &limits, &d, j.allow_empty)
    })
    .await?;
    let versions: BTreeSet<String> = documents
        .iter()
        .map(|d| d.api_version().to_string())
        .collect();
    let catalog = store.catalog(&versions).await.map_err(super::live_error)?;
    let (j, d) = (job.clone(), deadline.clone());
    let targets = offload(small, &job.turn, move || {
        let names: Vec<&str> = j.manifests.iter().map(manifest_name).collect();
        let mut catalog = catalog;
        check::resolve_until(documents, &mut catalog, &j.namespace, &d)
            .map_err(|e| bad_request(&e, "manifests", &names))
    })
    .await?;
    let refs: Vec<(ObjectRef, String)> = targets
        .iter()
        .map(|t| (t.object_ref.clone(), t.info.gvk.api_version()))
        .collect();
    let live = crate::live::state::fetch(&*store, &refs, job.fresh)
        .await
        .map_err(super::live_error)?;
    let d = deadline.clone();
    // The engine never runs inline, however small the request: a custom resource's CEL rules
    // can cost far more than the manifest's size says.
    let turn = job.turn.clone();
    offload(false, &turn, move || {
        let opts = Options {
            field_manager: job.field_manager.clone(),
            force: job.force.clone(),
            namespace: job.namespace.clone(),
            now: time::OffsetDateTime::now_utc().unix_timestamp(),
        };
        let report = check::run_until(&targets, &live, &opts, job.operation, &mut |_, _| {}, &d)
            .map_err(|_| Status::deadline_exceeded("the request's deadline passed"))?;
        let invalid = check::invalid_objects(&report, &targets);
        if !invalid.is_empty() {
            let names: Vec<&str> = job.manifests.iter().map(manifest_name).collect();
            return Err(bad_request(&invalid, "manifests", &names));
        }
        Ok(report)
    })
    .await
}

async fn predict(
    stores: &Stores,
    job: Job,
    deadline: crate::deadline::Deadline,
) -> Result<pb::PredictResponse, Status> {
    let job = Arc::new(job);
    let mut out = Vec::new();
    for (name, store) in clusters_of(stores, &job.clusters)? {
        let report =
            predict_on(job.clone(), store, stores.limits.clone(), deadline.clone()).await?;
        out.push(convert::cluster_prediction(&name, &report));
    }
    Ok(pb::PredictResponse { clusters: out })
}

/// Whose turn a request's work waits for: the authenticated user, or an unauthenticated
/// caller's address (every anonymous caller would otherwise share one turn).
fn turn_of<T>(caller: &super::auth::Caller, req: &Request<T>) -> Arc<str> {
    if caller.may_write() {
        return Arc::from(format!("user:{}", caller.user));
    }
    match req.remote_addr() {
        Some(a) => Arc::from(format!("peer:{}", a.ip())),
        None => Arc::from(format!("user:{}", caller.user)),
    }
}

/// A cluster by its name.
type Named = (String, Arc<dyn LiveState>);

/// The clusters a request names, each once, all known — checked before any is predicted:
/// a request cannot name more clusters than the service has, nor one twice.
#[allow(clippy::result_large_err)]
fn clusters_of(stores: &Stores, names: &[String]) -> Result<Vec<Named>, Status> {
    let served = stores.by_name.len().max(1);
    if names.len() > served {
        let m = format!(
            "clusters names {} clusters; this service has {served}",
            names.len()
        );
        return Err(error(
            Code::InvalidArgument,
            "TOO_MANY_CLUSTERS",
            &m,
            &[("clusters".into(), m.clone())],
        ));
    }
    let mut out: Vec<Named> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let (name, store) = stores.get(name)?;
        if let Some(first) = out.iter().position(|(n, _)| *n == name) {
            let m =
                format!("clusters[{i}] names cluster {name:?} again (as clusters[{first}] did)");
            return Err(error(
                Code::InvalidArgument,
                "DUPLICATE_CLUSTER",
                &m,
                &[(format!("clusters[{i}]"), m.clone())],
            ));
        }
        out.push((name, store));
    }
    Ok(out)
}

/// Records a prediction's latency, conflicts and status code.
fn observe(method: &str, start: std::time::Instant, r: &Result<pb::PredictResponse, Status>) {
    use crate::telemetry::metrics::{RpcCodeLabels, RpcLabels, global};
    let m = global();
    let code = match r {
        Ok(resp) => {
            m.prediction_seconds
                .get_or_create(&RpcLabels {
                    method: method.into(),
                })
                .observe(start.elapsed().as_secs_f64());
            let conflicts: u64 = resp
                .clusters
                .iter()
                .flat_map(|c| &c.objects)
                .map(|o| o.conflicts.len() as u64)
                .sum();
            m.conflicts_found.inc_by(conflicts);
            Code::Ok
        }
        Err(s) => s.code(),
    };
    m.requests
        .get_or_create(&RpcCodeLabels {
            method: method.into(),
            code: format!("{code:?}"),
        })
        .inc();
    tracing::debug!(method, code = ?code, elapsed_ms = start.elapsed().as_millis() as u64, "prediction");
}

type PredictionStream = Pin<Box<dyn Stream<Item = Result<pb::ObjectPrediction, Status>> + Send>>;

#[tonic::async_trait]
impl Analysis for AnalysisService {
    #[tracing::instrument(name = "PredictConflicts", skip_all)]
    async fn predict_conflicts(
        &self,
        req: Request<pb::PredictRequest>,
    ) -> Result<Response<pb::PredictResponse>, Status> {
        let start = std::time::Instant::now();
        let deadline = RequestDeadline::of(&req);
        let work = deadline.work();
        let caller = self.stores.caller(&req).await?;
        let turn = turn_of(&caller, &req);
        let r = deadline
            .run(async {
                let mut job = job(req.into_inner())?;
                job.turn = turn;
                let resp = predict(&self.stores, job, work).await?;
                self.authorize(&caller, resp).await
            })
            .await;
        observe("PredictConflicts", start, &r);
        Ok(Response::new(r?))
    }

    type PredictConflictsStreamStream = PredictionStream;

    async fn predict_conflicts_stream(
        &self,
        req: Request<Streaming<pb::PredictStreamRequest>>,
    ) -> Result<Response<Self::PredictConflictsStreamStream>, Status> {
        let deadline = RequestDeadline::of(&req);
        let work = deadline.work();
        let caller = self.stores.caller(&req).await?;
        let turn = turn_of(&caller, &req);
        let limit = self.stores.limits.total_bytes;
        let mut input = req.into_inner();
        let header = match input.next().await {
            Some(Ok(pb::PredictStreamRequest {
                part: Some(pb::predict_stream_request::Part::Header(h)),
            })) => h,
            Some(Err(e)) => return Err(e),
            _ => {
                return Err(error(
                    Code::InvalidArgument,
                    "MISSING_HEADER",
                    "the first message must be the header (a PredictRequest without manifests)",
                    &[("part.header".into(), "required first".into())],
                ));
            }
        };
        let mut job = job(header)?;
        job.turn = turn;
        let mut received = 0u64;
        while let Some(msg) = input.next().await {
            match msg?.part {
                Some(pb::predict_stream_request::Part::Manifest(m)) => {
                    received += m.content.len() as u64;
                    if received > limit {
                        return Err(error(
                            Code::ResourceExhausted,
                            "INPUT_TOO_LARGE",
                            &format!(
                                "the streamed manifests are {}",
                                manifest::limits::over(manifest::limits::Limit::Total, limit)
                            ),
                            &[],
                        ));
                    }
                    job.manifests.push(m)
                }
                _ => {
                    return Err(error(
                        Code::InvalidArgument,
                        "UNEXPECTED_HEADER",
                        "only the first message may be a header",
                        &[("part".into(), "expected a manifest".into())],
                    ));
                }
            }
        }
        let start = std::time::Instant::now();
        let resp = deadline
            .run(async {
                let r = predict(&self.stores, job, work).await?;
                self.authorize(&caller, r).await
            })
            .await;
        observe("PredictConflictsStream", start, &resp);
        let resp = resp?;
        let items: Vec<Result<pb::ObjectPrediction, Status>> = resp
            .clusters
            .into_iter()
            .flat_map(|c| c.objects.into_iter().map(Ok))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(items))))
    }
}
