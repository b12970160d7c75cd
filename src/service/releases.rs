//! `fieldguard.v1.Releases`: applying a release through the service (off unless the service
//! runs with `--allow-apply`). The run is [`crate::apply::run`]; progress lines stream back as
//! they happen, the result last.

use super::proto::releases_server::Releases;
use super::proto::{self as pb, apply_event::Event};
use super::{Stores, convert, error};
use crate::apply::release::ServerSide;
use crate::apply::run::{self, Outcome, Request as RunRequest, RunError};
use crate::manifest::{self, Loaded};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Code, Request, Response, Status};

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

#[tonic::async_trait]
impl Releases for ReleasesService {
    type ApplyStream = Events;

    async fn apply(
        &self,
        request: Request<pb::ApplyRequest>,
    ) -> Result<Response<Self::ApplyStream>, Status> {
        if !self.stores.allow_apply {
            return Err(error(
                Code::PermissionDenied,
                "APPLY_DISABLED",
                "this service does not apply releases (start it with --allow-apply)",
                &[],
            ));
        }
        let req = request.into_inner();
        let (cluster, store) = self.stores.get(&req.cluster)?;
        let Some(api) = store.api() else {
            return Err(error(
                Code::FailedPrecondition,
                "NOT_A_CLUSTER",
                &format!("{cluster} is a snapshot; releases are applied to clusters"),
                &[],
            ));
        };
        if req.release.is_empty() || req.namespace.is_empty() {
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
        let force = super::analysis::force_of(req.force.as_ref())?;
        let mut loaded: Loaded = manifest::load(&[], &mut std::io::empty());
        let mut text = String::new();
        for m in &req.manifests {
            let name: Arc<str> = Arc::from(if m.name.is_empty() {
                "<manifest>"
            } else {
                &m.name
            });
            manifest::parse_into(&name, &m.content, &mut loaded);
            text.push_str("---\n");
            text.push_str(&String::from_utf8_lossy(&m.content));
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        if !loaded.errors.is_empty() {
            return Err(super::analysis::bad_request(&loaded.errors, "manifests"));
        }
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
            documents: loaded.documents,
            manifest: text,
            rollback_to: (req.rollback_to > 0).then_some(req.rollback_to),
            plan_only: req.plan,
            dry_run: req.dry_run,
            expect_unchanged: req.expect_unchanged,
            adopt: req.adopt,
            migrate_from: req.migrate_from,
            wait: (req.wait_seconds > 0).then(|| Duration::from_secs(req.wait_seconds as u64)),
            poll: Duration::from_secs(2),
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let progress_tx = tx.clone();
            let mut progress = move |line: &str| {
                let _ = progress_tx.send(Ok(pb::ApplyEvent {
                    event: Some(Event::Progress(line.to_string())),
                }));
            };
            let msg = match run::run(&api, run_req, &mut progress).await {
                Ok(o) => Ok(pb::ApplyEvent {
                    event: Some(Event::Result(result_of(&o, &cluster))),
                }),
                Err(RunError::Invalid(errors)) => {
                    Err(super::analysis::bad_request(&errors, "manifests"))
                }
                Err(RunError::Refused(m)) => {
                    Err(error(Code::FailedPrecondition, "REFUSED", &m, &[]))
                }
                Err(RunError::Cluster(m)) => {
                    Err(error(Code::Unavailable, "CLUSTER_UNAVAILABLE", &m, &[]))
                }
            };
            let _ = tx.send(msg);
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
        )))
    }
}
