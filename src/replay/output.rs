//! Replay results, serialized exactly like the reference oracle's (field order, omitted empty
//! fields, Go's JSON escaping and number formatting), so the two can be diffed line by line.

use crate::managedfields::ManagedFieldsEntry;
use crate::value::Value;
use crate::value::gofmt::{Escape, write_json_string};
use crate::value::json::{self, Style};
use std::sync::Arc;

/// One conflict of a rejected apply.
#[derive(Clone, Debug, PartialEq)]
pub struct ConflictOut {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub subresource: String,
    pub manager_key: String,
    pub path: String,
    pub fields_v1_path: Vec<String>,
}

/// Outcome of `--check` on an `expect` block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckResult {
    pub passed: bool,
    pub failures: Vec<String>,
}

/// The result of one step (or of a single-request case).
#[derive(Clone, Debug, Default)]
pub struct StepResult {
    pub op: String,
    pub manager: String,
    pub error: String,
    pub conflicts: Vec<ConflictOut>,
    pub conflict_message: String,
    /// Shared with the session's state (objects are big; steps keep them).
    pub object: Option<Arc<Value>>,
    pub object_changed: bool,
    pub managers: Arc<Vec<ManagedFieldsEntry>>,
    pub check: Option<CheckResult>,
}

/// The result line of a case.
#[derive(Clone, Debug, Default)]
pub struct CaseResult {
    pub name: String,
    pub result: StepResult,
    pub steps: Vec<StepResult>,
}

fn key(out: &mut String, first: &mut bool, k: &str) {
    out.reserve(k.len() + 4);
    if !*first {
        out.push(',');
    }
    *first = false;
    out.push('"');
    out.push_str(k);
    out.push_str("\":");
}

fn string(out: &mut String, s: &str) {
    write_json_string(out, s, Escape::NoHtml);
}

impl StepResult {
    /// True when `self` and `other` print the same up to their `check` (the case's result is
    /// its last step's: the same object and managed fields, shared).
    pub(super) fn prints_as(&self, other: &StepResult) -> bool {
        let same_object = match (&self.object, &other.object) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_object
            && Arc::ptr_eq(&self.managers, &other.managers)
            && self.object_changed == other.object_changed
            && self.op == other.op
            && self.manager == other.manager
            && self.error == other.error
            && self.conflicts == other.conflicts
            && self.conflict_message == other.conflict_message
    }
}

/// Writes a step's fields; returns where the text from `"op"` to the end of `"managers"`
/// lies in `out` (all but the `check`).
fn write_step_fields(
    out: &mut String,
    first: &mut bool,
    r: &StepResult,
    hide_time: &dyn Fn(i64) -> bool,
) -> std::ops::Range<usize> {
    let start = out.len() + usize::from(!*first);
    write_step_core(out, first, r, hide_time);
    let end = out.len();
    write_check(out, first, r);
    start..end
}

fn write_step_core(
    out: &mut String,
    first: &mut bool,
    r: &StepResult,
    hide_time: &dyn Fn(i64) -> bool,
) {
    key(out, first, "op");
    string(out, &r.op);
    key(out, first, "manager");
    string(out, &r.manager);
    if !r.error.is_empty() {
        key(out, first, "error");
        string(out, &r.error);
    }
    key(out, first, "conflicts");
    out.push('[');
    for (i, c) in r.conflicts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_conflict(out, c);
    }
    out.push(']');
    if !r.conflict_message.is_empty() {
        key(out, first, "conflictMessage");
        string(out, &r.conflict_message);
    }
    key(out, first, "object");
    match &r.object {
        Some(v) => json::write(out, v, Style::GO_NO_HTML),
        None => out.push_str("null"),
    }
    key(out, first, "objectChanged");
    out.push_str(if r.object_changed { "true" } else { "false" });
    key(out, first, "managers");
    out.push('[');
    for (i, e) in r.managers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_entry(out, e, hide_time);
    }
    out.push(']');
}

fn write_check(out: &mut String, first: &mut bool, r: &StepResult) {
    if let Some(c) = &r.check {
        key(out, first, "check");
        out.push_str("{\"passed\":");
        out.push_str(if c.passed { "true" } else { "false" });
        if !c.failures.is_empty() {
            out.push_str(",\"failures\":[");
            for (i, f) in c.failures.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, f);
            }
            out.push(']');
        }
        out.push('}');
    }
}

fn write_conflict(out: &mut String, c: &ConflictOut) {
    let mut first = true;
    out.push('{');
    key(out, &mut first, "manager");
    string(out, &c.manager);
    for (k, v) in [
        ("operation", &c.operation),
        ("apiVersion", &c.api_version),
        ("subresource", &c.subresource),
    ] {
        if !v.is_empty() {
            key(out, &mut first, k);
            string(out, v);
        }
    }
    key(out, &mut first, "managerKey");
    string(out, &c.manager_key);
    key(out, &mut first, "path");
    string(out, &c.path);
    key(out, &mut first, "fieldsV1Path");
    out.push('[');
    for (i, p) in c.fields_v1_path.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(out, p);
    }
    out.push_str("]}");
}

/// One `managedFields` entry as the oracle prints it (times it did not set are hidden).
pub fn write_entry(out: &mut String, e: &ManagedFieldsEntry, hide_time: &dyn Fn(i64) -> bool) {
    let mut first = true;
    out.push('{');
    for (k, v) in [
        ("manager", &e.manager),
        ("operation", &e.operation),
        ("apiVersion", &e.api_version),
    ] {
        if !v.is_empty() {
            key(out, &mut first, k);
            string(out, v);
        }
    }
    if let Some(t) = e.time.filter(|t| !hide_time(*t)) {
        key(out, &mut first, "time");
        string(out, &crate::managedfields::format_time(t));
    }
    if !e.fields_type.is_empty() {
        key(out, &mut first, "fieldsType");
        string(out, &e.fields_type);
    }
    if let Some(f) = e.fields_v1.as_deref().filter(|f| !f.is_empty()) {
        key(out, &mut first, "fieldsV1");
        out.push_str(f);
    }
    if !e.subresource.is_empty() {
        key(out, &mut first, "subresource");
        string(out, &e.subresource);
    }
    out.push('}');
}

impl CaseResult {
    /// The result line (without the trailing newline).
    pub fn to_json(&self, hide_time: &dyn Fn(i64) -> bool) -> String {
        let mut out = String::with_capacity(512);
        let mut first = true;
        out.push('{');
        if !self.name.is_empty() {
            key(&mut out, &mut first, "name");
            string(&mut out, &self.name);
        }
        let result_text = write_step_fields(&mut out, &mut first, &self.result, hide_time);
        if !self.steps.is_empty() {
            key(&mut out, &mut first, "steps");
            out.push('[');
            let last = self.steps.len() - 1;
            for (i, s) in self.steps.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let mut f = true;
                out.push('{');
                if i == last && s.prints_as(&self.result) {
                    // The result's text again (its object is the largest part of a line).
                    // (`String::extend_from_within` is newer than the supported Rust.)
                    let again = out[result_text.clone()].to_owned();
                    out.push_str(&again);
                    f = false;
                    write_check(&mut out, &mut f, s);
                } else {
                    write_step_fields(&mut out, &mut f, s, hide_time);
                }
                out.push('}');
            }
            out.push(']');
        }
        out.push('}');
        out
    }
}
