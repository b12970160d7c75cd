//! What a YAML scalar means to Kubernetes: go-yaml v2's YAML 1.1 resolution of plain scalars
//! (`yes` is true, `012` is octal, `1_000` is 1000), numbers as they come back from Go's JSON
//! round trip, and mapping keys turned into the strings `sigs.k8s.io/yaml` makes of them.

use super::super::gofmt::{FloatStyle, format_float_json};
use super::super::{Str, Value};

pub(super) fn finite(v: Value) -> Result<Value, String> {
    match v {
        Value::Float(f) if !f.is_finite() => Err(format!(
            "{} is not representable in JSON",
            if f.is_nan() { "NaN" } else { "infinity" }
        )),
        v => Ok(v),
    }
}

/// Converts a resolved mapping key to the string sigs.k8s.io/yaml uses.
pub(super) fn key_string(v: &Value) -> Result<Str, String> {
    Ok(match v {
        Value::String(s) => s.clone(),
        Value::Int(i) => Str::from(i.to_string()),
        Value::Bool(b) => Str::from(if *b { "true" } else { "false" }),
        Value::Float(f) => Str::from(go_float32_g(*f)),
        Value::Null => return Err("a mapping key must not be null".into()),
        _ => return Err("a mapping key must be a scalar".into()),
    })
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` for the common cases (keys like `1.5`).
fn go_float32_g(f: f64) -> String {
    let f32v = f as f32;
    let s = format!("{}", f32v);
    if s.contains('e') || s.len() > 21 {
        format!("{:e}", f32v)
    } else {
        s
    }
}

/// A float as it comes back from Go's JSON round trip: integral values in `i64` range are ints.
pub(super) fn json_number(f: f64) -> Value {
    if f.is_finite() {
        let s = format_float_json(f, FloatStyle::GoJson);
        if let Ok(i) = s.parse::<i64>() {
            return Value::Int(i);
        }
    }
    Value::Float(f)
}

/// go-yaml v2's resolution of a plain scalar (`None`: it stays a string).
pub(super) fn resolve_plain(s: &str) -> Option<Value> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Some(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Some(Value::Bool(false));
        }
        "" | "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        ".nan" | ".NaN" | ".NAN" => return Some(Value::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Some(Value::Float(f64::INFINITY));
        }
        "-.inf" | "-.Inf" | "-.INF" => return Some(Value::Float(f64::NEG_INFINITY)),
        _ => {}
    }
    let first = s.as_bytes()[0];
    match first {
        b'.' => go_parse_float(s).map(json_number),
        b'0'..=b'9' | b'+' | b'-' => {
            let plain: std::borrow::Cow<str> = match s.contains('_') {
                true => s.chars().filter(|c| *c != '_').collect::<String>().into(),
                false => s.into(),
            };
            if let Some(i) = go_parse_int(&plain) {
                return Some(match i {
                    IntVal::I(i) => Value::Int(i),
                    IntVal::U(u) => Value::Float(u as f64),
                });
            }
            if yaml_style_float(&plain) {
                if let Some(f) = go_parse_float(&plain) {
                    return Some(json_number(f));
                }
            }
            if let Some(rest) = plain.strip_prefix("-0b") {
                if let Some(IntVal::I(i)) = parse_radix(rest, 2, true) {
                    return Some(Value::Int(i));
                }
            }
            None
        }
        _ => None,
    }
}

enum IntVal {
    I(i64),
    U(u64),
}

fn parse_radix(digits: &str, radix: u32, neg: bool) -> Option<IntVal> {
    if digits.is_empty() {
        return None;
    }
    let u = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        if u <= i64::MAX as u64 + 1 {
            return Some(IntVal::I((u as i128).wrapping_neg() as i64));
        }
        return None;
    }
    Some(match i64::try_from(u) {
        Ok(i) => IntVal::I(i),
        Err(_) => IntVal::U(u),
    })
}

/// Go's `strconv.ParseInt(s, 0, 64)` falling back to `ParseUint(s, 0, 64)`.
fn go_parse_int(s: &str) -> Option<IntVal> {
    let (neg, body) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() || body.starts_with(['+', '-']) {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(r) = lower.strip_prefix("0x") {
        (16, r)
    } else if let Some(r) = lower.strip_prefix("0o") {
        (8, r)
    } else if let Some(r) = lower.strip_prefix("0b") {
        (2, r)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    match parse_radix(digits, radix, neg)? {
        IntVal::U(u) if !neg => Some(IntVal::U(u)),
        IntVal::U(_) => None,
        v => Some(v),
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let st = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - st
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal input (hex floats and `inf`/`nan` words included).
fn go_parse_float(s: &str) -> Option<f64> {
    let t = s.trim_start_matches(['+', '-']);
    let lower = t.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return s.parse::<f64>().ok();
    }
    if lower.starts_with("0x") || s.contains('_') {
        return None;
    }
    if !s
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}
