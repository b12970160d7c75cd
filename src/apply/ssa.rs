//! One server-side apply: `PATCH` with `application/apply-patch+yaml`, the field manager,
//! `force` when the policy allows it, `dryRun=All` on request.
//!
//! Selective force (`--force-against`): the object is first applied without force; if every
//! conflict is with a manager the policy allows to take over, it is applied again, forced, on
//! the condition that it has not changed since that decision (its resourceVersion; a change
//! means a new decision); otherwise nothing more is sent and the conflicts are returned. 409 bodies are parsed into
//! structured conflicts (`details.causes`), never retried blindly. With an expected
//! resourceVersion, the apply carries it, so the server refuses it if the object changed since
//! the prediction.

use crate::check::Force;
use crate::live::api::{Api, ClusterError};
use crate::value::{Value, json};

/// How to apply.
#[derive(Clone, Debug)]
pub struct SsaOptions {
    pub field_manager: String,
    pub force: Force,
    /// `dryRun=All`: the server runs the apply and answers, but stores nothing.
    pub dry_run: bool,
    /// Refuse the apply unless the live object still has this resourceVersion (the one the
    /// prediction used).
    pub expect_resource_version: Option<String>,
}

/// A field another manager owns, as the apiserver's 409 reports it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Conflict {
    /// The manager (parsed from the cause's message).
    pub manager: String,
    /// The field path, as printed by the apiserver.
    pub field: String,
    /// The cause's message (`conflict with "kubectl-edit" using apps/v1`).
    pub message: String,
}

/// Why an apply did not happen.
#[derive(Clone, Debug, thiserror::Error)]
pub enum SsaError {
    /// Conflicts the policy does not allow to take over (409, `FieldManagerConflict`s).
    #[error("{message}")]
    Conflicts {
        message: String,
        conflicts: Vec<Conflict>,
    },
    /// The object changed since the prediction (409 without field conflicts, or it appeared).
    #[error("the object changed since the prediction: {0}")]
    Stale(String),
    /// Any other refusal (400, 403, 422, ...), with the apiserver's message.
    #[error("{code}: {message}")]
    Rejected { code: u16, message: String },
    #[error("{0}")]
    Unreachable(String),
}

/// The result of an apply.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The object as the server stored it (or would, in a dry run).
    pub object: Value,
    /// Managers fields were taken from by a forced apply (empty if not forced).
    pub forced_from: Vec<String>,
}

/// The manager a `FieldManagerConflict` cause names: the first quoted string of its message.
fn manager_of(message: &str) -> String {
    let mut parts = message.split('"');
    parts.next();
    parts.next().unwrap_or("").to_string()
}

fn conflicts_of(status: &kube::core::Status) -> Vec<Conflict> {
    status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .filter(|c| c.reason == "FieldManagerConflict")
                .map(|c| Conflict {
                    manager: manager_of(&c.message),
                    field: c.field.clone(),
                    message: c.message.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// How many times selective force decides again when the object changed between its
/// decision and the forced apply.
const MAX_DECISIONS: usize = 5;

/// Applies `object` at `path` (the object's URL, e.g.
/// `/apis/apps/v1/namespaces/shop/deployments/web`).
pub async fn apply(
    api: &Api,
    path: &str,
    object: &Value,
    opts: &SsaOptions,
) -> Result<Applied, SsaError> {
    apply_with(api, path, object, opts, async || {}).await
}

/// [`apply`], calling `before_forced` between a selective-force decision and the forced
/// apply it leads to (where a test makes another manager race it).
///
/// Selective force is decided on the conflicts the server reports for one resourceVersion,
/// and the forced apply carries that resourceVersion as a precondition: if anyone wrote the
/// object in between, the server refuses it (409, no causes), and the decision is made again
/// on the new version — a manager the policy does not allow never loses a field to it. With
/// `expect_resource_version`, that version is the only one decided on (a change is `Stale`).
pub async fn apply_with(
    api: &Api,
    path: &str,
    object: &Value,
    opts: &SsaOptions,
    mut before_forced: impl AsyncFnMut(),
) -> Result<Applied, SsaError> {
    let at = |rv: Option<&str>| {
        let mut body = object.clone();
        if let Some(rv) = rv
            && let Some(meta) = body
                .as_map_mut()
                .and_then(|m| m.get_mut("metadata"))
                .and_then(Value::as_map_mut)
        {
            meta.insert("resourceVersion", Value::from(rv));
        }
        json::to_string(&body, json::Style::PLAIN)
    };
    let expected = opts.expect_resource_version.as_deref();
    let first_forced = matches!(opts.force, Force::All);
    let allowed = |conflicts: &[Conflict]| {
        matches!(opts.force, Force::Against(_))
            && !conflicts.is_empty()
            && conflicts.iter().all(|c| opts.force.allows(&c.manager))
    };
    let applied = |object: Value, conflicts: &[Conflict]| {
        let mut from: Vec<String> = conflicts.iter().map(|c| c.manager.clone()).collect();
        from.sort();
        from.dedup();
        Applied {
            object,
            forced_from: from,
        }
    };
    // The decision: the conflicts of one resourceVersion (with an expected version, the first
    // answer is that version's; otherwise the version is read, then applied to).
    let mut decision = match send(api, path, &at(expected), opts, first_forced).await {
        Ok(obj) => return Ok(applied(obj, &[])),
        Err(SsaError::Conflicts { conflicts, .. }) if allowed(&conflicts) => {
            expected.map(|rv| (rv.to_string(), conflicts))
        }
        Err(e) => return Err(e),
    };
    for _ in 0..MAX_DECISIONS {
        let (rv, conflicts) = match decision.take() {
            Some(d) => d,
            None => {
                let current = api
                    .get_json(path)
                    .await
                    .map_err(|e| SsaError::Unreachable(e.to_string()))?;
                let Some(rv) = current
                    .as_ref()
                    .and_then(|c| c.str_at(&["metadata", "resourceVersion"]))
                    .map(str::to_string)
                else {
                    // Deleted meanwhile: a creation conflicts with no one.
                    return send(api, path, &at(None), opts, false)
                        .await
                        .map(|o| applied(o, &[]));
                };
                match send(api, path, &at(Some(&rv)), opts, false).await {
                    Ok(obj) => return Ok(applied(obj, &[])),
                    Err(SsaError::Conflicts { conflicts, .. }) if allowed(&conflicts) => {
                        (rv, conflicts)
                    }
                    Err(SsaError::Stale(_)) => continue,
                    Err(e) => return Err(e),
                }
            }
        };
        before_forced().await;
        match send(api, path, &at(Some(&rv)), opts, true).await {
            Ok(obj) => return Ok(applied(obj, &conflicts)),
            // Written by someone since the decision: decide again on what is there now.
            Err(SsaError::Stale(_)) if expected.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(SsaError::Stale(format!(
        "{path} changed between every decision and its forced apply ({MAX_DECISIONS} times)"
    )))
}

async fn send(
    api: &Api,
    path: &str,
    body: &str,
    opts: &SsaOptions,
    force: bool,
) -> Result<Value, SsaError> {
    let mut url = format!(
        "{path}?fieldManager={}",
        crate::live::api::percent_encode(&opts.field_manager)
    );
    if force {
        url.push_str("&force=true");
    }
    if opts.dry_run {
        url.push_str("&dryRun=All");
    }
    match api.patch_apply(&url, body.as_bytes().to_vec()).await {
        Ok(text) => json::parse(text.as_bytes())
            .map_err(|e| SsaError::Unreachable(format!("{path}: answer: {e}"))),
        Err(Ok(status)) if status.code == 409 => {
            let conflicts = conflicts_of(&status);
            if conflicts.is_empty() {
                Err(SsaError::Stale(status.message))
            } else {
                Err(SsaError::Conflicts {
                    message: status.message,
                    conflicts,
                })
            }
        }
        Err(Ok(status)) => Err(SsaError::Rejected {
            code: status.code,
            message: status.message,
        }),
        Err(Err(e)) => Err(SsaError::Unreachable(e.to_string())),
    }
}

impl Api {
    /// `PATCH` with `application/apply-patch+yaml` (JSON is YAML). The apiserver's refusal is
    /// `Err(Ok(status))`; a transport problem `Err(Err(..))`.
    pub async fn patch_apply(
        &self,
        url: &str,
        body: Vec<u8>,
    ) -> Result<String, Result<kube::core::Status, ClusterError>> {
        self.write(
            http::Method::PATCH,
            url,
            "application/apply-patch+yaml",
            body,
        )
        .await
    }
}
