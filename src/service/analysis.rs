//! `fieldguard.v1.Analysis`: predictions, unary and streamed.

use super::proto::analysis_server::Analysis;
use super::proto::{self as pb, ForceMode};
use super::{Stores, convert, error};
use crate::check::{self, Force, Options, Report};
use crate::live::{Fetched, ObjectRef};
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

pub(super) fn bad_request(errors: &[ManifestError], what: &str) -> Status {
    let violations: Vec<(String, String)> = errors
        .iter()
        .map(|e| (format!("manifests[{}]", e.file), e.to_string()))
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

#[allow(clippy::result_large_err)]
pub(super) fn force_of(f: Option<&pb::ForcePolicy>) -> Result<Force, Status> {
    let Some(f) = f else { return Ok(Force::None) };
    match ForceMode::try_from(f.mode).unwrap_or(ForceMode::Unspecified) {
        ForceMode::Unspecified => Ok(Force::None),
        ForceMode::All => Ok(Force::All),
        ForceMode::Selective => Force::against(&f.against).map_err(|e| {
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
    manifests: Vec<pb::Manifest>,
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
    let force = force_of(req.force.as_ref())?;
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
        manifests: req.manifests,
    })
}

/// Parses, resolves and predicts, for one cluster (blocking work).
#[allow(clippy::result_large_err)]
#[tracing::instrument(name = "predict_on_cluster", skip_all, fields(cluster = %store.describe(), manifests = job.manifests.len()))]
fn predict_on(job: &Job, store: &dyn super::Store) -> Result<Report, Status> {
    let mut loaded: Loaded = manifest::load(&[], &mut std::io::empty());
    for m in &job.manifests {
        let name: Arc<str> = Arc::from(if m.name.is_empty() {
            "<manifest>"
        } else {
            &m.name
        });
        manifest::parse_into(&name, &m.content, &mut loaded);
    }
    if !loaded.errors.is_empty() {
        return Err(bad_request(&loaded.errors, "manifests"));
    }
    let versions: BTreeSet<String> = loaded
        .documents
        .iter()
        .map(|d| d.api_version().to_string())
        .collect();
    let mut catalog = store
        .catalog(&versions)
        .map_err(|e| error(Code::Unavailable, "CLUSTER_UNAVAILABLE", &e, &[]))?;
    let targets = check::resolve(loaded.documents, &mut catalog, &job.namespace)
        .map_err(|e| bad_request(&e, "manifests"))?;
    let mut live = Fetched {
        source: store.describe(),
        ..Fetched::default()
    };
    if job.fresh {
        let refs: Vec<(ObjectRef, String)> = targets
            .iter()
            .map(|t| (t.object_ref.clone(), t.info.gvk.api_version()))
            .collect();
        let got = store
            .fetch_fresh(&refs)
            .map_err(|e| error(Code::Unavailable, "CLUSTER_UNAVAILABLE", &e, &[]))?;
        for ((r, _), v) in refs.into_iter().zip(got) {
            if let Some(v) = v {
                live.objects.insert(r, (*v).clone());
            }
        }
    } else {
        for t in &targets {
            if let Some(v) = store.get(&t.object_ref) {
                live.objects.insert(t.object_ref.clone(), (*v).clone());
            }
        }
    }
    let opts = Options {
        field_manager: job.field_manager.clone(),
        force: job.force.clone(),
        namespace: job.namespace.clone(),
        now: time::OffsetDateTime::now_utc().unix_timestamp(),
    };
    let report = check::run(&targets, &live, &opts, &mut |_, _| {});
    let invalid = check::invalid_objects(&report, &targets);
    if !invalid.is_empty() {
        return Err(bad_request(&invalid, "manifests"));
    }
    Ok(report)
}

async fn predict(stores: &Stores, job: Job) -> Result<pb::PredictResponse, Status> {
    let job = Arc::new(job);
    let mut out = Vec::new();
    for name in &job.clusters {
        let (name, store) = stores.get(name)?;
        let j = job.clone();
        let report = tokio::task::spawn_blocking(move || predict_on(&j, &*store))
            .await
            .map_err(|e| Status::internal(format!("prediction failed: {e}")))??;
        out.push(convert::cluster_prediction(&name, &report));
    }
    Ok(pb::PredictResponse { clusters: out })
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
        let caller = self.stores.caller(&req).await?;
        let r = match job(req.into_inner()) {
            Ok(job) => predict(&self.stores, job).await,
            Err(e) => Err(e),
        };
        let r = match r {
            Ok(resp) => self.authorize(&caller, resp).await,
            Err(e) => Err(e),
        };
        observe("PredictConflicts", start, &r);
        Ok(Response::new(r?))
    }

    type PredictConflictsStreamStream = PredictionStream;

    async fn predict_conflicts_stream(
        &self,
        req: Request<Streaming<pb::PredictStreamRequest>>,
    ) -> Result<Response<Self::PredictConflictsStreamStream>, Status> {
        let caller = self.stores.caller(&req).await?;
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
        while let Some(msg) = input.next().await {
            match msg?.part {
                Some(pb::predict_stream_request::Part::Manifest(m)) => job.manifests.push(m),
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
        let resp = match predict(&self.stores, job).await {
            Ok(r) => self.authorize(&caller, r).await,
            Err(e) => Err(e),
        };
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
