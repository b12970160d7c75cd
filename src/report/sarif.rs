//! `-o sarif`: SARIF 2.1.0 for code-scanning UIs (GitHub, GitLab). Each conflict is a result
//! pointing to the file and line where the manifest sets the field; takeovers, removals and
//! stuck fields are results of their own rules (warnings and notes) at the object's line.

use super::{object_name, show};
use crate::check::{Conflict, Field, ObjectReport, Report, describe_owner};
use serde_json::{Value as Json, json};

const RULES: &[(&str, &str, &str, &str)] = &[
    (
        "FG001",
        "ssa-conflict",
        "error",
        "Server-side apply would be rejected: the field is owned by another field manager with a different value.",
    ),
    (
        "FG002",
        "ssa-takeover",
        "warning",
        "A forced server-side apply takes the field over from another field manager.",
    ),
    (
        "FG003",
        "ssa-removal",
        "note",
        "The field was dropped from the manifest and no other manager owns it: the apply deletes it.",
    ),
    (
        "FG004",
        "ssa-stuck-field",
        "warning",
        "The field was dropped from the manifest but stays, because other field managers still own it.",
    ),
    (
        "FG005",
        "schema-rejection",
        "error",
        "The object the apply would store changes an immutable field or fails its schema: the apiserver refuses the apply (422).",
    ),
    (
        "FG006",
        "invalid-input",
        "error",
        "The input cannot be read or applied as it is (syntax, identity, limits, values the apiserver refuses): nothing was predicted.",
    ),
];

/// A file name as a URI reference relative to the repository root.
fn uri(file: &str) -> String {
    let file = file.strip_prefix("./").unwrap_or(file);
    let mut out = String::with_capacity(file.len());
    for b in file.bytes() {
        let plain = b.is_ascii_alphanumeric() || b"-._~/".contains(&b);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn location(o: &ObjectReport, line: u32, path: &str) -> Json {
    json!({
        "physicalLocation": {
            "artifactLocation": {"uri": uri(&o.file), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": line.max(1)}
        },
        "logicalLocations": [{
            "fullyQualifiedName": format!("{}{}", object_name(o), path),
            "kind": "member"
        }]
    })
}

/// A stable identity for a finding, so code-scanning UIs track it across runs.
fn fingerprint(o: &ObjectReport, rule: &str, path: &str, managers: &str) -> String {
    // FNV-1a 64: stable across platforms and releases (unlike std's hasher).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [rule, &o.kind, &o.namespace, &o.name, path, managers] {
        for b in part.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn conflict_result(o: &ObjectReport, c: &Conflict, rule: usize) -> Json {
    let (id, _, level, _) = RULES[rule];
    let owners: Vec<String> = c.field.owners.iter().map(describe_owner).collect();
    let managers: Vec<&str> = c.field.owners.iter().map(|o| o.manager.as_str()).collect();
    let verb = if rule == 0 {
        "conflicts with"
    } else {
        "would be taken over from"
    };
    let mut text = format!(
        "{} {}: {verb} {} (live {}, manifest {}).",
        object_name(o),
        c.field.path,
        owners.join("; "),
        show(&c.field.current),
        show(&c.field.proposed)
    );
    if let Some(s) = c.suggestions.first() {
        text.push_str(" Fix: ");
        text.push_str(&s.message);
    }
    json!({
        "ruleId": id,
        "ruleIndex": rule,
        "level": level,
        "message": {"text": text},
        "locations": [location(o, c.line, &c.field.path)],
        "partialFingerprints": {"fieldguard/v1": fingerprint(o, id, &c.field.path, &managers.join(","))},
        "properties": {
            "owners": c.field.owners,
            "current": c.field.current,
            "proposed": c.field.proposed,
            "suggestions": c.suggestions,
        }
    })
}

fn field_result(o: &ObjectReport, f: &Field, rule: usize) -> Json {
    let (id, _, level, _) = RULES[rule];
    let owners: Vec<String> = f.field.owners.iter().map(describe_owner).collect();
    let text = if rule == 2 {
        format!(
            "{} {}: dropped from the manifest; the apply deletes it.",
            object_name(o),
            f.field.path
        )
    } else {
        format!(
            "{} {}: dropped from the manifest but kept: still owned by {}.",
            object_name(o),
            f.field.path,
            owners.join("; ")
        )
    };
    json!({
        "ruleId": id,
        "ruleIndex": rule,
        "level": level,
        "message": {"text": text},
        "locations": [location(o, f.line.unwrap_or(o.line), &f.field.path)],
        "partialFingerprints": {"fieldguard/v1": fingerprint(o, id, &f.field.path, "")},
    })
}

fn rejection_result(o: &ObjectReport, e: &crate::validation::FieldError) -> Json {
    let (id, _, level, _) = RULES[4];
    let path = format!(".{}", e.field);
    json!({
        "ruleId": id,
        "ruleIndex": 4,
        "level": level,
        "message": {"text": format!("{} {}: {}", object_name(o), e.field, e.message)},
        "locations": [location(o, e.line.unwrap_or(o.line), &path)],
        "partialFingerprints": {"fieldguard/v1": fingerprint(o, id, &e.field, &e.reason)},
    })
}

pub fn render(r: &Report) -> String {
    let mut results = Vec::new();
    let mut invocation_notes = Vec::new();
    for o in &r.objects {
        results.extend(o.conflicts.iter().map(|c| conflict_result(o, c, 0)));
        results.extend(o.taken_over.iter().map(|c| conflict_result(o, c, 1)));
        results.extend(o.removed.iter().map(|f| field_result(o, f, 2)));
        results.extend(o.stuck.iter().map(|f| field_result(o, f, 3)));
        results.extend(o.rejections.iter().map(|e| rejection_result(o, e)));
        if let Some(e) = &o.error {
            invocation_notes.push(json!({
                "level": "error",
                "message": {"text": format!("{}: {e}", object_name(o))},
                "locations": [location(o, o.line, "")],
            }));
        }
    }
    document(results, invocation_notes, r)
}

/// The SARIF document around `results`.
fn document(results: Vec<Json>, invocation_notes: Vec<Json>, r: &Report) -> String {
    let rules: Vec<Json> = RULES
        .iter()
        .map(|(id, name, level, text)| {
            json!({
                "id": id,
                "name": name,
                "shortDescription": {"text": text},
                "defaultConfiguration": {"level": level},
                "helpUri": "https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts"
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "fieldguard",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://kubernetes.io/docs/reference/using-api/server-side-apply/",
                "rules": rules
            }},
            "invocations": [{
                "executionSuccessful": invocation_notes.is_empty(),
                "toolExecutionNotifications": invocation_notes,
                "properties": {
                    "fieldManager": r.field_manager,
                    "force": r.force.mode(),
                    "source": r.source
                }
            }],
            "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The directory fieldguard ran in."}}},
            "results": results
        }]
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// Invalid input: one `invalid-input` result per problem, at its file and line.
pub fn render_errors(errors: &[crate::manifest::ManifestError]) -> String {
    let (id, _, level, _) = RULES[5];
    let results: Vec<Json> = errors
        .iter()
        .map(|e| {
            let mut region = json!({});
            if let Some(l) = e.line.filter(|l| *l > 0) {
                region = json!({"startLine": l});
            }
            json!({
                "ruleId": id,
                "ruleIndex": 5,
                "level": level,
                "message": {"text": e.to_string()},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&e.file), "uriBaseId": "%SRCROOT%"},
                        "region": region
                    }
                }],
                "partialFingerprints": {"fieldguard/v1": format!("{}|{}|{}", e.file, e.path.as_deref().unwrap_or(""), e.message)},
            })
        })
        .collect();
    let note = json!({
        "level": "error",
        "message": {"text": format!("{} problem(s) in the input; nothing was checked", errors.len())},
    });
    document(results, vec![note], &Report::default())
}
