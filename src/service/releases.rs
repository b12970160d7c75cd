//! `fieldguard.v1.Releases`: applying a release through the service (off unless the service
//! runs with `--allow-apply`). The run is [`crate::apply::run`]; progress lines stream back as
//! they happen, the result last.

use super::proto::releases_server::Releases;
use super::proto::{self as pb, apply_event::Event};
use super::{Stores, convert, error};
use crate::apply::release::ServerSide;
use crate::apply::run::{self, Outcome, Request as RunRequest, RunError};
use crate::apply::uninstall::{self, UninstallRequest};
use std::pin::Pin;
use std::time::Duration;

/// Progress lines queued for a caller, at most.
const PROGRESS_QUEUE: usize = 64;
use tokio_stream::Stream;
use tonic::{Code, Request, Response, Status};

/// The audit log of applies: one JSON object per line (who, what, method, result), to a file
/// when configured, and always as a tracing event (target `fieldguard::audit`).
#[derive(Default)]
pub struct AuditLog {
    file: Option<std::sync::Mutex<std::fs::File>>,
}

impl AuditLog {
    /// Appends to `path` (created if absent).
    pub fn to_file(path: &std::path::Path) -> std::io::Result<AuditLog> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(AuditLog {
            file: Some(std::sync::Mutex::new(f)),
        })
    }

    pub fn record(&self, entry: &serde_json::Value) {
        tracing::info!(target: "fieldguard::audit", entry = %entry, "apply");
        if let Some(f) = &self.file {
            use std::io::Write;
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = writeln!(f, "{entry}").and_then(|_| f.flush()) {
                tracing::error!("cannot write the audit log: {e}");
            }
        }
    }
}

pub struct ReleasesService {
    stores: Stores,
}

impl ReleasesService {
    pub fn new(stores: Stores) -> ReleasesService {
        ReleasesService { stores }
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<pb::ApplyEvent, Status>> + Send>>;

fn result_of(o: &Outcome, cluster: &str) -> pb::ApplyResult {
    pb::ApplyResult {
        revision: o.revision,
        operation: o.operation.clone(),
        method: o.method.as_str().into(),
        status: o.status.clone(),
        prediction: o
            .prediction
            .objects
            .iter()
            .map(|p| convert::object(p, cluster))
            .collect(),
        objects: o
            .objects
            .iter()
            .map(|x| pb::ObjectResult {
                object: x.object.clone(),
                result: x.result.as_str().into(),
                message: x.message.clone().unwrap_or_default(),
                forced_from: x.forced_from.clone(),
                readiness: x.readiness.clone().unwrap_or_default(),
                hook: x.hook.clone().unwrap_or_default(),
                logs: x
                    .logs
                    .iter()
                    .map(|l| pb::ContainerLog {
                        pod: l.pod.clone(),
                        container: l.container.clone(),
                        text: l.text.clone(),
                    })
                    .collect(),
                events: x.events.clone(),
            })
            .collect(),
        migrations: o
            .migrations
            .iter()
            .map(|(obj, m)| pb::Migration {
                object: obj.clone(),
                from: m
                    .from
                    .iter()
                    .map(|(w, n)| pb::MigratedManager {
                        manager: w.clone(),
                        fields: *n as u32,
                    })
                    .collect(),
            })
            .collect(),
        mismatches: o.mismatches.clone(),
    }
}

fn audit_entry(
    who: &super::auth::Caller,
    cluster: &str,
    release: &str,
    namespace: &str,
    outcome: &Result<Outcome, RunError>,
) -> serde_json::Value {
    let time = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let mut e = serde_json::json!({
        "time": time, "user": who.user, "groups": who.groups, "authenticatedBy": who.via,
        "cluster": cluster, "release": release, "namespace": namespace,
    });
    match outcome {
        Ok(o) => {
            e["revision"] = o.revision.into();
            e["operation"] = o.operation.clone().into();
            e["method"] = o.method.as_str().into();
            e["status"] = o.status.clone().into();
            e["objects"] = o
                .objects
                .iter()
                .map(|x| serde_json::json!({"object": x.object, "result": x.result.as_str()}))
                .collect();
        }
        Err(err) => {
            e["status"] = "refused".into();
            e["error"] = err.to_string().into();
        }
    }
    e
}

#[tonic::async_trait]
impl Releases for ReleasesService {
    type ApplyStream = Events;

    async fn apply(
        &self,
        request: Request<pb::ApplyRequest>,
    ) -> Result<Response<Self::ApplyStream>, Status> {
        let (caller, cluster, api) = self
            .gate(
                &request,
                &request.get_ref().cluster,
                &request.get_ref().release,
                &request.get_ref().namespace,
            )
            .await?;
        let mut req = request.into_inner();
        super::analysis::field_manager_accepted(&req.field_manager)?;
        let force = super::analysis::force_of(req.force.as_ref())?;
        // Parsing is work for the blocking pool, within the service's limits.
        let names: Vec<String> = req
            .manifests
            .iter()
            .map(|m| super::analysis::manifest_name(m).to_string())
            .collect();
        let manifests = std::mem::take(&mut req.manifests);
        let limits = self.stores.limits.clone();
        let allow_empty = req.allow_empty || req.rollback_to > 0;
        let (documents, text) = tokio::task::spawn_blocking(move || {
            let documents = super::analysis::read_manifests(
                &manifests,
                &limits,
                &crate::deadline::Deadline::default(),
                allow_empty,
            )?;
            let mut text = String::new();
            for m in &manifests {
                text.push_str("---\n");
                text.push_str(&String::from_utf8_lossy(&m.content));
                if !text.ends_with('\n') {
                    text.push('\n');
                }
            }
            Ok::<_, Status>((documents, text))
        })
        .await
        .map_err(|e| Status::internal(format!("reading the manifests failed: {e}")))??;
        let run_req = RunRequest {
            release: req.release,
            namespace: req.namespace,
            field_manager: if req.field_manager.is_empty() {
                "fieldguard".into()
            } else {
                req.field_manager
            },
            server_side: match pb::ServerSide::try_from(req.server_side)
                .unwrap_or(pb::ServerSide::Auto)
            {
                pb::ServerSide::Auto => ServerSide::Auto,
                pb::ServerSide::True => ServerSide::True,
                pb::ServerSide::False => ServerSide::False,
            },
            force,
            documents,
            manifest: text,
            rollback_to: (req.rollback_to > 0).then_some(req.rollback_to),
            plan_only: req.plan,
            dry_run: req.dry_run,
            expect_unchanged: req.expect_unchanged,
            adopt: req.adopt,
            migrate_from: req.migrate_from,
            wait: (req.wait_seconds > 0).then(|| Duration::from_secs(req.wait_seconds as u64)),
            poll: Duration::from_secs(2),
            driver: crate::apply::storage::Driver::from_env()
                .map_err(|e| Status::failed_precondition(e.0))?,
            hook_timeout: Duration::from_secs(300),
            recreate_on_immutable: req.recreate_on_immutable,
        };
        let (release, namespace) = (run_req.release.clone(), run_req.namespace.clone());
        Ok(Response::new(self.spawn_run(
            caller,
            cluster,
            (release, namespace),
            names,
            move |mut progress| async move { run::run(&api, run_req, &mut *progress).await },
        )))
    }

    type UninstallStream = Events;

    async fn uninstall(
        &self,
        request: Request<pb::UninstallRequest>,
    ) -> Result<Response<Self::UninstallStream>, Status> {
        let (caller, cluster, api) = self
            .gate(
                &request,
                &request.get_ref().cluster,
                &request.get_ref().release,
                &request.get_ref().namespace,
            )
            .await?;
        let req = request.into_inner();
        super::analysis::field_manager_accepted(&req.field_manager)?;
        let un = UninstallRequest {
            release: req.release.clone(),
            namespace: req.namespace.clone(),
            field_manager: if req.field_manager.is_empty() {
                "fieldguard".into()
            } else {
                req.field_manager
            },
            plan_only: req.plan,
            keep_history: req.keep_history,
            driver: crate::apply::storage::Driver::from_env()
                .map_err(|e| Status::failed_precondition(e.0))?,
            timeout: Duration::from_secs(if req.timeout_seconds > 0 {
                req.timeout_seconds as u64
            } else {
                300
            }),
            poll: Duration::from_secs(1),
        };
        Ok(Response::new(self.spawn_run(
            caller,
            cluster,
            (req.release, req.namespace),
            vec![],
            move |mut progress| async move { uninstall::uninstall(&api, un, &mut *progress).await },
        )))
    }
}

/// What a release run reports progress through.
type BoxedProgress = Box<dyn FnMut(&str) + Send>;

impl ReleasesService {
    /// The gate every release write passes: the service applies, the caller is authenticated
    /// (writes are made as the caller, impersonated), the cluster is one, the release named.
    async fn gate<T>(
        &self,
        request: &Request<T>,
        cluster: &str,
        release: &str,
        namespace: &str,
    ) -> Result<(super::auth::Caller, String, crate::live::api::Api), Status> {
        if !self.stores.allow_apply {
            return Err(error(
                Code::PermissionDenied,
                "APPLY_DISABLED",
                "this service does not apply releases (start it with --allow-apply)",
                &[],
            ));
        }
        let caller = self.stores.caller(request).await?;
        if !caller.may_write() {
            return Err(error(
                Code::PermissionDenied,
                "AUTHENTICATION_REQUIRED",
                "applies are made as their caller: authenticate with a client certificate or a bearer token",
                &[],
            ));
        }
        let (cluster, store) = self.stores.get(cluster)?;
        let Some(api) = store
            .api()
            .map(|a| a.impersonating(&caller.user, &caller.groups))
        else {
            return Err(error(
                Code::FailedPrecondition,
                "NOT_A_CLUSTER",
                &format!("{cluster} is a snapshot; releases are applied to clusters"),
                &[],
            ));
        };
        if release.is_empty() || namespace.is_empty() {
            return Err(error(
                Code::InvalidArgument,
                "MISSING_FIELD",
                "release and namespace are required",
                &[
                    ("release".into(), "must not be empty".into()),
                    ("namespace".into(), "must not be empty".into()),
                ],
            ));
        }
        Ok((caller, cluster, api))
    }

    /// Runs a release operation in the background: progress lines stream to the caller as
    /// they happen, the result (or the refusal) last; the audit log records it.
    fn spawn_run<F, Fut>(
        &self,
        who: super::auth::Caller,
        cluster: String,
        (release, namespace): (String, String),
        names: Vec<String>,
        run: F,
    ) -> Events
    where
        F: FnOnce(BoxedProgress) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Outcome, RunError>> + Send + 'static,
    {
        // Bounded: a caller that stops reading cannot grow the queue. Progress lines beyond
        // it are dropped (and counted in the next line that gets through); the result is
        // always delivered.
        let (tx, rx) = tokio::sync::mpsc::channel(PROGRESS_QUEUE);
        let audit = self.stores.audit.clone();
        tokio::spawn(async move {
            let progress_tx = tx.clone();
            let mut dropped = 0usize;
            let progress = move |line: &str| {
                let text = if dropped > 0 {
                    format!("({dropped} progress line(s) dropped: the caller reads slowly) {line}")
                } else {
                    line.to_string()
                };
                match progress_tx.try_send(Ok(pb::ApplyEvent {
                    event: Some(Event::Progress(text)),
                })) {
                    Ok(()) => dropped = 0,
                    Err(_) => dropped += 1,
                }
            };
            let outcome = run(Box::new(progress)).await;
            audit.record(&audit_entry(&who, &cluster, &release, &namespace, &outcome));
            let msg = match outcome {
                Ok(o) => Ok(pb::ApplyEvent {
                    event: Some(Event::Result(result_of(&o, &cluster))),
                }),
                Err(RunError::Invalid(errors)) => {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    Err(super::analysis::bad_request(&errors, "manifests", &names))
                }
                Err(RunError::Refused(m)) => {
                    Err(error(Code::FailedPrecondition, "REFUSED", &m, &[]))
                }
                Err(RunError::Cluster(m)) => {
                    Err(error(Code::Unavailable, "CLUSTER_UNAVAILABLE", &m, &[]))
                }
            };
            let _ = tx.send(msg).await;
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }
}
