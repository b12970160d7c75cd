//! The fast path judged on one schema: what it answers, and what it leaves to the crate.

use super::*;
use crate::validation::Structural;
use crate::value::yaml::parse_one;

const SCHEMA: &str = "{type: object, properties: {
    num: {type: integer}, w: {type: number}, s: {type: string}, b: {type: boolean},
    d: {type: string, format: date-time}, q: {x-kubernetes-int-or-string: true},
    m: {type: object, additionalProperties: {type: string}},
    ps: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name],
         items: {type: object, properties: {name: {type: string}, port: {type: integer}}}}}}";

/// The fast path's answer for `rule` on `obj`; `None` when it leaves it to the crate.
fn fast(rule: &str, obj: &str) -> Option<Result<bool, String>> {
    let s = Structural::from_value(&parse_one(SCHEMA).unwrap(), None);
    let program = cel::Program::compile(rule).unwrap();
    let p = compile(program.expression())?;
    let v = parse_one(obj).unwrap();
    run(&p, &v, None, &s, false)
}

const OBJ: &str = "{num: 3, w: 1, s: app-1, b: true, d: '2024-01-01T00:00:00Z', q: 50%,
    m: {a: x, bb: yy}, ps: [{name: http, port: 80}, {name: metrics, port: 9090}]}";

#[test]
fn common_rules_are_answered_by_the_schema_typed_values() {
    for (rule, want) in [
        ("self.num >= 0 && self.num <= 100", true),
        ("self.w == 1.0", true),
        ("self.s.size() <= 63 && self.s.startsWith('app-')", true),
        ("self.s.matches('^[a-z][a-z0-9-]*$')", true),
        ("has(self.tier) ? self.tier == 'gold' : self.b", true),
        ("self.ps.all(p, p.port > 0 && p.port < 65536)", true),
        ("self.ps.exists(p, p.name == 'grpc')", false),
        ("self.ps.exists_one(p, p.port > 100)", true),
        ("self.ps.map(p, p.port).all(x, x >= 80)", true),
        ("self.ps.filter(p, p.port > 100).size() == 1", true),
        ("self.m.all(k, k.size() <= 2) && 'a' in self.m", true),
        ("self.m['bb'] == 'yy' && self.m.a == 'x'", true),
        ("self.s in ['app-1', 'app-2']", true),
        ("self.q == '50%'", true),
        (
            "self.num * 2 - 1 == 5 && self.num / 2 == 1 && self.num % 2 == 1",
            true,
        ),
        ("-self.num < 0 && !self.b == false", true),
    ] {
        assert_eq!(fast(rule, OBJ), Some(Ok(want)), "{rule}");
    }
}

#[test]
fn a_missing_field_is_the_servers_error_unless_a_deciding_value_absorbs_it() {
    assert_eq!(fast("self.x > 0", OBJ), Some(Err("x".into())));
    assert_eq!(fast("self.x > 0 || true", OBJ), Some(Ok(true)));
    assert_eq!(fast("false && self.x > 0", OBJ), Some(Ok(false)));
    assert_eq!(fast("self.x > 0 && true", OBJ), Some(Err("x".into())));
    assert_eq!(fast("has(self.x) && self.x > 0", OBJ), Some(Ok(false)));
    // An error in one element of `all` is absorbed by a false one in another.
    assert_eq!(
        fast("self.ps.all(p, p.name == 'http' ? p.nope > 0 : false)", OBJ),
        Some(Ok(false))
    );
    assert_eq!(
        fast("self.ps.all(p, p.name == 'http' ? p.nope > 0 : true)", OBJ),
        Some(Err("nope".into()))
    );
}

#[test]
fn what_the_fast_path_cannot_be_sure_of_is_left_to_the_crate() {
    for rule in [
        // Mixed numeric types, overflow, division by zero, two errors meeting.
        "self.num == 3.0",
        "self.num * 9223372036854775807 > 0",
        "self.num / 0 == 1",
        "self.x > 0 || self.y > 0",
        // A format-typed string, a list compared whole, an index past the end.
        "self.d == self.d",
        "self.ps == self.ps",
        "self.ps[5].port > 0",
    ] {
        assert_eq!(fast(rule, OBJ), None, "{rule}");
    }
    // Functions it does not know are not compiled for it at all.
    let p = cel::Program::compile("self.s.lowerAscii() == 'a'").unwrap();
    assert!(compile(p.expression()).is_none());
}
