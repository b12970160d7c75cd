//! Replay of the reference oracle's JSONL case format: a live object with managed fields, then
//! applies and updates; the result (conflicts, object, managed fields, 409 message) is printed in
//! the oracle's own format so any case can be run through both and diffed. Users reproduce a
//! prediction offline the same way.

mod check;
/// Random cases for differential testing: a development tool, not in the shipped binary
/// (`--features generator`).
#[cfg(feature = "generator")]
pub mod generate;

/// The CRD of the generated custom-resource cases (also shipped as an example).
pub const WIDGET_CRD: &str = include_str!("data/widget-crd.yaml");

mod input;
mod output;
mod schemas;
#[cfg(test)]
mod tests;

pub use input::{CaseInput, Expectation, StepInput, parse_case};
pub use output::{CaseResult, CheckResult, ConflictOut, StepResult};

use crate::fieldpath::{Set, serialize_path_element};
use crate::managedfields::{
    ApplyOutcome, FieldManager, FieldsCache, ManagedFieldsEntry, ManagerError, ManagerOptions,
    Prepared, encode, entries_from_value, entries_to_value, parse_identity, parse_time,
    remove_managed_fields,
};
use crate::merge::Conflicts;
use crate::value::{Map, Value, json};
use schemas::{Loaded, Schemas, type_name_for};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Largest case line accepted (cases may carry inline schemas and several objects).
pub const MAX_CASE_BYTES: usize = 64 * 1024 * 1024;

/// Unix time of 9000-01-01T00:00:00Z: times at or after it are internal and never printed
/// (the oracle's clock for cases without `now`).
pub const SYNTHETIC_BASE: i64 = 221_845_392_000;

/// True for the internal clock's times.
pub fn is_synthetic(t: i64) -> bool {
    t >= SYNTHETIC_BASE
}

/// Runs replay cases, caching schemas across cases.
#[derive(Default)]
pub struct Replayer {
    schemas: Schemas,
    /// Run applies on prepared live objects (the service's path) when the case allows.
    prepared: bool,
}

struct State {
    live: Option<Arc<Value>>,
    entries: Arc<Vec<ManagedFieldsEntry>>,
    /// The type `live` was validated against by the step that wrote it, if one did.
    validated_as: Option<String>,
}

impl Replayer {
    pub fn new() -> Self {
        Replayer::default()
    }

    /// A replayer that runs applies the way the service does: on a live object prepared once
    /// ([`Prepared`]: managed fields decoded and reconciled, object validated) rather than
    /// decoded per request. The results must be the same; the differential tests check it.
    pub fn with_prepared_live() -> Self {
        Replayer {
            prepared: true,
            ..Replayer::default()
        }
    }

    /// Runs one case line and returns its result (errors are part of the result).
    pub fn run_line(&mut self, line: &[u8]) -> CaseResult {
        // A case whose schema text was seen before (and loaded) runs without building that
        // schema again; any other line is read whole, which also reports its errors.
        let mut schema_text = None;
        if line.len() <= MAX_CASE_BYTES {
            // The quickest: the schema's text found without reading it (it may be large), and
            // the rest of the line read alone.
            if let Some(case) = self.known_schema_cut(line) {
                return case;
            }
            if let Some((rest, Some(text))) = json::parse_object_keeping(line, "schema") {
                if let Some(loaded) = self.schemas.by_text.get(text) {
                    if let Ok(case) = parse_case(Value::Map(rest)) {
                        return self.run_case_with(&case, Some(loaded)).0;
                    }
                }
                schema_text = Some(text);
            }
        }
        let parsed = json::parse_limited(line, MAX_CASE_BYTES)
            .map_err(|e| e.to_string())
            .and_then(parse_case);
        match parsed {
            Ok(c) => {
                let (res, loaded) = self.run_case_with(&c, None);
                if let (Some(text), Some(loaded)) = (schema_text, loaded) {
                    self.schemas.by_text.insert(text, loaded);
                }
                res
            }
            Err(e) => CaseResult {
                result: StepResult {
                    error: format!("bad case JSON: {e}"),
                    ..StepResult::default()
                },
                ..CaseResult::default()
            },
        }
    }

    /// [`Replayer::run_line`] for a line whose schema's text was loaded before (found by
    /// comparing texts, without reading the schema) and whose other members read cleanly;
    /// `None` for any other line.
    fn known_schema_cut(&mut self, line: &[u8]) -> Option<CaseResult> {
        let (start, value) = crate::value::member::locate(line, "schema")?;
        let (text, loaded) = self.schemas.by_text.find_at_start(line.get(value..)?)?;
        let rest = crate::value::member::without(line, start, value, text)?;
        // The rest read like any document (the direct reader first); the key again (in any
        // spelling) makes the line one to read whole.
        let Value::Map(rest) = json::parse(&rest).ok()? else {
            return None;
        };
        if rest.get("schema").is_some() {
            return None;
        }
        let case = parse_case(Value::Map(rest)).ok()?;
        Some(self.run_case_with(&case, Some(loaded)).0)
    }

    /// Starts a session: loads the case's schema, live object and managed fields.
    pub fn session(&mut self, c: &CaseInput) -> Result<Session, String> {
        self.session_with(c, None)
    }

    /// [`Replayer::session`] with the case's schema already loaded, if it is.
    fn session_with(
        &mut self,
        c: &CaseInput,
        preloaded: Option<Arc<Loaded>>,
    ) -> Result<Session, String> {
        let loaded = match (preloaded, c.schema.as_ref().filter(|s| !s.is_null())) {
            (Some(loaded), _) => loaded,
            (None, None) => return Err("case has no \"schema\"".into()),
            (None, Some(raw)) => self.schemas.resolve(raw)?,
        };
        let mut live = None;
        if let Some(l) = c.live.as_ref().filter(|v| !v.is_null()) {
            if l.as_map().is_none() {
                return Err(format!(
                    "live: expected a JSON object, got {}",
                    l.type_name()
                ));
            }
            live = Some(l.clone());
        }
        let entries = match (&c.managers, &live) {
            (Some(m), _) if !m.is_null() => entries_from_value(m)?,
            (_, Some(l)) => match l.get_path(&["metadata", "managedFields"]) {
                Some(mf) if !mf.is_null() => entries_from_value(mf)?,
                _ => vec![],
            },
            _ => vec![],
        };
        if let Some(l) = &mut live {
            remove_managed_fields(l);
        }
        let mut ignored = BTreeMap::new();
        for (v, raw) in &c.ignored_fields {
            let s =
                Set::from_fields_v1_value(raw).map_err(|e| format!("ignoredFields[{v}]: {e}"))?;
            ignored.insert(v.clone(), s);
        }
        Ok(Session {
            loaded,
            type_name: c.type_name.clone(),
            known_versions: c.known_versions.clone(),
            ignored,
            now: c.now.clone(),
            state: State {
                live: live.map(Arc::new),
                entries: Arc::new(entries),
                validated_as: None,
            },
            steps_run: 0,
            prepared: self.prepared,
            fields: FieldsCache::new(),
        })
    }

    /// Runs a parsed case.
    pub fn run_case(&mut self, c: &CaseInput) -> CaseResult {
        self.run_case_with(c, None).0
    }

    /// [`Replayer::run_case`] with the case's schema already loaded, if it is; also returns
    /// the schema the case ran with (`None` if its session did not start).
    fn run_case_with(
        &mut self,
        c: &CaseInput,
        preloaded: Option<Arc<Loaded>>,
    ) -> (CaseResult, Option<Arc<Loaded>>) {
        let mut res = CaseResult {
            name: c.name.clone(),
            ..CaseResult::default()
        };
        let fail = |res: &mut CaseResult, e: String| {
            res.result.error = e;
            if let Some(x) = &c.expect {
                res.result.check = Some(check::check(x, &res.result));
            }
        };
        let mut session = match self.session_with(c, preloaded) {
            Ok(s) => s,
            Err(e) => {
                fail(&mut res, e);
                return (res, None);
            }
        };
        let loaded = Some(session.loaded.clone());
        let single = c.steps.is_empty();
        // (step, the op it runs as)
        let steps: Vec<(&StepInput, &str)> = if single {
            let op = c.op.to_ascii_lowercase();
            if op == "update" || (op.is_empty() && c.update.is_some() && c.apply.is_none()) {
                match &c.update {
                    Some(u) => vec![(u, "update")],
                    None => {
                        fail(&mut res, "op \"update\" needs an \"update\" object".into());
                        return (res, loaded);
                    }
                }
            } else if op == "apply" || op.is_empty() {
                match &c.apply {
                    Some(a) => vec![(a, "apply")],
                    None => {
                        fail(
                            &mut res,
                            "case needs \"apply\", \"update\" or \"steps\"".into(),
                        );
                        return (res, loaded);
                    }
                }
            } else {
                fail(&mut res, format!("unknown op {:?}", c.op));
                return (res, loaded);
            }
        } else {
            c.steps.iter().map(|s| (s, s.op.as_str())).collect()
        };

        let mut results = Vec::with_capacity(steps.len());
        for &(step, op) in &steps {
            let mut r = match session.step_as(step, op) {
                Ok(r) => r,
                Err(e) => {
                    fail(&mut res, e);
                    return (res, loaded);
                }
            };
            if let Some(x) = &step.expect {
                r.check = Some(check::check(x, &r));
            }
            results.push(r);
        }
        let mut last = if single {
            results.pop().unwrap_or_default()
        } else {
            results.last().cloned().unwrap_or_default()
        };
        last.check = None;
        res.result = last;
        if let Some(x) = &c.expect {
            res.result.check = Some(check::check(x, &res.result));
        }
        if !single {
            for (i, r) in results.iter().enumerate() {
                if let Some(chk) = &r.check {
                    let agg = res.result.check.get_or_insert_with(|| CheckResult {
                        passed: true,
                        failures: vec![],
                    });
                    if !chk.passed {
                        agg.passed = false;
                        for f in &chk.failures {
                            agg.failures.push(format!("step {}: {f}", i + 1));
                        }
                    }
                }
            }
            res.steps = results;
        }
        (res, loaded)
    }
}

/// A case in progress: the object and its managed fields after the steps run so far.
pub struct Session {
    loaded: Arc<Loaded>,
    type_name: String,
    known_versions: Vec<String>,
    ignored: BTreeMap<String, Set>,
    now: String,
    state: State,
    steps_run: usize,
    prepared: bool,
    /// Each step reads back the managed fields the step before wrote.
    fields: FieldsCache,
}

impl Session {
    /// Runs the next step. `Err` only for a malformed `now`.
    pub fn step(&mut self, step: &StepInput) -> Result<StepResult, String> {
        self.step_as(step, &step.op)
    }

    /// Runs `step` as the given op (`apply` or `update`, any case).
    fn step_as(&mut self, step: &StepInput, op: &str) -> Result<StepResult, String> {
        self.steps_run += 1;
        let mut now = SYNTHETIC_BASE + self.steps_run as i64;
        let now_str = if step.now.is_empty() {
            &self.now
        } else {
            &step.now
        };
        if !now_str.is_empty() {
            now = parse_time(now_str)?;
        }
        Ok(run_step(self, step, op, now))
    }

    /// The current object (without managed fields), if it exists.
    pub fn live(&self) -> Option<&Value> {
        self.state.live.as_deref()
    }

    /// The current managed fields.
    pub fn entries(&self) -> &[ManagedFieldsEntry] {
        &self.state.entries
    }
}

/// Conflicts as the oracle prints them, sorted by identity, then by the printed path; and
/// its 409 message for them in that order.
fn conflicts_out(cs: &Conflicts) -> (Vec<ConflictOut>, String) {
    let mut out: Vec<(ConflictOut, &crate::merge::Conflict)> =
        cs.0.iter()
            .map(|c| {
                let id = parse_identity(&c.manager).unwrap_or_default();
                let printed = ConflictOut {
                    manager: id.manager,
                    operation: id.operation,
                    api_version: id.api_version,
                    subresource: id.subresource,
                    manager_key: c.manager.clone(),
                    path: c.path.to_string(),
                    fields_v1_path: c.path.0.iter().map(serialize_path_element).collect(),
                };
                (printed, c)
            })
            .collect();
    out.sort_by(|(a, _), (b, _)| {
        a.manager_key
            .as_bytes()
            .cmp(b.manager_key.as_bytes())
            .then_with(|| a.path.as_bytes().cmp(b.path.as_bytes()))
    });
    let sorted = Conflicts(out.iter().map(|(_, c)| (*c).clone()).collect());
    let message = crate::managedfields::conflict_message(&sorted);
    (out.into_iter().map(|(p, _)| p).collect(), message)
}

/// An apply on the live object prepared as the service keeps it (for sessions that ask for it
/// and cases with every API version convertible); `None` when there is no live object or it
/// does not prepare cleanly.
fn prepared_apply(
    st: &State,
    fm: &FieldManager,
    body: &Value,
    manager: &str,
    force: bool,
) -> Option<Result<ApplyOutcome, ManagerError>> {
    let live = st.live.as_ref()?;
    let mut with_entries = Value::clone(live);
    if let Some(md) = with_entries
        .as_map_mut()
        .and_then(|m| m.get_mut("metadata"))
        .and_then(Value::as_map_mut)
    {
        md.insert("managedFields", entries_to_value(&st.entries, |_| false));
    }
    let p = Prepared::new(fm.schema, fm.type_ref, &with_entries).ok()?;
    let fm = FieldManager {
        options: ManagerOptions {
            prepared: Some(&p),
            capture_before: false,
            fields: None,
            validated: None,
        },
        api_version: fm.api_version.clone(),
        kind: fm.kind.clone(),
        subresource: fm.subresource.clone(),
        ..*fm
    };
    Some(
        fm.apply_managed(p.object(), body, p.managed().clone(), manager, force)
            .map(|out| ApplyOutcome {
                validated: false,
                changed: out.changed,
                entries: encode(&out.managed),
                object: out.object,
            }),
    )
}

fn run_step(sess: &mut Session, step: &StepInput, op: &str, now: i64) -> StepResult {
    let use_prepared = sess.prepared && sess.known_versions.is_empty();
    let loaded = &*sess.loaded;
    let ignored = &sess.ignored;
    let fields = &sess.fields;
    let st = &mut sess.state;
    let op = op.to_ascii_lowercase();
    let mut r = StepResult {
        op: op.clone(),
        manager: step.manager.clone(),
        ..StepResult::default()
    };
    let fail = |r: &mut StepResult, st: &State, e: String| {
        r.error = e;
        r.object = None;
        r.managers = st.entries.clone();
    };
    let body = match op.as_str() {
        "apply" => step.config.as_ref(),
        "update" => step.object.as_ref(),
        _ => {
            fail(
                &mut r,
                st,
                format!("unknown step op {:?} (want apply or update)", step.op),
            );
            return r;
        }
    };
    let body: &Value = match body {
        Some(b @ Value::Map(_)) => b,
        Some(Value::Null) | None => {
            let what = if op == "apply" {
                "apply step needs \"config\""
            } else {
                "update step needs \"object\""
            };
            fail(&mut r, st, what.into());
            return r;
        }
        Some(other) => {
            fail(
                &mut r,
                st,
                format!("expected a JSON object, got {}", other.type_name()),
            );
            return r;
        }
    };
    let mut api_version = step.api_version.clone();
    if api_version.is_empty() {
        api_version = body.str_at(&["apiVersion"]).unwrap_or("").to_string();
    }
    if api_version.is_empty() {
        if let Some(l) = &st.live {
            api_version = l.str_at(&["apiVersion"]).unwrap_or("").to_string();
        }
    }
    let mut kind = st
        .live
        .as_ref()
        .and_then(|l| l.str_at(&["kind"]))
        .unwrap_or("")
        .to_string();
    if kind.is_empty() {
        kind = body.str_at(&["kind"]).unwrap_or("").to_string();
    }
    let type_name = match type_name_for(loaded, &sess.type_name, &api_version, &kind) {
        Ok(t) => t,
        Err(e) => {
            fail(&mut r, st, e);
            return r;
        }
    };
    let known: Option<HashSet<String>> = if sess.known_versions.is_empty() {
        None
    } else {
        let mut k: HashSet<String> = sess.known_versions.iter().cloned().collect();
        k.insert(api_version.clone());
        Some(k)
    };
    let tr = loaded.schema.type_ref(&type_name);
    let fm = FieldManager {
        schema: &loaded.schema,
        type_ref: &tr,
        api_version: api_version.clone(),
        kind: kind.clone(),
        subresource: step.subresource.clone(),
        ignored,
        known_versions: known.as_ref(),
        now,
        options: ManagerOptions {
            fields: Some(fields),
            validated: st
                .live
                .as_deref()
                .filter(|_| st.validated_as.as_ref() == Some(&type_name)),
            ..Default::default()
        },
    };
    let created;
    let live: &Value = match &st.live {
        Some(l) => l,
        None => {
            let mut m = Map::new();
            m.insert("apiVersion", Value::from(api_version.as_str()));
            m.insert("kind", Value::from(kind.as_str()));
            created = Value::Map(m);
            &created
        }
    };
    let outcome = if op == "apply" {
        if step.manager.is_empty() {
            fail(
                &mut r,
                st,
                "BadRequest: fieldManager must be set for apply requests".into(),
            );
            return r;
        }
        let fast = use_prepared
            .then(|| prepared_apply(st, &fm, body, &step.manager, step.force))
            .flatten();
        match fast {
            Some(out) => out,
            None => fm.apply(live, body, &st.entries, &step.manager, step.force),
        }
    } else {
        let new_entries = match body.get_path(&["metadata", "managedFields"]) {
            Some(v) if !v.is_null() => match entries_from_value(v) {
                Ok(e) => Some(e),
                Err(e) => {
                    fail(&mut r, st, e);
                    return r;
                }
            },
            _ => None,
        };
        fm.update(
            live,
            body,
            &st.entries,
            new_entries.as_deref(),
            &step.manager,
        )
    };
    match outcome {
        Ok(o) => {
            let mut obj = o.object;
            remove_managed_fields(&mut obj);
            r.object_changed = st.live.as_ref().is_none_or(|b| !b.strict_eq(&obj));
            let obj = Arc::new(obj);
            r.object = Some(obj.clone());
            st.live = Some(obj);
            st.validated_as = o.validated.then(|| type_name.clone());
            st.entries = Arc::new(o.entries);
            r.managers = st.entries.clone();
        }
        Err(ManagerError::Conflicts(cs)) => {
            (r.conflicts, r.conflict_message) = conflicts_out(&cs);
            r.error = r.conflict_message.clone();
            r.object = None;
            r.managers = st.entries.clone();
        }
        Err(e) => fail(&mut r, st, e.to_string()),
    }
    r
}
