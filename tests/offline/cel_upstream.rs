//! Upstream's own CEL validation tests as fixtures: the cases of apiextensions-apiserver's
//! `pkg/apiserver/schema/cel/validation_test.go` and apiserver's `pkg/cel/library/*_test.go`
//! (v0.36.5), transcribed as custom resource writes in `tests/data/cel/*.jsonl`, each with the
//! answer of Kubernetes' own write path (the validation oracle) as its expectation; see
//! `tests/data/cel/README.md` for how they were made and how to regenerate them.
//!
//! Each case runs through `validation::custom_resource` on the object the server stored (the
//! case's `stored`, else `new`). It agrees when fieldguard's error texts are the recorded ones
//! (as sets: the server's order is not deterministic). A case where fieldguard reports something
//! as not evaluated is counted apart; the errors it did report must still be among the
//! recorded ones (a rule it cannot evaluate is no licence to invent an error). Any other
//! difference fails the test unless the case is in [`KNOWN`], with its reason.

use fieldguard::validation::{Structural, custom_resource};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Cases whose differences are understood, by `source`, with the reason. A reason starting
/// `fieldguard bug` is a defect of fieldguard's (reported, with a minimized case): remove the
/// entry with the fix (the test fails on an entry that no longer disagrees).
const KNOWN: &[(&str, &str)] = &[
    // The root object's metadata is checked before the schema (`validation::meta::object_meta`,
    // given here as `custom_resource`'s prior errors), which does not check `generateName`;
    // upstream's object has `generateName: pickItForMe` (upper case: not a DNS subdomain).
    (
        "validation_test.go:TestValidationExpressions/typemeta_and_objectmeta_access_not_specified/self.apiVersion_==_'v1'",
        GENERATE_NAME,
    ),
    (
        "validation_test.go:TestValidationExpressions/typemeta_and_objectmeta_access_not_specified/self.kind_==_'Pod'",
        GENERATE_NAME,
    ),
    (
        "validation_test.go:TestValidationExpressions/typemeta_and_objectmeta_access_not_specified/self.metadata.generateName_==_'pickItForMe'",
        GENERATE_NAME,
    ),
    (
        "validation_test.go:TestValidationExpressions/typemeta_and_objectmeta_access_not_specified/self.metadata.name_==_'foo'",
        GENERATE_NAME,
    ),
    (
        "validation_test.go:TestValidationExpressions/typemeta_and_objectmeta_access_not_specified/self.spec.field1_==_'a'",
        GENERATE_NAME,
    ),
    // The server refuses the embedded resource's `metadata.namespace:
    // reserved_keyword_namespace` (not a DNS label), which fieldguard does not check; its rules
    // pass on the server, while fieldguard neither sees the declared `metadata.namespace` of
    // an embedded resource nor resolves `.if` / `.namespace` unescaped.
    (
        "validation_test.go:TestValidationExpressions/embedded_object_with_usage_of_reserved_keywords/has(self.embedded.metadata.namespace)",
        EMBEDDED_RESERVED,
    ),
    (
        "validation_test.go:TestValidationExpressions/embedded_object_with_usage_of_reserved_keywords/has(self.embedded.spec.if)",
        EMBEDDED_RESERVED,
    ),
    (
        "validation_test.go:TestValidationExpressions/embedded_object_with_usage_of_reserved_keywords/self.embedded.metadata.namespace_==_'reserved_keyword_namespace'",
        EMBEDDED_RESERVED,
    ),
    (
        "validation_test.go:TestValidationExpressions/embedded_object_with_usage_of_reserved_keywords/self.embedded.spec.if_==_'reserved_keyword_if'",
        EMBEDDED_RESERVED,
    ),
    (
        "validation_test.go:TestValidationExpressions/optionals/optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00.000+00:00'))_==_optional.none()",
        "fieldguard bug: optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')) is \
         optional.none() for cel-go (the zero time.Time is a zero value), a value for fieldguard",
    ),
    (
        "validation_test.go:TestValidationExpressions/conversions/string(self.val11)_==_self.val10",
        "fieldguard bug: string(<timestamp>) keeps the offset the timestamp was written with \
         (cel-go: time.Time.Format(RFC3339Nano) of the parsed time, \
         '2011-08-18T19:03:37.01+01:00'); fieldguard prints it in UTC \
         ('2011-08-18T18:03:37.01Z'), for a date-time field and a timestamp() literal alike",
    ),
];

const GENERATE_NAME: &str = "fieldguard does not check metadata.generateName (a server-side \
     apply names its object); the server refuses `pickItForMe` (not a DNS subdomain)";

const EMBEDDED_RESERVED: &str = "fieldguard bug: (1) the metadata of an \
     x-kubernetes-embedded-resource is not validated (the server: \
     `spec.embedded.metadata.namespace: Invalid value: ...: a lowercase RFC 1123 label ...`); \
     (2) an embedded resource whose schema declares apiVersion, kind and metadata.name/\
     generateName as strings keeps its declared metadata for CEL (WithTypeAndObjectMeta \
     returns such a schema unchanged): fieldguard hides every metadata field but name and \
     generateName";

const FILES: &[&str] = &["validation.jsonl", "library.jsonl"];

fn fg(v: &Value) -> fieldguard::value::Value {
    fieldguard::value::json::parse(v.to_string().as_bytes()).expect("JSON")
}

#[derive(Default)]
struct Counts {
    cases: usize,
    agree: usize,
    not_evaluated: usize,
    known: usize,
    disagree: usize,
}

/// What fieldguard says about one case: its error texts and what it did not evaluate.
fn judge(case: &Value) -> (BTreeSet<String>, Vec<String>) {
    let schema = &case["schema"];
    let root = match case["placement"].as_str() {
        Some("root") => schema.clone(),
        _ => serde_json::json!({"type": "object", "properties": {"spec": schema}}),
    };
    let structural = Structural::from_value(&fg(&root), None);
    let stored = fg(case.get("stored").unwrap_or(&case["new"]));
    let old = Some(&case["old"]).filter(|o| !o.is_null()).map(fg);
    // What comes before the schema in fieldguard's check (as for the server): the metadata.
    let prior = fieldguard::validation::meta::object_meta(&stored, "example.com", "Widget", true)
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    let d = custom_resource(&stored, old.as_ref(), &structural, prior);
    (
        d.errors.iter().map(ToString::to_string).collect(),
        d.not_evaluated,
    )
}

/// A not-evaluated report without its place and rule: `<path>: rule "<rule>" not evaluated
/// (<why>)` is `<why>` up to its first `:`; `<path>: <constraint>` is `<constraint>`.
fn reason(n: &str) -> String {
    if let Some(i) = n.rfind(" not evaluated (") {
        let why = n[i + " not evaluated (".len()..].trim_end_matches(')');
        return why.split(':').next().unwrap_or(why).to_string();
    }
    n.split_once(": ").map_or(n, |(_, w)| w).to_string()
}

#[test]
fn upstream_cel_cases() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cel");
    let known: BTreeMap<&str, &str> = KNOWN.iter().copied().collect();
    let mut used_known = BTreeSet::new();
    let mut by_file: BTreeMap<String, Counts> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut why_not: BTreeMap<String, usize> = BTreeMap::new();
    // FIELDGUARD_CEL_UPSTREAM_FILE: run the cases of that file instead (minimizing).
    let own = std::env::var_os("FIELDGUARD_CEL_UPSTREAM_FILE");
    let own_file = own.is_some();
    let files: Vec<std::path::PathBuf> = match own {
        Some(f) => vec![f.into()],
        None => FILES.iter().map(|f| dir.join(f)).collect(),
    };
    for path in &files {
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        for (n, line) in text.lines().enumerate() {
            let case: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{file}:{}: not JSON: {e}", n + 1));
            let source = case["source"].as_str().expect("source");
            let upstream_file = source.split(':').next().unwrap_or(source).to_string();
            let c = by_file.entry(upstream_file).or_default();
            c.cases += 1;
            let theirs: BTreeSet<String> = case["expect"]["errors"]
                .as_array()
                .expect("expect.errors")
                .iter()
                .map(|e| e.as_str().expect("error text").to_string())
                .collect();
            let (ours, not_evaluated) = judge(&case);
            let ok = if not_evaluated.is_empty() {
                ours == theirs
            } else {
                ours.is_subset(&theirs)
            };
            if ok && !not_evaluated.is_empty() {
                c.not_evaluated += 1;
                for why in not_evaluated
                    .iter()
                    .map(|n| reason(n))
                    .collect::<BTreeSet<_>>()
                {
                    *why_not.entry(why).or_default() += 1;
                }
            } else if ok {
                c.agree += 1;
            } else if known.contains_key(source) {
                c.known += 1;
                used_known.insert(source.to_string());
            } else {
                c.disagree += 1;
                failures.push(format!(
                    "{file}:{}: {source}\n  server:    {theirs:?}\n  fieldguard: {ours:?}\n  not evaluated: {not_evaluated:?}",
                    n + 1
                ));
            }
        }
    }
    let mut total = Counts::default();
    println!(
        "{:<28} {:>6} {:>6} {:>14} {:>6} {:>9}",
        "upstream file", "cases", "agree", "not evaluated", "known", "disagree"
    );
    for (f, c) in &by_file {
        println!(
            "{f:<28} {:>6} {:>6} {:>14} {:>6} {:>9}",
            c.cases, c.agree, c.not_evaluated, c.known, c.disagree
        );
        total.cases += c.cases;
        total.agree += c.agree;
        total.not_evaluated += c.not_evaluated;
        total.known += c.known;
        total.disagree += c.disagree;
    }
    println!(
        "{:<28} {:>6} {:>6} {:>14} {:>6} {:>9}",
        "total", total.cases, total.agree, total.not_evaluated, total.known, total.disagree
    );
    let mut whys: Vec<(usize, String)> = why_not.into_iter().map(|(w, n)| (n, w)).collect();
    whys.sort_by(|a, b| b.cmp(a));
    println!("not evaluated, by reason (cases):");
    for (n, w) in whys.iter().take(12) {
        println!("{n:>6}  {w}");
    }
    assert!(
        failures.is_empty(),
        "{} case(s) disagree with the server:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if !own_file {
        let stale: Vec<&&str> = known.keys().filter(|k| !used_known.contains(**k)).collect();
        assert!(
            stale.is_empty(),
            "KNOWN lists cases that no longer disagree (or no longer exist): {stale:?}"
        );
    }
}
