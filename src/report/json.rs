//! `-o json`: the report as one JSON document. The schema is documented in
//! `docs/check-report.md`; `apiVersion` changes whenever a field changes meaning or goes away.

use crate::check::{ObjectReport, Report, Summary};
use serde::Serialize;

/// The report's `apiVersion`.
pub const SCHEMA_VERSION: &str = "fieldguard.dev/v1";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    api_version: &'static str,
    kind: &'static str,
    field_manager: &'a str,
    force: Force,
    source: &'a str,
    summary: Summary,
    objects: &'a [ObjectReport],
    #[serde(skip_serializing_if = "Option::is_none")]
    hooks: Option<&'a crate::check::HookPlan>,
}

#[derive(Serialize)]
struct Force {
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    against: Vec<String>,
}

pub fn render(r: &Report) -> String {
    let doc = Document {
        api_version: SCHEMA_VERSION,
        kind: "CheckReport",
        field_manager: &r.field_manager,
        force: Force {
            mode: r.force.mode(),
            against: r.force.patterns(),
        },
        source: &r.source,
        summary: r.summary(),
        objects: &r.objects,
        hooks: r.hooks.as_ref(),
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Problem<'a> {
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    message: &'a str,
}

/// `{"apiVersion": …, "kind": "InvalidInput", "errors": [{file, document, line, path, message}]}`.
pub fn render_errors(errors: &[crate::manifest::ManifestError]) -> String {
    let problems: Vec<Problem> = errors
        .iter()
        .map(|e| Problem {
            file: &e.file,
            document: e.doc,
            line: e.line,
            path: e.path.as_deref(),
            message: &e.message,
        })
        .collect();
    let doc = serde_json::json!({
        "apiVersion": SCHEMA_VERSION,
        "kind": "InvalidInput",
        "errors": problems,
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}
