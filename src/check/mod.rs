//! `fieldguard check`: for a manifest set, a field manager and a force policy, what a
//! server-side apply of every object would do against the live state — conflicts (with owners,
//! both values and a concrete fix), takeovers, shared fields, removals, stuck fields, creations.
//!
//! Two steps, so nothing is predicted from a partly valid input: [`resolve`] turns manifests
//! into targets (types looked up, namespaces defaulted, CRDs of the set registered) or reports
//! every problem, located; [`run`] predicts each target against the live objects read for it ([`Fetched`]).

pub mod hooks;
mod parallel;
mod redact;
mod resolve;
mod suggest;

pub use redact::{REDACTED, is_secret};
pub use resolve::{resolve, resolve_until};

/// A Secret with its values, and its last-applied annotation, replaced.
pub fn redact_object(obj: Value) -> Value {
    redact::value(&[], obj)
}
pub use suggest::{Action, Suggestion};

use crate::catalog::TypeInfo;
use crate::deadline::{Deadline, Expired};
use crate::live::{Fetched, ObjectRef};
use crate::managedfields::{Identity, Prepared, Time};
use crate::manifest::{Document, ManifestError, Origin};
use crate::predict::{self, ApplyRequest, FieldConflict, ForcePolicy, OwnedField, Owner, Verdict};
use crate::value::Value;
use foldhash::HashMap;
use regex::Regex;
use serde::Serialize;

/// The most `--force-against` patterns (`force.against` entries) one check takes.
pub const MAX_FORCE_PATTERNS: usize = 64;
/// The longest `--force-against` pattern, in bytes: room for alternatives of several
/// field-manager names (each at most 128 characters, the apiserver's limit).
pub const MAX_FORCE_PATTERN_BYTES: usize = 4096;
/// What one compiled pattern may take in memory (the regex crate's size limits).
pub const FORCE_PATTERN_COMPILED_BYTES: usize = 1 << 20;

/// Whose fields the apply may take over.
#[derive(Clone, Debug, Default)]
pub enum Force {
    /// Nobody's: every conflict fails the apply.
    #[default]
    None,
    /// Everybody's (`--force-conflicts`).
    All,
    /// Only managers whose name matches one of these (each anchored: the whole name must
    /// match); if any other manager conflicts, the apply fails.
    Against(Vec<Regex>),
}

impl Force {
    /// Compiles `--force-against` patterns (each must match a whole manager name).
    /// At most [`MAX_FORCE_PATTERNS`] patterns of at most [`MAX_FORCE_PATTERN_BYTES`] each,
    /// counted and measured before any is compiled, each compiled within
    /// [`FORCE_PATTERN_COMPILED_BYTES`].
    pub fn against(patterns: &[String]) -> Result<Force, String> {
        if patterns.len() > MAX_FORCE_PATTERNS {
            return Err(format!(
                "--force-against: {} patterns, more than the {MAX_FORCE_PATTERNS} allowed \
                 (one pattern can name many managers: a|b|c)",
                patterns.len()
            ));
        }
        if let Some((i, p)) = patterns
            .iter()
            .enumerate()
            .find(|(_, p)| p.len() > MAX_FORCE_PATTERN_BYTES)
        {
            return Err(format!(
                "--force-against: pattern {} is {} bytes, more than the {MAX_FORCE_PATTERN_BYTES} \
                 allowed (a field manager's name is at most 128 characters)",
                i + 1,
                p.len()
            ));
        }
        let mut out = Vec::with_capacity(patterns.len());
        for p in patterns {
            let r = regex::RegexBuilder::new(&format!("^(?:{p})$"))
                .size_limit(FORCE_PATTERN_COMPILED_BYTES)
                .dfa_size_limit(FORCE_PATTERN_COMPILED_BYTES)
                .build()
                .map_err(|e| format!("--force-against {p:?}: {e}"))?;
            out.push(r);
        }
        Ok(Force::Against(out))
    }

    /// True if this policy takes fields over from `manager`.
    pub fn allows(&self, manager: &str) -> bool {
        match self {
            Force::None => false,
            Force::All => true,
            Force::Against(rs) => rs.iter().any(|r| r.is_match(manager)),
        }
    }

    /// `none`, `all` or `selective`.
    pub fn mode(&self) -> &'static str {
        match self {
            Force::None => "none",
            Force::All => "all",
            Force::Against(_) => "selective",
        }
    }

    /// The patterns as given (selective policy).
    pub fn patterns(&self) -> Vec<String> {
        match self {
            Force::Against(rs) => rs
                .iter()
                .map(|r| {
                    let s = r.as_str();
                    s["^(?:".len()..s.len() - ")$".len()].to_string()
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// How to check.
#[derive(Clone, Debug)]
pub struct Options {
    /// The identity the apply uses (`--field-manager`).
    pub field_manager: String,
    pub force: Force,
    /// Namespace of namespaced objects that name none.
    pub namespace: String,
    /// Time stamped on the entries the apply would write.
    pub now: Time,
}

/// A manifest ready to predict.
#[derive(Debug)]
pub struct Target {
    pub doc: Document,
    pub object_ref: ObjectRef,
    pub info: TypeInfo,
}

/// A conflict, with where the manifest sets the field and how to resolve it.
#[derive(Clone, Debug, Serialize)]
pub struct Conflict {
    #[serde(flatten)]
    pub field: FieldConflict,
    /// Line of the field in the manifest.
    pub line: u32,
    pub suggestions: Vec<Suggestion>,
}

/// A field with its owners, located in the manifest when the manifest sets it.
#[derive(Clone, Debug, Serialize)]
pub struct Field {
    #[serde(flatten)]
    pub field: OwnedField,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// What applying one manifest would do.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    pub file: String,
    pub document: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    pub line: u32,
    pub verdict: Verdict,
    /// The live object's resourceVersion the prediction used (none for creations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    pub conflicts: Vec<Conflict>,
    pub taken_over: Vec<Conflict>,
    pub shared: Vec<Field>,
    pub removed: Vec<Field>,
    pub stuck: Vec<Field>,
    /// Number of fields the apply would own (for creations: what would be created).
    pub owned_fields: usize,
    /// kube-apiserver's message when the apply would be refused: the 409 of conflicts, or
    /// the 422 of a stored object that fails validation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the stored object would fail validation (verdict `rejected`), each as the
    /// server's `StatusCause`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<crate::validation::FieldError>,
    /// What of the type's schema fieldguard did not evaluate (e.g. CEL rules).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_evaluated: Vec<String>,
    /// What else the apply does that the verdict does not say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The object is a Helm hook (`helm.sh/hook`): its events, weight and delete policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<crate::manifest::hooks::Hook>,
    /// The event the hook runs in for the operation predicted (`pre-upgrade`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_event: Option<String>,
    /// Why the object cannot be applied (verdict `invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip)]
    pub origin: Origin,
    #[serde(skip)]
    pub object_ref: ObjectRef,
    /// Where the live object came from, when it is what cannot be read (a snapshot's file):
    /// the problem is located there, not in the manifest.
    #[serde(skip)]
    pub live_origin: Option<Origin>,
}

/// Counts over a check.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub objects: usize,
    pub created: usize,
    pub configured: usize,
    pub unchanged: usize,
    /// Only the managedFields change (the server still writes).
    pub ownership_only: usize,
    pub conflicted: usize,
    /// Refused with 422: the stored object would fail its schema.
    pub rejected: usize,
    pub invalid: usize,
    pub conflicts: usize,
    pub taken_over: usize,
    pub shared: usize,
    pub removed: usize,
    pub stuck: usize,
}

/// The result of a check.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub field_manager: String,
    pub force: Force,
    pub source: String,
    pub objects: Vec<ObjectReport>,
    /// When the manifests hold Helm hooks: the operation they were predicted for, and the
    /// hooks it does not run.
    pub hooks: Option<HookPlan>,
}

/// The hooks of a prediction: the operation (its pre-phase hooks come before the objects, its
/// post-phase hooks after), and the hooks it does not run.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookPlan {
    pub operation: hooks::Operation,
    /// Why this operation, when it was inferred rather than asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inferred: Option<String>,
    /// `Pod default/web-test: runs on test, not on upgrade`, in manifest order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

impl Report {
    pub fn summary(&self) -> Summary {
        let mut s = Summary {
            objects: self.objects.len(),
            ..Summary::default()
        };
        for o in &self.objects {
            match o.verdict {
                Verdict::Created => s.created += 1,
                Verdict::Configured => s.configured += 1,
                Verdict::Unchanged => s.unchanged += 1,
                Verdict::OwnershipOnly => s.ownership_only += 1,
                Verdict::Conflict => s.conflicted += 1,
                Verdict::Rejected => s.rejected += 1,
                Verdict::Invalid => s.invalid += 1,
            }
            s.conflicts += o.conflicts.len();
            s.taken_over += o.taken_over.len();
            s.shared += o.shared.len();
            s.removed += o.removed.len();
            s.stuck += o.stuck.len();
        }
        s
    }

    /// The process exit code: 2 if any object cannot be applied, 1 if any apply would be
    /// refused (conflicts, or a stored object that fails validation), else 0.
    pub fn exit_code(&self) -> u8 {
        if self.objects.iter().any(|o| o.verdict == Verdict::Invalid) {
            2
        } else if self
            .objects
            .iter()
            .any(|o| matches!(o.verdict, Verdict::Conflict | Verdict::Rejected))
        {
            1
        } else {
            0
        }
    }
}

/// Predicts every target against `live` (Helm hooks for `operation`, see [`run_until`]);
/// `progress` is called after each object with (done, total).
#[tracing::instrument(name = "engine", skip_all, fields(objects = targets.len()))]
pub fn run(
    targets: &[Target],
    live: &Fetched,
    opts: &Options,
    operation: Option<hooks::Operation>,
    progress: &mut dyn FnMut(usize, usize),
) -> Report {
    match run_until(
        targets,
        live,
        opts,
        operation,
        progress,
        &Deadline::default(),
    ) {
        Ok(r) => r,
        Err(Expired) => unreachable!("no deadline"),
    }
}

/// [`run`], stopping (between objects) when `deadline` passes. Helm hooks are predicted for
/// `operation` (`None`: install when none of the release's objects is live, else upgrade): its
/// pre-phase hooks first, then the release's objects, then its post-phase hooks, each phase in
/// the order Helm runs it; hooks the operation does not run are listed, not predicted.
pub fn run_until(
    targets: &[Target],
    live: &Fetched,
    opts: &Options,
    operation: Option<hooks::Operation>,
    progress: &mut dyn FnMut(usize, usize),
    deadline: &Deadline,
) -> Result<Report, Expired> {
    let read: Vec<(Option<crate::manifest::hooks::Hook>, &Target)> = targets
        .iter()
        .map(|t| (crate::manifest::hooks::Hook::of(&t.doc.object), t))
        .collect();
    let plan = read
        .iter()
        .any(|(h, _)| h.is_some())
        .then(|| hook_plan(&read, live, operation));
    // A hook naming an event Helm does not know is dropped (Helm 4 drops the document).
    let hooked: Vec<(crate::manifest::hooks::Hook, &Target)> = read
        .iter()
        .filter_map(|(h, t)| h.clone().map(|h| (h, *t)))
        .filter(|(h, _)| h.unknown_events.is_empty())
        .collect();
    let mut objects = Vec::with_capacity(targets.len());
    let mut done = 0;
    let mut step = |objects: &mut Vec<ObjectReport>, o: ObjectReport| -> Result<(), Expired> {
        objects.push(o);
        done += 1;
        progress(done, targets.len());
        deadline.check()
    };
    let phase = |event: &str| hooks::order(&hooked, event, |(h, t)| (h, *t));
    let write = hooks::Write::ServerSide;
    if let Some(p) = &plan {
        deadline.check()?;
        let pre = phase(p.operation.events().0);
        for (i, (h, t)) in pre.iter().enumerate() {
            let current = live.get(&t.object_ref);
            let o = hooks::predict(
                t,
                h,
                current,
                opts,
                write,
                p.operation.events().0,
                (i + 1, pre.len()),
            );
            step(&mut objects, with_live_origin(o, live, t))?;
        }
    }
    let release: Vec<&Target> = read
        .iter()
        .filter(|(h, _)| h.is_none())
        .map(|(_, t)| *t)
        .collect();
    deadline.check()?;
    parallel::check_objects(&release, live, opts, deadline, &mut |o| {
        step(&mut objects, o)
    })?;
    if let Some(p) = &plan {
        let post_event = p.operation.events().1;
        let post = phase(post_event);
        for (i, (h, t)) in post.iter().enumerate() {
            // A hook that ran in the pre-phase and was not deleted after it is live by now:
            // deleted and created again.
            let ran_before = h.recreated()
                && h.events.iter().any(|e| e == p.operation.events().0)
                && !h.delete_policies.iter().any(|d| d == "hook-succeeded");
            let current = live.get(&t.object_ref);
            let placeholder;
            let current = match (current, ran_before) {
                (None, true) => {
                    placeholder = t.doc.object.clone();
                    Some(&placeholder)
                }
                (c, _) => c,
            };
            let o = hooks::predict(t, h, current, opts, write, post_event, (i + 1, post.len()));
            step(&mut objects, with_live_origin(o, live, t))?;
        }
    }
    Ok(Report {
        field_manager: opts.field_manager.clone(),
        force: opts.force.clone(),
        source: live.source.clone(),
        objects,
        hooks: plan,
    })
}

/// Where a live object that cannot be read came from.
fn with_live_origin(mut o: ObjectReport, live: &Fetched, t: &Target) -> ObjectReport {
    if o.live_origin.is_some() {
        o.live_origin = live.origins.get(&t.object_ref).cloned();
    }
    o
}

/// The operation hooks are predicted for, and the hooks it does not run.
fn hook_plan(
    read: &[(Option<crate::manifest::hooks::Hook>, &Target)],
    live: &Fetched,
    operation: Option<hooks::Operation>,
) -> HookPlan {
    let (operation, inferred) = match operation {
        Some(op) => (op, None),
        None => {
            let objects: Vec<&Target> = read
                .iter()
                .filter(|(h, _)| h.is_none())
                .map(|(_, t)| *t)
                .collect();
            let existing = objects
                .iter()
                .filter(|t| live.get(&t.object_ref).is_some())
                .count();
            if existing == 0 {
                let why = if objects.is_empty() {
                    "no release objects in the manifests".to_string()
                } else {
                    format!("none of the {} release objects is live", objects.len())
                };
                (hooks::Operation::Install, Some(why))
            } else {
                (
                    hooks::Operation::Upgrade,
                    Some(format!(
                        "{existing} of the {} release objects are live",
                        objects.len()
                    )),
                )
            }
        }
    };
    let not_run = read
        .iter()
        .filter_map(|(h, t)| {
            let why = hooks::not_run(h.as_ref()?, operation)?;
            Some(format!("{}: {why}", t.object_ref))
        })
        .collect();
    HookPlan {
        operation,
        inferred,
        not_run,
    }
}

/// The engine's whole prediction for one target against its live object (`None`: it does
/// not exist): the verdict, the object and managedFields the apply would store. An error when
/// the live object itself cannot be read with the type's schema.
pub fn predict_target(
    t: &Target,
    live: Option<&Value>,
    opts: &Options,
) -> Result<predict::Prediction, String> {
    predict_prepared(t, live, None, opts)
}

/// [`predict_target`] with the live object already prepared for the engine, when it is
/// (`prepared` must be `live`'s, as [`crate::live::Fetched::prepare`] gives it).
pub fn predict_prepared(
    t: &Target,
    live: Option<&Value>,
    prepared: Option<&Prepared>,
    opts: &Options,
) -> Result<predict::Prediction, String> {
    let owned;
    let prepared = match (prepared, live) {
        (Some(p), Some(_)) => Some(p),
        (_, None) => None,
        (None, Some(l)) => match Prepared::new(&t.info.schema, &t.info.type_ref, l) {
            Err(e) => return Err(format!("the live object cannot be read: {e}")),
            Ok(p) => {
                owned = p;
                Some(&owned)
            }
        },
    };
    let allows = |id: &Identity| opts.force.allows(&id.manager);
    let req = ApplyRequest {
        schema: &t.info.schema,
        type_ref: &t.info.type_ref,
        live: prepared,
        config: &t.doc.object,
        manager: &opts.field_manager,
        force: match &opts.force {
            Force::None => ForcePolicy::None,
            Force::All => ForcePolicy::All,
            Force::Against(_) => ForcePolicy::Selective(&allows),
        },
        subresource: "",
        reset_fields: &t.info.reset_fields,
        now: opts.now,
        structural: t.info.validation.as_deref(),
    };
    let mut p = predict::predict(&req);
    // kube-apiserver's IgnoreManagedFieldsTimestampsTransformer: when an update changes
    // nothing but the times in managedFields, the old times are kept and nothing is written.
    // Built-in kinds are compared typed (an empty map equals none), so an apply whose only
    // change the stored form undoes (`labels: {}`) writes nothing; custom resources are
    // compared as stored JSON, where the new time stands.
    if !t.info.custom_resource
        && p.verdict == Verdict::OwnershipOnly
        && let Some(l) = prepared
    {
        let untimed = |mut es: Vec<crate::managedfields::ManagedFieldsEntry>| {
            es.iter_mut().for_each(|e| e.time = None);
            es.sort_by(|a, b| {
                (&a.manager, &a.operation, &a.api_version, &a.subresource).cmp(&(
                    &b.manager,
                    &b.operation,
                    &b.api_version,
                    &b.subresource,
                ))
            });
            es
        };
        if untimed(crate::managedfields::encode(l.managed())) == untimed(p.managed_fields()) {
            p.verdict = Verdict::Unchanged;
            p.ownership_changed = false;
            p.managed = l.managed().clone();
        }
    }
    // The update's own validation: what may not change once stored (metadata first), then
    // a custom resource's schema.
    let mut errors = match (live, &p.object) {
        (Some(old), Some(stored)) => crate::validation::immutable::check(
            &t.info.gvk.group,
            &t.info.gvk.version,
            &t.info.gvk.kind,
            t.info.custom_resource,
            old,
            stored,
            p.decoded.as_ref().unwrap_or(stored),
        ),
        _ => Vec::new(),
    };
    if let (Some(schema), Some(stored)) = (&t.info.validation, &p.object) {
        let d = crate::validation::custom_resource(stored, live, schema, errors);
        errors = d.errors;
        p.not_evaluated = d.not_evaluated;
    }
    if !errors.is_empty() {
        p.reject(t.doc.kind(), &t.info.gvk.group, &t.object_ref.name, &errors);
    }
    Ok(p)
}

/// Predicts one target against its live object (`None`: it does not exist).
pub fn check_one(t: &Target, live: Option<&Value>, opts: &Options) -> ObjectReport {
    check_prepared(t, live, None, opts)
}

/// [`check_one`] with the live object already prepared for the engine, when it is.
pub fn check_prepared(
    t: &Target,
    live: Option<&Value>,
    prepared: Option<&Prepared>,
    opts: &Options,
) -> ObjectReport {
    let doc = &t.doc;
    let secret = is_secret(&t.object_ref);
    let mut report = ObjectReport {
        api_version: doc.api_version().to_string(),
        kind: doc.kind().to_string(),
        namespace: t.object_ref.namespace.clone(),
        name: t.object_ref.name.clone(),
        file: doc.origin.file.to_string(),
        document: doc.origin.doc,
        item: doc.origin.item,
        line: doc.origin.line,
        verdict: Verdict::Invalid,
        resource_version: live
            .and_then(|l| l.str_at(&["metadata", "resourceVersion"]))
            .map(str::to_string),
        conflicts: vec![],
        taken_over: vec![],
        shared: vec![],
        removed: vec![],
        stuck: vec![],
        owned_fields: 0,
        message: None,
        rejections: vec![],
        not_evaluated: vec![],
        notes: vec![],
        hook: None,
        hook_event: None,
        error: None,
        origin: doc.origin.clone(),
        object_ref: t.object_ref.clone(),
        live_origin: None,
    };
    let p = match predict_prepared(t, live, prepared, opts) {
        Ok(p) => p,
        Err(e) => {
            report.error = Some(e);
            // Only the live object can fail here: `check_in` says where it came from.
            report.live_origin = Some(Origin::default());
            return report;
        }
    };
    report.verdict = p.verdict.clone();
    report.message = p.message.clone();
    report.error = p.error.clone();
    report.rejections = p.rejections.clone();
    for r in &mut report.rejections {
        let at = crate::validation::immutable::manifest_path(&r.field);
        r.line = Some(doc.line_of_printed(&at));
    }
    report.not_evaluated = p.not_evaluated.clone();
    report.notes = p.notes.clone();
    report.owned_fields = p
        .managed
        .fields
        .iter()
        .find(|(k, _)| {
            crate::managedfields::parse_identity(k).is_some_and(|id| {
                id.manager == opts.field_manager
                    && id.operation == "Apply"
                    && id.subresource.is_empty()
            })
        })
        .map_or(0, |(_, vs)| vs.set.leaves().paths().len());
    let conflict = |c: FieldConflict| {
        let c = redact::conflict(secret, c);
        Conflict {
            line: doc.line_of(&c.path_elements.0),
            suggestions: suggest::for_conflict(&c, &t.object_ref, opts),
            field: c,
        }
    };
    let field = |f: OwnedField, in_manifest: bool| {
        let f = redact::field(secret, f);
        Field {
            line: in_manifest.then(|| doc.line_of(&f.path_elements.0)),
            field: f,
        }
    };
    report.conflicts = p.conflicts.into_iter().map(conflict).collect();
    report.taken_over = p.taken_over.into_iter().map(conflict).collect();
    report.shared = p.shared.into_iter().map(|f| field(f, true)).collect();
    report.removed = p.removed.into_iter().map(|f| field(f, false)).collect();
    report.stuck = p.stuck.into_iter().map(|f| field(f, false)).collect();
    report
}

/// The objects of `report` that cannot be applied, as located problems (the field an engine
/// error names is looked up in the manifest for its line). `targets` are the report's, in order.
pub fn invalid_objects<'t>(
    report: &Report,
    targets: impl IntoIterator<Item = &'t Target>,
) -> Vec<ManifestError> {
    // Hooks may come first, twice (pre- and post-phase) or not at all: matched by object.
    let targets: HashMap<&ObjectRef, &Target> =
        targets.into_iter().map(|t| (&t.object_ref, t)).collect();
    let mut seen = foldhash::HashSet::default();
    report
        .objects
        .iter()
        .filter(|o| o.verdict == Verdict::Invalid && seen.insert(&o.object_ref))
        .filter_map(|o| Some((o, *targets.get(&o.object_ref)?)))
        .map(|(o, t)| {
            let error = o.error.as_deref().unwrap_or("cannot be applied");
            if let Some(at) = &o.live_origin {
                // The live object is broken (its managedFields, its values): say where it is.
                return ManifestError {
                    file: at.file.clone(),
                    doc: Some(at.doc),
                    line: Some(at.line),
                    path: None,
                    message: format!("{} (live state): {error}", o.object_ref),
                };
            }
            let path = error_path(error);
            ManifestError {
                file: o.origin.file.clone(),
                doc: Some(o.origin.doc),
                line: Some(path.map_or(o.origin.line, |p| t.doc.line_of_printed(p))),
                path: path.map(str::to_string),
                message: format!("{}: {error}", o.object_ref),
            }
        })
        .collect()
}

/// The field path an engine error names (`... typed: .spec.x: expected ...`), if any.
fn error_path(error: &str) -> Option<&str> {
    let start = error.find(": .").map(|i| i + 2)?;
    let rest = &error[start..];
    let end = rest.find(": ").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The owner printed the way reports show it: `kubectl-edit (Update, apps/v1)`.
pub fn describe_owner(o: &Owner) -> String {
    let mut s = format!("{} ({}", o.manager, o.operation);
    if !o.api_version.is_empty() {
        s.push_str(", ");
        s.push_str(&o.api_version);
    }
    if !o.subresource.is_empty() {
        s.push_str(", subresource ");
        s.push_str(&o.subresource);
    }
    s.push(')');
    if let Some(t) = &o.time {
        s.push_str(" at ");
        s.push_str(t);
    }
    s
}

#[cfg(test)]
mod tests;
