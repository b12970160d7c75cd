//! JSON merge patch (RFC 7386) as Kubernetes uses it for custom resources: applying
//! (`evanphx/json-patch` v4 semantics, including its treatment of non-object documents),
//! two-way creation, and apimachinery's three-way patch (`CreateThreeWayJSONMergePatch`:
//! additions and changes from live to the new manifest, deletions from the last-applied
//! configuration to the new manifest, refused if the two disagree).

use super::PatchError;
use crate::value::{Map, Value};

const BAD_DOC: &str = "Invalid JSON Document";
const BAD_PATCH: &str = "Invalid JSON Patch";

fn err(m: &str) -> PatchError {
    PatchError::Invalid(m.to_string())
}

/// Applies `patch` to `target` (`jsonpatch.MergePatch`).
pub fn apply(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    match (target, patch) {
        (_, Value::Null) | (_, Value::Bool(_) | Value::Int(_) | Value::Float(_)) => {
            Err(err(BAD_PATCH))
        }
        (_, Value::String(_)) => Err(err(BAD_PATCH)),
        (Value::Null, _) => Err(err(BAD_DOC)),
        (Value::Map(t), Value::Map(p)) => {
            let mut doc = t.clone();
            merge_docs(&mut doc, p.clone());
            Ok(Value::Map(doc))
        }
        (_, p) => {
            let mut p = p.clone();
            prune_nulls(&mut p);
            Ok(p)
        }
    }
}

fn merge_docs(doc: &mut Map, patch: Map) {
    for (k, mut v) in patch.into_entries() {
        if v.is_null() {
            doc.remove(&k);
            continue;
        }
        match doc.get_mut(&k) {
            Some(cur) if !cur.is_null() => {
                let c = std::mem::take(cur);
                *cur = merge(c, v);
            }
            _ => {
                prune_nulls(&mut v);
                doc.insert(k, v);
            }
        }
    }
}

fn merge(cur: Value, mut patch: Value) -> Value {
    match (cur, patch) {
        (Value::Map(mut c), Value::Map(p)) => {
            merge_docs(&mut c, p);
            Value::Map(c)
        }
        (Value::Map(_), p) => p,
        (_, p) => {
            patch = p;
            prune_nulls(&mut patch);
            patch
        }
    }
}

fn prune_nulls(v: &mut Value) {
    match v {
        Value::Map(m) => {
            m.entries_mut().retain(|(_, v)| !v.is_null());
            for (_, v) in m.entries_mut() {
                prune_nulls(v);
            }
        }
        Value::List(l) => l.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// Same JSON type, as `evanphx` sees it (every number is a float64).
fn same_kind(a: &Value, b: &Value) -> bool {
    number(a).is_some() && number(b).is_some()
        || std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn matches(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && y.iter()
                    .all(|(k, bv)| x.get(k).is_some_and(|av| matches(av, bv)))
        }
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| matches(a, b))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a.strict_eq(b),
        },
    }
}

fn diff(a: &Map, b: &Map) -> Map {
    let mut into = Map::new();
    for (k, bv) in b.iter() {
        let Some(av) = a.get(k) else {
            into.insert(k.clone(), bv.clone());
            continue;
        };
        if !same_kind(av, bv) {
            into.insert(k.clone(), bv.clone());
            continue;
        }
        match (av, bv) {
            (Value::Map(x), Value::Map(y)) => {
                let d = diff(x, y);
                if !d.is_empty() {
                    into.insert(k.clone(), Value::Map(d));
                }
            }
            _ => {
                if !matches(av, bv) {
                    into.insert(k.clone(), bv.clone());
                }
            }
        }
    }
    for k in a.keys() {
        if !b.contains_key(k) {
            into.insert(k.clone(), Value::Null);
        }
    }
    into
}

/// Creates the merge patch from `original` to `modified` (`jsonpatch.CreateMergePatch`): objects
/// are diffed; two arrays of objects of the same length are diffed element by element.
pub fn two_way(original: &Value, modified: &Value) -> Result<Value, PatchError> {
    match (original, modified) {
        (Value::List(o), Value::List(m)) => {
            if o.len() != m.len() {
                return Err(err(BAD_DOC));
            }
            o.iter()
                .zip(m)
                .map(|(a, b)| two_way_objects(a, b))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::List)
        }
        (Value::List(_), _) | (_, Value::List(_)) => Err(err("Mismatched JSON Documents")),
        (a, b) => two_way_objects(a, b),
    }
}

fn two_way_objects(a: &Value, b: &Value) -> Result<Value, PatchError> {
    match (a, b) {
        (Value::Map(a), Value::Map(b)) => Ok(Value::Map(diff(a, b))),
        _ => Err(err(BAD_DOC)),
    }
}

/// What a value looks like after `evanphx` (float64 numbers) printed it and apimachinery read it
/// back (integral numbers become integers).
fn through_float64(v: Value) -> Value {
    match v {
        Value::Int(_) | Value::Float(_) => {
            let f = number(&v).unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 1e21 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
                Value::Int(f as i64)
            } else {
                Value::Float(f)
            }
        }
        Value::List(l) => Value::List(l.into_iter().map(through_float64).collect()),
        Value::Map(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m.into_entries() {
                out.push_unique(k, through_float64(v));
            }
            Value::Map(out)
        }
        other => other,
    }
}

/// Keeps only the deletions (`keep_null`) or only the additions and changes of a merge patch
/// (apimachinery's `keepOrDeleteNullInObj`; an explicitly empty object counts as a value).
pub fn keep_or_delete_null(m: &Map, keep_null: bool) -> Map {
    let mut out = Map::new();
    for (k, v) in m.iter() {
        match v {
            Value::Null if keep_null => {
                out.insert(k.clone(), Value::Null);
            }
            Value::Null => {}
            Value::Map(sub) if sub.is_empty() => {
                if !keep_null {
                    out.insert(k.clone(), v.clone());
                }
            }
            Value::Map(sub) => {
                let f = keep_or_delete_null(sub, keep_null);
                if !f.is_empty() {
                    out.insert(k.clone(), Value::Map(f));
                }
            }
            _ => {
                if !keep_null {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
    }
    out
}

/// True if the two patches set some field to different values (`mergepatch.HasConflicts`).
pub fn has_conflicts(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Map(l), Value::Map(r)) => l
            .iter()
            .any(|(k, lv)| r.get(k).is_some_and(|rv| has_conflicts(lv, rv))),
        (Value::Map(_), _) => true,
        (Value::List(l), Value::List(r)) => {
            l.len() != r.len() || l.iter().zip(r).any(|(x, y)| has_conflicts(x, y))
        }
        (Value::List(_), _) => true,
        _ => !a.strict_eq(b),
    }
}

/// The three-way JSON merge patch (`CreateThreeWayJSONMergePatch`).
pub fn three_way(original: &Map, modified: &Map, current: &Map) -> Result<Map, PatchError> {
    let to_map = |v: Value| match through_float64(v) {
        Value::Map(m) => m,
        _ => Map::new(),
    };
    let add_and_change = to_map(Value::Map(diff(current, modified)));
    let add_and_change = keep_or_delete_null(&add_and_change, false);
    let deletions = to_map(Value::Map(diff(original, modified)));
    let deletions = keep_or_delete_null(&deletions, true);
    if has_conflicts(
        &Value::Map(add_and_change.clone()),
        &Value::Map(deletions.clone()),
    ) {
        return Err(PatchError::Conflict(
            "the additions and the deletions of the patch disagree".into(),
        ));
    }
    let patch = apply(&Value::Map(deletions), &Value::Map(add_and_change))?;
    Ok(to_map(patch))
}
