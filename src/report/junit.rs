//! `-o junit`: JUnit XML, one test case per object (a failure per conflicting object, an error
//! per object that cannot be applied), for CI systems that show test reports.

use super::{object_name, show};
use crate::check::{Report, describe_owner};
use crate::predict::Verdict;
use std::fmt::Write;

/// Escapes text for XML attributes and content; drops characters XML 1.0 cannot carry.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

pub fn render(r: &Report) -> String {
    let s = r.summary();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let name = esc(&format!("fieldguard check ({})", r.field_manager));
    let _ = writeln!(
        out,
        "<testsuites name=\"{name}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"0\">",
        s.objects,
        s.conflicted + s.rejected,
        s.invalid
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"0\">",
        s.objects,
        s.conflicted + s.rejected,
        s.invalid
    );
    let _ = writeln!(
        out,
        "    <properties>\n      <property name=\"fieldManager\" value=\"{}\"/>\n      <property name=\"force\" value=\"{}\"/>\n      <property name=\"source\" value=\"{}\"/>\n    </properties>",
        esc(&r.field_manager),
        r.force.mode(),
        esc(&r.source)
    );
    for o in &r.objects {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"0\"",
            esc(&object_name(o)),
            esc(&format!("{}:{}", o.file, o.line))
        );
        let mut body = String::new();
        match o.verdict {
            Verdict::Conflict => {
                let mut text = String::new();
                for c in &o.conflicts {
                    let owners: Vec<String> = c.field.owners.iter().map(describe_owner).collect();
                    let _ = writeln!(
                        text,
                        "{}:{}: {} owned by {}; live {}, manifest {}",
                        o.file,
                        c.line,
                        c.field.path,
                        owners.join("; "),
                        show(&c.field.current),
                        show(&c.field.proposed)
                    );
                    if let Some(s) = c.suggestions.first() {
                        let _ = writeln!(text, "  fix: {}", s.message);
                    }
                }
                let _ = writeln!(
                    body,
                    "      <failure type=\"Conflict\" message=\"{}\">{}</failure>",
                    esc(o.message.as_deref().unwrap_or("conflict")),
                    esc(&text)
                );
            }
            Verdict::Rejected => {
                let text: String = o.rejections.iter().map(|r| format!("{r}\n")).collect();
                let _ = writeln!(
                    body,
                    "      <failure type=\"Rejected\" message=\"{}\">{}</failure>",
                    esc(o.message.as_deref().unwrap_or("rejected")),
                    esc(&text)
                );
            }
            Verdict::Invalid => {
                let _ = writeln!(
                    body,
                    "      <error type=\"Invalid\" message=\"{}\"/>",
                    esc(o.error.as_deref().unwrap_or("invalid"))
                );
            }
            _ => {
                let mut notes = Vec::new();
                notes.push(format!("{:?}", o.verdict).to_lowercase());
                for c in &o.taken_over {
                    notes.push(format!("takes over {}", c.field.path));
                }
                for f in &o.removed {
                    notes.push(format!("removes {}", f.field.path));
                }
                for f in &o.stuck {
                    notes.push(format!("stuck {}", f.field.path));
                }
                let _ = writeln!(
                    body,
                    "      <system-out>{}</system-out>",
                    esc(&notes.join("\n"))
                );
            }
        }
        let _ = write!(out, ">\n{body}    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Invalid input: one test case per problem, each an error at its file and line.
pub fn render_errors(errors: &[crate::manifest::ManifestError]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let n = errors.len();
    let _ = writeln!(
        out,
        "<testsuites name=\"fieldguard check\" tests=\"{n}\" failures=\"0\" errors=\"{n}\" time=\"0\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"fieldguard check: invalid input\" tests=\"{n}\" failures=\"0\" errors=\"{n}\" skipped=\"0\" time=\"0\">"
    );
    for e in errors {
        let place = match e.line {
            Some(l) => format!("{}:{l}", e.file),
            None => e.file.to_string(),
        };
        let _ = writeln!(
            out,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"0\">\n      <error type=\"InvalidInput\" message=\"{}\"/>\n    </testcase>",
            esc(&place),
            esc(&e.file),
            esc(&e.to_string())
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
