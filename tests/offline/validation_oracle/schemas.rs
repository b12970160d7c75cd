//! Random structural CRD schemas: objects, maps, lists (atomic, set, map with keys), scalars
//! with their constraints, int-or-string, preserved unknown fields, nullable fields, defaults,
//! and `x-kubernetes-validations` rules ([`super::rules`]) on any node.

use super::{objects, rules};
use crate::support::pick;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

/// Property names, some of which a CEL rule must escape (`my-field`, `namespace`, `x.y`,
/// `f__g`) and some that are CEL words without being reserved (`int`, `size`).
pub const NAMES: &[&str] = &[
    "a",
    "b",
    "name",
    "size",
    "count",
    "mode",
    "my-field",
    "namespace",
    "x.y",
    "int",
    "foo_bar",
    "f__g",
    "tags",
];

/// Strings of `pattern`, all of which Go and fieldguard read alike.
pub const PATTERNS: &[&str] = &["^[a-z]+$", "^a", "b$", "^[a-z0-9-]*$", "^(ab|x-1)$"];

/// The shape a schema node has, for rules and values.
pub enum Shape<'a> {
    Str,
    Int,
    Num,
    Bool,
    IntOrString,
    /// Properties (possibly none, e.g. a preserve-unknown-fields object).
    Object(&'a serde_json::Map<String, Value>),
    Map(&'a Value),
    Array(&'a Value),
    Any,
}

pub fn shape(s: &Value) -> Shape<'_> {
    if s["x-kubernetes-int-or-string"] == true {
        return Shape::IntOrString;
    }
    match s["type"].as_str() {
        Some("string") => Shape::Str,
        Some("integer") => Shape::Int,
        Some("number") => Shape::Num,
        Some("boolean") => Shape::Bool,
        Some("array") => Shape::Array(&s["items"]),
        Some("object") => match (s["properties"].as_object(), s.get("additionalProperties")) {
            (None, Some(a)) => Shape::Map(a),
            (Some(p), _) => Shape::Object(p),
            (None, None) => Shape::Any,
        },
        _ => Shape::Any,
    }
}

/// A whole CRD (`widgets.example.com`, kind `Widget`, one version `v1`).
pub fn crd(rng: &mut StdRng) -> Value {
    let mut root = json!({"type": "object", "properties": {"spec": object(rng, 0, true, &[])}});
    if rng.gen_bool(0.2) {
        root["properties"]["status"] = object(rng, 1, true, &[]);
    }
    if rng.gen_bool(0.15) {
        root["x-kubernetes-validations"] = json!([rules::root_rule(rng)]);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": root}}]
        }
    })
}

/// A node below the root; `correlatable`: an update's old value can be found for it (so
/// transition rules may be put on it).
fn node(rng: &mut StdRng, depth: usize, correlatable: bool) -> Value {
    let containers = depth < 3;
    let roll = rng.gen_range(0..100);
    let mut s = match roll {
        0..=24 => string(rng),
        25..=41 => integer(rng),
        42..=45 => json!({"type": "number", "minimum": 0.5, "maximum": 2.5}),
        46..=52 => json!({"type": "boolean"}),
        53..=56 => json!({"x-kubernetes-int-or-string": true}),
        57..=72 if containers => object(rng, depth + 1, correlatable, &[]),
        73..=80 if containers => {
            let mut m = json!({"type": "object", "additionalProperties": node(rng, depth + 1, correlatable)});
            if rng.gen_bool(0.3) {
                m["maxProperties"] = json!(rng.gen_range(1..4));
            }
            m
        }
        81..=84 if containers => {
            let mut o = object(rng, depth + 1, correlatable, &[]);
            o["x-kubernetes-preserve-unknown-fields"] = json!(true);
            if rng.gen_bool(0.3) {
                o.as_object_mut().unwrap().remove("properties");
                o.as_object_mut().unwrap().remove("required");
                o.as_object_mut()
                    .unwrap()
                    .remove("x-kubernetes-validations");
            }
            o
        }
        85..=99 if containers => array(rng, depth + 1, correlatable),
        _ => string(rng),
    };
    if rng.gen_bool(0.08) {
        s["nullable"] = json!(true);
    }
    if rng.gen_bool(0.08) {
        s["default"] = objects::valid(rng, &s);
    }
    add_rules(rng, &mut s, correlatable, 0.25);
    s
}

fn add_rules(rng: &mut StdRng, s: &mut Value, correlatable: bool, p: f64) {
    if matches!(shape(s), Shape::Object(p) if p.is_empty()) || !rng.gen_bool(p) {
        return;
    }
    let n = rng.gen_range(1..=2);
    let rs: Vec<Value> = (0..n).map(|_| rules::rule(rng, s, correlatable)).collect();
    s["x-kubernetes-validations"] = Value::Array(rs);
}

fn string(rng: &mut StdRng) -> Value {
    let mut s = json!({"type": "string"});
    if rng.gen_bool(0.4) {
        s["maxLength"] = json!(rng.gen_range(1..8));
    }
    if rng.gen_bool(0.2) {
        let max = s["maxLength"].as_i64().unwrap_or(3);
        s["minLength"] = json!(rng.gen_range(0..=max.min(3)));
    }
    if rng.gen_bool(0.15) {
        s["pattern"] = json!(pick(rng, PATTERNS));
    }
    if rng.gen_bool(0.15) {
        let all = ["a", "ab", "abc", "root", "x-1"];
        let n = rng.gen_range(1..=3);
        let start = rng.gen_range(0..all.len() - n);
        s["enum"] = json!(all[start..start + n]);
    }
    if rng.gen_bool(0.03) {
        s["format"] = json!(pick(rng, &["date-time", "duration", "byte"]));
    }
    s
}

fn integer(rng: &mut StdRng) -> Value {
    let mut s = json!({"type": "integer"});
    if rng.gen_bool(0.3) {
        s["minimum"] = json!(rng.gen_range(-1..4));
        if rng.gen_bool(0.2) {
            s["exclusiveMinimum"] = json!(true);
        }
    }
    if rng.gen_bool(0.3) {
        let lo = s["minimum"].as_i64().unwrap_or(0);
        s["maximum"] = json!(rng.gen_range(lo + 1..lo + 10));
    }
    if rng.gen_bool(0.05) {
        s["multipleOf"] = json!(rng.gen_range(2..4));
    }
    if rng.gen_bool(0.05) {
        s["enum"] = json!([1, 2, 3]);
    }
    s
}

/// An object with 1 to 4 properties (`forced` ones first: a map list's keys), some required.
fn object(rng: &mut StdRng, depth: usize, correlatable: bool, forced: &[(&str, Value)]) -> Value {
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for (k, v) in forced {
        props.insert(k.to_string(), v.clone());
        required.push(json!(k));
    }
    let n = rng.gen_range(1..=4);
    for _ in 0..n {
        let k = *pick(rng, NAMES);
        if props.contains_key(k) {
            continue;
        }
        props.insert(k.to_string(), node(rng, depth, correlatable));
        if rng.gen_bool(0.2) {
            required.push(json!(k));
        }
    }
    let mut s = json!({"type": "object", "properties": props});
    if !required.is_empty() {
        s["required"] = Value::Array(required);
    }
    if rng.gen_bool(0.04) {
        s["maxProperties"] = json!(rng.gen_range(1..3));
    }
    if rng.gen_bool(0.04) {
        s["minProperties"] = json!(1);
    }
    if depth == 0 {
        add_rules(rng, &mut s, correlatable, 0.9);
    }
    s
}

fn array(rng: &mut StdRng, depth: usize, correlatable: bool) -> Value {
    let roll = rng.gen_range(0..10);
    let mut s = if roll < 3 {
        let items = if rng.gen_bool(0.5) {
            string(rng)
        } else {
            integer(rng)
        };
        json!({"type": "array", "x-kubernetes-list-type": "set", "items": items})
    } else if roll < 6 {
        let mut keys = vec![("name", json!({"type": "string", "maxLength": 5}))];
        if rng.gen_bool(0.3) {
            keys.push(("count", json!({"type": "integer"})));
        }
        let names: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
        let mut items = object(rng, depth, correlatable, &keys);
        add_rules(rng, &mut items, correlatable, 0.3);
        json!({"type": "array", "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": names, "items": items})
    } else {
        let mut a = json!({"type": "array", "items": node(rng, depth, false)});
        if rng.gen_bool(0.5) {
            a["x-kubernetes-list-type"] = json!("atomic");
        }
        a
    };
    if rng.gen_bool(0.75) {
        s["maxItems"] = json!(rng.gen_range(1..5));
    }
    if rng.gen_bool(0.15) {
        s["minItems"] = json!(1);
    }
    s
}
