//! Classes of disagreement: which kinds of error only the server reports, which only
//! fieldguard, and whether the verdicts differ; and the classes documented as understood.

use std::collections::BTreeSet;

/// A class of disagreement that is understood and is not fieldguard's bug.
pub struct Documented {
    pub class: &'static str,
    /// The evidence: why the two differ.
    pub why: &'static str,
    /// A minimized case.
    pub example: &'static str,
}

pub const DOCUMENTED: &[Documented] = &[Documented {
    class: "both refuse: worded differently: cel no such key",
    why: "both refuse the write with the same rule's evaluation error at the same field; when \
          several fields of one rule are missing, cel-go and the cel crate name a different one \
          first (the order in which `&&`/`||` operands that both fail are reported): only the \
          key in `no such key: K evaluating rule: ...` differs",
    example: "seed 202, 100,000 cases: server `spec: Invalid value: \"object\": no such key: \
              foo_bar evaluating rule: value is wrong`, fieldguard `... no such key: \
              __namespace__ evaluating rule: value is wrong`",
}];

pub fn documented(class: &str) -> Option<&'static Documented> {
    DOCUMENTED.iter().find(|d| d.class == class)
}

/// The kind of an error text (`field: message`).
pub fn kind(text: &str) -> &'static str {
    let has = |s: &str| text.contains(s);
    if has("some validation rules were not checked") {
        "rules-not-checked notice"
    } else if has("in body must be of type") {
        "type"
    } else if has("Checked value must be of type integer") {
        "integer (nil field)"
    } else if has("Unsupported value") {
        "enum"
    } else if has("Too long") {
        "maxLength"
    } else if has("Too many") {
        "maxItems/maxProperties"
    } else if has("should be at least") {
        "minLength/minItems/minProperties"
    } else if has("should match") {
        "pattern"
    } else if has("should be greater") || has("should be less") {
        "minimum/maximum"
    } else if has("multiple of") {
        "multipleOf"
    } else if has("no such key") {
        "cel no such key"
    } else if has("evaluating rule") {
        "cel runtime error"
    } else if has("running out of cost budget") {
        "cel cost budget"
    } else if has(": Duplicate value") {
        "duplicate"
    } else if has(": Required value") {
        "required"
    } else if has(": Forbidden") {
        "forbidden"
    } else {
        "invalid (cel rule)"
    }
}

/// Kinds in the order that picks a class: schema errors (which block the rules) first.
const ORDER: &[&str] = &[
    "type",
    "required",
    "enum",
    "maxLength",
    "maxItems/maxProperties",
    "integer (nil field)",
    "minLength/minItems/minProperties",
    "pattern",
    "minimum/maximum",
    "multipleOf",
    "duplicate",
    "rules-not-checked notice",
    "cel runtime error",
    "cel no such key",
    "cel cost budget",
    "forbidden",
    "invalid (cel rule)",
];

fn field(text: &str) -> &str {
    text.split(": ").next().unwrap_or(text)
}

/// The class of a disagreement: the verdicts, then its first difference: an error both report
/// at the same field in other words, or else the first kind (in [`ORDER`]) one side alone
/// reports.
pub fn class(server_refused: bool, theirs: &BTreeSet<String>, ours: &BTreeSet<String>) -> String {
    let verdict = match (server_refused, !ours.is_empty()) {
        (true, false) => "server refuses, fieldguard accepts",
        (false, true) => "server accepts, fieldguard refuses",
        _ => "both refuse",
    };
    let t: Vec<&String> = theirs.difference(ours).collect();
    let o: Vec<&String> = ours.difference(theirs).collect();
    if let Some(x) = t
        .iter()
        .find(|x| o.iter().any(|y| field(y) == field(x) && kind(y) == kind(x)))
    {
        return format!("{verdict}: worded differently: {}", kind(x));
    }
    let rank = |k: &str| ORDER.iter().position(|o| *o == k).unwrap_or(ORDER.len());
    let first = |side: &[&String]| side.iter().map(|x| kind(x)).min_by_key(|k| rank(k));
    match (first(&t), first(&o)) {
        (Some(a), Some(b)) if rank(b) < rank(a) => format!("{verdict}: fieldguard only: {b}"),
        (Some(a), _) => format!("{verdict}: server only: {a}"),
        (None, Some(b)) => format!("{verdict}: fieldguard only: {b}"),
        (None, None) => verdict.to_string(),
    }
}

/// A CRD error without its field path and values (for the summary).
pub fn crd_error_kind(e: &str) -> String {
    let detail = e.rsplit(": ").next().unwrap_or(e);
    detail.chars().take(90).collect()
}

/// What fieldguard did not evaluate, by kind (for the summary).
pub fn not_evaluated_kind(n: &str) -> String {
    if n.contains(": format ") {
        "format".into()
    } else if n.contains("allOf/anyOf") {
        "junctors".into()
    } else if n.contains(": pattern ") {
        "pattern".into()
    } else if let Some(i) = n.find(" not evaluated (") {
        let why = &n[i + 16..];
        let why = why.split(':').next().unwrap_or(why);
        let why: String = why.chars().take(60).collect();
        format!("rule: {why}")
    } else if n.contains("messageExpression") {
        "messageExpression".into()
    } else {
        n.chars().take(60).collect()
    }
}

#[test]
fn documented_classes_are_explained() {
    for d in DOCUMENTED {
        assert!(
            !d.class.is_empty() && !d.why.is_empty() && !d.example.is_empty(),
            "{}",
            d.class
        );
    }
}
