//! Evaluation of `expect` blocks (the oracle's `--check`).

use super::input::Expectation;
use super::output::{CheckResult, StepResult};
use crate::fieldpath::Set;
use crate::managedfields::{ManagedFieldsEntry, entries_from_value};
use crate::value::Value;
use crate::value::json::{self, Style};

/// Checks one result against an expectation.
pub fn check(e: &Expectation, r: &StepResult) -> CheckResult {
    let mut fails = Vec::new();
    let expect_conflicts = e.conflicts.as_ref().is_some_and(|c| !c.is_empty());
    if !e.error_contains.is_empty() {
        if !r.error.contains(&e.error_contains) {
            fails.push(format!(
                "error {:?} does not contain {:?}",
                r.error, e.error_contains
            ));
        }
    } else if !r.error.is_empty() && !expect_conflicts {
        fails.push(format!("unexpected error: {}", r.error));
    }
    if let Some(want) = &e.conflicts {
        let by_key = want.iter().any(|(m, _)| m.starts_with('{'));
        let mut w: Vec<String> = want.iter().map(|(m, p)| format!("{m} {p}")).collect();
        let mut g: Vec<String> = r
            .conflicts
            .iter()
            .map(|c| {
                let m = if by_key { &c.manager_key } else { &c.manager };
                format!("{m} {}", c.path)
            })
            .collect();
        w.sort();
        g.sort();
        if w != g {
            fails.push(format!("conflicts: want {w:?}, got {g:?}"));
        }
    }
    if let Some(want) = &e.object {
        // Compare as JSON, after the round trip the oracle's result goes through.
        let got = r.object.as_deref().cloned().unwrap_or(Value::Null);
        let rt = |v: &Value| json::parse_str(&json::to_string(v, Style::GO)).unwrap_or(Value::Null);
        if !rt(want).strict_eq(&rt(&got)) {
            fails.push(format!(
                "object: want {}, got {}",
                json::to_string(want, Style::GO_NO_HTML),
                json::to_string(&got, Style::GO_NO_HTML)
            ));
        }
    }
    if let Some(want) = e.object_changed {
        if want != r.object_changed {
            fails.push(format!(
                "objectChanged: want {want}, got {}",
                r.object_changed
            ));
        }
    }
    if let Some(want) = &e.managers {
        match entries_from_value(want) {
            Ok(w) => fails.extend(compare_managers(&w, &r.managers)),
            Err(err) => fails.push(format!("bad expected managers: {err}")),
        }
    }
    CheckResult {
        passed: fails.is_empty(),
        failures: fails,
    }
}

fn set_of(e: &ManagedFieldsEntry) -> Result<Set, String> {
    match e.fields_v1.as_deref() {
        None | Some("") | Some("null") => Ok(Set::new()),
        Some(raw) => Set::from_fields_v1(raw.as_bytes()).map_err(|e| e.to_string()),
    }
}

fn compare_managers(want: &[ManagedFieldsEntry], got: &[ManagedFieldsEntry]) -> Vec<String> {
    let mut fails = Vec::new();
    let mut used = vec![false; got.len()];
    for w in want {
        let ws = match set_of(w) {
            Ok(s) => s,
            Err(e) => {
                fails.push(format!("bad expected fieldsV1 for {}: {e}", w.manager));
                continue;
            }
        };
        let found = got.iter().enumerate().find(|(i, g)| {
            !used[*i]
                && g.manager == w.manager
                && g.operation == w.operation
                && g.subresource == w.subresource
                && (w.api_version.is_empty() || g.api_version == w.api_version)
        });
        match found {
            Some((i, g)) => {
                used[i] = true;
                if let Ok(gs) = set_of(g) {
                    if !ws.equals(&gs) {
                        fails.push(format!(
                            "manager {}/{} fieldsV1: want {}, got {}",
                            w.manager,
                            w.operation,
                            w.fields_v1.as_deref().unwrap_or("{}"),
                            g.fields_v1.as_deref().unwrap_or("{}")
                        ));
                    }
                }
            }
            None => fails.push(format!(
                "manager {}/{}/{} not found in result",
                w.manager, w.operation, w.api_version
            )),
        }
    }
    for (i, g) in got.iter().enumerate() {
        if !used[i] {
            fails.push(format!(
                "unexpected manager entry {}/{}/{}: {}",
                g.manager,
                g.operation,
                g.api_version,
                g.fields_v1.as_deref().unwrap_or("")
            ));
        }
    }
    fails
}
