//! Check reports for people and machines: text (grouped per object, colour on terminals), JSON
//! (versioned schema, see `docs/check-report.md`), SARIF 2.1.0 (code-scanning UIs: file and
//! line of each offending field), JUnit XML (one test case per object).
//!
//! Reports are built from [`crate::check::Report`], whose values are already redacted; invalid
//! input has a report of its own in each machine format ([`render_errors`]).

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

/// Invalid input as a report, for machines (nothing was predicted): JSON lists the problems
/// (`kind: InvalidInput`), SARIF makes each a result at its file and line, JUnit an error
/// each — so a CI upload step gets a document that says what is wrong. Text: `None` (the
/// problems go to standard error).
pub fn render_errors(errors: &[crate::manifest::ManifestError], format: Format) -> Option<String> {
    match format {
        Format::Text => None,
        Format::Json => Some(json::render_errors(errors)),
        Format::Sarif => Some(sarif::render_errors(errors)),
        Format::Junit => Some(junit::render_errors(errors)),
    }
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

/// Writes a report to `w`: JSON as it is made, the other formats rendered first.
pub fn write(
    r: &Report,
    format: Format,
    color: bool,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        Format::Json => json::write(r, w),
        _ => w.write_all(render(r, format, color).as_bytes()),
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

/// Text safe to print on a terminal: control characters (an escape sequence in a manager name,
/// a carriage return in a key) are shown escaped (`\u{1b}`), never sent raw.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    terminal_safe(s, false)
}

/// [`printable`], keeping colour sequences (`ESC [ digits ; m`: they can only colour text)
/// when `colours`: what text reports print after painting.
pub fn terminal_safe(s: &str, colours: bool) -> std::borrow::Cow<'_, str> {
    let control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}' && colours {
            let b = rest.as_bytes();
            if b.get(1) == Some(&b'[') {
                let end = b[2..]
                    .iter()
                    .position(|x| !(x.is_ascii_digit() || *x == b';'))
                    .map(|i| i + 2);
                if let Some(e) = end.filter(|e| b.get(*e) == Some(&b'm')) {
                    out.push_str(&rest[..=e]);
                    rest = &rest[e + 1..];
                    continue;
                }
            }
        }
        if control(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::printable("helm"), "helm");
        assert_eq!(super::printable("evil\u{1b}[2Jx"), "evil\\u{1b}[2Jx");
        assert_eq!(super::printable("a\rb\u{9b}c"), "a\\u{d}b\\u{9b}c");
        assert_eq!(
            super::terminal_safe("\u{1b}[31;1mred\u{1b}[0m \u{1b}]0;title\u{7}", true),
            "\u{1b}[31;1mred\u{1b}[0m \\u{1b}]0;title\\u{7}"
        );
        assert_eq!(super::terminal_safe("\u{1b}[2J", true), "\\u{1b}[2J");
    }
}
