//! Rules end to end: escaping, typed values, Go's regular expressions, `optionalOldSelf`,
//! and ratcheting by correlation. Cases from
//! `k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation_test.go` (v0.36.5)
//! where named.

use super::*;
use crate::validation::Structural;
use crate::value::yaml::parse_one;

/// A schema whose `spec` has `props` (YAML) and `rules` at `spec`.
fn spec(props: &str, rules: &[&str], extra: &str) -> Structural {
    let rules: Vec<String> = rules
        .iter()
        .map(|r| format!("{{rule: {r:?}{extra}}}"))
        .collect();
    let s = format!(
        "{{type: object, properties: {{spec: {{type: object, x-kubernetes-validations: [{}], properties: {props}}}}}}}",
        rules.join(", ")
    );
    Structural::from_value(&parse_one(&s).unwrap(), None)
}

fn obj(spec: &str) -> Value {
    parse_one(&format!(
        "{{apiVersion: a/v1, kind: K, metadata: {{name: n, labels: {{a: b}}}}, spec: {spec}}}"
    ))
    .unwrap()
}

fn errors(o: &Outcome) -> Vec<String> {
    o.errors.iter().map(|e| e.to_string()).collect()
}

#[test]
fn escaped_names_reach_their_fields() {
    // validation_test.go TestValidationExpressions "escaping".
    let s = spec(
        "{my-field: {type: integer}, namespace: {type: string}, if: {type: boolean}}",
        &[
            "self.my__dash__field == 1",
            "self.__namespace__ == 'ns'",
            "self.__if__",
        ],
        "",
    );
    let o = evaluate(&obj("{my-field: 1, namespace: ns, if: true}"), None, &s);
    assert!(o.errors.is_empty(), "{:?}", errors(&o));
    assert!(o.not_evaluated.is_empty(), "{:?}", o.not_evaluated);
    let o = evaluate(&obj("{my-field: 2, namespace: ns, if: true}"), None, &s);
    assert_eq!(
        errors(&o),
        ["spec: Invalid value: failed rule: self.my__dash__field == 1"]
    );
}

#[test]
fn typed_values_and_unconvertible_ones() {
    let s = spec(
        "{at: {type: string, format: date-time}, ratio: {type: number}}",
        &[
            "self.at < timestamp('2030-01-01T00:00:00Z')",
            "self.ratio == 2.0",
        ],
        "",
    );
    let o = evaluate(&obj("{at: '2024-05-01T10:00:00Z', ratio: 2}"), None, &s);
    assert!(o.errors.is_empty(), "{:?}", errors(&o));
    assert!(o.not_evaluated.is_empty(), "{:?}", o.not_evaluated);
    // A date-time the apiserver cannot read: not evaluated, never a verdict.
    let o = evaluate(&obj("{at: 'yesterday', ratio: 2}"), None, &s);
    assert!(o.errors.is_empty(), "{:?}", errors(&o));
    assert_eq!(o.not_evaluated.len(), 2, "{:?}", o.not_evaluated);
    assert!(
        o.not_evaluated[0].contains("invalid date-time"),
        "{:?}",
        o.not_evaluated
    );
}

#[test]
fn matches_reads_the_pattern_as_go_does() {
    let s = spec("{x: {type: string}}", &["self.x.matches('^\\\\d+$')"], "");
    assert!(evaluate(&obj("{x: '123'}"), None, &s).errors.is_empty());
    // Arabic-Indic digits are no `\d` for RE2.
    assert_eq!(evaluate(&obj("{x: '٣٤'}"), None, &s).errors.len(), 1);
    // A pattern Go refuses: an evaluation error upstream; not evaluated here.
    let s = spec("{x: {type: string}}", &["self.x.matches('(a)\\\\1')"], "");
    let o = evaluate(&obj("{x: aa}"), None, &s);
    assert!(o.errors.is_empty(), "{:?}", errors(&o));
    assert!(
        o.not_evaluated[0].contains("invalid escape sequence"),
        "{:?}",
        o.not_evaluated
    );
}

#[test]
fn optional_old_self_runs_on_create_and_update() {
    // validation_test.go TestOptionalOldSelf.
    let props = "{foo: {type: string}}";
    let cases: [(&str, &str, Option<&str>, usize); 5] = [
        // allow new value if old value is null
        (
            "self.foo == 'not bar' || !oldSelf.hasValue()",
            "bar",
            None,
            0,
        ),
        // block new value if old value is not null
        (
            "self.foo == 'valid' || !oldSelf.hasValue()",
            "invalid",
            Some("bar"),
            1,
        ),
        // allow invalid new value if old value is also invalid
        (
            "self.foo == 'valid' || (oldSelf.hasValue() && oldSelf.value().foo != 'valid')",
            "invalid again",
            Some("invalid"),
            0,
        ),
        // block invalid new value if old value is valid
        (
            "self.foo == 'valid' || (oldSelf.hasValue() && oldSelf.value().foo != 'valid')",
            "invalid",
            Some("valid"),
            1,
        ),
        ("oldSelf.orValue(self).foo == self.foo", "x", None, 0),
    ];
    for (rule, new, old, want) in cases {
        let s = spec(props, &[rule], ", optionalOldSelf: true");
        let old = old.map(|o| obj(&format!("{{foo: {o:?}}}")));
        let o = evaluate(&obj(&format!("{{foo: {new:?}}}")), old.as_ref(), &s);
        assert!(o.not_evaluated.is_empty(), "{rule}: {:?}", o.not_evaluated);
        assert_eq!(o.errors.len(), want, "{rule}: {:?}", errors(&o));
    }
}

/// A `spec.items` list of `{k, v}` objects whose items carry `rule`.
fn items(list_type: &str, rule: &str) -> Structural {
    let keys = if list_type == "map" {
        ", x-kubernetes-list-map-keys: [k]"
    } else {
        ""
    };
    let s = format!(
        "{{type: object, properties: {{spec: {{type: object, properties: {{items: {{type: array, x-kubernetes-list-type: {list_type}{keys}, items: {{type: object, x-kubernetes-validations: [{{rule: {rule:?}}}], properties: {{k: {{type: string}}, v: {{type: integer}}}}}}}}}}}}}}}}"
    );
    Structural::from_value(&parse_one(&s).unwrap(), None)
}

#[test]
fn map_list_items_correlate_by_key() {
    // An item moved within a `map` list keeps its old value: it ratchets, and `oldSelf` is
    // the item with its key (validation_test.go "map list" transition rule cases).
    let s = items("map", "self.v < 10");
    let old = obj("{items: [{k: a, v: 50}, {k: b, v: 1}]}");
    let new = obj("{items: [{k: b, v: 1}, {k: a, v: 50}]}");
    assert!(evaluate(&new, Some(&old), &s).errors.is_empty());
    let changed = obj("{items: [{k: b, v: 1}, {k: a, v: 51}]}");
    assert_eq!(
        errors(&evaluate(&changed, Some(&old), &s)),
        ["spec.items[1]: Invalid value: failed rule: self.v < 10"]
    );
    let s = items("map", "self.v >= oldSelf.v");
    let new = obj("{items: [{k: b, v: 2}, {k: a, v: 49}]}");
    assert_eq!(
        errors(&evaluate(&new, Some(&old), &s)),
        ["spec.items[1]: Invalid value: failed rule: self.v >= oldSelf.v"]
    );
}

#[test]
fn other_list_items_ratchet_only_with_the_whole_list() {
    // `correlateOldValueForChildAtNewIndex`: set and atomic items have no old value; their
    // errors ratchet when the list (the nearest correlated value) is unchanged.
    for list_type in ["set", "atomic"] {
        let s = items(list_type, "self.v < 10");
        let old = obj("{items: [{k: a, v: 50}, {k: b, v: 1}]}");
        assert!(
            evaluate(&old, Some(&old), &s).errors.is_empty(),
            "{list_type}"
        );
        let reordered = obj("{items: [{k: b, v: 1}, {k: a, v: 50}]}");
        assert_eq!(
            evaluate(&reordered, Some(&old), &s).errors.len(),
            1,
            "{list_type}"
        );
        let s = items(list_type, "self.v == oldSelf.v");
        assert!(
            evaluate(&reordered, Some(&old), &s).errors.is_empty(),
            "{list_type}"
        );
    }
}

#[test]
fn set_equality_in_a_transition_rule() {
    let s = spec(
        "{tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}}",
        &["self.tags == oldSelf.tags"],
        "",
    );
    let old = obj("{tags: [p, q]}");
    assert!(
        evaluate(&obj("{tags: [q, p]}"), Some(&old), &s)
            .errors
            .is_empty()
    );
    assert_eq!(
        evaluate(&obj("{tags: [q, r]}"), Some(&old), &s)
            .errors
            .len(),
        1
    );
}

/// A caller that gave up (its request's deadline passed) stops the evaluation between rules:
/// the rules left are not evaluated, never given a verdict.
#[test]
fn rules_after_the_deadline_are_not_evaluated() {
    let s = spec("{n: {type: integer}}", &["self.n > 100", "self.n < 0"], "");
    let o = evaluate(&obj("{n: 5}"), None, &s);
    assert_eq!(o.errors.len(), 2, "{:?}", o.errors);
    let _gone = crate::deadline::Deadline::at(std::time::Instant::now()).enter();
    let o = evaluate(&obj("{n: 5}"), None, &s);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert_eq!(o.not_evaluated.len(), 2, "{:?}", o.not_evaluated);
    assert!(
        o.not_evaluated[0].contains("the deadline passed before it was evaluated"),
        "{:?}",
        o.not_evaluated
    );
}

/// Under optionalOldSelf the server's old value is untyped and keeps its null fields:
/// `oldSelf.value().tags <= 2.0` of a null `tags` is no such overload there (the validation
/// oracle, apiextensions-apiserver 1.36.5, seed 1796625580), no such key here — not evaluated.
#[test]
fn an_untyped_old_value_with_null_fields_is_not_evaluated() {
    let s = spec(
        "{tags: {type: number, nullable: true}}",
        &["!oldSelf.hasValue() || oldSelf.value().tags <= 2.0"],
        ", optionalOldSelf: true",
    );
    let o = evaluate(&obj("{tags: 0.5}"), Some(&obj("{tags: null}")), &s);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert_eq!(o.not_evaluated.len(), 1, "{:?}", o.not_evaluated);
    let o = evaluate(&obj("{tags: 0.5}"), Some(&obj("{tags: 3.0}")), &s);
    assert_eq!(errors(&o).len(), 1, "{:?}", o);
}
