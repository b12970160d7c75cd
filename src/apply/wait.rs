//! Waiting for applied workloads: Deployment, StatefulSet and DaemonSet rollouts, Job
//! completion. Readiness is read from the object's status the way `kubectl rollout status`
//! does; per-object annotations opt out of waiting (`fieldguard.dev/wait: "false"`) or make a
//! failure non-fatal (`fieldguard.dev/ignore-failure: "true"`).

use crate::value::Value;

pub const WAIT_ANNOTATION: &str = "fieldguard.dev/wait";
pub const IGNORE_FAILURE_ANNOTATION: &str = "fieldguard.dev/ignore-failure";

/// Where a workload stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    Progressing(String),
    Failed(String),
}

/// Kinds worth waiting for.
pub fn is_workload(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet") | ("batch", "Job")
    )
}

fn int(obj: &Value, path: &[&str]) -> i64 {
    match obj.get_path(path) {
        Some(Value::Int(i)) => *i,
        _ => 0,
    }
}

fn condition<'v>(obj: &'v Value, kind: &str) -> Option<&'v Value> {
    obj.get_path(&["status", "conditions"])?
        .as_list()?
        .iter()
        .find(|c| c.str_at(&["type"]) == Some(kind))
}

fn generation_seen(obj: &Value) -> bool {
    int(obj, &["status", "observedGeneration"]) >= int(obj, &["metadata", "generation"])
}

/// The readiness of a workload from its status.
pub fn readiness(group: &str, kind: &str, obj: &Value) -> Readiness {
    use Readiness::*;
    let replicas = match obj.get_path(&["spec", "replicas"]) {
        Some(Value::Int(i)) => *i,
        _ => 1,
    };
    match (group, kind) {
        ("apps", "Deployment") => {
            if let Some(c) = condition(obj, "Progressing")
                && c.str_at(&["reason"]) == Some("ProgressDeadlineExceeded")
            {
                return Failed(format!(
                    "progress deadline exceeded: {}",
                    c.str_at(&["message"]).unwrap_or("")
                ));
            }
            if !generation_seen(obj) {
                return Progressing("waiting for the rollout to be observed".into());
            }
            let updated = int(obj, &["status", "updatedReplicas"]);
            let total = int(obj, &["status", "replicas"]);
            let available = int(obj, &["status", "availableReplicas"]);
            if updated < replicas {
                Progressing(format!("{updated} of {replicas} updated"))
            } else if total > updated {
                Progressing(format!(
                    "{} old replicas pending termination",
                    total - updated
                ))
            } else if available < updated {
                Progressing(format!(
                    "{available} of {updated} updated replicas available"
                ))
            } else {
                Ready
            }
        }
        ("apps", "StatefulSet") => {
            if !generation_seen(obj) {
                return Progressing("waiting for the rollout to be observed".into());
            }
            let ready = int(obj, &["status", "readyReplicas"]);
            let updated = int(obj, &["status", "updatedReplicas"]);
            let on_delete = obj.str_at(&["spec", "updateStrategy", "type"]) == Some("OnDelete");
            if ready < replicas {
                Progressing(format!("{ready} of {replicas} ready"))
            } else if !on_delete
                && (updated < replicas
                    || obj.str_at(&["status", "currentRevision"])
                        != obj.str_at(&["status", "updateRevision"]))
            {
                Progressing(format!("{updated} of {replicas} updated"))
            } else {
                Ready
            }
        }
        ("apps", "DaemonSet") => {
            if !generation_seen(obj) {
                return Progressing("waiting for the rollout to be observed".into());
            }
            let desired = int(obj, &["status", "desiredNumberScheduled"]);
            let updated = int(obj, &["status", "updatedNumberScheduled"]);
            let available = int(obj, &["status", "numberAvailable"]);
            if updated < desired {
                Progressing(format!("{updated} of {desired} updated"))
            } else if available < desired {
                Progressing(format!("{available} of {desired} available"))
            } else {
                Ready
            }
        }
        ("batch", "Job") => {
            let is_true = |c: &Value| c.str_at(&["status"]) == Some("True");
            if condition(obj, "Failed").is_some_and(is_true) {
                let c = condition(obj, "Failed").unwrap_or(&Value::Null);
                Failed(format!(
                    "{}: {}",
                    c.str_at(&["reason"]).unwrap_or("Failed"),
                    c.str_at(&["message"]).unwrap_or("")
                ))
            } else if condition(obj, "Complete").is_some_and(is_true) {
                Ready
            } else {
                Progressing(format!(
                    "{} succeeded, {} active",
                    int(obj, &["status", "succeeded"]),
                    int(obj, &["status", "active"])
                ))
            }
        }
        _ => Ready,
    }
}

/// True if the object asks not to be waited for.
pub fn skip_wait(obj: &Value) -> bool {
    obj.str_at(&["metadata", "annotations", WAIT_ANNOTATION]) == Some("false")
}

/// True if the object's failure must not fail the release.
pub fn ignore_failure(obj: &Value) -> bool {
    obj.str_at(&["metadata", "annotations", IGNORE_FAILURE_ANNOTATION]) == Some("true")
}

/// Deletes the object at `path` with `propagation` (`Background`, `Foreground`) and waits until
/// it is gone, polling every `poll` up to `timeout`. `Ok(false)`: it was not there. A dry run
/// sends the deletion with `dryRun=All` and does not wait.
pub async fn delete_and_wait(
    api: &crate::live::api::Api,
    path: &str,
    propagation: &str,
    dry_run: bool,
    timeout: std::time::Duration,
    poll: std::time::Duration,
) -> Result<bool, String> {
    let mut url = format!("{path}?propagationPolicy={propagation}");
    if dry_run {
        url.push_str("&dryRun=All");
    }
    match api
        .write(http::Method::DELETE, &url, "application/json", Vec::new())
        .await
    {
        Ok(_) => {}
        Err(Ok(s)) if s.code == 404 => return Ok(false),
        Err(Ok(s)) => return Err(format!("{}: {}", s.code, s.message)),
        Err(Err(e)) => return Err(e.message),
    }
    if dry_run {
        return Ok(true);
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match api.get_json(path).await {
            Ok(None) => return Ok(true),
            Ok(Some(_)) if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "still exists {}s after its deletion (finalizers?)",
                    timeout.as_secs()
                ));
            }
            Ok(Some(_)) => tokio::time::sleep(poll).await,
            Err(e) => return Err(e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Value {
        crate::value::yaml::parse_one(s).unwrap()
    }

    #[test]
    fn deployment_rollout_states() {
        let base = "metadata: {generation: 2}\nspec: {replicas: 3}\n";
        let r =
            |status: &str| readiness("apps", "Deployment", &v(&format!("{base}status: {status}")));
        assert!(matches!(
            r("{observedGeneration: 1}"),
            Readiness::Progressing(_)
        ));
        assert!(matches!(
            r("{observedGeneration: 2, updatedReplicas: 2, replicas: 3}"),
            Readiness::Progressing(_)
        ));
        assert!(matches!(
            r("{observedGeneration: 2, updatedReplicas: 3, replicas: 4, availableReplicas: 3}"),
            Readiness::Progressing(_)
        ));
        assert_eq!(
            r("{observedGeneration: 2, updatedReplicas: 3, replicas: 3, availableReplicas: 3}"),
            Readiness::Ready
        );
        assert!(matches!(
            r(
                "{conditions: [{type: Progressing, status: 'False', reason: ProgressDeadlineExceeded}]}"
            ),
            Readiness::Failed(_)
        ));
    }

    #[test]
    fn job_completion_and_failure() {
        let j = |s: &str| readiness("batch", "Job", &v(s));
        assert_eq!(
            j("status: {conditions: [{type: Complete, status: 'True'}]}"),
            Readiness::Ready
        );
        assert!(
            matches!(j("status: {conditions: [{type: Failed, status: 'True', reason: BackoffLimitExceeded}]}"), Readiness::Failed(m) if m.contains("Backoff"))
        );
        assert!(matches!(
            j("status: {active: 1}"),
            Readiness::Progressing(_)
        ));
    }
}
