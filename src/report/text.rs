//! Human-readable text: one block per object in manifest order, conflicts first with their
//! owners, values and fixes; then takeovers, removals and stuck fields; a summary line last.

use super::{object_name, show};
use crate::check::{Conflict, Field, ObjectReport, Report, describe_owner};
use crate::predict::Verdict;
use std::fmt::Write;

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn red(&self, s: &str) -> String {
        self.paint("31;1", s)
    }
    fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
}

pub fn render(r: &Report, color: bool) -> String {
    let st = Style { on: color };
    let mut out = String::new();
    let force = match r.force.mode() {
        "selective" => format!("force against {}", r.force.patterns().join(", ")),
        "all" => "force all conflicts".to_string(),
        _ => "no force".to_string(),
    };
    let _ = writeln!(
        out,
        "Checking {} object(s) as field manager {:?} against {} ({force})\n",
        r.objects.len(),
        r.field_manager,
        r.source
    );
    if let Some(h) = &r.hooks {
        let why = h
            .inferred
            .as_ref()
            .map(|w| format!(" (inferred: {w}; --operation to choose)"))
            .unwrap_or_default();
        let (pre, post) = h.operation.events();
        let _ = writeln!(
            out,
            "Helm hooks predicted for {}{why}: {pre} hooks, the release's objects, {post} hooks",
            h.operation.as_str()
        );
        for n in &h.not_run {
            let _ = writeln!(out, "  {} {n}", st.dim("not run"));
        }
        out.push('\n');
    }
    for o in &r.objects {
        object(&mut out, o, &st);
    }
    let s = r.summary();
    let mut parts = Vec::new();
    for (n, what) in [
        (s.created, "created"),
        (s.configured, "configured"),
        (s.unchanged, "unchanged"),
        (s.ownership_only, "ownership only"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    let head = if s.conflicted > 0 || s.rejected > 0 {
        let mut h = Vec::new();
        if s.conflicted > 0 {
            h.push(format!(
                "{} of {} object(s) conflict ({} conflicting field(s))",
                s.conflicted, s.objects, s.conflicts
            ));
        }
        if s.rejected > 0 {
            h.push(format!(
                "{} of {} object(s) would be rejected by validation",
                s.rejected, s.objects
            ));
        }
        st.red(&h.join("; "))
    } else if s.invalid > 0 {
        st.red(&format!("{} object(s) cannot be applied", s.invalid))
    } else {
        st.green(&format!("No conflicts in {} object(s)", s.objects))
    };
    let mut extra = Vec::new();
    for (n, what) in [
        (s.taken_over, "taken over"),
        (s.removed, "removed"),
        (s.stuck, "stuck"),
    ] {
        if n > 0 {
            extra.push(format!("{n} field(s) {what}"));
        }
    }
    let _ = write!(out, "{head}");
    if !parts.is_empty() {
        let _ = write!(out, "; would be {}", parts.join(", "));
    }
    if !extra.is_empty() {
        let _ = write!(out, "; {}", extra.join(", "));
    }
    out.push_str(".\n");
    // Names, paths and messages come from the input: no control sequence of theirs reaches the
    // terminal (only this renderer's colours do).
    super::terminal_safe(&out, color).into_owned()
}

fn object(out: &mut String, o: &ObjectReport, st: &Style) {
    let (mark, verdict) = match o.verdict {
        Verdict::Conflict => (st.red("✗"), st.red("conflict")),
        Verdict::Invalid => (st.red("✗"), st.red("invalid")),
        Verdict::Rejected => (st.red("✗"), st.red("rejected (422)")),
        Verdict::Created => (
            st.green("+"),
            st.green(&format!("create ({} field(s))", o.owned_fields)),
        ),
        Verdict::Configured => (st.green("✓"), "configure".to_string()),
        Verdict::Unchanged => (st.green("✓"), st.dim("unchanged")),
        Verdict::OwnershipOnly => (
            st.green("✓"),
            "ownership only (managedFields change; the object is written)".to_string(),
        ),
    };
    let _ = writeln!(
        out,
        "{mark} {}  {}  {}",
        st.bold(&object_name(o)),
        st.dim(&format!("{}:{}", o.file, o.line)),
        verdict
    );
    if let Some(e) = &o.error {
        let _ = writeln!(out, "    {}", st.red(e));
    }
    for r in &o.rejections {
        let at = r
            .line
            .map(|l| format!("  {}", st.dim(&format!("{}:{l}", o.file))))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    {} {}{at}  {}",
            st.red("rejected"),
            st.bold(&r.field),
            r.message
        );
    }
    for n in &o.notes {
        let _ = writeln!(out, "    {} {n}", st.dim("note"));
    }
    for n in &o.not_evaluated {
        let _ = writeln!(out, "    {} {n}", st.dim("not evaluated"));
    }
    for c in &o.conflicts {
        conflict(
            out,
            o,
            c,
            st,
            if c.field.forced {
                "conflict (forcible)"
            } else {
                "conflict"
            },
        );
    }
    for c in &o.taken_over {
        conflict(out, o, c, st, "taken over");
    }
    for f in &o.removed {
        field(
            out,
            f,
            st,
            "removed",
            "nobody else owns it; the apply deletes it",
        );
    }
    for f in &o.stuck {
        field(
            out,
            f,
            st,
            "stuck",
            "dropped from the manifest but kept: still owned by others",
        );
    }
    if !o.shared.is_empty() {
        let _ = writeln!(
            out,
            "    {} {} field(s) become co-owned (same value as their owners)",
            st.dim("="),
            o.shared.len()
        );
    }
    out.push('\n');
}

fn conflict(out: &mut String, o: &ObjectReport, c: &Conflict, st: &Style, what: &str) {
    let label = if what == "taken over" {
        st.yellow(what)
    } else {
        st.red(what)
    };
    let _ = writeln!(
        out,
        "    {label} {}  {}",
        st.bold(&c.field.path),
        st.dim(&format!("{}:{}", o.file, c.line))
    );
    for ow in &c.field.owners {
        let _ = writeln!(out, "        owner     {}", describe_owner(ow));
    }
    let _ = writeln!(out, "        live      {}", show(&c.field.current));
    let _ = writeln!(out, "        manifest  {}", show(&c.field.proposed));
    // A takeover needs no fix, but its first suggestion says what the force costs.
    let shown = if what == "taken over" { 1 } else { usize::MAX };
    for (i, s) in c.suggestions.iter().take(shown).enumerate() {
        let lead = match (i, what) {
            (_, "taken over") => "note",
            (0, _) => "fix",
            _ => "or",
        };
        let _ = writeln!(out, "        {lead:<9} {}", s.message);
    }
}

fn field(out: &mut String, f: &Field, st: &Style, what: &str, why: &str) {
    let owners: Vec<String> = f.field.owners.iter().map(describe_owner).collect();
    let _ = writeln!(
        out,
        "    {} {}  {}",
        st.yellow(what),
        st.bold(&f.field.path),
        st.dim(why)
    );
    if !owners.is_empty() {
        let _ = writeln!(out, "        owner     {}", owners.join("; "));
    }
}
