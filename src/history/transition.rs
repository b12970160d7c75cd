//! What changed hands between two states of one object's managedFields, per field.
//!
//! Owners of a field are the managers whose entry holds it. Between two states, for every
//! field some entry gained or lost: managers that lost it and managers that gained it give
//! a *takeover* (lost and gained), the start of *sharing* (gained, nobody lost, somebody owned
//! it before), or a *release* (lost, nobody gained). A field that nobody owned before and
//! somebody owns now is no change of hands (it is new) and is not recorded. A deleted object
//! releases everything: one *removed* transition per manager, for the whole object. When a
//! field and its descendants change hands the same way (a container taken over with all its
//! fields), only the topmost is recorded.

use crate::fieldpath::{Path, PathElement, Set};
use crate::value::{self, Value};
use std::collections::BTreeSet;

/// How a field changed hands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// `from` lost it and `to` gained it (by a forced apply, or by an Update).
    TakenOver,
    /// `to` started owning it too; nobody lost it.
    Shared,
    /// `from` dropped it from its set; `to` (possibly nobody) still own it.
    Released,
    /// The object was deleted: `from` lost everything it owned.
    Removed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::TakenOver => "taken-over",
            Change::Shared => "shared",
            Change::Released => "released",
            Change::Removed => "removed",
        }
    }
}

/// One managedFields entry, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Owned<'a> {
    pub manager: &'a str,
    pub operation: &'a str,
    pub subresource: &'a str,
    /// The entry's FieldsV1 as JSON text.
    pub fields: &'a str,
    pub time: Option<i64>,
}

/// One state of an object: its entries and, for kinds cached in full, the object.
#[derive(Clone, Debug, Default)]
pub struct ObjectState<'a> {
    pub entries: Vec<Owned<'a>>,
    pub object: Option<&'a Value>,
}

/// One field changing hands, before it is stamped with where and when.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldChange {
    /// Empty for a whole object (`Removed`).
    pub path: Path,
    pub change: Change,
    /// Managers that lost it (sorted).
    pub from: Vec<String>,
    /// Managers that gained it (`TakenOver`, `Shared`) or still own it (`Released`), sorted.
    pub to: Vec<String>,
    /// The operation and subresource of the entry that gained it (or lost it, for releases).
    pub operation: String,
    pub subresource: String,
    /// That entry's time.
    pub time: Option<i64>,
    /// Values before and after, for kinds cached in full.
    pub old_value: Option<Value>,
    pub new_value: Option<Value>,
    /// For `Removed`: how many fields the manager owned.
    pub fields: usize,
}

type Key<'a> = (&'a str, &'a str, &'a str);

fn key<'a>(o: &Owned<'a>) -> Key<'a> {
    (o.manager, o.operation, o.subresource)
}

fn parse(o: &Owned<'_>) -> Result<Set, String> {
    Set::from_fields_v1(o.fields.as_bytes())
        .map_err(|e| format!("managedFields of {} ({}): {e}", o.manager, o.operation))
}

/// The field changes from `old` to `new` (`None`: the object does not exist on that side).
/// Cheap when no entry changed: entries are compared by text before anything is parsed.
pub fn diff(
    old: Option<&ObjectState<'_>>,
    new: Option<&ObjectState<'_>>,
) -> Result<Vec<FieldChange>, String> {
    let (Some(old), Some(new)) = (old, new) else {
        // Created: nothing changes hands. Deleted: everyone loses everything.
        let Some(old) = old.filter(|_| new.is_none()) else {
            return Ok(vec![]);
        };
        return removed(old);
    };
    let changed: Vec<Key> = {
        let mut keys: BTreeSet<Key> = BTreeSet::new();
        for o in &old.entries {
            let same = new
                .entries
                .iter()
                .any(|n| key(n) == key(o) && n.fields == o.fields);
            if !same {
                keys.insert(key(o));
            }
        }
        for n in &new.entries {
            let same = old
                .entries
                .iter()
                .any(|o| key(n) == key(o) && n.fields == o.fields);
            if !same {
                keys.insert(key(n));
            }
        }
        keys.into_iter().collect()
    };
    if changed.is_empty() {
        return Ok(vec![]);
    }
    let old_sets: Vec<(Owned, Set)> = old
        .entries
        .iter()
        .map(|o| Ok((*o, parse(o)?)))
        .collect::<Result<_, String>>()?;
    let new_sets: Vec<(Owned, Set)> = new
        .entries
        .iter()
        .map(|o| Ok((*o, parse(o)?)))
        .collect::<Result<_, String>>()?;
    // The fields some changed entry gained or lost.
    let empty = Set::new();
    let mut candidates = Set::new();
    for k in &changed {
        let before = old_sets
            .iter()
            .find(|(o, _)| key(o) == *k)
            .map_or(&empty, |x| &x.1);
        let after = new_sets
            .iter()
            .find(|(o, _)| key(o) == *k)
            .map_or(&empty, |x| &x.1);
        let (gained, lost) = after.differences(before);
        candidates.union_with(gained);
        candidates.union_with(lost);
    }
    let owners = |sets: &[(Owned, Set)], p: &[PathElement]| -> BTreeSet<String> {
        sets.iter()
            .filter(|(_, s)| s.has(p))
            .map(|(o, _)| o.manager.to_string())
            .collect()
    };
    let mut out: Vec<FieldChange> = Vec::new();
    candidates.iterate(|p| {
        let before = owners(&old_sets, p);
        let after = owners(&new_sets, p);
        let gained: Vec<String> = after.difference(&before).cloned().collect();
        let lost: Vec<String> = before.difference(&after).cloned().collect();
        let (change, from, to, by) = match (lost.is_empty(), gained.is_empty()) {
            (false, false) => (Change::TakenOver, lost, gained.clone(), gained.first()),
            (true, false) if !before.is_empty() => {
                (Change::Shared, vec![], gained.clone(), gained.first())
            }
            (false, true) => {
                let by = lost.first().cloned();
                let to = after.iter().cloned().collect();
                return push(
                    &mut out,
                    p,
                    Change::Released,
                    lost,
                    to,
                    by.as_deref(),
                    &old_sets,
                    old,
                    new,
                );
            }
            _ => return,
        };
        let by = by.cloned();
        push(
            &mut out,
            p,
            change,
            from,
            to,
            by.as_deref(),
            &new_sets,
            old,
            new,
        );
    });
    Ok(topmost(out))
}

/// Records one change; `by` names the manager whose entry (in `sets`) made it.
#[allow(clippy::too_many_arguments)]
fn push(
    out: &mut Vec<FieldChange>,
    p: &[PathElement],
    change: Change,
    from: Vec<String>,
    to: Vec<String>,
    by: Option<&str>,
    sets: &[(Owned, Set)],
    old: &ObjectState<'_>,
    new: &ObjectState<'_>,
) {
    // The entry of `by` holding the field (in the state it was changed in), else any of its.
    let entry = sets
        .iter()
        .filter(|(o, _)| Some(o.manager) == by)
        .max_by_key(|(o, s)| (s.has(p), o.time))
        .map(|(o, _)| *o);
    let new_entry = by.and_then(|b| {
        new.entries
            .iter()
            .filter(|o| o.manager == b)
            .max_by_key(|o| o.time)
    });
    out.push(FieldChange {
        path: Path(p.to_vec()),
        change,
        from,
        to,
        operation: entry.map(|o| o.operation.to_string()).unwrap_or_default(),
        subresource: entry.map(|o| o.subresource.to_string()).unwrap_or_default(),
        time: new_entry
            .and_then(|o| o.time)
            .or(entry.and_then(|o| o.time)),
        old_value: old.object.and_then(|v| value_at(v, p)).cloned(),
        new_value: new.object.and_then(|v| value_at(v, p)).cloned(),
        fields: 0,
    });
}

/// Everything each manager owned, lost with the object.
fn removed(old: &ObjectState<'_>) -> Result<Vec<FieldChange>, String> {
    let mut out: Vec<FieldChange> = Vec::new();
    for o in &old.entries {
        let fields = parse(o)?.paths().len();
        if let Some(prev) = out.iter_mut().find(|c| c.from[0] == o.manager) {
            prev.fields += fields;
            continue;
        }
        out.push(FieldChange {
            path: Path::new(),
            change: Change::Removed,
            from: vec![o.manager.to_string()],
            to: vec![],
            operation: o.operation.to_string(),
            subresource: o.subresource.to_string(),
            time: o.time,
            old_value: None,
            new_value: None,
            fields,
        });
    }
    out.sort_by(|a, b| a.from.cmp(&b.from));
    Ok(out)
}

/// Drops changes whose ancestor changed the same way (pre-order input: ancestors first).
fn topmost(changes: Vec<FieldChange>) -> Vec<FieldChange> {
    let mut kept: Vec<FieldChange> = Vec::with_capacity(changes.len());
    for c in changes {
        let covered = kept.iter().any(|k| {
            k.path.len() < c.path.len()
                && c.path.elements()[..k.path.len()]
                    .iter()
                    .zip(k.path.elements())
                    .all(|(a, b)| a.equals(b))
                && (k.change, &k.from, &k.to) == (c.change, &c.from, &c.to)
        });
        if !covered {
            kept.push(c);
        }
    }
    kept
}

/// The value at `path` in `v`, without a schema: list-map items by their key fields, set
/// items by value, positions by index.
pub fn value_at<'v>(v: &'v Value, path: &[PathElement]) -> Option<&'v Value> {
    let mut cur = v;
    for pe in path {
        cur = match pe {
            PathElement::Field(name) => cur.as_map()?.get(name)?,
            PathElement::Key(fields) => cur.as_list()?.iter().find(|item| {
                fields.iter().all(|k| {
                    item.as_map()
                        .and_then(|m| m.get(&k.name))
                        .is_some_and(|x| value::equals(x, &k.value))
                })
            })?,
            PathElement::Value(x) => cur.as_list()?.iter().find(|i| value::equals(i, x))?,
            PathElement::Index(i) => cur.as_list()?.get(usize::try_from(*i).ok()?)?,
        };
    }
    Some(cur)
}

#[cfg(test)]
mod tests;
