//! Cases from `k8s.io/apiserver/pkg/cel/common/values_test.go` and
//! `k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation_test.go` (v0.36.5),
//! evaluated end to end through a rule.

use super::*;
use crate::value::yaml::parse_one;

fn schema(yaml: &str) -> Structural {
    Structural::from_value(&parse_one(yaml).unwrap(), None)
}

/// Evaluates `rule` with `self` the value `v` of schema `s`.
fn eval(rule: &str, s: &str, v: &str) -> Result<cel::Value, String> {
    let this = to_cel(&parse_one(v).unwrap(), &schema(s))?;
    let program = cel::Program::compile(rule).map_err(|e| e.to_string())?;
    let mut ctx = cel::Context::default();
    ctx.add_variable_as_val("self", this);
    take_undecided();
    let r = program.execute(&ctx).map_err(|e| e.to_string());
    if let Some(u) = take_undecided() {
        return Err(format!("undecided: {u}"));
    }
    r
}

fn truth(rule: &str, s: &str, v: &str) -> bool {
    match eval(rule, s, v) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("{rule}: {other:?}"),
    }
}

#[test]
fn property_names_are_escaped_and_nulls_absent() {
    // validation_test.go "escaping": `self.__namespace__`, `self.a__dash__prop`, ...
    let s = "{type: object, properties: {namespace: {type: string}, a-prop: {type: integer}, a.b: {type: integer}, a/b: {type: integer}, a__b: {type: integer}, '@': {type: integer}, n: {type: string, nullable: true}}}";
    let v = "{namespace: ns, a-prop: 1, a.b: 2, a/b: 3, a__b: 4, '@': 5, n: null}";
    assert!(truth("self.__namespace__ == 'ns'", s, v));
    assert!(truth("self.a__dash__prop == 1", s, v));
    assert!(truth("self.a__dot__b == 2 && self.a__slash__b == 3", s, v));
    assert!(truth("self.a__underscores__b == 4", s, v));
    assert!(truth("self['@'] == 5", s, v));
    assert!(truth("!has(self.n)", s, v));
    // Keys of additionalProperties maps are not escaped.
    let m = "{type: object, additionalProperties: {type: integer}}";
    assert!(truth("self['a-b'] == 1", m, "{a-b: 1}"));
}

#[test]
fn formats_and_numbers_are_typed_by_the_schema() {
    let dt = "{type: string, format: date-time}";
    assert!(truth(
        "self == timestamp('2011-08-18T19:03:37Z')",
        dt,
        "'2011-08-18T19:03:37.000Z'"
    ));
    assert!(truth(
        "self.getHours() == 17",
        dt,
        "'2011-08-18T19:03:37+02:00'"
    ));
    assert!(truth(
        "self.getFullYear() == 2011",
        dt,
        "'2011-08-18T19:03:37'"
    ));
    assert!(eval("self", dt, "'2011-13-18T19:03:37Z'").is_err());
    let date = "{type: string, format: date}";
    assert!(truth(
        "self == timestamp('2011-08-18T00:00:00Z')",
        date,
        "'2011-08-18'"
    ));
    let d = "{type: string, format: duration}";
    assert!(truth("self == duration('1h2m3s')", d, "'1h2m3s'"));
    assert!(truth("self == duration('1500ms')", d, "'1.5s'"));
    assert!(eval("self", d, "'3 days'").is_err());
    let b = "{type: string, format: byte}";
    assert!(truth("self == b'hi?'", b, "'aGk_'"));
    assert!(eval("self", b, "'aGk/'").is_err());
    let n = "{type: number}";
    assert!(truth("self == 1.0 && type(self) == double", n, "1"));
    let ios = "{x-kubernetes-int-or-string: true}";
    assert!(truth("type(self) == int", ios, "1"));
    assert!(truth("type(self) == string", ios, "'1'"));
    assert!(eval("self", "{type: integer}", "'1'").is_err());
    assert!(
        eval(
            "self",
            "{x-kubernetes-preserve-unknown-fields: true}",
            "{a: 1}"
        )
        .is_err()
    );
}

#[test]
fn embedded_resources_show_type_and_name_only() {
    let s = "{type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true, properties: {spec: {type: string}}}";
    let v = "{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {a: b}}, spec: x}";
    assert!(truth(
        "self.kind == 'Pod' && self.metadata.name == 'p' && !has(self.metadata.labels)",
        s,
        v
    ));
}

const SET: &str = "{type: array, x-kubernetes-list-type: set, items: {type: string}}";

#[test]
fn set_lists_compare_as_sets() {
    // values_test.go TestEquality "set lists are equal regardless of order".
    let s = "{type: object, properties: {a: {type: array, x-kubernetes-list-type: set, items: {type: string}}, b: {type: array, x-kubernetes-list-type: set, items: {type: string}}}}";
    assert!(truth("self.a == self.b", s, "{a: [p, q], b: [q, p]}"));
    assert!(!truth("self.a == self.b", s, "{a: [p, q], b: [q, r]}"));
    assert!(!truth("self.a == self.b", s, "{a: [p], b: [p, q]}"));
    // The left operand decides: a literal list compares pairwise.
    assert!(truth("self == ['q', 'p']", SET, "[p, q]"));
    assert!(!truth("['q', 'p'] == self", SET, "[p, q]"));
    assert!(truth("['p', 'q'] == self", SET, "[p, q]"));
    // Upstream's quirk: a set of numbers given as integers holds int64s, compared with the
    // float64s of its CEL elements: never equal to itself.
    let n = "{type: object, properties: {a: {type: array, x-kubernetes-list-type: set, items: {type: number}}}}";
    assert!(!truth("self.a == self.a", n, "{a: [1, 2]}"));
    assert!(truth("self.a == self.a", n, "{a: [1.5]}"));
    assert!(truth("'p' in self && size(self) == 2", SET, "[p, q]"));
}

#[test]
fn map_lists_compare_by_key() {
    let item = "{type: object, properties: {k: {type: string}, v: {type: integer}}}";
    let s = format!(
        "{{type: object, properties: {{a: {{type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [k], items: {item}}}, b: {{type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [k], items: {item}}}}}}}"
    );
    assert!(truth(
        "self.a == self.b",
        &s,
        "{a: [{k: x, v: 1}, {k: q, v: 2}], b: [{k: q, v: 2}, {k: x, v: 1}]}"
    ));
    assert!(!truth(
        "self.a == self.b",
        &s,
        "{a: [{k: x, v: 1}, {k: q, v: 2}], b: [{k: q, v: 3}, {k: x, v: 1}]}"
    ));
    assert!(!truth(
        "self.a == self.b",
        &s,
        "{a: [{k: x, v: 1}], b: [{k: z, v: 1}]}"
    ));
    // A literal list of maps is no list of stored objects: upstream's outcome is not pictured.
    assert!(eval("self.a == [{'k': 'x', 'v': 1}]", &s, "{a: [{k: x, v: 1}]}").is_err());
    // `+` (a merge by key upstream) is not evaluated.
    assert!(
        eval(
            "size(self.a + self.b) == 1",
            &s,
            "{a: [{k: x, v: 1}], b: [{k: x, v: 2}]}"
        )
        .is_err()
    );
}

#[test]
fn go_durations_and_times_parse_strictly() {
    assert_eq!(go_duration("1h"), Some(3_600_000_000_000));
    assert_eq!(go_duration("-1.5h"), Some(-5_400_000_000_000));
    assert_eq!(go_duration("300ms"), Some(300_000_000));
    assert_eq!(go_duration("2h45m"), Some(9_900_000_000_000));
    assert_eq!(go_duration("1µs"), Some(1_000));
    assert_eq!(go_duration("0"), Some(0));
    assert_eq!(go_duration(""), None);
    assert_eq!(go_duration("1"), None);
    assert_eq!(go_duration("1d"), None);
    assert_eq!(date_time("1970-01-01T00:00:00Z"), Some((0, 0)));
    assert_eq!(date_time("1970-01-01T01:00:00+01:00"), Some((0, 0)));
    assert_eq!(date_time("1970-01-01T00:00:00.5Z"), Some((0, 500_000_000)));
    assert_eq!(date_time("2000-02-30T00:00:00Z"), None);
    assert_eq!(date_time("2000-01-01 00:00:00Z"), None);
    assert_eq!(date_time("2000-01-01T24:00:00Z"), None);
}
