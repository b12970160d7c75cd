//! Applying a release: validation of every manifest before the first write, the HIP-0023 method,
//! ownership checks (adoption), create-only fields, the prediction (shown, and the only thing
//! done with `plan`), CSA→SSA migration, CRDs and Namespaces first (waiting for CRDs to be
//! Established), per-object applies, deletion of dropped objects, waiting for workloads, the
//! comparison of the prediction with what the server did, and the revision record.

use super::client_side::{self, Action};
use super::hooks::{self, HookTarget, PhaseRun};
use super::migrate::{self, Migration};
use super::recreate::{self, Decision};
use super::release::{
    self, History, Method, ObjectResult, Operation, ReleaseError, Revision, ServerSide,
};
use super::ssa::{self, SsaError, SsaOptions};
use super::storage::{Driver, Store};
use super::wait::{self, Readiness};
use crate::catalog::{Catalog, Discovered};
use crate::check::{self, Force, Target};
use crate::live::api::{Api, ClusterError, percent_encode};
use crate::live::{Fetched, ObjectRef};
use crate::managedfields::entries_from_value;
use crate::manifest::hooks::Hook;
use crate::manifest::{self, Document, ManifestError};
use crate::predict::Verdict;
use crate::schema::Gvk;
use crate::value::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// Helm's ownership annotations (fieldguard stamps and honours them).
pub const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
pub const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";
/// The label Helm puts on release objects.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// `keep`: never delete the object when it leaves the release.
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";
/// Comma-separated field paths (`spec.replicas`) set only when the object is created.
pub const CREATE_ONLY_ANNOTATION: &str = "fieldguard.dev/create-only-fields";

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
    let Some(list) = annotation(body, CREATE_ONLY_ANNOTATION).map(str::to_string) else {
        return;
    };
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
    for field in list.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let path: Vec<&str> = field.split('.').collect();
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
    let mut report = check::Report {
        field_manager: opts.field_manager.clone(),
        force: opts.force.clone(),
        source: live.source.clone(),
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
    let mut hook_runs = Vec::new();
    if !outcome.objects.iter().any(|o| o.result == Result_::Failed) && !pre_hooks.is_empty() {
        let phase = PhaseRun {
            api,
            req: &req,
            method,
            mismatches: &mut outcome.mismatches,
        }
        .run(
            pre_event,
            &pre_hooks,
            &pre_predicted.iter().collect::<Vec<_>>(),
            progress,
        )
        .await;
        outcome.objects.extend(phase.outcomes);
        hook_runs.extend(phase.runs);
        if phase.failed {
            outcome.objects.push(
                ObjectOutcome::new(format!("{pre_event} hooks"), Result_::Failed).with_message(
                    format!("{pre_event} hooks failed: the release's objects are not applied"),
                ),
            );
        }
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
    if !failed && !post_hooks.is_empty() {
        let phase = PhaseRun {
            api,
            req: &req,
            method,
            mismatches: &mut outcome.mismatches,
        }
        .run(
            post_event,
            &post_hooks,
            &post_predicted.iter().collect::<Vec<_>>(),
            progress,
        )
        .await;
        outcome.objects.extend(phase.outcomes);
        hook_runs.extend(phase.runs);
        failed |= phase.failed;
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

/// Counts an object's apply (`fieldguard_applies{method,result}`); dry runs are not counted.
fn count_apply(method: Method, result: Result_, dry_run: bool) {
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

fn skipped(object: String) -> ObjectOutcome {
    ObjectOutcome::new(object, Result_::Skipped)
}

pub(super) fn failure(object: String, message: String) -> ObjectOutcome {
    ObjectOutcome::new(object, Result_::Failed).with_message(message)
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
async fn apply_csa(
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

async fn delete_dropped(
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

async fn wait_established(
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
async fn wait_for(
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
async fn events_of(api: &Api, r: &ObjectRef) -> String {
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
