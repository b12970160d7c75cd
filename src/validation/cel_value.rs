//! A node's value as a CEL rule sees it, typed by the schema rather than by its JSON shape:
//! `UnstructuredToVal` in `k8s.io/apiserver/pkg/cel/common/valuesunstructured.go` (Kubernetes
//! 1.36). Properties are named by their escaped identifiers ([`super::escape`]) and a null
//! property is absent; `format: date-time`/`date` strings are timestamps, `duration` strings
//! durations, `byte` strings bytes; a `number` given as an integer is a double. A `set` list
//! compares equal regardless of order and a `map` list by its keys, each with the quirks of
//! upstream's `unstructuredSetList.Equal`/`unstructuredMapList.Equal` ([`ListOf`]).
//!
//! A value that cannot be converted — or a comparison whose upstream outcome fieldguard cannot
//! tell (Go would panic or compare values it has no picture of) — makes the rule
//! "not evaluated", never a verdict: conversion returns the reason, comparisons record it with
//! [`take_undecided`].

use super::Structural;
use super::escape::escape;
use crate::value::gofmt::format_float_v;
use crate::value::{Map, Value};
use cel::common::traits::{Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    self, CelBool, CelBytes, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString,
    CelUInt, Type,
};
use cel::common::value::{Builtin, BuiltinRef, StaticVal, Val};
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// A CEL value owned by fieldguard.
pub type Cel = Box<dyn Val + 'static>;

/// Converts `v`, a value of schema `s`, as the apiserver does; `Err` says why it cannot be.
pub fn to_cel(v: &Value, s: &Structural) -> Result<Cel, String> {
    convert(v, s, false)
}

/// Converts a custom resource's root (or an embedded resource): `apiVersion` and `kind` are
/// strings and `metadata` shows `name` and `generateName` only (`WithTypeAndObjectMeta`).
pub fn root_to_cel(v: &Value, s: &Structural) -> Result<Cel, String> {
    convert(v, s, true)
}

thread_local! {
    static UNDECIDED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Why the last evaluation compared values whose upstream outcome is unknown, if it did
/// (cleared by the call).
pub fn take_undecided() -> Option<String> {
    UNDECIDED.with(|u| u.borrow_mut().take())
}

fn undecided(why: &str) {
    UNDECIDED.with(|u| {
        u.borrow_mut().get_or_insert_with(|| why.to_string());
    });
}

fn convert(v: &Value, s: &Structural, type_and_meta: bool) -> Result<Cel, String> {
    if v.is_null() {
        return if s.nullable {
            Ok(Box::new(CelNull))
        } else {
            Err("null for a schema with nullable=false".into())
        };
    }
    if s.int_or_string {
        return match v {
            Value::String(x) => Ok(Box::new(CelString::from(x.to_string()))),
            Value::Int(i) => Ok(Box::new(CelInt::from(*i))),
            _ => Err("an x-kubernetes-int-or-string value neither a string nor an integer".into()),
        };
    }
    match (s.ty.as_deref(), v) {
        (Some("object"), Value::Map(m)) => object(m, s, type_and_meta || s.embedded),
        (Some("array"), Value::List(l)) => list(l, s),
        (Some("string"), Value::String(x)) => string(x, s.format.as_deref()),
        (Some("number"), Value::Int(i)) => Ok(Box::new(CelDouble::from(*i as f64))),
        (Some("number"), Value::Float(f)) => Ok(Box::new(CelDouble::from(*f))),
        (Some("integer"), Value::Int(i)) => Ok(Box::new(CelInt::from(*i))),
        (Some("boolean"), Value::Bool(b)) => Ok(Box::new(CelBool::from(*b))),
        (Some(t), _) => Err(format!("a value that is not of its schema's type {t}")),
        (None, _) if s.preserve_unknown => {
            Err("a value kept by x-kubernetes-preserve-unknown-fields without a type".into())
        }
        (None, _) => Err("a value whose schema has no type".into()),
    }
}

/// Whether [`to_cel`] (`type_and_meta`: [`root_to_cel`]) converts `v` without an error, told
/// without building the value: the fast path ([`super::cel_fast`]) reads the object itself, but
/// a value the crate cannot be given leaves its rules not evaluated all the same.
pub(super) fn convertible(v: &Value, s: &Structural, type_and_meta: bool) -> bool {
    if v.is_null() {
        return s.nullable;
    }
    if s.int_or_string {
        return matches!(v, Value::String(_) | Value::Int(_));
    }
    match (s.ty.as_deref(), v) {
        (Some("object"), Value::Map(m)) => {
            let type_and_meta = type_and_meta || s.embedded;
            let is_object = type_and_meta || !s.properties.is_empty();
            m.iter().all(|(k, child)| {
                let meta = type_and_meta.then(|| type_and_meta_schema(k)).flatten();
                let prop = meta
                    .as_ref()
                    .or_else(|| s.properties.iter().find(|(n, _)| n == k).map(|(_, c)| c));
                if is_object {
                    match prop {
                        Some(ps) if !child.is_null() => convertible(child, ps, false),
                        _ => true,
                    }
                } else {
                    s.additional
                        .as_deref()
                        .is_none_or(|ps| convertible(child, ps, false))
                }
            })
        }
        (Some("array"), Value::List(l)) => {
            let Some(items) = s.items.as_deref() else {
                return false;
            };
            matches!(
                s.list_type.as_deref(),
                None | Some("atomic" | "set" | "map")
            ) && l.iter().all(|e| convertible(e, items, false))
        }
        (Some("string"), Value::String(x)) => match s.format.as_deref() {
            Some("duration") => go_duration(x).is_some(),
            Some("date") => x.len() == 10 && date_time(&format!("{x}T00:00:00Z")).is_some(),
            Some("date-time") => x.is_empty() || date_time(x).is_some(),
            Some("byte") => {
                use base64::Engine;
                base64::engine::general_purpose::URL_SAFE
                    .decode(x.as_bytes())
                    .is_ok()
            }
            _ => true,
        },
        (Some("number"), Value::Int(_) | Value::Float(_))
        | (Some("integer"), Value::Int(_))
        | (Some("boolean"), Value::Bool(_)) => true,
        _ => false,
    }
}

/// Whether `v` holds, at or below it, fields kept by x-kubernetes-preserve-unknown-fields that
/// its schema does not declare, or null fields: a rule cannot read them, but the server's
/// equality of such objects compares them, which fieldguard's values (without them) do not
/// reproduce.
pub(super) fn holds_unknown_fields(v: &Value, s: &Structural) -> bool {
    match v {
        Value::Map(m) => {
            m.iter().any(
                |(k, child)| match s.properties.iter().find(|(n, _)| n == k) {
                    // A null field is absent for a rule, but counts in the server's equality.
                    Some(_) if child.is_null() => true,
                    Some((_, cs)) => holds_unknown_fields(child, cs),
                    None => match s.additional.as_deref() {
                        Some(a) => holds_unknown_fields(child, a),
                        None => s.preserve_unknown && !child.is_null(),
                    },
                },
            )
        }
        // A null item too: Go's equality of it with an object is no such overload (seed
        // 1796649359).
        Value::List(items) => s.items.as_deref().is_some_and(|is| {
            items
                .iter()
                .any(|i| i.is_null() || holds_unknown_fields(i, is))
        }),
        _ => false,
    }
}

/// Whether `v` holds, at or below it, a `format: byte` string whose bytes are not UTF-8: cel-go
/// refuses to print or convert such bytes as a string (`format`, `string()`), with an error
/// fieldguard does not reproduce (seed 1796650537).
pub(super) fn holds_non_utf8_bytes(v: &Value, s: &Structural) -> bool {
    match v {
        Value::String(x) if s.format.as_deref() == Some("byte") => {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE
                .decode(x.as_bytes())
                .is_ok_and(|b| std::str::from_utf8(&b).is_err())
        }
        Value::Map(m) => {
            m.iter().any(
                |(k, child)| match s.properties.iter().find(|(n, _)| n == k) {
                    Some((_, cs)) => holds_non_utf8_bytes(child, cs),
                    None => s
                        .additional
                        .as_deref()
                        .is_some_and(|a| holds_non_utf8_bytes(child, a)),
                },
            )
        }
        Value::List(items) => s
            .items
            .as_deref()
            .is_some_and(|is| items.iter().any(|i| holds_non_utf8_bytes(i, is))),
        _ => false,
    }
}

/// The schemas `WithTypeAndObjectMeta` gives a resource's `apiVersion`, `kind`, `metadata`.
fn type_and_meta_schema(name: &str) -> Option<Structural> {
    let string = || Structural {
        ty: Some("string".into()),
        ..Structural::default()
    };
    match name {
        "apiVersion" | "kind" => Some(string()),
        "metadata" => Some(Structural {
            ty: Some("object".into()),
            properties: vec![("name".into(), string()), ("generateName".into(), string())],
            ..Structural::default()
        }),
        _ => None,
    }
}

fn object(m: &Map, s: &Structural, type_and_meta: bool) -> Result<Cel, String> {
    let mut out: HashMap<CelMapKey<'static>, Cel> = HashMap::new();
    let is_object = type_and_meta || !s.properties.is_empty();
    for (k, child) in m.iter() {
        let meta = type_and_meta.then(|| type_and_meta_schema(k)).flatten();
        let prop = meta
            .as_ref()
            .or_else(|| s.properties.iter().find(|(n, _)| n == k).map(|(_, c)| c));
        if is_object {
            // An undeclared property (kept by x-kubernetes-preserve-unknown-fields) and a null
            // one are not there for a rule.
            let Some(ps) = prop else { continue };
            if child.is_null() {
                continue;
            }
            let key = escape(k).unwrap_or_else(|| k.to_string());
            out.insert(CelMapKey::from(key), convert(child, ps, false)?);
        } else if let Some(ps) = s.additional.as_deref() {
            out.insert(CelMapKey::from(k.to_string()), convert(child, ps, false)?);
        }
    }
    Ok(Box::new(CelMap::from(out)))
}

fn list(l: &[Value], s: &Structural) -> Result<Cel, String> {
    let Some(items) = s.items.as_deref() else {
        return Err("an array whose schema has no items".into());
    };
    let elements: Vec<Cel> = l
        .iter()
        .map(|e| convert(e, items, false))
        .collect::<Result<_, _>>()?;
    let inner = CelList::from(elements);
    let kind = match s.list_type.as_deref() {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Map(Arc::new(
            s.list_map_keys
                .iter()
                .flatten()
                .map(|k| escape(k).unwrap_or_else(|| k.clone()))
                .collect(),
        )),
        None | Some("atomic") => return Ok(Box::new(inner)),
        Some(other) => return Err(format!("x-kubernetes-list-type {other}")),
    };
    Ok(Box::new(ListOf {
        inner,
        raw: Arc::new(l.to_vec()),
        kind,
    }))
}

fn string(x: &str, format: Option<&str>) -> Result<Cel, String> {
    match format {
        Some("duration") => {
            let ns = go_duration(x).ok_or_else(|| format!("invalid duration {x:?}"))?;
            eval_builtin("duration(s)", Value::from(format!("{ns}ns").as_str()))
        }
        Some("date") => {
            let secs = date_time(&format!("{x}T00:00:00Z"))
                .filter(|_| x.len() == 10)
                .ok_or_else(|| format!("invalid date {x:?}"))?;
            timestamp(secs)
        }
        Some("date-time") => {
            let t = if x.is_empty() {
                // strfmt's zero DateTime: 0001-01-01T00:00:00Z.
                Some((-62_135_596_800, 0))
            } else {
                date_time(x)
            };
            timestamp(t.ok_or_else(|| format!("invalid date-time {x:?}"))?)
        }
        Some("byte") => {
            use base64::Engine;
            // strfmt.Base64 decodes with base64.URLEncoding (padded).
            let b = base64::engine::general_purpose::URL_SAFE
                .decode(x)
                .map_err(|e| format!("invalid byte string: {e}"))?;
            Ok(Box::new(CelBytes::from(b)))
        }
        _ => Ok(Box::new(CelString::from(x.to_string()))),
    }
}

/// Seconds and nanoseconds since the epoch of a timestamp, as UTC (cel-go reads a timestamp's
/// fields in UTC; the `cel` crate in the offset it was given).
fn timestamp((secs, nanos): (i64, u32)) -> Result<Cel, String> {
    let mut m = Map::new();
    m.insert("s", Value::Int(secs));
    m.insert("n", Value::from(format!("{nanos}ns").as_str()));
    eval_builtin("timestamp(v.s) + duration(v.n)", Value::Map(m))
}

/// Runs a small CEL expression over `v` to build a value of a type only the `cel` crate
/// constructs (timestamps and durations).
fn eval_builtin(src: &str, v: Value) -> Result<Cel, String> {
    let program = cel::Program::compile(src).map_err(|e| e.to_string())?;
    let mut ctx = cel::Context::default();
    let input: Cel = match v {
        Value::String(s) => Box::new(CelString::from(s.to_string())),
        Value::Map(m) => {
            let mut h: HashMap<CelMapKey<'static>, Cel> = HashMap::new();
            for (k, x) in m.iter() {
                let x: Cel = match x {
                    Value::Int(i) => Box::new(CelInt::from(*i)),
                    Value::String(s) => Box::new(CelString::from(s.to_string())),
                    _ => return Err("unexpected input".into()),
                };
                h.insert(CelMapKey::from(k.to_string()), x);
            }
            Box::new(CelMap::from(h))
        }
        _ => return Err("unexpected input".into()),
    };
    let name = if src.contains("v.") { "v" } else { "s" };
    ctx.add_variable_as_val(name, input);
    let out = program.execute(&ctx).map_err(|e| e.to_string())?;
    Cel::try_from(out).map_err(|e| e.to_string())
}

/// The layouts strfmt's `ParseDateTime` tries (`RFC3339Micro`, `RFC3339Millis`, `RFC3339`,
/// `RFC3339Nano`, `ISO8601LocalTime`), read strictly: anything else is `None` (and the rule not
/// evaluated), never a guess.
pub(super) fn date_time(x: &str) -> Option<(i64, u32)> {
    let b = x.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = b.get(r)?;
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| std::str::from_utf8(s).ok()?.parse().ok())?
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo) || d < 1 || d > days_in[(mo - 1) as usize] || y < 1 {
        return None;
    }
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        if end == start || end - start > 9 {
            return None;
        }
        let digits = std::str::from_utf8(&b[start..end]).ok()?;
        nanos = format!("{digits:0<9}").parse().ok()?;
        i = end;
    }
    let offset = match &b[i..] {
        [] => 0,
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    let (yy, m) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + s - offset, nanos))
}

/// Go's `time.ParseDuration`, in nanoseconds. strfmt's fallback forms (`3 days`) are `None`.
pub(super) fn go_duration(x: &str) -> Option<i64> {
    let (neg, mut rest) = match x.as_bytes().first()? {
        b'-' => (true, &x[1..]),
        b'+' => (false, &x[1..]),
        _ => (false, x),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, r) = rest.split_at(int_len);
        let (frac, r) = match r.strip_prefix('.') {
            Some(r) => {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                r.split_at(n)
            }
            None => ("", r),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = r
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(r.len(), |(i, _)| i);
        let (unit, r) = r.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut v = whole.checked_mul(scale)?;
        if !frac.is_empty() {
            let digits = &frac[..frac.len().min(18)];
            let f: i128 = digits.parse().ok()?;
            v += f * scale / 10i128.pow(digits.len() as u32);
        }
        total = total.checked_add(v)?;
        if total > i64::MAX as i128 + 1 {
            return None;
        }
        rest = r;
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).ok()
}

/// The two list types whose equality is not the elements', pairwise.
#[derive(Clone, Debug)]
enum ListKind {
    Set,
    /// The list's (escaped) keys: upstream looks them up, escaped, in the unescaped items.
    Map(Arc<Vec<String>>),
}

/// A `set` or `map` list: a CEL list (indexing, iteration, `in`, `size` are the list's) with
/// upstream's equality.
#[derive(Clone, Debug)]
struct ListOf {
    inner: CelList<'static>,
    /// The items as stored (upstream compares some of them, not their CEL values).
    raw: Arc<Vec<Value>>,
    kind: ListKind,
}

/// What Go's `ref.Val.Value()` returns for an element, as far as set and map-list equality
/// can use it: a scalar of the object (`Some`), something that matches no stored item
/// (`Ok(None)`), or something Go could not even hash (`Err`).
fn native(v: &dyn Val) -> Result<Option<Value>, ()> {
    if let Some(i) = v.downcast_ref::<CelInt>() {
        return Ok(Some(Value::Int(*i.inner())));
    }
    if let Some(f) = v.downcast_ref::<CelDouble>() {
        return Ok(Some(Value::Float(*f.inner())));
    }
    if let Some(s) = v.downcast_ref::<CelString>() {
        return Ok(Some(Value::from(s.inner())));
    }
    if let Some(b) = v.downcast_ref::<CelBool>() {
        return Ok(Some(Value::Bool(*b.inner())));
    }
    if v.downcast_ref::<CelUInt>().is_some() || v.downcast_ref::<CelNull>().is_some() {
        return Ok(None);
    }
    let t = v.get_type();
    if *t == types::TIMESTAMP_TYPE || *t == types::DURATION_TYPE {
        return Ok(None);
    }
    Err(())
}

/// Go's `==` on two interface values holding scalars of a decoded object.
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

/// An element of the other operand: its CEL value and what Go's `Value()` gives for it.
struct Other<'a> {
    val: &'a dyn Val,
    /// `Err(())`: Go's value is one fieldguard cannot picture (a literal map, say).
    native: Result<Option<Value>, ()>,
}

fn elements_of(other: &dyn Val) -> Option<Vec<Other<'_>>> {
    if let Some(l) = other.as_any().and_then(|a| a.downcast_ref::<ListOf>()) {
        // An item that is an object converts to an `unstructuredMap`, whose `Value()` is the
        // stored map; any other item to a CEL scalar.
        return Some(
            l.inner
                .inner()
                .iter()
                .zip(l.raw.iter())
                .map(|(val, raw)| Other {
                    val: val.as_ref(),
                    native: match raw {
                        Value::Map(_) => Ok(Some(raw.clone())),
                        _ => native(val.as_ref()),
                    },
                })
                .collect(),
        );
    }
    let l = other.downcast_ref::<CelList>()?;
    Some(
        l.inner()
            .iter()
            .map(|val| Other {
                val: val.as_ref(),
                native: native(val.as_ref()),
            })
            .collect(),
    )
}

/// A map-list item's key as `unstructuredMapList.toMapKey` builds it; `Err` where Go would
/// panic on an unhashable key (or print one fieldguard does not render).
#[derive(PartialEq)]
enum MapKey {
    /// An item that is no object: a fresh error value, equal to nothing.
    Unique,
    Parts(Vec<Value>),
    Printed(String),
}

fn map_key(item: &Value, keys: &[String]) -> Result<MapKey, ()> {
    let Value::Map(m) = item else {
        return Ok(MapKey::Unique);
    };
    let parts: Vec<Value> = keys
        .iter()
        .map(|k| m.get(k).cloned().unwrap_or(Value::Null))
        .collect();
    if parts
        .iter()
        .any(|p| matches!(p, Value::Map(_) | Value::List(_)))
    {
        return Err(());
    }
    if keys.len() <= 3 {
        return Ok(MapKey::Parts(parts));
    }
    // `fmt.Sprintf("%v", []interface{}{...})`.
    let printed: Vec<String> = parts
        .iter()
        .map(|p| match p {
            Value::Null => "<nil>".to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format_float_v(*f),
            Value::String(s) => s.to_string(),
            _ => String::new(),
        })
        .collect();
    Ok(MapKey::Printed(format!("[{}]", printed.join(" "))))
}

impl ListOf {
    /// `unstructuredSetList.Equal`: same size, and every element's Go value is one of the
    /// stored items (so a set of `number`s given as integers, or of `date-time`s, is never
    /// equal to a non-empty one: upstream's quirk).
    fn set_equals(&self, other: &dyn Val) -> bool {
        let Some(others) = elements_of(other) else {
            undecided("a set list compared with a value that is not a list");
            return false;
        };
        if others.len() != self.raw.len() {
            return false;
        }
        if self
            .raw
            .iter()
            .any(|r| matches!(r, Value::Map(_) | Value::List(_)))
        {
            undecided("a set list of objects or lists compared (Go cannot hash them)");
            return false;
        }
        for o in others {
            match o.native {
                Err(()) => {
                    undecided("a set list compared with a list of values Go cannot hash");
                    return false;
                }
                Ok(None) => return false,
                Ok(Some(n)) => {
                    if matches!(n, Value::Map(_) | Value::List(_)) {
                        undecided("a set list compared with a list of objects");
                        return false;
                    }
                    if !self.raw.iter().any(|r| same_scalar(r, &n)) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// `unstructuredMapList.Equal`: same size, and every element of the other list has an
    /// item with its key (the last such item) that equals it.
    fn map_equals(&self, other: &dyn Val, keys: &[String]) -> bool {
        let Some(others) = elements_of(other) else {
            undecided("a map list compared with a value that is not a list");
            return false;
        };
        if others.len() != self.raw.len() {
            return false;
        }
        let mut mine: Vec<(MapKey, usize)> = Vec::new();
        for (i, r) in self.raw.iter().enumerate() {
            let Ok(k) = map_key(r, keys) else {
                undecided("a map list whose keys are not scalars compared");
                return false;
            };
            if k != MapKey::Unique {
                mine.retain(|(m, _)| *m != k);
            }
            mine.push((k, i));
        }
        for o in others {
            let key = match &o.native {
                Ok(Some(v @ Value::Map(_))) => match map_key(v, keys) {
                    Ok(k) => k,
                    Err(()) => {
                        undecided("a map list compared with items whose keys are not scalars");
                        return false;
                    }
                },
                Ok(_) => MapKey::Unique,
                Err(()) => {
                    undecided(
                        "a map list compared with a list of values fieldguard cannot read as Go does",
                    );
                    return false;
                }
            };
            let found = (key != MapKey::Unique)
                .then(|| mine.iter().find(|(k, _)| *k == key))
                .flatten();
            let Some((_, i)) = found else { return false };
            if !self.inner.inner()[*i].equals(o.val) {
                return false;
            }
        }
        true
    }
}

impl Val for ListOf {
    fn get_type(&self) -> &Type {
        &types::LIST_TYPE
    }

    fn cel_type() -> &'static Type {
        &types::LIST_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.inner.as_container()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_indexer()
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        Box::new(self.inner).into_indexer()
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.inner.as_sizer()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.inner.as_zeroer()
    }

    // No `as_adder`: upstream's `+` on a set (a union) or a map list (a merge by key) is not
    // reproduced, so a rule using it fails here and is reported as not evaluated.

    fn equals(&self, other: &dyn Val) -> bool {
        match &self.kind {
            ListKind::Set => self.set_equals(other),
            ListKind::Map(keys) => self.map_equals(other, keys),
        }
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }

    fn as_builtin<'b, 'w>(&'b self) -> BuiltinRef<'b, 'w>
    where
        Self: 'w,
    {
        // Functions taking a list (and a literal list compared with this one, pairwise, as
        // upstream's `baseList.Equal` does) see the plain list.
        BuiltinRef::List(&self.inner)
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        Some(Builtin::List(self.inner))
    }
}

impl StaticVal for ListOf {}

#[cfg(test)]
#[path = "cel_value_tests.rs"]
mod tests;
