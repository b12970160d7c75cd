//! Cases whose expected messages are the real apiserver's answers (Kubernetes 1.36,
//! `../shared/realapi`) to the same objects against `tests/data/realapi/probe-crd.json`; the
//! real tier asks the server again on every run
//! (`tests/real/differential.rs::validation_equals_the_servers`).

use super::*;
use crate::value::json::parse_str;

fn schema() -> Structural {
    let crd = parse_str(include_str!("../../tests/data/realapi/probe-crd.json")).unwrap();
    let s = crd
        .get_path(&["spec", "versions"])
        .and_then(|v| v.as_list())
        .unwrap()[0]
        .get_path(&["schema", "openAPIV3Schema"])
        .unwrap()
        .clone();
    Structural::from_value(&s, None)
}

fn causes(spec: &str) -> Vec<String> {
    let obj = parse_str(&format!(
        r#"{{"apiVersion":"p.test/v1","kind":"Probe","metadata":{{"name":"x"}},"spec":{spec}}}"#
    ))
    .unwrap();
    let v = validate(&obj, &schema());
    let (errors, _) = settle(v.errors, &obj, None, &schema());
    let mut v: Vec<String> = errors
        .iter()
        .map(|e| format!("{} | {} | {}", e.field, e.reason, e.message))
        .collect();
    v.sort();
    v
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

const NOT_CHECKED: &str = "<nil> | FieldValueInvalid | Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

#[test]
fn limits_enums_and_required_as_the_server_words_them() {
    let got = causes(
        r#"{"e":"c","ei":3,"n":11,"nx":10,"s":"ABCDEF","l":["a","b","c"],"m":{"a":"1","b":"2","c":"3"},"mo":7,"ios":1.5}"#,
    );
    let want = sorted(&[
        "spec.l | FieldValueTooMany | Too many: 3: must have at most 2 items",
        "spec.s | FieldValueTooLong | Too long: may not be more than 4 bytes",
        "spec.ei | FieldValueNotSupported | Unsupported value: 3: supported values: \"1\", \"2\"",
        "spec.m | FieldValueTooMany | Too many: 3: must have at most 2 items",
        "spec.n | FieldValueInvalid | Invalid value: 11: spec.n in body should be less than or equal to 10",
        "spec.mo | FieldValueInvalid | Invalid value: 7: spec.mo in body should be a multiple of 5",
        "spec.ios | FieldValueTypeInvalid | Invalid value: \"number\": spec.ios in body must be of type integer,string: \"number\"",
        "spec.e | FieldValueNotSupported | Unsupported value: \"c\": supported values: \"a\", \"b\"",
        "spec.nx | FieldValueInvalid | Invalid value: 10: spec.nx in body should be less than 10",
        "spec.must | FieldValueRequired | Required value",
        NOT_CHECKED,
    ]);
    assert_eq!(got, want);
}

#[test]
fn lower_limits() {
    let got = causes(r#"{"must":"x","n":0,"nx":1,"s":"a","l":[],"m":{}}"#);
    let want = sorted(&[
        "spec.l | FieldValueInvalid | Invalid value: 0: spec.l in body should have at least 1 items",
        "spec.s | FieldValueInvalid | Invalid value: \"a\": spec.s in body should be at least 2 chars long",
        "spec.m | FieldValueInvalid | Invalid value: 0: spec.m in body should have at least 1 properties",
        "spec.n | FieldValueInvalid | Invalid value: 0: spec.n in body should be greater than or equal to 1",
        "spec.nx | FieldValueInvalid | Invalid value: 1: spec.nx in body should be greater than 1",
    ]);
    // No blocking error: the server evaluates the CEL rules, and so does fieldguard.
    let obj = parse_str(
        r#"{"apiVersion":"p.test/v1","kind":"Probe","metadata":{"name":"x"},"spec":{"must":"x","n":0}}"#,
    )
    .unwrap();
    let v = validate(&obj, &schema());
    let (errors, note) = settle(v.errors, &obj, None, &schema());
    assert_eq!(errors.len(), 1);
    assert!(note.is_empty(), "{note:?}");
    assert_eq!(got, want);
}

#[test]
fn nulls_fail_unless_nullable() {
    let got = causes(r#"{"must":null,"e":null,"n":null,"nn":null}"#);
    let want = sorted(&[
        "spec.n | FieldValueTypeInvalid | Invalid value: \"null\": spec.n in body must be of type integer: \"null\"",
        "spec.e | FieldValueTypeInvalid | Invalid value: \"null\": spec.e in body must be of type string: \"null\"",
        "spec.e | FieldValueNotSupported | Unsupported value: null: supported values: \"a\", \"b\"",
        "spec.must | FieldValueTypeInvalid | Invalid value: \"null\": spec.must in body must be of type string: \"null\"",
        NOT_CHECKED,
    ]);
    assert_eq!(got, want);
    let got = causes(r#"{"must":"x","ios":true}"#);
    assert_eq!(
        got,
        sorted(&[
            "spec.ios | FieldValueTypeInvalid | Invalid value: \"boolean\": spec.ios in body must be of type integer,string: \"boolean\"",
            NOT_CHECKED,
        ])
    );
}

#[test]
fn singular_limits_multiples_and_the_root() {
    let s = Structural::from_value(
        &parse_str(
            r#"{"type":"object","required":["spec"],"properties":{"spec":{"type":"object","properties":{
                "one":{"type":"array","maxItems":1,"items":{"type":"string"}},
                "s":{"type":"string","maxLength":1},
                "f":{"type":"number","multipleOf":0.1},
                "ios":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]}}}}}"#,
        )
        .unwrap(),
        None,
    );
    let obj =
        parse_str(r#"{"apiVersion":"p.test/v1","kind":"Probe","metadata":{"name":"x"}}"#).unwrap();
    let v = validate(&obj, &s);
    assert_eq!(v.errors[0].to_string(), "spec: Required value");
    let obj = parse_str(
        r#"{"apiVersion":"p.test/v1","kind":"Probe","metadata":{"name":"x"},"spec":{"one":["a","b"],"s":"ab","f":0.3,"ios":1}}"#,
    )
    .unwrap();
    let v = validate(&obj, &s);
    let got: Vec<String> = v.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        got,
        [
            "spec.one: Too many: 2: must have at most 1 item",
            "spec.s: Too long: may not be more than 1 byte"
        ]
    );
    assert!(v.not_evaluated.is_empty(), "{:?}", v.not_evaluated);
}

#[test]
fn a_valid_object_reports_only_what_was_not_evaluated() {
    let obj = parse_str(
        r#"{"apiVersion":"p.test/v1","kind":"Probe","metadata":{"name":"x"},"spec":{"must":"x","f":"2026-01-01T00:00:00Z","cel":"ok"}}"#,
    )
    .unwrap();
    let v = validate(&obj, &schema());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let (errors, note) = settle(v.errors.clone(), &obj, None, &schema());
    assert!(errors.is_empty() && note.is_empty(), "{errors:?} {note:?}");
    assert!(v.not_evaluated.is_empty(), "{:?}", v.not_evaluated);
}

/// `format` failures are type errors printing the value, which stop the CEL rules (answers of
/// the validation oracle, apiextensions-apiserver 1.36.5); a value in a layout fieldguard does
/// not read is not evaluated, and neither are the rules it may stop.
#[test]
fn formats_are_type_errors_that_stop_cel() {
    let s = Structural::from_value(
        &parse_str(r#"{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":[{"rule":"self.n > 1"}],"properties":{"n":{"type":"integer"},"b":{"type":"string","format":"byte"},"d":{"type":"string","format":"date"},"t":{"type":"string","format":"date-time"},"e":{"type":"string","format":"duration"},"u":{"type":"string","format":"uuid"}}}}}"#).unwrap(),
        None,
    );
    let run = |spec: &str| {
        let obj = parse_str(&format!(
            r#"{{"apiVersion":"a/v1","kind":"K","metadata":{{"name":"x"}},"spec":{spec}}}"#
        ))
        .unwrap();
        custom_resource(&obj, None, &s, Vec::new())
    };
    let printed = |d: &Decision| d.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    let d = run(r#"{"n":0,"b":"e!"}"#);
    assert_eq!(
        printed(&d),
        [
            r#"spec.b: Invalid value: "e!": spec.b in body must be of type byte: "e!""#,
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
    assert_eq!(
        printed(&run(r#"{"n":5,"d":"2026-02-30"}"#))[0],
        r#"spec.d: Invalid value: "2026-02-30": spec.d in body must be of type date: "2026-02-30""#
    );
    for ok in [
        r#"{"n":5,"d":"2024-02-29","b":"eHh4","t":"2026-01-01T00:00:00Z","e":"90m"}"#,
        r#"{"n":5,"t":"2026-01-01T00:00:00.123+02:00","e":"-1.5h"}"#,
    ] {
        let d = run(ok);
        assert!(
            d.errors.is_empty() && d.not_evaluated.is_empty(),
            "{ok}: {d:?}"
        );
    }
    // strfmt reads `3 days` as a duration; fieldguard does not: not evaluated, CEL neither.
    let d = run(r#"{"n":0,"e":"3 days"}"#);
    assert!(d.errors.is_empty(), "{d:?}");
    assert_eq!(d.not_evaluated.len(), 2, "{:?}", d.not_evaluated);
    assert!(d.not_evaluated[1].starts_with("CEL rules: not evaluated"));
    assert!(run(r#"{"n":5,"u":"x"}"#).not_evaluated[0].contains("format uuid"));
}

#[test]
fn the_message_is_the_servers() {
    let e = |f: &str, m: &str| FieldError {
        field: f.into(),
        reason: "FieldValueTypeInvalid".into(),
        message: m.into(),
        line: None,
    };
    let one = [e(
        "spec.labels",
        "Invalid value: \"null\": spec.labels in body must be of type object: \"null\"",
    )];
    assert_eq!(
        invalid_message("Widget", "fieldguard.test", "w0", &one),
        "Widget.fieldguard.test \"w0\" is invalid: spec.labels: Invalid value: \"null\": spec.labels in body must be of type object: \"null\""
    );
    let two = [one[0].clone(), e("spec.extra", "x")];
    assert_eq!(
        invalid_message("Widget", "fieldguard.test", "w0", &two),
        "Widget.fieldguard.test \"w0\" is invalid: [spec.labels: Invalid value: \"null\": spec.labels in body must be of type object: \"null\", spec.extra: x]"
    );
}

#[test]
fn patterns_are_read_as_go_reads_them() {
    // kube-openapi matches `pattern` with Go's regexp: `\d` is ASCII only.
    let s = Structural::from_value(
        &crate::value::yaml::parse_one(
            r"{type: object, properties: {spec: {type: object, properties: {num: {type: string, pattern: '^\d+$'}, r: {type: string, pattern: '(a)\1'}}}}}",
        )
        .unwrap(),
        None,
    );
    let check = |spec: &str| {
        let obj = parse_str(&format!(
            r#"{{"apiVersion":"a/v1","kind":"K","spec":{spec}}}"#
        ))
        .unwrap();
        validate(&obj, &s)
    };
    assert!(check(r#"{"num":"42"}"#).errors.is_empty());
    let v = check(r#"{"num":"٤٢"}"#);
    assert_eq!(
        v.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        [r#"spec.num: Invalid value: "٤٢": spec.num in body should match '^\d+$'"#]
    );
    let v = check(r#"{"r":"aa"}"#);
    assert!(v.errors.is_empty());
    assert_eq!(
        v.not_evaluated,
        [r"spec.r: pattern (a)\1 (error parsing regexp: invalid escape sequence: `\1`)"]
    );
}

/// Numbers as kube-openapi checks them (answers of the validation oracle, apiextensions-apiserver
/// 1.36.5): an integer value against a bound truncated to an integer, a bound or value out of
/// its type's range reported without a field, a fraction in an integer field checked still, an
/// empty enum no constraint.
#[test]
fn numbers_and_bounds_as_kube_openapi_checks_them() {
    let s = Structural::from_value(
        &parse_str(r#"{"type":"object","properties":{"spec":{"type":"object","properties":{"n":{"type":"number","minimum":0.5,"maximum":2.5},"i":{"type":"integer","minimum":0.5},"j":{"type":"integer","format":"int32"},"e":{"type":"integer","enum":[]},"k":{"type":"integer","maximum":10}}}}}"#).unwrap(),
        None,
    );
    let run = |spec: &str| {
        let obj = parse_str(&format!(
            r#"{{"apiVersion":"a/v1","kind":"K","metadata":{{"name":"x"}},"spec":{spec}}}"#
        ))
        .unwrap();
        let mut v: Vec<String> = custom_resource(&obj, None, &s, Vec::new())
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect();
        v.sort();
        v
    };
    let range = |what: &str, f: &str, at: &str| {
        format!("<nil>: Invalid value: \"\": {what} value must be of type integer {f} in {at}")
    };
    for (spec, want) in [
        (r#"{"n":0}"#, vec![]),
        (r#"{"n":3}"#, vec!["spec.n: Invalid value: 3: spec.n in body should be less than or equal to 2".to_string()]),
        (r#"{"n":-100}"#, vec!["spec.n: Invalid value: -100: spec.n in body should be greater than or equal to 0".into()]),
        (r#"{"n":2.7}"#, vec!["spec.n: Invalid value: 2.7: spec.n in body should be less than or equal to 2.5".into()]),
        (r#"{"i":1}"#, vec![range("Minimum boundary", "(default format)", "spec.i")]),
        (r#"{"i":0}"#, vec![range("Minimum boundary", "(default format)", "spec.i"), "spec.i: Invalid value: 0: spec.i in body should be greater than or equal to 0.5".into()]),
        (r#"{"j":3000000000}"#, vec![range("Checked", "with format int32", "spec.j")]),
        (r#"{"e":-100}"#, vec![]),
        (r#"{"k":11.5}"#, vec![
            range("Checked", "(default format)", "spec.k"),
            "spec.k: Invalid value: \"number\": spec.k in body must be of type integer: \"number\"".into(),
            "spec.k: Invalid value: 11.5: spec.k in body should be less than or equal to 10".into(),
        ]),
    ] {
        let mut want = want;
        want.sort();
        assert_eq!(run(spec), want, "{spec}");
    }
}

/// A value that is no string against a schema with a format is reported against the format,
/// by the Go type it decodes to (answers of the validation oracle, apiextensions-apiserver
/// 1.36.5).
#[test]
fn a_formatted_schema_names_its_format_in_type_errors() {
    let s = Structural::from_value(
        &parse_str(r#"{"type":"object","properties":{"spec":{"type":"object","properties":{"b":{"type":"string","format":"byte"},"i":{"type":"integer","format":"int32"}}}}}"#).unwrap(),
        None,
    );
    let run = |spec: &str| {
        let obj = parse_str(&format!(
            r#"{{"apiVersion":"a/v1","kind":"K","metadata":{{"name":"x"}},"spec":{spec}}}"#
        ))
        .unwrap();
        let mut v: Vec<String> = custom_resource(&obj, None, &s, Vec::new())
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect();
        v.sort();
        v
    };
    for (spec, want) in [
        (
            r#"{"b":5}"#,
            vec![r#"spec.b: Invalid value: "int64": spec.b in body must be of type byte: "int64""#],
        ),
        (
            r#"{"b":true}"#,
            vec![r#"spec.b: Invalid value: "": spec.b in body must be of type byte: """#],
        ),
        (
            r#"{"b":{"a":1}}"#,
            vec![r#"spec.b: Invalid value: "": spec.b in body must be of type byte: """#],
        ),
        (
            r#"{"b":1.5}"#,
            vec![
                r#"spec.b: Invalid value: "float64": spec.b in body must be of type byte: "float64""#,
            ],
        ),
        (
            r#"{"i":1.5}"#,
            vec![
                r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.i"#,
                r#"spec.i: Invalid value: "float64": spec.i in body must be of type int32: "float64""#,
            ],
        ),
        (
            r#"{"i":"x"}"#,
            vec![
                r#"spec.i: Invalid value: "string": spec.i in body must be of type integer: "string""#,
            ],
        ),
    ] {
        assert_eq!(run(spec), want, "{spec}");
    }
}
