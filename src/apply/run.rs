//! Applying a release: validation of every manifest before the first write, the HIP-0023 method,
//! ownership checks (adoption), create-only fields, the prediction (shown, and the only thing
//! done with `plan`), recreation where asked, CSA→SSA migration, the pre-phase hooks, CRDs and
//! Namespaces first (waiting for CRDs to be Established), per-object applies (`objects`),
//! deletion of dropped objects, waiting for workloads, the post-phase hooks, the comparison of
//! the prediction with what the server did, and the revision record.

use super::hooks::{self, HookTarget};
use super::migrate::{self, Migration};
use super::objects::{
    apply_csa, apply_ssa, count_apply, delete_dropped, failure, skipped, wait_established, wait_for,
};
pub use super::outcome::{ObjectOutcome, Outcome, Progress, Request, Result_, RunError};
use super::recreate::{self, Decision};
use super::release::{self, History, Method, ObjectResult, Operation, Revision};
use super::storage::Store;
use super::wait;
use crate::catalog::{Catalog, Discovered};
use crate::check::{self, Force, Target};
use crate::live::api::{Api, percent_encode};
use crate::live::{Fetched, ObjectRef};
use crate::managedfields::entries_from_value;
use crate::manifest::hooks::Hook;
use crate::manifest::{self, Document, ManifestError};
use crate::predict::Verdict;
use crate::schema::Gvk;
use crate::value::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};

/// Helm's ownership annotations (fieldguard stamps and honours them).
pub const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
pub const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";
/// The label Helm puts on release objects.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// `keep`: never delete the object when it leaves the release.
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";
pub use crate::manifest::directives::CREATE_ONLY_ANNOTATION;

pub(super) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// URL of the collection and of the object.
pub(super) fn urls(api_version: &str, plural: &str, r: &ObjectRef) -> (String, String) {
    use crate::live::api::resource_path;
    (
        resource_path(api_version, plural, &r.namespace, None),
        resource_path(api_version, plural, &r.namespace, Some(&r.name)),
    )
}

pub(super) fn parse_manifest(text: &str, name: &str) -> Result<Vec<Document>, Vec<ManifestError>> {
    let mut loaded = manifest::load(&[], &mut std::io::empty());
    manifest::parse_into(&std::sync::Arc::from(name), text.as_bytes(), &mut loaded);
    if loaded.errors.is_empty() {
        Ok(loaded.documents)
    } else {
        Err(loaded.errors)
    }
}

pub(super) fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.str_at(&["metadata", "annotations", key])
}

fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    set_metadata(obj, "annotations", key, value)
}

/// Sets `metadata.<section>.<key>` (`section`: `labels` or `annotations`).
fn set_metadata(obj: &mut Value, section: &str, key: &str, value: &str) {
    let Some(root) = obj.as_map_mut() else { return };
    if root.get("metadata").and_then(Value::as_map).is_none() {
        root.insert("metadata", Value::Map(Map::new()));
    }
    let Some(meta) = root.get_mut("metadata").and_then(Value::as_map_mut) else {
        return;
    };
    if meta.get(section).and_then(Value::as_map).is_none() {
        meta.insert(section, Value::Map(Map::new()));
    }
    if let Some(a) = meta.get_mut(section).and_then(Value::as_map_mut) {
        a.insert(key, Value::from(value));
    }
}

/// Adds a CRD's types to the catalog's discovery (their plural and scope), for CRDs the cluster
/// does not serve yet.
fn discover_crd(catalog: &mut Catalog, crd: &Value) {
    let group = crd.str_at(&["spec", "group"]).unwrap_or("");
    let kind = crd.str_at(&["spec", "names", "kind"]).unwrap_or("");
    let plural = crd.str_at(&["spec", "names", "plural"]).unwrap_or("");
    let namespaced = crd.str_at(&["spec", "scope"]) != Some("Cluster");
    for v in crd
        .get_path(&["spec", "versions"])
        .and_then(Value::as_list)
        .unwrap_or(&[])
    {
        let version = v.str_at(&["name"]).unwrap_or("");
        let gvk = Gvk::new(group, version, kind);
        if catalog.discovered(&gvk).is_none() {
            catalog.add_discovered(
                gvk,
                Discovered {
                    namespaced,
                    plural: plural.to_string(),
                    has_status: v.get_path(&["subresources", "status"]).is_some(),
                },
            );
        }
    }
}

/// Removes a dotted map path (`spec.replicas`) from `obj`; returns the removed value.
fn take_path(obj: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut cur = obj;
    for p in parents {
        cur = cur.as_map_mut()?.get_mut(p)?;
    }
    cur.as_map_mut()?.remove(last)
}

fn put_path(obj: &mut Value, path: &[&str], v: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for p in parents {
        let Some(m) = cur.as_map_mut() else { return };
        if m.get(p).and_then(Value::as_map).is_none() {
            m.insert(*p, Value::Map(Map::new()));
        }
        let Some(next) = m.get_mut(p) else { return };
        cur = next;
    }
    if let Some(m) = cur.as_map_mut() {
        m.insert(*last, v);
    }
}

/// Create-only fields: on an existing object, a field listed in the annotation is left out of
/// the apply — unless the release's manager still owns it (then the live value is applied, so
/// the field is neither changed nor dropped).
fn strip_create_only(body: &mut Value, live: &Value, manager: &str) {
    // A malformed list was refused when the manifests were resolved.
    let Ok(fields) = crate::manifest::directives::create_only_fields(body) else {
        return;
    };
    if fields.is_empty() {
        return;
    }
    let owned = entries_from_value(
        live.get_path(&["metadata", "managedFields"])
            .unwrap_or(&Value::Null),
    )
    .unwrap_or_default()
    .into_iter()
    .filter(|e| e.manager == manager)
    .filter_map(|e| e.fields_v1)
    .filter_map(|f| crate::fieldpath::Set::from_fields_v1(f.as_bytes()).ok())
    .fold(crate::fieldpath::Set::new(), |a, s| a.union(&s));
    for field in &fields {
        let path: Vec<&str> = field.iter().map(String::as_str).collect();
        take_path(body, &path);
        let pes: Vec<_> = path
            .iter()
            .map(|p| crate::fieldpath::PathElement::field(p))
            .collect();
        if owned.has(&pes)
            && let Some(v) = live.get_path(&path)
        {
            put_path(body, &path, v.clone());
        }
    }
}

fn order_rank(t: &Target) -> u8 {
    match (t.info.gvk.group.as_str(), t.info.gvk.kind.as_str()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 0,
        ("", "Namespace") => 1,
        _ => 2,
    }
}

/// Runs a release apply.
#[tracing::instrument(name = "release", skip_all, fields(release = %req.release, namespace = %req.namespace))]
pub async fn run(api: &Api, req: Request, progress: Progress<'_>) -> Result<Outcome, RunError> {
    let ns = req.namespace.clone();
    let store = Store::open(req.driver.clone(), !req.plan_only && !req.dry_run).await?;
    let history = store.history(api, &req.release, &ns).await?;
    for u in &history.unreadable {
        progress(&format!("warning: unreadable release record {u}"));
    }
    let op = release::operation(&history, req.rollback_to)?;
    let method = release::resolve_method(req.server_side, op, &history);
    release::check_flags(
        method,
        req.server_side,
        !matches!(req.force, Force::None),
        !req.migrate_from.is_empty(),
    )?;
    let (documents, manifest_text) = match op {
        Operation::Rollback(r) => {
            let rev = history
                .get(r)
                .ok_or_else(|| RunError::Refused(format!("no revision {r}")))?;
            let docs = parse_manifest(&rev.manifest, &format!("revision {r}"))
                .map_err(RunError::Invalid)?;
            (docs, rev.manifest.clone())
        }
        _ => (req.documents.clone(), req.manifest.clone()),
    };
    let revision = history.next_revision();

    // Types: the cluster's discovery and schemas, plus CRDs of the release.
    let versions: BTreeSet<String> = documents
        .iter()
        .map(|d| d.api_version().to_string())
        .collect();
    let mut catalog = api.catalog_for(&versions).await?;
    for d in &documents {
        if crate::schema::crd::is_crd(&d.object) {
            discover_crd(&mut catalog, &d.object);
        }
    }
    let resolved = check::resolve(documents, &mut catalog, &ns).map_err(RunError::Invalid)?;
    // Hooks are no release objects: they run around them, in their phases.
    let (hook_list, mut targets): (Vec<Target>, Vec<Target>) = resolved
        .into_iter()
        .partition(|t| Hook::of(&t.doc.object).is_some());
    targets.sort_by_key(order_rank);
    let (pre_event, post_event) = match op {
        Operation::Install => ("pre-install", "post-install"),
        Operation::Upgrade => ("pre-upgrade", "post-upgrade"),
        Operation::Rollback(_) => ("pre-rollback", "post-rollback"),
    };

    // Live objects and their URLs.
    let mut paths: HashMap<ObjectRef, (String, String)> = HashMap::new();
    let mut live = Fetched {
        source: format!("cluster {}", api.url()),
        ..Fetched::default()
    };
    for t in &targets {
        let Some(d) = catalog.discovered(&t.info.gvk) else {
            return Err(RunError::Refused(format!(
                "{}: the cluster does not serve {} and no CustomResourceDefinition in the release defines it",
                t.object_ref,
                t.info.gvk.api_version()
            )));
        };
        let (coll, obj) = urls(&t.info.gvk.api_version(), &d.plural, &t.object_ref);
        if let Some(v) = api.get_json(&obj).await? {
            live.objects
                .insert(t.object_ref.clone(), std::sync::Arc::new(v));
        }
        paths.insert(t.object_ref.clone(), (coll, obj));
    }
    let mut hooks: Vec<HookTarget> = Vec::new();
    for t in hook_list {
        let Some(hook) = Hook::of(&t.doc.object) else {
            continue;
        };
        if hook.events.is_empty() || !hook.unknown_events.is_empty() {
            // Helm 4 drops a document whose hook annotation names an event it does not know.
            progress(&format!(
                "warning: {}:{}: {} is not applied: Helm drops a hook with unknown event(s) {:?}",
                t.doc.origin.file,
                t.doc.origin.line,
                t.object_ref,
                hook.unknown_events.join(",")
            ));
            continue;
        }
        let Some(d) = catalog.discovered(&t.info.gvk) else {
            return Err(RunError::Refused(format!(
                "{} (hook): the cluster does not serve {}",
                t.object_ref,
                t.info.gvk.api_version()
            )));
        };
        let (collection, path) = urls(&t.info.gvk.api_version(), &d.plural, &t.object_ref);
        if let Some(v) = api.get_json(&path).await? {
            live.objects
                .insert(t.object_ref.clone(), std::sync::Arc::new(v));
        }
        hooks.push(HookTarget {
            target: t,
            hook,
            collection,
            path,
        });
    }
    let pre_hooks = hooks::of_event(&hooks, pre_event);
    let post_hooks = hooks::of_event(&hooks, post_event);

    // Ownership: never take an object silently. Adopted objects are brought to the manifest's
    // state: their fields are taken over from whoever set them.
    let mut refusals = Vec::new();
    let mut adopted: BTreeSet<ObjectRef> = BTreeSet::new();
    for t in &targets {
        let Some(l) = live.objects.get(&t.object_ref) else {
            continue;
        };
        match annotation(l, RELEASE_NAME_ANNOTATION) {
            Some(owner)
                if owner != req.release
                    || annotation(l, RELEASE_NAMESPACE_ANNOTATION).is_some_and(|n| n != ns) =>
            {
                refusals.push(format!(
                    "{} belongs to release {owner:?} (namespace {:?}); it is not taken over",
                    t.object_ref,
                    annotation(l, RELEASE_NAMESPACE_ANNOTATION).unwrap_or("")
                ));
            }
            Some(_) => {}
            None if req.adopt => {
                adopted.insert(t.object_ref.clone());
            }
            None => refusals.push(format!(
                "{} exists and belongs to no release; pass --adopt to bring it into {:?}",
                t.object_ref, req.release
            )),
        }
    }
    if !refusals.is_empty() {
        return Err(RunError::Refused(refusals.join("\n")));
    }

    // What is sent: ownership stamped, create-only fields handled.
    for t in &mut targets {
        set_annotation(&mut t.doc.object, RELEASE_NAME_ANNOTATION, &req.release);
        set_annotation(&mut t.doc.object, RELEASE_NAMESPACE_ANNOTATION, &ns);
        // Helm's label on release objects (never on hooks): Helm adopts only objects that
        // carry it, so a release fieldguard installed can be taken on by Helm.
        set_metadata(&mut t.doc.object, "labels", MANAGED_BY_LABEL, "Helm");
        if let Some(l) = live.objects.get(&t.object_ref) {
            strip_create_only(&mut t.doc.object, l, &req.field_manager);
        }
    }

    // Migration (server-side runs): planned locally, predicted against, written before applying.
    let mut migrations = Vec::new();
    if method == Method::Ssa {
        for t in &targets {
            let Some(l) = live.objects.get(&t.object_ref) else {
                continue;
            };
            if let Some(m) = migrate::plan(l, &req.field_manager, &req.migrate_from)
                .map_err(|e| RunError::Refused(format!("{}: {e}", t.object_ref)))?
            {
                migrations.push((t.object_ref.clone(), m));
            }
        }
        for (r, m) in &migrations {
            if let Some(l) = live.objects.get_mut(r) {
                *l = std::sync::Arc::new(migrate::migrated(l, m));
            }
        }
    }

    // The prediction: every object, before the first write.
    let opts = check::Options {
        field_manager: req.field_manager.clone(),
        force: req.force.clone(),
        namespace: ns.clone(),
        now: time::OffsetDateTime::now_utc().unix_timestamp(),
    };
    let adopt_opts = check::Options {
        force: Force::All,
        ..opts.clone()
    };
    let hook_op = match op {
        Operation::Install => check::hooks::Operation::Install,
        Operation::Upgrade => check::hooks::Operation::Upgrade,
        Operation::Rollback(_) => check::hooks::Operation::Rollback,
    };
    let mut report = check::Report {
        field_manager: opts.field_manager.clone(),
        force: opts.force.clone(),
        source: live.source.clone(),
        hooks: hooks::hooks_plan(&hooks, hook_op),
        objects: targets
            .iter()
            .map(|t| {
                let o = if adopted.contains(&t.object_ref) {
                    &adopt_opts
                } else {
                    &opts
                };
                check::check_one(t, live.get(&t.object_ref), o)
            })
            .collect(),
    };
    // Recreation of objects whose update would be refused, where asked (or a Job's default).
    let mut recreated: BTreeSet<ObjectRef> = BTreeSet::new();
    let mut bad = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        match recreate::decide(
            t,
            live.get(&t.object_ref),
            &mut report.objects[i],
            req.recreate_on_immutable,
            &opts,
        ) {
            Ok(Decision::Apply) => {}
            Ok(Decision::Recreate(created)) => {
                report.objects[i] = *created;
                recreated.insert(t.object_ref.clone());
            }
            Err(m) => bad.push(ManifestError {
                file: t.doc.origin.file.clone(),
                doc: Some(t.doc.origin.doc),
                line: Some(t.doc.origin.line),
                path: Some(format!(
                    ".metadata.annotations.{}",
                    recreate::RECREATE_ANNOTATION
                )),
                message: format!("{}: {m}", t.object_ref),
            }),
        }
    }
    if !bad.is_empty() {
        return Err(RunError::Invalid(bad));
    }
    // Hooks follow, pre-phase then post-phase, in run order.
    for (event, list) in [(pre_event, &pre_hooks), (post_event, &post_hooks)] {
        for (i, h) in list.iter().enumerate() {
            report.objects.push(hooks::predict(
                h,
                live.get(&h.target.object_ref),
                &opts,
                method,
                event,
                (i + 1, list.len()),
            ));
        }
    }
    let invalid = check::invalid_objects(
        &report,
        targets
            .iter()
            .chain(pre_hooks.iter().chain(&post_hooks).map(|h| &h.target)),
    );
    if !invalid.is_empty() {
        return Err(RunError::Invalid(invalid));
    }
    let migrations_out: Vec<(String, Migration)> = migrations
        .iter()
        .map(|(r, m)| (r.to_string(), m.clone()))
        .collect();
    let mut outcome = Outcome {
        release: req.release.clone(),
        namespace: ns.clone(),
        revision,
        operation: match op {
            Operation::Install => "install".into(),
            Operation::Upgrade => "upgrade".into(),
            Operation::Rollback(r) => format!("rollback to {r}"),
        },
        method,
        status: "planned".into(),
        prediction: report,
        migrations: migrations_out,
        objects: vec![],
        mismatches: vec![],
    };
    if req.plan_only {
        return Ok(outcome);
    }
    // Server-side conflicts the policy does not allow stop the run before anything is written.
    if method == Method::Ssa && outcome.prediction.exit_code() == 1 {
        for o in &outcome.prediction.objects {
            if matches!(o.verdict, Verdict::Conflict | Verdict::Rejected) {
                let result = if o.verdict == Verdict::Rejected {
                    Result_::Rejected
                } else {
                    Result_::Conflicted
                };
                let mut x = ObjectOutcome::new(o.object_ref.to_string(), result);
                x.message = o.message.clone();
                outcome.objects.push(x);
            }
        }
        outcome.status = "refused".into();
        return Ok(outcome);
    }

    let started = now_rfc3339();
    let mut record = Revision {
        name: req.release.clone(),
        namespace: ns.clone(),
        revision,
        method: Some(method),
        field_manager: req.field_manager.clone(),
        status: format!(
            "pending-{}",
            match op {
                Operation::Install => "install",
                Operation::Upgrade => "upgrade",
                Operation::Rollback(_) => "rollback",
            }
        ),
        manifest: manifest_text,
        started: started.clone(),
        finished: String::new(),
        source: release::Source::Fieldguard,
        results: vec![],
        hooks: vec![],
    };
    if !req.dry_run {
        store.write(api, &record, true).await?;
    }

    // Migrations first, each refused if the object changed since the preview.
    for (r, m) in &migrations {
        let (_, path) = &paths[r];
        progress(&format!(
            "migrating {r} to server-side apply: fields move from {}",
            m.from
                .iter()
                .map(|(who, n)| format!("{who} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if req.dry_run {
            continue;
        }
        let body = json::to_string(&migrate::json_patch(m), json::Style::PLAIN);
        if let Err(e) = api
            .write(
                http::Method::PATCH,
                &format!("{path}?fieldManager={}", percent_encode(&req.field_manager)),
                "application/json-patch+json",
                body.into_bytes(),
            )
            .await
        {
            let message = match e {
                Ok(s) => format!("the migration was refused ({}): {}", s.code, s.message),
                Err(c) => c.message,
            };
            outcome
                .objects
                .push(ObjectOutcome::new(r.to_string(), Result_::Failed).with_message(message));
        }
    }

    // The pre-phase hooks, one at a time.
    let n = targets.len();
    let pre_predicted: Vec<check::ObjectReport> =
        outcome.prediction.objects[n..n + pre_hooks.len()].to_vec();
    let post_predicted: Vec<check::ObjectReport> =
        outcome.prediction.objects[n + pre_hooks.len()..].to_vec();
    let hook_runner = hooks::Runner {
        api,
        req: &req,
        method,
    };
    let mut hook_runs = Vec::new();
    if !outcome.objects.iter().any(|o| o.result == Result_::Failed)
        && hook_runner
            .phase(
                pre_event,
                &pre_hooks,
                &pre_predicted,
                &mut outcome,
                &mut hook_runs,
                progress,
            )
            .await
    {
        outcome.objects.push(
            ObjectOutcome::new(format!("{pre_event} hooks"), Result_::Failed).with_message(
                format!("{pre_event} hooks failed: the release's objects are not applied"),
            ),
        );
    }

    // Applies, CRDs and Namespaces first.
    let patch_meta = crate::patch::meta::kubernetes(crate::catalog::DEFAULT_KUBERNETES).ok();
    let previous = history.last_applied().map(|r| r.manifest.clone());
    let previous_docs: Vec<Document> = previous
        .as_deref()
        .and_then(|m| parse_manifest(m, "previous revision").ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|d| Hook::of(&d.object).is_none())
        .collect();
    let mut failed = outcome.objects.iter().any(|o| o.result == Result_::Failed);
    let mut crds_pending = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let name = t.object_ref.to_string();
        if failed {
            outcome.objects.push(skipped(name));
            continue;
        }
        if order_rank(t) > 0 && !crds_pending.is_empty() && !req.dry_run {
            wait_established(api, &crds_pending, req.poll, progress).await?;
            crds_pending.clear();
        }
        let (coll, path) = &paths[&t.object_ref];
        let predicted = &outcome.prediction.objects[i];
        let mut live_obj = live.get(&t.object_ref);
        if recreated.contains(&t.object_ref) {
            let gone = wait::delete_and_wait(
                api,
                path,
                "Background",
                req.dry_run,
                req.hook_timeout,
                req.poll,
            )
            .await;
            let o = match gone {
                Ok(_) => ObjectOutcome::new(name.clone(), Result_::Deleted)
                    .with_message("recreated: deleted before it is created again"),
                Err(m) => failure(
                    name.clone(),
                    format!("recreating: the deletion failed: {m}"),
                ),
            };
            progress(&format!("{name}: {} (recreation)", o.result.as_str()));
            let deleted = o.result == Result_::Deleted;
            outcome.objects.push(o);
            if !deleted {
                failed = true;
                continue;
            }
            if req.dry_run {
                // The object is still there under a dry run: a creation cannot be tried.
                continue;
            }
            live_obj = None;
        }
        let o = match method {
            Method::Ssa => {
                let force = if adopted.contains(&t.object_ref) {
                    Force::All
                } else {
                    req.force.clone()
                };
                apply_ssa(
                    api,
                    path,
                    t,
                    live_obj,
                    predicted,
                    &req,
                    force,
                    &mut outcome.mismatches,
                )
                .await
            }
            Method::Csa => {
                let fallback = previous_docs
                    .iter()
                    .find(|d| d.kind() == t.object_ref.kind && d.name() == t.object_ref.name)
                    .map(|d| d.object.clone());
                let meta = patch_meta
                    .and_then(|m| m.root_for(&t.info.gvk.api_version(), &t.info.gvk.kind));
                apply_csa(
                    api,
                    coll,
                    path,
                    t,
                    live_obj,
                    fallback.as_ref(),
                    meta.as_ref(),
                    &req,
                )
                .await
            }
        };
        progress(&format!("{name}: {}", o.result.as_str()));
        count_apply(method, o.result, req.dry_run);
        tracing::info!(release = %req.release, object = %name, result = o.result.as_str(), method = method.as_str(), "applied");
        if o.result == Result_::Failed || o.result == Result_::Conflicted {
            failed = true;
        }
        if order_rank(t) == 0 && matches!(o.result, Result_::Created | Result_::Configured) {
            crds_pending.push(path.clone());
        }
        outcome.objects.push(o);
    }

    // Objects dropped from the release.
    if !failed {
        let kept: BTreeSet<(String, String, String)> = targets
            .iter()
            .map(|t| {
                (
                    t.object_ref.kind.clone(),
                    t.object_ref.namespace.clone(),
                    t.object_ref.name.clone(),
                )
            })
            .collect();
        for d in &previous_docs {
            let Ok(info) = catalog.lookup(d.api_version(), d.kind()) else {
                continue;
            };
            let d_ns = if info.namespaced {
                d.namespace().unwrap_or(&ns).to_string()
            } else {
                String::new()
            };
            if kept.contains(&(d.kind().to_string(), d_ns.clone(), d.name().to_string())) {
                continue;
            }
            let Some(disc) = catalog.discovered(&info.gvk) else {
                continue;
            };
            let r = ObjectRef {
                group: info.gvk.group.clone(),
                kind: info.gvk.kind.clone(),
                namespace: d_ns,
                name: d.name().to_string(),
            };
            let (_, path) = urls(&info.gvk.api_version(), &disc.plural, &r);
            let o = delete_dropped(api, &path, &r, d, &req).await;
            progress(&format!("{}: {}", o.object, o.result.as_str()));
            if o.result == Result_::Failed {
                failed = true;
            }
            outcome.objects.push(o);
        }
    }

    // Waiting.
    if let (Some(timeout), false, false) = (req.wait, failed, req.dry_run) {
        failed |= wait_for(
            api,
            &targets,
            &paths,
            &mut outcome,
            timeout,
            req.poll,
            progress,
        )
        .await;
    }

    // The post-phase hooks, once the release's objects are in (and ready, when waited for).
    if !failed {
        failed |= hook_runner
            .phase(
                post_event,
                &post_hooks,
                &post_predicted,
                &mut outcome,
                &mut hook_runs,
                progress,
            )
            .await;
    }

    outcome.status = if req.dry_run {
        "dry-run".into()
    } else if failed {
        "failed".into()
    } else {
        "deployed".into()
    };
    for m in &outcome.mismatches {
        tracing::error!(release = %req.release, "prediction differs from the server's result: {m}");
        progress(&format!("PREDICTION MISMATCH: {m}"));
    }
    if !req.dry_run {
        record.status = outcome.status.clone();
        record.finished = now_rfc3339();
        record.hooks = hook_runs;
        record.results = outcome
            .objects
            .iter()
            .map(|o| ObjectResult {
                object: o.object.clone(),
                result: o.result.as_str().into(),
            })
            .collect();
        store.write(api, &record, false).await?;
        if !failed {
            supersede(api, &store, &history, revision).await;
        }
    }
    Ok(outcome)
}

/// Marks earlier deployed fieldguard records superseded (Helm's records are never rewritten).
async fn supersede(api: &Api, store: &Store, history: &History, current: u32) {
    for r in &history.revisions {
        if r.source == release::Source::Fieldguard
            && r.revision != current
            && r.status == "deployed"
        {
            let mut r = r.clone();
            r.status = "superseded".into();
            if let Err(e) = store.write(api, &r, false).await {
                tracing::warn!("{e}");
            }
        }
    }
}
