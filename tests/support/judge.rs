//! Judging a prediction by the real apiserver: what fieldguard predicts for one server-side
//! apply (from the live object read from the server and the schema the server publishes, as
//! `check` against a cluster sees them), and the comparison of that prediction with the
//! server's answer to the same apply — refused or not (the 409 message word for word, the 422
//! causes), the stored object, the managedFields (entries, order, operation, apiVersion,
//! subresource, fields; times by presence) and whether it wrote at all (resourceVersion).

use super::realapi::Answer;
use fieldguard::check::{self, Force, Options};
use fieldguard::manifest::{self, Loaded};
use fieldguard::predict::{Prediction, Verdict};
use serde_json::{Value, json};
use std::sync::Arc;

/// What fieldguard predicts for an apply of `manifest` by `manager`, from the live object
/// (as a `check` against the cluster sees it) and the published schema.
pub fn predict(
    catalog: &mut fieldguard::catalog::Catalog,
    namespace: &str,
    live: Option<&Value>,
    manifest: &Value,
    manager: &str,
    force: bool,
    now: i64,
) -> Prediction {
    let mut loaded = Loaded::default();
    manifest::parse_into(
        &Arc::from("step.json"),
        manifest.to_string().as_bytes(),
        &mut loaded,
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let targets = check::resolve(loaded.documents, catalog, namespace).unwrap();
    let opts = Options {
        field_manager: manager.into(),
        force: if force { Force::All } else { Force::None },
        namespace: namespace.into(),
        now,
    };
    let live = live.map(|l| {
        let text = l.to_string();
        fieldguard::value::json::parse_str(&text).unwrap()
    });
    check::predict_target(&targets[0], live.as_ref(), &opts).unwrap()
}

/// The time the server stamped on the applier's entry (Unix seconds).
pub fn stamped(answer: &Answer, manager: &str) -> Option<i64> {
    let entries = answer.as_ref().ok()?["metadata"]["managedFields"].as_array()?;
    let e = entries
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == "Apply")?;
    let t = e["time"].as_str()?;
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// An object with the fields only the server sets taken out, for comparing contents.
pub fn contents(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
        ] {
            m.remove(k);
        }
    }
    v
}

/// managedFields without times, and whether each entry has one.
pub fn entries(v: &Value) -> Vec<Value> {
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut e| {
            let has_time = e.get("time").is_some_and(|t| t.is_string());
            if let Some(m) = e.as_object_mut() {
                m.remove("time");
                m.insert("hasTime".into(), json!(has_time));
            }
            e
        })
        .collect()
}

pub fn to_json(v: &fieldguard::value::Value) -> Value {
    serde_json::from_str(&fieldguard::value::json::to_string(
        v,
        fieldguard::value::json::Style::PLAIN,
    ))
    .unwrap()
}

/// Compares a prediction with the server's answer; the disagreements, described.
pub fn compare(p: &Prediction, before: Option<&Value>, answer: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    match (&p.verdict, answer) {
        (Verdict::Conflict, Err(r)) if r.code == 409 => {
            let predicted = p.message.clone().unwrap_or_default();
            if predicted != r.message {
                out.push(format!(
                    "409 message: predicted {predicted:?}, server {:?}",
                    r.message
                ));
            }
        }
        (Verdict::Rejected, Err(r)) if r.code == 422 => {
            // The server lists several errors in Go map order (it varies between requests),
            // and each error of an object's metadata twice (`rest.BeforeUpdate`'s checks,
            // then the kind's own): the causes are compared as a set, the message when there
            // is one cause.
            let predicted = causes(p);
            let mut server = r.causes.clone();
            server.dedup();
            if predicted != server {
                out.push(format!(
                    "422 causes: predicted {predicted:?}, server {:?}",
                    r.causes
                ));
            } else if server.len() == 1 && p.message.as_deref() != Some(r.message.as_str()) {
                out.push(format!(
                    "422 message: predicted {:?}, server {:?}",
                    p.message, r.message
                ));
            }
        }
        (Verdict::Invalid, Err(r)) if r.code == 422 || r.code == 500 => {}
        (v, Err(r)) => out.push(format!(
            "verdict: predicted {v:?} ({:?}), server refused {}: {}",
            p.error.as_ref().or(p.message.as_ref()),
            r.code,
            r.message
        )),
        (Verdict::Conflict | Verdict::Rejected | Verdict::Invalid, Ok(_)) => out.push(format!(
            "verdict: predicted {:?} ({:?}), server accepted",
            p.verdict,
            p.message.as_ref().or(p.error.as_ref())
        )),
        (v, Ok(stored)) => {
            let predicted_obj = p.object.as_ref().map(to_json).unwrap_or_default();
            if contents(&predicted_obj) != contents(stored) {
                out.push(format!(
                    "object: predicted {}, server {}",
                    contents(&predicted_obj),
                    contents(stored)
                ));
            }
            let predicted_mf = entries(&to_json(&fieldguard::managedfields::entries_to_value(
                &p.managed_fields(),
                |_| false,
            )));
            let stored_mf = entries(&stored["metadata"]["managedFields"]);
            if predicted_mf != stored_mf {
                out.push(format!(
                    "managedFields: predicted {}, server {}",
                    Value::Array(predicted_mf),
                    Value::Array(stored_mf)
                ));
            }
            let rv = |o: Option<&Value>| {
                o.and_then(|o| o["metadata"]["resourceVersion"].as_str().map(String::from))
            };
            let wrote = rv(before) != rv(Some(stored));
            let predicted_write = p.writes();
            // The one documented divergence: an owned, empty ObjectMeta field the server does
            // not serve may or may not be in its stored bytes (it is when it was written
            // through the storage version); no client can read which, the prediction says so
            // in a note, and the server rewrites or not (`stored_form_rewrites` below).
            let noted =
                !predicted_write && p.notes.iter().any(|n| n.contains("owned but not served"));
            if wrote != predicted_write && !noted {
                out.push(format!(
                    "write: predicted {v:?} (writes: {predicted_write}), server {}",
                    if wrote { "wrote" } else { "did not write" }
                ));
            }
        }
    }
    out
}

/// A prediction's refusal causes as (field, reason, message), sorted as the tests sort the
/// server's, each once.
pub fn causes(p: &Prediction) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = p
        .rejections
        .iter()
        .map(|e| (e.field.clone(), e.reason.clone(), e.message.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// One server-side apply, predicted and then sent: what fieldguard predicted, the server's
/// answer, and whether the server wrote (the resourceVersion moved). The clock is an input
/// (entries are sorted by their time in seconds): when the server wrote at another second
/// than the one predicted with, the prediction is made again, from the same live object, with
/// the server's. (Only then: otherwise the stamp is an old one, and predicting with it could
/// hide a wrongly predicted write.)
pub struct Judged {
    pub prediction: Prediction,
    pub answer: Answer,
    pub wrote: bool,
}

/// Predicts and sends `manifest` as an apply by `manager` to the object at `url`, which is
/// `live` now.
#[allow(clippy::too_many_arguments)]
pub async fn apply_judged(
    api: &fieldguard::live::api::Api,
    catalog: &mut fieldguard::catalog::Catalog,
    namespace: &str,
    url: &str,
    live: Option<&Value>,
    manifest: &Value,
    manager: &str,
    force: bool,
) -> Judged {
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut prediction = predict(catalog, namespace, live, manifest, manager, force, before);
    let target = format!(
        "{url}?fieldManager={manager}{}",
        if force { "&force=true" } else { "" }
    );
    let answer = super::realapi::write(
        api,
        http::Method::PATCH,
        &target,
        "application/apply-patch+yaml",
        manifest,
    )
    .await;
    let wrote = answer.as_ref().is_ok_and(|a| {
        live.map(|l| &l["metadata"]["resourceVersion"]) != Some(&a["metadata"]["resourceVersion"])
    });
    if wrote
        && let Some(t) = stamped(&answer, manager)
        && t != before
    {
        prediction = predict(catalog, namespace, live, manifest, manager, force, t);
    }
    Judged {
        prediction,
        answer,
        wrote,
    }
}

/// A random history's record: its steps, and the disagreements found (the run stops at five).
#[derive(Default)]
pub struct History {
    pub steps: Vec<String>,
    pub disagreements: Vec<String>,
}

/// One apply of a history, as the record tells it.
pub struct Step<'a> {
    pub step: usize,
    pub name: &'a str,
    pub manager: &'a str,
    pub force: bool,
    pub manifest: &'a Value,
    pub live: Option<&'a Value>,
    pub answer: &'a Answer,
}

impl History {
    /// Records an apply and what was found wrong with its prediction; whether the run has
    /// found enough to stop.
    pub fn apply(&mut self, s: &Step, found: &[String]) -> bool {
        self.steps.push(format!(
            "{}: {}: apply by {}{}: {}",
            s.step,
            s.name,
            s.manager,
            if s.force { " (forced)" } else { "" },
            s.manifest
        ));
        if !found.is_empty() {
            self.disagreements.push(format!(
                "step {} ({}, {}, force {})\n  manifest {}\n  live {}\n  server {}\n  {}",
                s.step,
                s.name,
                s.manager,
                s.force,
                s.manifest,
                s.live
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "none".into()),
                match s.answer {
                    Ok(v) => v.to_string(),
                    Err(r) => format!("{r:?}"),
                },
                found.join("\n  ")
            ));
        }
        self.disagreements.len() >= 5
    }

    /// Records what was found wrong with the prediction of another writer's step (a
    /// client-side apply); whether the run has found enough to stop.
    pub fn writer(&mut self, step: usize, name: &str, found: &[String]) -> bool {
        if !found.is_empty() {
            self.disagreements
                .push(format!("step {step} ({name})\n  {}", found.join("\n  ")));
        }
        self.disagreements.len() >= 5
    }

    /// Fails with the disagreements and the last steps, if there were any.
    pub fn assert_agreed(&self, judge: &str, seed: u64) {
        assert!(
            self.disagreements.is_empty(),
            "{} disagreement(s) with {judge} (seed {seed}):\n{}\nlast steps:\n{}",
            self.disagreements.len(),
            self.disagreements.join("\n"),
            self.steps[self.steps.len().saturating_sub(15)..].join("\n")
        );
    }
}

/// What fieldguard predicts a non-apply write stores (a client-side apply's patch, an edit):
/// `written` is the live object with the write applied, as fieldguard applies it (its own
/// strategic merge or JSON merge patch); it is decoded as kube-apiserver decodes an object of
/// its built-in type (`fieldguard::defaulting`), the writer's `Update` entry is added by
/// fieldguard's field manager, and the strategy's changes made. `live`: `None` for a create. The object, with its
/// managedFields, in JSON.
pub fn predict_update(
    catalog: &fieldguard::catalog::Catalog,
    live: Option<&Value>,
    written: &fieldguard::value::Value,
    manager: &str,
    now: i64,
) -> Value {
    use fieldguard::managedfields::{
        FieldManager, ManagerOptions, entries_from_value, entries_to_value, remove_managed_fields,
    };
    let fg = |v: &Value| fieldguard::value::json::parse_str(&v.to_string()).unwrap();
    let av = written.str_at(&["apiVersion"]).unwrap_or("").to_string();
    let kind = written.str_at(&["kind"]).unwrap_or("").to_string();
    let info = catalog.lookup(&av, &kind).unwrap();
    let mut new = written.clone();
    remove_managed_fields(&mut new);
    // The server decodes the written object (defaulted, through its Go type, converted)
    // before its field manager compares it with the live one — for a create, with the type's
    // zero value; its strategy prepares what is stored after that.
    let name = info.type_ref.named.clone();
    if let Some(name) = &name {
        fieldguard::defaulting::decoded_write(name, &mut new);
        // Seen on kube-apiserver 1.36: a created DaemonSet's template-generation annotation
        // is already there when the field manager records the create (the creator's entry
        // owns it); a claim's protection finalizer is not (admission, after it).
        if live.is_none() && name == "io.k8s.api.apps.v1.DaemonSet" {
            fieldguard::defaulting::prepared(name, &mut new, None);
        }
    }
    let live_v = live.map(fg);
    let empty = match &name {
        Some(name) => fieldguard::defaulting::zero_object(name, &av, &kind),
        None => fg(&json!({"apiVersion": av, "kind": kind})),
    };
    let live_v = live_v.unwrap_or(empty);
    let live_entries = entries_from_value(
        live_v
            .get_path(&["metadata", "managedFields"])
            .unwrap_or(&fieldguard::value::Value::Null),
    )
    .unwrap();
    let mut bare = live_v.clone();
    remove_managed_fields(&mut bare);
    let fm = FieldManager {
        schema: &info.schema,
        type_ref: &info.type_ref,
        api_version: av.clone(),
        kind: kind.clone(),
        subresource: String::new(),
        ignored: &info.reset_fields,
        known_versions: None,
        now,
        options: ManagerOptions::default(),
    };
    let mut out = fm
        .update(&bare, &new, &live_entries, None, manager)
        .unwrap();
    if let Some(name) = &name {
        let replaces = live.is_some().then_some(&bare);
        fieldguard::defaulting::prepared(name, &mut out.object, replaces);
    }
    let mut obj = to_json(&out.object);
    let mf = to_json(&entries_to_value(&out.entries, |_| false));
    if mf.as_array().is_some_and(|a| !a.is_empty()) {
        obj["metadata"]["managedFields"] = mf;
    }
    obj
}

/// The time the server stamped on `manager`'s `Update` entry (Unix seconds).
pub fn stamped_update(stored: &Value, manager: &str) -> Option<i64> {
    let e = stored["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == "Update")?;
    time::OffsetDateTime::parse(
        e["time"].as_str()?,
        &time::format_description::well_known::Rfc3339,
    )
    .ok()
    .map(|t| t.unix_timestamp())
}

/// Compares a predicted stored object (with managedFields) with the server's: contents and
/// entries (times by presence); the disagreements, described.
pub fn compare_stored(predicted: &Value, stored: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if contents(predicted) != contents(stored) {
        out.push(format!(
            "object: predicted {}, server {}",
            contents(predicted),
            contents(stored)
        ));
    }
    let (p, s) = (
        entries(&predicted["metadata"]["managedFields"]),
        entries(&stored["metadata"]["managedFields"]),
    );
    if p != s {
        out.push(format!(
            "managedFields: predicted {}, server {}",
            Value::Array(p),
            Value::Array(s)
        ));
    }
    out
}
