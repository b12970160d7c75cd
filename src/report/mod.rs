//! Check reports for people and machines: text (grouped per object, colour on terminals), JSON
//! (versioned schema, see `docs/check-report.md`), SARIF 2.1.0 (code-scanning UIs: file and
//! line of each offending field), JUnit XML (one test case per object).
//!
//! Reports are built from [`crate::check::Report`], whose values are already redacted.

mod json;
mod junit;
mod sarif;
mod text;

use crate::check::Report;

pub use json::SCHEMA_VERSION;

/// An output format (`-o`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Sarif,
    Junit,
}

/// Renders a report.
pub fn render(r: &Report, format: Format, color: bool) -> String {
    match format {
        Format::Text => text::render(r, color),
        Format::Json => json::render(r),
        Format::Sarif => sarif::render(r),
        Format::Junit => junit::render(r),
    }
}

/// The object as reports name it: `Deployment shop/checkout`.
fn object_name(o: &crate::check::ObjectReport) -> String {
    if o.namespace.is_empty() {
        format!("{} {}", o.kind, o.name)
    } else {
        format!("{} {}/{}", o.kind, o.namespace, o.name)
    }
}

/// A value as reports print it (JSON, one line).
fn show(v: &Option<crate::value::Value>) -> String {
    match v {
        Some(v) => crate::value::json::to_string(v, crate::value::json::Style::PLAIN),
        None => "(not set)".to_string(),
    }
}
