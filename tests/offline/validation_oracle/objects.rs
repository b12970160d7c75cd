//! Values for a schema: ones that satisfy its constraints (rules are met or not by chance, as
//! the values come from small domains the rules' constants are drawn from), ones that violate
//! them (wrong type, null, out of range, too long, not in the enum, missing required, too many
//! items, duplicates in a set or map list, unknown fields), and updates of a value that change
//! some parts and leave the others as they were (so ratcheting matters).

use super::schemas::{PATTERNS, Shape, shape};
use crate::support::pick;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use std::sync::LazyLock;

const STRINGS: &[&str] = &[
    "a",
    "ab",
    "abc",
    "b",
    "root",
    "x-1",
    "",
    "forbidden",
    "aaaaaaaaaa",
    "Abc",
    "cb",
    // For the libraries: quantities, addresses, URLs, versions, names.
    "100m",
    "1.5Gi",
    "2",
    "10.0.0.1",
    "::1",
    "10.0.0.0/8",
    "fd00::/64",
    "https://example.com:8443/a/b?c=d",
    "/relative/path",
    "1.2.3",
    "v1.2.3-rc.1",
    "My_Name",
];
const KEYS: &[&str] = &["a", "b", "ab", "c"];

static REGEXES: LazyLock<Vec<(&'static str, regex::Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .map(|p| (*p, regex::Regex::new(p).unwrap()))
        .collect()
});

/// A value satisfying `s`'s own constraints (a default).
pub fn valid(rng: &mut StdRng, s: &Value) -> Value {
    value(rng, s, 0.0)
}

/// Whether scalar `v` meets `s`'s constraints (type included).
fn fits(s: &Value, v: &Value) -> bool {
    if let Some(e) = s["enum"].as_array()
        && !e.contains(v)
    {
        return false;
    }
    match (shape(s), v) {
        (Shape::Str, Value::String(t)) => {
            let n = t.chars().count() as i64;
            s["maxLength"].as_i64().is_none_or(|m| n <= m)
                && s["minLength"].as_i64().is_none_or(|m| n >= m)
                && s["pattern"]
                    .as_str()
                    .is_none_or(|p| REGEXES.iter().any(|(q, re)| *q == p && re.is_match(t)))
        }
        (Shape::Int | Shape::Num, Value::Number(x)) => {
            let x = x.as_f64().unwrap();
            let ex_min = s["exclusiveMinimum"] == true;
            s["minimum"]
                .as_f64()
                .is_none_or(|m| if ex_min { x > m } else { x >= m })
                && s["maximum"].as_f64().is_none_or(|m| x <= m)
                && s["multipleOf"]
                    .as_f64()
                    .is_none_or(|m| (x / m).fract() == 0.0)
        }
        _ => true,
    }
}

fn string_candidates(s: &Value) -> Vec<Value> {
    match s["format"].as_str() {
        Some("date-time") => vec![json!("2024-01-02T03:04:05Z"), json!("2024-13-01")],
        Some("duration") => vec![json!("1h"), json!("5m30s"), json!("soon")],
        Some("byte") => vec![json!("aGVsbG8="), json!("!!")],
        _ => STRINGS.iter().map(|t| json!(t)).collect(),
    }
}

/// A value for `s`; each node is one that violates the schema with probability `bad`.
pub fn value(rng: &mut StdRng, s: &Value, bad: f64) -> Value {
    if bad > 0.0 && rng.gen_bool(bad) {
        return violate(rng, s);
    }
    if let Some(e) = s["enum"].as_array()
        && rng.gen_bool(0.85)
    {
        return pick(rng, e).clone();
    }
    let scalar = |rng: &mut StdRng, make: &dyn Fn(&mut StdRng) -> Value| {
        let mut v = make(rng);
        for _ in 0..10 {
            if fits(s, &v) {
                break;
            }
            v = make(rng);
        }
        v
    };
    match shape(s) {
        Shape::Str => {
            let c = string_candidates(s);
            scalar(rng, &|r| pick(r, &c).clone())
        }
        Shape::Int => scalar(rng, &|r| json!(r.gen_range(-2..=12))),
        Shape::Num => scalar(rng, &|r| json!(pick(r, &[0.5, 1.5, 2.5, -1.5, 2.25]))),
        Shape::Bool => json!(rng.gen_bool(0.5)),
        Shape::IntOrString => {
            if rng.gen_bool(0.5) {
                json!(rng.gen_range(-1..4))
            } else {
                json!(pick(rng, STRINGS))
            }
        }
        Shape::Object(props) => {
            let required: Vec<&str> = s["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut m = serde_json::Map::new();
            for (k, cs) in props {
                if required.contains(&k.as_str()) || rng.gen_bool(0.65) {
                    m.insert(k.clone(), value(rng, cs, bad));
                }
            }
            if s["x-kubernetes-preserve-unknown-fields"] == true && rng.gen_bool(0.3) {
                m.insert("extra".into(), json!({"kept": 1}));
            } else if bad > 0.0 && rng.gen_bool(0.05) {
                m.insert("zzz".into(), json!(1));
            }
            Value::Object(m)
        }
        Shape::Map(vs) => {
            let max = s["maxProperties"].as_u64().unwrap_or(3).min(3) as usize;
            let n = rng.gen_range(0..=max);
            let mut m = serde_json::Map::new();
            for _ in 0..n {
                m.insert(pick(rng, KEYS).to_string(), value(rng, vs, bad));
            }
            Value::Object(m)
        }
        Shape::Array(items) => {
            let max = s["maxItems"].as_u64().unwrap_or(4).min(4) as usize;
            let min = s["minItems"].as_u64().unwrap_or(0) as usize;
            let n = rng.gen_range(min.min(max)..=max);
            let mut out: Vec<Value> = Vec::new();
            for _ in 0..n {
                let mut v = value(rng, items, bad);
                for _ in 0..5 {
                    if !duplicate(s, &out, &v) {
                        break;
                    }
                    v = value(rng, items, bad);
                }
                if !duplicate(s, &out, &v) || rng.gen_bool(bad) {
                    out.push(v);
                }
            }
            Value::Array(out)
        }
        Shape::Any => json!({"free": pick(rng, STRINGS)}),
    }
}

/// Whether `v` would repeat an item (a set's) or an item's keys (a map list's) in `items`.
fn duplicate(s: &Value, items: &[Value], v: &Value) -> bool {
    match s["x-kubernetes-list-type"].as_str() {
        Some("set") => items.contains(v),
        Some("map") => {
            let keys = s["x-kubernetes-list-map-keys"].as_array().unwrap();
            items.iter().any(|i| {
                keys.iter()
                    .all(|k| i[k.as_str().unwrap()] == v[k.as_str().unwrap()])
            })
        }
        _ => false,
    }
}

/// A value that violates `s` (or, where `s` allows anything, some value).
fn violate(rng: &mut StdRng, s: &Value) -> Value {
    let wrong_type = |rng: &mut StdRng| match s["type"].as_str() {
        Some("string") => json!(pick(rng, &[json!(5), json!(true)])),
        Some("integer") => json!(pick(rng, &[json!("x"), json!(1.5)])),
        Some("number") => json!("1.5"),
        Some("boolean") => json!("yes"),
        Some("array") => json!({"a": 1}),
        Some("object") => json!(["a"]),
        _ => json!(1.5),
    };
    match rng.gen_range(0..4) {
        0 => wrong_type(rng),
        1 => Value::Null,
        _ => match shape(s) {
            Shape::Str => {
                if let Some(m) = s["maxLength"].as_u64() {
                    json!("a".repeat(m as usize + 1))
                } else if s["enum"].is_array() {
                    json!("zz")
                } else if s["pattern"].is_string() {
                    json!("AB!")
                } else {
                    json!("")
                }
            }
            Shape::Int | Shape::Num => {
                if let Some(m) = s["maximum"].as_i64() {
                    json!(m + 1)
                } else if let Some(m) = s["minimum"].as_i64() {
                    json!(m - 1)
                } else {
                    json!(-100)
                }
            }
            Shape::Object(_) => {
                let mut v = value(rng, s, 0.0);
                if let (Some(r), Some(m)) = (s["required"].as_array(), v.as_object_mut())
                    && let Some(k) = r.first().and_then(Value::as_str)
                {
                    m.remove(k);
                }
                v
            }
            Shape::Array(items) => {
                let n = s["maxItems"].as_u64().unwrap_or(2) as usize + 1;
                let one = value(rng, items, 0.0);
                Value::Array(vec![one; n])
            }
            _ => wrong_type(rng),
        },
    }
}

/// An update of `old`: each node replaced by a new value with probability `p`, some fields
/// added or removed; the rest as it was.
pub fn mutate(rng: &mut StdRng, old: &Value, s: &Value, p: f64, bad: f64) -> Value {
    if p > 0.0 && rng.gen_bool(p) {
        return value(rng, s, bad);
    }
    match (old, shape(s)) {
        (Value::Object(m), Shape::Object(props)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                match props.get(k) {
                    Some(cs) if p > 0.0 && rng.gen_bool(p / 3.0) => {
                        if rng.gen_bool(0.5) {
                            out.insert(k.clone(), value(rng, cs, bad));
                        }
                    }
                    Some(cs) => {
                        out.insert(k.clone(), mutate(rng, v, cs, p, bad));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for (k, cs) in props {
                if !out.contains_key(k) && p > 0.0 && rng.gen_bool(p / 3.0) {
                    out.insert(k.clone(), value(rng, cs, bad));
                }
            }
            Value::Object(out)
        }
        (Value::Object(m), Shape::Map(vs)) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), mutate(rng, v, vs, p, bad)))
                .collect(),
        ),
        (Value::Array(a), Shape::Array(items)) => {
            let mut out: Vec<Value> = a.iter().map(|v| mutate(rng, v, items, p, bad)).collect();
            if p > 0.0 && rng.gen_bool(p / 2.0) {
                if rng.gen_bool(0.5) {
                    out.pop();
                } else {
                    out.push(value(rng, items, bad));
                }
            }
            Value::Array(out)
        }
        _ => old.clone(),
    }
}
