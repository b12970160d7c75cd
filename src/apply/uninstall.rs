//! Uninstalling a release as Helm 4 does (helm/helm `pkg/action/uninstall.go`): the latest
//! revision marked `uninstalling`, its `pre-delete` hooks, its objects deleted in Helm's
//! uninstall order (background propagation, waited for) except those whose live object says
//! `helm.sh/resource-policy: keep`, its `post-delete` hooks, then the records purged — or, with
//! `keep_history`, the revision recorded `uninstalled`. Hooks are written with the release's
//! recorded method (helm/helm#32225), never a hard-coded server-side apply.

use super::hooks::{self, HookTarget};
use super::release::{Method, Revision, Source};
use super::run::{
    self, ObjectOutcome, Outcome, Progress, RESOURCE_POLICY_ANNOTATION, Request, Result_, RunError,
};
use super::storage::{Driver, Store};
use crate::check::{self, Force, Target};
use crate::live::api::Api;
use crate::manifest::hooks::Hook;
use crate::value::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// What to uninstall.
#[derive(Clone, Debug)]
pub struct UninstallRequest {
    pub release: String,
    pub namespace: String,
    /// The field manager of hook writes (server-side releases).
    pub field_manager: String,
    /// Show what would be deleted and stop.
    pub plan_only: bool,
    /// Keep the records, the latest marked `uninstalled`.
    pub keep_history: bool,
    pub driver: Driver,
    /// How long one hook, or one deletion, may take.
    pub timeout: Duration,
    pub poll: Duration,
}

/// Helm's kind order for deletions (`releaseutil.UninstallOrder`: install order reversed, with
/// Service right after IngressClass and the validating webhooks before the mutating ones).
fn uninstall_rank(kind: &str) -> (usize, String) {
    const ORDER: &[&str] = &[
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
        "Ingress",
        "IngressClass",
        "Service",
        "CronJob",
        "Job",
        "StatefulSet",
        "HorizontalPodAutoscaler",
        "Deployment",
        "ReplicaSet",
        "ReplicationController",
        "Pod",
        "DaemonSet",
        "RoleBindingList",
        "RoleBinding",
        "RoleList",
        "Role",
        "ClusterRoleBindingList",
        "ClusterRoleBinding",
        "ClusterRoleList",
        "ClusterRole",
        "CustomResourceDefinition",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
        "ConfigMap",
        "SecretList",
        "Secret",
        "ServiceAccount",
        "PodDisruptionBudget",
        "PodSecurityPolicy",
        "LimitRange",
        "ResourceQuota",
        "NetworkPolicy",
        "Namespace",
        "PriorityClass",
    ];
    match ORDER.iter().position(|k| *k == kind) {
        Some(i) => (i, String::new()),
        None => (ORDER.len(), kind.to_string()),
    }
}

fn keep(obj: &Value) -> bool {
    run::annotation(obj, RESOURCE_POLICY_ANNOTATION)
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("keep"))
}

/// Uninstalls a release.
#[tracing::instrument(name = "uninstall", skip_all, fields(release = %req.release, namespace = %req.namespace))]
pub async fn uninstall(
    api: &Api,
    req: UninstallRequest,
    progress: Progress<'_>,
) -> Result<Outcome, RunError> {
    let ns = req.namespace.clone();
    let store = Store::open(req.driver.clone(), !req.plan_only).await?;
    let history = store.history(api, &req.release, &ns).await?;
    let Some(latest) = history.latest().cloned() else {
        return Err(RunError::Refused(format!(
            "release {:?} not found in {}",
            req.release,
            store.describe(&ns)
        )));
    };
    if latest.status == "uninstalled" {
        return Err(RunError::Refused(format!(
            "release {:?} is already uninstalled (revision {})",
            req.release, latest.revision
        )));
    }
    let method = latest.method.unwrap_or(Method::Csa);
    let documents = run::parse_manifest(&latest.manifest, &format!("revision {}", latest.revision))
        .map_err(RunError::Invalid)?;
    let versions: BTreeSet<String> = documents
        .iter()
        .map(|d| d.api_version().to_string())
        .collect();
    let mut catalog = api.catalog_for(&versions).await?;
    let resolved = check::resolve(documents, &mut catalog, &ns).map_err(RunError::Invalid)?;
    let (hook_list, mut objects): (Vec<Target>, Vec<Target>) = resolved
        .into_iter()
        .partition(|t| Hook::of(&t.doc.object).is_some());
    objects.sort_by_key(|t| uninstall_rank(&t.info.gvk.kind));
    let mut hook_targets = Vec::new();
    for t in hook_list {
        let (Some(hook), Some(d)) = (Hook::of(&t.doc.object), catalog.discovered(&t.info.gvk))
        else {
            continue;
        };
        let (collection, path) = run::urls(&t.info.gvk.api_version(), &d.plural, &t.object_ref);
        hook_targets.push(HookTarget {
            target: t,
            hook,
            collection,
            path,
        });
    }
    let pre = hooks::of_event(&hook_targets, "pre-delete");
    let post = hooks::of_event(&hook_targets, "post-delete");

    // The prediction: the hooks as they will run, the objects as they will go.
    let opts = check::Options {
        field_manager: req.field_manager.clone(),
        force: Force::None,
        namespace: ns.clone(),
        now: time::OffsetDateTime::now_utc().unix_timestamp(),
    };
    let mut prediction = check::Report {
        field_manager: req.field_manager.clone(),
        force: Force::None,
        source: format!("cluster {}", api.url()),
        objects: vec![],
        hooks: hooks::hooks_plan(&hook_targets, check::hooks::Operation::Uninstall),
    };
    for (event, list) in [("pre-delete", &pre), ("post-delete", &post)] {
        for (i, h) in list.iter().enumerate() {
            let live = api.get_json(&h.path).await?;
            prediction.objects.push(hooks::predict(
                h,
                live.as_ref(),
                &opts,
                method,
                event,
                (i + 1, list.len()),
            ));
        }
    }
    let mut outcome = Outcome {
        release: req.release.clone(),
        namespace: ns.clone(),
        revision: latest.revision,
        operation: "uninstall".into(),
        method,
        status: "planned".into(),
        prediction,
        migrations: vec![],
        objects: vec![],
        mismatches: vec![],
    };
    let mut doomed = Vec::new();
    for t in &objects {
        let name = t.object_ref.to_string();
        let Some(d) = catalog.discovered(&t.info.gvk) else {
            outcome.objects.push(
                ObjectOutcome::new(name, Result_::Kept)
                    .with_message("its kind is no longer served: nothing to delete"),
            );
            continue;
        };
        let (_, path) = run::urls(&t.info.gvk.api_version(), &d.plural, &t.object_ref);
        match api.get_json(&path).await? {
            None => outcome
                .objects
                .push(ObjectOutcome::new(name, Result_::Deleted).with_message("already gone")),
            Some(l) if keep(&l) || keep(&t.doc.object) => outcome.objects.push(
                ObjectOutcome::new(name, Result_::Kept)
                    .with_message("helm.sh/resource-policy: keep"),
            ),
            Some(_) => doomed.push((name, path)),
        }
    }
    if req.plan_only {
        for (name, _) in &doomed {
            outcome.objects.push(
                ObjectOutcome::new(name.clone(), Result_::Deleted).with_message("would be deleted"),
            );
        }
        return Ok(outcome);
    }

    // Marked uninstalling first (Helm records it before the pre-delete hooks).
    let mut record = Revision {
        status: "uninstalling".into(),
        source: Source::Fieldguard,
        method: Some(method),
        ..latest.clone()
    };
    store
        .write(api, &record, latest.source == Source::Helm)
        .await?;
    let hook_req = Request {
        release: req.release.clone(),
        namespace: ns.clone(),
        field_manager: req.field_manager.clone(),
        server_side: super::release::ServerSide::Auto,
        force: Force::None,
        documents: vec![],
        manifest: String::new(),
        rollback_to: None,
        plan_only: false,
        dry_run: false,
        expect_unchanged: false,
        adopt: false,
        migrate_from: vec![],
        wait: None,
        poll: req.poll,
        driver: req.driver.clone(),
        hook_timeout: req.timeout,
        recreate_on_immutable: false,
    };
    let predicted: Vec<check::ObjectReport> = outcome.prediction.objects.clone();
    let (pre_predicted, post_predicted) = predicted.split_at(pre.len());
    let runner = hooks::Runner {
        api,
        req: &hook_req,
        method,
    };
    let mut failed = runner
        .phase(
            "pre-delete",
            &pre,
            pre_predicted,
            &mut outcome,
            &mut record.hooks,
            progress,
        )
        .await;
    if !failed {
        for (name, path) in &doomed {
            let o = delete_waiting(api, name, path, &req).await;
            progress(&format!("{name}: {}", o.result.as_str()));
            failed |= o.result == Result_::Failed;
            outcome.objects.push(o);
        }
    }
    if !failed {
        failed = runner
            .phase(
                "post-delete",
                &post,
                post_predicted,
                &mut outcome,
                &mut record.hooks,
                progress,
            )
            .await;
    }
    record.finished = run::now_rfc3339();
    if failed {
        record.status = "failed".into();
        outcome.status = "failed".into();
        store.write(api, &record, false).await?;
    } else if req.keep_history {
        record.status = "uninstalled".into();
        outcome.status = "uninstalled".into();
        store.write(api, &record, false).await?;
        for r in &history.revisions {
            if r.revision != latest.revision && r.status == "deployed" {
                let superseded = Revision {
                    status: "superseded".into(),
                    source: Source::Fieldguard,
                    ..r.clone()
                };
                store
                    .write(api, &superseded, r.source == Source::Helm)
                    .await?;
            }
        }
    } else {
        outcome.status = "uninstalled".into();
        // Every record of the release goes, Helm's and fieldguard's (a fieldguard record may
        // stand for a Helm revision it overrode).
        let mut purged = history.revisions.clone();
        purged.push(record.clone());
        for r in &purged {
            store.delete(api, r).await?;
            if r.source == Source::Fieldguard {
                let helm = Revision {
                    source: Source::Helm,
                    ..r.clone()
                };
                store.delete(api, &helm).await?;
            }
        }
    }
    Ok(outcome)
}

/// Deletes one object (background propagation, as Helm) and waits until it is gone.
async fn delete_waiting(
    api: &Api,
    name: &str,
    path: &str,
    req: &UninstallRequest,
) -> ObjectOutcome {
    match super::wait::delete_and_wait(api, path, "Background", false, req.timeout, req.poll).await
    {
        Ok(true) => ObjectOutcome::new(name.into(), Result_::Deleted),
        Ok(false) => ObjectOutcome::new(name.into(), Result_::Deleted).with_message("already gone"),
        Err(m) => super::objects::failure(name.into(), m),
    }
}

#[cfg(test)]
mod tests {
    use super::uninstall_rank;

    #[test]
    fn deletions_follow_helms_uninstall_order() {
        let mut kinds = vec![
            "Namespace",
            "Widget",
            "Deployment",
            "Service",
            "ConfigMap",
            "Ingress",
            "Apple",
        ];
        kinds.sort_by_key(|k| uninstall_rank(k));
        assert_eq!(
            kinds,
            [
                "Ingress",
                "Service",
                "Deployment",
                "ConfigMap",
                "Namespace",
                "Apple",
                "Widget"
            ]
        );
    }
}
