//! What a release run is asked (`Request`) and what it answers: each object's result, the
//! run's outcome, and why a run stopped before writing.

use super::migrate::Migration;
use super::release::{Method, ReleaseError, ServerSide};
use super::ssa;
use super::storage::Driver;
use crate::check::{self, Force};
use crate::live::api::ClusterError;
use crate::manifest::{Document, ManifestError};
use std::time::Duration;

/// What to do.
#[derive(Clone, Debug)]
pub struct Request {
    pub release: String,
    pub namespace: String,
    pub field_manager: String,
    pub server_side: ServerSide,
    pub force: Force,
    /// The manifests (ignored for a rollback, which uses the target revision's).
    pub documents: Vec<Document>,
    /// Their text, recorded on the revision.
    pub manifest: String,
    pub rollback_to: Option<u32>,
    /// Predict and stop.
    pub plan_only: bool,
    /// Send everything with `dryRun=All`; record nothing.
    pub dry_run: bool,
    /// Each apply carries the resourceVersion the prediction used.
    pub expect_unchanged: bool,
    /// Take over objects that exist but belong to no release.
    pub adopt: bool,
    /// More managers to migrate from when switching to server-side apply.
    pub migrate_from: Vec<String>,
    /// Wait this long for workloads to become ready.
    pub wait: Option<Duration>,
    /// How often to poll while waiting.
    pub poll: Duration,
    /// Where release records are kept (`HELM_DRIVER`).
    pub driver: Driver,
    /// How long one hook may take (Helm's `--timeout`, 5m by default); also how long a
    /// recreated object's deletion may take.
    pub hook_timeout: Duration,
    /// Recreate objects whose update the server would refuse (immutable fields).
    pub recreate_on_immutable: bool,
}

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Result_ {
    Created,
    Configured,
    Unchanged,
    /// Only its managedFields changed (the server wrote it; the contents stayed).
    #[serde(rename = "ownership-only")]
    OwnershipOnly,
    Conflicted,
    /// Refused with 422: the stored object would fail its schema.
    Rejected,
    Failed,
    Deleted,
    /// Left in place although dropped from the release (`helm.sh/resource-policy: keep`).
    Kept,
    /// Not attempted (an earlier object failed).
    Skipped,
}

impl Result_ {
    pub fn as_str(self) -> &'static str {
        match self {
            Result_::Created => "created",
            Result_::Configured => "configured",
            Result_::Unchanged => "unchanged",
            Result_::OwnershipOnly => "ownership-only",
            Result_::Conflicted => "conflicted",
            Result_::Rejected => "rejected",
            Result_::Failed => "failed",
            Result_::Deleted => "deleted",
            Result_::Kept => "kept",
            Result_::Skipped => "skipped",
        }
    }
}

/// One object's outcome.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectOutcome {
    pub object: String,
    pub result: Result_,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<ssa::Conflict>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forced_from: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness: Option<String>,
    /// The hook event this write or deletion ran in (`pre-upgrade`, ...); none for release
    /// objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// A hook's container logs, as its `helm.sh/hook-output-log-policy` asks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<super::hook_logs::ContainerLog>,
    /// The latest events about a failed hook and its pods.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
}

impl ObjectOutcome {
    /// An outcome with nothing more to say.
    pub fn new(object: String, result: Result_) -> ObjectOutcome {
        ObjectOutcome {
            object,
            result,
            message: None,
            conflicts: vec![],
            forced_from: vec![],
            readiness: None,
            hook: None,
            logs: vec![],
            events: vec![],
        }
    }

    pub(super) fn with_message(mut self, message: impl Into<String>) -> ObjectOutcome {
        self.message = Some(message.into());
        self
    }
}

/// The outcome of a run.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub release: String,
    pub namespace: String,
    pub revision: u32,
    pub operation: String,
    pub method: Method,
    /// `deployed`, `failed`, `planned` (plan only), `dry-run`.
    pub status: String,
    #[serde(skip)]
    pub prediction: check::Report,
    pub migrations: Vec<(String, Migration)>,
    pub objects: Vec<ObjectOutcome>,
    /// Where the server did something else than predicted (the engine would be wrong).
    pub mismatches: Vec<String>,
}

impl Outcome {
    /// 0: deployed/planned; 1: conflicts stopped the run; 4: something failed.
    pub fn exit_code(&self) -> u8 {
        if self.objects.iter().any(|o| o.result == Result_::Failed) {
            4
        } else if self
            .objects
            .iter()
            .any(|o| matches!(o.result, Result_::Conflicted | Result_::Rejected))
            || (self.status == "planned" && self.prediction.exit_code() == 1)
        {
            1
        } else {
            0
        }
    }
}

/// Why a run stopped before writing anything.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Manifests that cannot be applied, located.
    #[error("{} invalid manifest(s)", .0.len())]
    Invalid(Vec<ManifestError>),
    /// The request is refused (flags, ownership, history).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Cluster(String),
}

impl From<ClusterError> for RunError {
    /// A 403 (the caller, impersonated, may not read something the release needs) is a
    /// refusal, not an unreachable cluster.
    fn from(e: ClusterError) -> Self {
        if e.code == Some(403) {
            RunError::Refused(e.message)
        } else {
            RunError::Cluster(e.message)
        }
    }
}

impl From<ReleaseError> for RunError {
    fn from(e: ReleaseError) -> Self {
        RunError::Refused(e.0)
    }
}

/// Progress lines for the caller to show.
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);
