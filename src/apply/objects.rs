//! Writing the release's objects: server-side and client-side applies compared with their
//! prediction, deletion of objects dropped from the release, waiting for CRDs and workloads.

use super::client_side::{self, Action};
use super::outcome::{ObjectOutcome, Outcome, Progress, Request, Result_, RunError};
use super::release::Method;
use super::run::{RELEASE_NAME_ANNOTATION, RESOURCE_POLICY_ANNOTATION, annotation};
use super::ssa::{self, SsaError, SsaOptions};
use super::wait::{self, Readiness};
use crate::check::{self, Force, Target};
use crate::live::ObjectRef;
use crate::live::api::{Api, percent_encode};
use crate::managedfields::entries_from_value;
use crate::manifest::Document;
use crate::predict::Verdict;
use crate::value::{Map, Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// Counts an object's apply (`fieldguard_applies{method,result}`); dry runs are not counted.
pub(super) fn count_apply(method: Method, result: Result_, dry_run: bool) {
    if dry_run {
        return;
    }
    crate::telemetry::metrics::global()
        .applies
        .get_or_create(&crate::telemetry::metrics::ResultLabels {
            method: method.as_str().into(),
            result: result.as_str().into(),
        })
        .inc();
}

pub(super) fn skipped(object: String) -> ObjectOutcome {
    ObjectOutcome::new(object, Result_::Skipped)
}

pub(super) fn failure(object: String, message: String) -> ObjectOutcome {
    ObjectOutcome::new(object, Result_::Failed).with_message(message)
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn apply_ssa(
    api: &Api,
    path: &str,
    t: &Target,
    live: Option<&Value>,
    predicted: &check::ObjectReport,
    req: &Request,
    force: Force,
    mismatches: &mut Vec<String>,
) -> ObjectOutcome {
    let name = t.object_ref.to_string();
    let opts = SsaOptions {
        field_manager: req.field_manager.clone(),
        force,
        dry_run: req.dry_run,
        expect_resource_version: if req.expect_unchanged {
            predicted.resource_version.clone()
        } else {
            None
        },
    };
    match ssa::apply(api, path, &t.doc.object, &opts).await {
        Ok(applied) => {
            let before = live.and_then(|l| l.str_at(&["metadata", "resourceVersion"]));
            let after = applied.object.str_at(&["metadata", "resourceVersion"]);
            let same_contents = |l: &Value| strip_volatile(l) == strip_volatile(&applied.object);
            let same_owners = |l: &Value| {
                l.get_path(&["metadata", "managedFields"])
                    == applied.object.get_path(&["metadata", "managedFields"])
            };
            let result = match (live, req.dry_run) {
                (None, _) => Result_::Created,
                (Some(_), false) if before == after => Result_::Unchanged,
                (Some(l), false) if same_contents(l) => Result_::OwnershipOnly,
                (Some(l), true) if same_contents(l) && same_owners(l) => Result_::Unchanged,
                (Some(l), true) if same_contents(l) => Result_::OwnershipOnly,
                _ => Result_::Configured,
            };
            let predicted_result = match predicted.verdict {
                Verdict::Created => Some(Result_::Created),
                Verdict::Configured => Some(Result_::Configured),
                Verdict::Unchanged => Some(Result_::Unchanged),
                Verdict::OwnershipOnly => Some(Result_::OwnershipOnly),
                _ => None,
            };
            if predicted_result.is_some_and(|p| p != result) && applied.forced_from.is_empty() {
                mismatches.push(format!(
                    "{name}: predicted {}, the server {}",
                    predicted_result.map_or("", |p| p.as_str()),
                    result.as_str()
                ));
            }
            let owned = owned_leaves(&applied.object, &req.field_manager);
            if predicted_result.is_some() && owned != Some(predicted.owned_fields) {
                mismatches.push(format!(
                    "{name}: predicted {} fields owned by {}, the server recorded {}",
                    predicted.owned_fields,
                    req.field_manager,
                    owned.map_or("none".to_string(), |n| n.to_string())
                ));
            }
            ObjectOutcome {
                forced_from: applied.forced_from,
                ..ObjectOutcome::new(name, result)
            }
        }
        Err(SsaError::Conflicts { message, conflicts }) => ObjectOutcome {
            conflicts,
            ..ObjectOutcome::new(name, Result_::Conflicted).with_message(message)
        },
        Err(e) => failure(name, e.to_string()),
    }
}

/// How many fields `manager`'s Apply entry owns on `obj` (None: unreadable managed fields).
fn owned_leaves(obj: &Value, manager: &str) -> Option<usize> {
    let entries = entries_from_value(
        obj.get_path(&["metadata", "managedFields"])
            .unwrap_or(&Value::Null),
    )
    .ok()?;
    let Some(e) = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply" && e.subresource.is_empty())
    else {
        return Some(0);
    };
    let set = crate::fieldpath::Set::from_fields_v1(e.fields_v1.as_deref()?.as_bytes()).ok()?;
    Some(set.leaves().paths().len())
}

/// The object without what every write changes (for dry-run comparisons).
fn strip_volatile(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v
        .as_map_mut()
        .and_then(|o| o.get_mut("metadata"))
        .and_then(Value::as_map_mut)
    {
        m.remove("managedFields");
        m.remove("resourceVersion");
        m.remove("generation");
    }
    v
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn apply_csa(
    api: &Api,
    coll: &str,
    path: &str,
    t: &Target,
    live: Option<&Value>,
    fallback: Option<&Value>,
    meta: Option<&crate::patch::meta::Meta<'_>>,
    req: &Request,
) -> ObjectOutcome {
    let name = t.object_ref.to_string();
    let action = match client_side::plan(&t.doc.object, live, fallback, meta) {
        Ok(a) => a,
        Err(e) => return failure(name, format!("cannot compute the patch: {e}")),
    };
    let mut query = format!("?fieldManager={}", percent_encode(&req.field_manager));
    if req.dry_run {
        query.push_str("&dryRun=All");
    }
    let (method, url, content_type, body, result) = match action {
        Action::Unchanged => {
            return ObjectOutcome::new(name, Result_::Unchanged);
        }
        Action::Create(body) => (
            http::Method::POST,
            format!("{coll}{query}"),
            "application/json",
            body,
            Result_::Created,
        ),
        Action::Patch {
            content_type,
            mut patch,
        } => {
            if req.expect_unchanged
                && let Some(rv) = live.and_then(|l| l.str_at(&["metadata", "resourceVersion"]))
            {
                let meta = match patch.get_mut("metadata").and_then(Value::as_map_mut) {
                    Some(m) => m,
                    None => {
                        patch.insert("metadata", Value::Map(Map::new()));
                        patch
                            .get_mut("metadata")
                            .and_then(Value::as_map_mut)
                            .expect("just inserted")
                    }
                };
                meta.insert("resourceVersion", Value::from(rv));
            }
            (
                http::Method::PATCH,
                format!("{path}{query}"),
                content_type,
                Value::Map(patch),
                Result_::Configured,
            )
        }
    };
    let text = json::to_string(&body, json::Style::PLAIN).into_bytes();
    match api.write(method, &url, content_type, text).await {
        Ok(_) => ObjectOutcome::new(name, result),
        Err(Ok(s)) if s.code == 409 => failure(
            name,
            format!("the object changed since the prediction: {}", s.message),
        ),
        Err(Ok(s)) => failure(name, format!("{}: {}", s.code, s.message)),
        Err(Err(e)) => failure(name, e.message),
    }
}

pub(super) async fn delete_dropped(
    api: &Api,
    path: &str,
    r: &ObjectRef,
    doc: &Document,
    req: &Request,
) -> ObjectOutcome {
    let name = r.to_string();
    let live = match api.get_json(path).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            return ObjectOutcome::new(name, Result_::Deleted).with_message("already gone");
        }
        Err(e) => return failure(name, e.message),
    };
    let keep = |o: &Value| annotation(o, RESOURCE_POLICY_ANNOTATION) == Some("keep");
    let ours = annotation(&live, RELEASE_NAME_ANNOTATION) == Some(req.release.as_str());
    if keep(&doc.object) || keep(&live) || !ours {
        return ObjectOutcome::new(name, Result_::Kept).with_message(if ours {
            "helm.sh/resource-policy: keep"
        } else {
            "no longer owned by this release"
        });
    }
    let mut url = format!("{path}?propagationPolicy=Background");
    if req.dry_run {
        url.push_str("&dryRun=All");
    }
    match api
        .write(http::Method::DELETE, &url, "application/json", Vec::new())
        .await
    {
        Ok(_) => ObjectOutcome::new(name, Result_::Deleted),
        Err(Ok(s)) if s.code == 404 => {
            ObjectOutcome::new(name, Result_::Deleted).with_message("already gone")
        }
        Err(Ok(s)) => failure(name, format!("{}: {}", s.code, s.message)),
        Err(Err(e)) => failure(name, e.message),
    }
}

pub(super) async fn wait_established(
    api: &Api,
    crds: &[String],
    poll: Duration,
    progress: Progress<'_>,
) -> Result<(), RunError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for path in crds {
        loop {
            let est = api.get_json(path).await?.is_some_and(|c| {
                c.get_path(&["status", "conditions"])
                    .and_then(Value::as_list)
                    .unwrap_or(&[])
                    .iter()
                    .any(|c| {
                        c.str_at(&["type"]) == Some("Established")
                            && c.str_at(&["status"]) == Some("True")
                    })
            });
            if est {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(RunError::Cluster(format!(
                    "{path}: the CustomResourceDefinition was not Established within 60s"
                )));
            }
            progress(&format!("waiting for {path} to be Established"));
            tokio::time::sleep(poll).await;
        }
    }
    Ok(())
}

/// Waits for the release's workloads; returns true if one failed (and its failure counts).
pub(super) async fn wait_for(
    api: &Api,
    targets: &[Target],
    paths: &HashMap<ObjectRef, (String, String)>,
    outcome: &mut Outcome,
    timeout: Duration,
    poll: Duration,
    progress: Progress<'_>,
) -> bool {
    let watched: Vec<&Target> = targets
        .iter()
        .filter(|t| wait::is_workload(&t.info.gvk.group, &t.info.gvk.kind))
        .filter(|t| !wait::skip_wait(&t.doc.object))
        .collect();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut state: HashMap<ObjectRef, Readiness> = HashMap::new();
    loop {
        for t in &watched {
            if matches!(
                state.get(&t.object_ref),
                Some(Readiness::Ready | Readiness::Failed(_))
            ) {
                continue;
            }
            let (_, path) = &paths[&t.object_ref];
            let r = match api.get_json(path).await {
                Ok(Some(o)) => wait::readiness(&t.info.gvk.group, &t.info.gvk.kind, &o),
                Ok(None) => Readiness::Failed("the object disappeared".into()),
                Err(e) => Readiness::Progressing(e.message),
            };
            state.insert(t.object_ref.clone(), r);
        }
        let rows: Vec<String> = watched
            .iter()
            .map(|t| {
                let s = match state.get(&t.object_ref) {
                    Some(Readiness::Ready) => "ready".to_string(),
                    Some(Readiness::Progressing(m)) => format!("progressing: {m}"),
                    Some(Readiness::Failed(m)) => format!("FAILED: {m}"),
                    None => "unknown".into(),
                };
                format!("  {:<50} {s}", t.object_ref.to_string())
            })
            .collect();
        progress(&format!("waiting for workloads:\n{}", rows.join("\n")));
        let done = watched.iter().all(|t| {
            matches!(
                state.get(&t.object_ref),
                Some(Readiness::Ready | Readiness::Failed(_))
            )
        });
        if done || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(poll).await;
    }
    let mut failed = false;
    for t in &watched {
        let name = t.object_ref.to_string();
        let (text, bad) = match state.get(&t.object_ref) {
            Some(Readiness::Ready) => ("ready".to_string(), false),
            Some(Readiness::Failed(m)) => (format!("failed: {m}"), true),
            Some(Readiness::Progressing(m)) => (format!("not ready after {timeout:?}: {m}"), true),
            None => ("unknown".into(), true),
        };
        let mut text = text;
        if bad {
            text.push_str(&events_of(api, &t.object_ref).await);
            if !wait::ignore_failure(&t.doc.object) {
                failed = true;
                if let Some(o) = outcome.objects.iter_mut().find(|o| o.object == name) {
                    o.result = Result_::Failed;
                }
            }
        }
        if let Some(o) = outcome.objects.iter_mut().find(|o| o.object == name) {
            o.readiness = Some(text);
        }
    }
    failed
}

/// The object's latest events, for failure messages.
pub(super) async fn events_of(api: &Api, r: &ObjectRef) -> String {
    let path = format!(
        "{}?fieldSelector={}",
        crate::live::api::resource_path("v1", "events", &r.namespace, None),
        percent_encode(&format!("involvedObject.name={}", r.name))
    );
    let Ok(Some(list)) = api.get_json(&path).await else {
        return String::new();
    };
    let lines: Vec<String> = list
        .get_path(&["items"])
        .and_then(Value::as_list)
        .unwrap_or(&[])
        .iter()
        .rev()
        .take(5)
        .map(|e| {
            format!(
                "\n    {} {}: {}",
                e.str_at(&["type"]).unwrap_or(""),
                e.str_at(&["reason"]).unwrap_or(""),
                e.str_at(&["message"]).unwrap_or("")
            )
        })
        .collect();
    lines.concat()
}
