//! Running Helm hooks as Helm 4 runs them (helm/helm `pkg/action/hooks.go`): the hooks of one
//! event, ordered by weight, then name (a stable sort over hooks already in kind install order:
//! Helm 4's code, where the docs say weight, kind, name), one at a time. Per hook: delete the
//! previous one under `before-hook-creation` (the default policy), write it with the release's
//! method (server-side apply without force, or a create), wait for Jobs (Complete/Failed) and
//! Pods (Succeeded/Failed) — every other kind is done once written. A failed hook fails the phase:
//! it is deleted under `hook-failed`, and hooks that succeeded before it under `hook-succeeded`.
//! After a phase that succeeded, `hook-succeeded` hooks are deleted in reverse order. CRD hooks
//! are never deleted. Hooks are no release objects: never stamped with the release's
//! annotations, never adopted, never pruned.

use super::run::{ObjectOutcome, Progress, Request, Result_};
use crate::check::{self, Target};
use crate::live::api::Api;
use crate::manifest::hooks::Hook;
use crate::value::Value;

/// A hook of the run: the object, its annotations read, its URLs.
#[derive(Debug)]
pub struct HookTarget {
    pub target: Target,
    pub hook: Hook,
    pub collection: String,
    pub path: String,
}

impl HookTarget {
    fn is_crd(&self) -> bool {
        self.target.info.gvk.kind == "CustomResourceDefinition"
    }
    fn deletes_on(&self, policy: &str) -> bool {
        !self.is_crd() && self.hook.delete_policies.iter().any(|p| p == policy)
    }
}

/// The hooks that run on `event`, in the order Helm 4 runs them (`hooks` in manifest order).
pub fn of_event<'h>(hooks: &'h [HookTarget], event: &str) -> Vec<&'h HookTarget> {
    check::hooks::order(hooks, event, |h| (&h.hook, &h.target))
}

/// The operation the hooks run in and the hooks it does not run; `None` without hooks.
pub fn hooks_plan(hooks: &[HookTarget], op: check::hooks::Operation) -> Option<check::HookPlan> {
    (!hooks.is_empty()).then(|| check::HookPlan {
        operation: op,
        inferred: None,
        not_run: hooks
            .iter()
            .filter_map(|h| {
                let why = check::hooks::not_run(&h.hook, op)?;
                Some(format!("{}: {why}", h.target.object_ref))
            })
            .collect(),
    })
}

/// What running `h` in `event` will do (`nth`: its place in the phase), written with `method`.
pub fn predict(
    h: &HookTarget,
    live: Option<&Value>,
    opts: &check::Options,
    method: super::release::Method,
    event: &str,
    nth: (usize, usize),
) -> check::ObjectReport {
    let plural = h.collection.rsplit('/').next().unwrap_or("");
    let group = &h.target.info.gvk.group;
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let write = match method {
        super::release::Method::Ssa => check::hooks::Write::ServerSide,
        super::release::Method::Csa => check::hooks::Write::ClientSide {
            resource: &resource,
        },
    };
    check::hooks::predict(&h.target, &h.hook, live, opts, write, event, nth)
}

/// The record of one hook's last run (Helm's `last_run`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    pub object: String,
    pub event: String,
    /// `Succeeded` or `Failed`.
    pub phase: String,
    pub started: String,
    pub completed: String,
}

/// What a phase did.
#[derive(Default)]
struct Phase {
    outcomes: Vec<ObjectOutcome>,
    runs: Vec<HookRun>,
    failed: bool,
}

fn hook_outcome(h: &HookTarget, event: &str, result: Result_) -> ObjectOutcome {
    let mut o = ObjectOutcome::new(h.target.object_ref.to_string(), result);
    o.hook = Some(event.to_string());
    o
}

/// Where a written hook stands (Helm 4's status readers for Jobs and Pods).
fn hook_readiness(group: &str, kind: &str, obj: &Value) -> Option<Result<(), String>> {
    let cond = |t: &str| {
        obj.get_path(&["status", "conditions"])
            .and_then(Value::as_list)
            .unwrap_or(&[])
            .iter()
            .any(|c| c.str_at(&["type"]) == Some(t) && c.str_at(&["status"]) == Some("True"))
    };
    let int = |p: &[&str]| match obj.get_path(p) {
        Some(Value::Int(i)) => *i,
        _ => 0,
    };
    match (group, kind) {
        ("batch", "Job") => {
            let completions = match obj.get_path(&["spec", "completions"]) {
                Some(Value::Int(i)) => *i,
                _ => 1,
            };
            if cond("Failed") {
                Some(Err(format!(
                    "Job Failed. failed: {}/{completions}",
                    int(&["status", "failed"])
                )))
            } else if cond("Complete") {
                Some(Ok(()))
            } else {
                None
            }
        }
        ("", "Pod") => match obj.str_at(&["status", "phase"]) {
            Some("Succeeded") => Some(Ok(())),
            Some("Failed") => Some(Err(format!(
                "pod {} failed",
                obj.str_at(&["metadata", "name"]).unwrap_or("")
            ))),
            _ => None,
        },
        _ => Some(Ok(())),
    }
}

/// Deletes a hook (background propagation, as Helm) and waits until it is gone.
async fn delete(api: &Api, h: &HookTarget, req: &Request) -> Result<bool, String> {
    super::wait::delete_and_wait(
        api,
        &h.path,
        "Background",
        req.dry_run,
        req.hook_timeout,
        req.poll,
    )
    .await
}

/// Writes one hook with the release's method: server-side apply without force, or a create.
async fn write(
    api: &Api,
    h: &HookTarget,
    predicted: &check::ObjectReport,
    live: Option<&Value>,
    method: super::release::Method,
    req: &Request,
    mismatches: &mut Vec<String>,
) -> ObjectOutcome {
    if method == super::release::Method::Ssa {
        return super::objects::apply_ssa(
            api,
            &h.path,
            &h.target,
            live,
            predicted,
            req,
            check::Force::None,
            mismatches,
        )
        .await;
    }
    let name = h.target.object_ref.to_string();
    let mut url = h.collection.clone();
    if req.dry_run {
        url.push_str("?dryRun=All");
    }
    let body =
        crate::value::json::to_string(&h.target.doc.object, crate::value::json::Style::PLAIN);
    match api
        .write(
            http::Method::POST,
            &url,
            "application/json",
            body.into_bytes(),
        )
        .await
    {
        Ok(_) => ObjectOutcome::new(name, Result_::Created),
        Err(Ok(s)) => ObjectOutcome::new(name, Result_::Failed)
            .with_message(format!("{}: {}", s.code, s.message)),
        Err(Err(e)) => ObjectOutcome::new(name, Result_::Failed).with_message(e.message),
    }
}

/// Waits for a written hook until it succeeds or fails, or `req.hook_timeout` passes.
async fn wait(api: &Api, h: &HookTarget, req: &Request) -> Result<(), String> {
    let gvk = &h.target.info.gvk;
    if req.dry_run || hook_readiness(&gvk.group, &gvk.kind, &Value::Null) == Some(Ok(())) {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + req.hook_timeout;
    loop {
        match api.get_json(&h.path).await {
            Ok(Some(o)) => {
                if let Some(r) = hook_readiness(&gvk.group, &gvk.kind, &o) {
                    return r;
                }
            }
            Ok(None) => return Err("the hook disappeared while it ran".into()),
            Err(e) => tracing::warn!("waiting for hook {}: {}", h.target.object_ref, e.message),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "not done within {}s (the hook timeout)",
                req.hook_timeout.as_secs()
            ));
        }
        tokio::time::sleep(req.poll).await;
    }
}

/// The context a phase runs in.
struct PhaseRun<'a> {
    api: &'a Api,
    req: &'a Request,
    method: super::release::Method,
    mismatches: &'a mut Vec<String>,
}

/// What runs hooks: the cluster, the run's request, the release's method.
pub struct Runner<'a> {
    pub api: &'a Api,
    pub req: &'a Request,
    pub method: super::release::Method,
}

impl Runner<'_> {
    /// Runs the hooks of `event` (`predicted`: the prediction of each, in the same order) into
    /// `outcome` (results, prediction mismatches) and `runs`; true when the phase failed.
    pub async fn phase(
        &self,
        event: &str,
        hooks: &[&HookTarget],
        predicted: &[check::ObjectReport],
        outcome: &mut super::outcome::Outcome,
        runs: &mut Vec<HookRun>,
        progress: Progress<'_>,
    ) -> bool {
        if hooks.is_empty() {
            return false;
        }
        let phase = PhaseRun {
            api: self.api,
            req: self.req,
            method: self.method,
            mismatches: &mut outcome.mismatches,
        }
        .run(event, hooks, predicted, progress)
        .await;
        outcome.objects.extend(phase.outcomes);
        runs.extend(phase.runs);
        phase.failed
    }
}

impl PhaseRun<'_> {
    /// Runs the hooks of `event` (`predicted`: the prediction of each, in the same order).
    async fn run(
        &mut self,
        event: &str,
        hooks: &[&HookTarget],
        predicted: &[check::ObjectReport],
        progress: Progress<'_>,
    ) -> Phase {
        let mut phase = Phase::default();
        let mut done: Vec<&HookTarget> = Vec::new();
        for (h, p) in hooks.iter().zip(predicted) {
            let name = h.target.object_ref.to_string();
            let started = super::run::now_rfc3339();
            // The previous hook object goes first (before-hook-creation).
            let mut live = self.api.get_json(&h.path).await.ok().flatten();
            if live.is_some() && h.deletes_on("before-hook-creation") {
                match delete(self.api, h, self.req).await {
                    Ok(_) => {
                        progress(&format!(
                            "{event} hook {name}: deleted (before-hook-creation)"
                        ));
                        phase.outcomes.push(
                            hook_outcome(h, event, Result_::Deleted)
                                .with_message("before-hook-creation"),
                        );
                        live = None;
                    }
                    Err(m) => {
                        phase.outcomes.push(
                            hook_outcome(h, event, Result_::Failed)
                                .with_message(format!("deleting the previous hook: {m}")),
                        );
                        phase.failed = true;
                        break;
                    }
                }
            }
            let mut o = write(
                self.api,
                h,
                p,
                live.as_ref(),
                self.method,
                self.req,
                self.mismatches,
            )
            .await;
            o.hook = Some(event.to_string());
            let written = matches!(
                o.result,
                Result_::Created
                    | Result_::Configured
                    | Result_::Unchanged
                    | Result_::OwnershipOnly
            );
            let verdict = if written {
                wait(self.api, h, self.req).await
            } else {
                Err(o
                    .message
                    .clone()
                    .unwrap_or_else(|| o.result.as_str().into()))
            };
            progress(&format!("{event} hook {name}: {}", o.result.as_str()));
            let ok = verdict.is_ok();
            if let Err(m) = &verdict
                && written
            {
                o.result = Result_::Failed;
                o.message = Some(format!("hook failed: {m}"));
            }
            if written && !self.req.dry_run {
                self.diagnose(h, event, ok, &mut o, progress).await;
            }
            phase.runs.push(HookRun {
                object: name,
                event: event.to_string(),
                phase: if ok { "Succeeded" } else { "Failed" }.into(),
                started,
                completed: super::run::now_rfc3339(),
            });
            phase.outcomes.push(o);
            if !ok {
                phase.failed = true;
                if h.deletes_on("hook-failed") {
                    self.delete_after(h, event, "hook-failed", &mut phase, progress)
                        .await;
                }
                for d in done.iter().rev() {
                    if d.deletes_on("hook-succeeded") {
                        self.delete_after(d, event, "hook-succeeded", &mut phase, progress)
                            .await;
                    }
                }
                return phase;
            }
            done.push(h);
        }
        if !phase.failed {
            for d in done.iter().rev() {
                if d.deletes_on("hook-succeeded") {
                    self.delete_after(d, event, "hook-succeeded", &mut phase, progress)
                        .await;
                }
            }
        }
        phase
    }

    /// Keeps what a hook that ended leaves for diagnosis, before any delete policy removes it:
    /// its logs when its output log policy asks, the events about it when it failed.
    async fn diagnose(
        &self,
        h: &HookTarget,
        event: &str,
        ok: bool,
        o: &mut ObjectOutcome,
        progress: Progress<'_>,
    ) {
        let (r, gvk) = (&h.target.object_ref, &h.target.info.gvk);
        let name = r.to_string();
        let policy = if ok { "hook-succeeded" } else { "hook-failed" };
        if super::hook_logs::wants(&h.target.doc.object, policy) {
            match super::hook_logs::logs(self.api, &gvk.group, &gvk.kind, &r.namespace, &r.name)
                .await
            {
                Ok(logs) => {
                    progress(&format!(
                        "{event} hook {name}: logs of {} container(s) kept ({policy})",
                        logs.len()
                    ));
                    o.logs = logs;
                }
                Err(m) => progress(&format!(
                    "{event} hook {name}: its logs cannot be read: {m}"
                )),
            }
        }
        if !ok {
            o.events =
                super::hook_logs::events(self.api, &gvk.group, &gvk.kind, &r.namespace, &r.name)
                    .await;
        }
    }

    /// Deletes a hook after it ran, by `policy` (a failure is reported, not fatal: Helm logs it).
    async fn delete_after(
        &self,
        h: &HookTarget,
        event: &str,
        policy: &str,
        phase: &mut Phase,
        progress: Progress<'_>,
    ) {
        let name = h.target.object_ref.to_string();
        let o = match delete(self.api, h, self.req).await {
            Ok(_) => hook_outcome(h, event, Result_::Deleted).with_message(policy),
            Err(m) => hook_outcome(h, event, Result_::Kept)
                .with_message(format!("{policy}: the deletion failed: {m}")),
        };
        progress(&format!(
            "{event} hook {name}: {} ({policy})",
            o.result.as_str()
        ));
        phase.outcomes.push(o);
    }
}

#[cfg(test)]
mod tests {
    use super::hook_readiness;
    use crate::value::yaml::parse_one;

    #[test]
    fn jobs_and_pods_are_waited_for_and_the_rest_is_done_once_written() {
        let job = |status: &str| {
            parse_one(&format!("{{spec: {{completions: 2}}, status: {status}}}")).unwrap()
        };
        assert_eq!(hook_readiness("batch", "Job", &job("{active: 1}")), None);
        assert_eq!(
            hook_readiness(
                "batch",
                "Job",
                &job("{conditions: [{type: Complete, status: 'True'}]}")
            ),
            Some(Ok(()))
        );
        assert_eq!(
            hook_readiness(
                "batch",
                "Job",
                &job("{failed: 2, conditions: [{type: Failed, status: 'True'}]}")
            ),
            Some(Err("Job Failed. failed: 2/2".into()))
        );
        let pod = |phase: &str| {
            parse_one(&format!(
                "{{metadata: {{name: p}}, status: {{phase: {phase}}}}}"
            ))
            .unwrap()
        };
        assert_eq!(hook_readiness("", "Pod", &pod("Running")), None);
        assert_eq!(hook_readiness("", "Pod", &pod("Succeeded")), Some(Ok(())));
        assert_eq!(
            hook_readiness("", "Pod", &pod("Failed")),
            Some(Err("pod p failed".into()))
        );
        assert_eq!(
            hook_readiness("example.com", "Widget", &pod("Running")),
            Some(Ok(()))
        );
    }
}
