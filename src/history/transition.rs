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

/// One field changing hands, before it is stamped with where and when. Borrows the names
/// and values of the states it was computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldChange<'a> {
    /// Empty for a whole object (`Removed`).
    pub path: Path,
    pub change: Change,
    /// Managers that lost it (sorted).
    pub from: Vec<&'a str>,
    /// Managers that gained it (`TakenOver`, `Shared`) or still own it (`Released`), sorted.
    pub to: Vec<&'a str>,
    /// The operation and subresource of the entry that gained it (or lost it, for releases).
    pub operation: &'a str,
    pub subresource: &'a str,
    /// That entry's time.
    pub time: Option<i64>,
    /// Values before and after, for kinds cached in full.
    pub old_value: Option<&'a Value>,
    pub new_value: Option<&'a Value>,
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

/// The same entry (manager, operation, subresource and fields) on both sides. Interned texts
/// are compared by address first.
fn same(a: &Owned<'_>, b: &Owned<'_>) -> bool {
    key(a) == key(b) && (std::ptr::eq(a.fields, b.fields) || a.fields == b.fields)
}

/// Managers as bits: one per distinct manager name, in name order.
type Mask = u128;

/// Objects with more distinct managers than this are not recorded (counted as unreadable).
pub const MAX_MANAGERS: usize = Mask::BITS as usize;

/// One side's entries: which changed (and their parsed sets), which did not.
struct Side<'s, 'a> {
    entries: &'s [Owned<'a>],
    /// Per entry: the manager's bit.
    bits: Vec<Mask>,
    /// Per entry: its fields, parsed when it changed (else `None` until needed).
    sets: Vec<Option<Set>>,
    changed: Vec<bool>,
}

impl<'a> Side<'_, 'a> {
    /// The managers whose entries of the given kind (changed or not) hold `p`.
    fn owners(&self, p: &[PathElement], changed: bool) -> Mask {
        let mut m = 0;
        for (i, s) in self.sets.iter().enumerate() {
            if self.changed[i] == changed && s.as_ref().is_some_and(|s| s.has(p)) {
                m |= self.bits[i];
            }
        }
        m
    }

    /// The fields of the changed entry with key `k`.
    fn changed_set(&self, k: Key) -> Option<&Set> {
        (0..self.entries.len())
            .find(|&i| self.changed[i] && key(&self.entries[i]) == k)
            .and_then(|i| self.sets[i].as_ref())
    }

    /// The entry of the manager `bit` that holds `p` (the latest, if several), else its latest.
    fn entry(&self, bit: Mask, p: &[PathElement]) -> Option<Owned<'a>> {
        (0..self.entries.len())
            .filter(|&i| self.bits[i] == bit)
            .max_by_key(|&i| {
                let holds = self.sets[i].as_ref().is_some_and(|s| s.has(p));
                (holds, self.entries[i].time)
            })
            .map(|i| self.entries[i])
    }
}

/// One side, its changed entries parsed.
fn side<'s, 'a>(
    st: &'s ObjectState<'a>,
    changed: Vec<bool>,
    bit: &impl Fn(&str) -> Mask,
) -> Result<Side<'s, 'a>, String> {
    let sets = st
        .entries
        .iter()
        .zip(&changed)
        .map(|(o, &c)| c.then(|| parse(o)).transpose())
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Side {
        entries: &st.entries,
        bits: st.entries.iter().map(|o| bit(o.manager)).collect(),
        sets,
        changed,
    })
}

/// The field changes from `old` to `new` (`None`: the object does not exist on that side).
/// Cheap when no entry changed: entries are compared by text before anything is parsed; an
/// entry that is the same on both sides is parsed only when a field's owners depend on it.
pub fn diff<'a>(
    old: Option<&ObjectState<'a>>,
    new: Option<&ObjectState<'a>>,
) -> Result<Vec<FieldChange<'a>>, String> {
    let (Some(old), Some(new)) = (old, new) else {
        // Created: nothing changes hands. Deleted: everyone loses everything.
        let Some(old) = old.filter(|_| new.is_none()) else {
            return Ok(vec![]);
        };
        return removed(old);
    };
    let old_changed: Vec<bool> = old
        .entries
        .iter()
        .map(|o| !new.entries.iter().any(|n| same(o, n)))
        .collect();
    let new_changed: Vec<bool> = new
        .entries
        .iter()
        .map(|n| !old.entries.iter().any(|o| same(o, n)))
        .collect();
    if !old_changed.iter().chain(&new_changed).any(|&c| c) {
        return Ok(vec![]);
    }
    let mut names: Vec<&'a str> = old
        .entries
        .iter()
        .chain(&new.entries)
        .map(|o| o.manager)
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.len() > MAX_MANAGERS {
        return Err(format!(
            "{} managers: more than {MAX_MANAGERS} are not recorded",
            names.len()
        ));
    }
    let bit = |m: &str| -> Mask { 1 << names.binary_search(&m).unwrap_or(0) };
    let before = side(old, old_changed, &bit)?;
    let mut after = side(new, new_changed, &bit)?;
    // The fields some changed entry gained or lost: per (manager, operation, subresource).
    let empty = Set::new();
    let mut candidates = Set::new();
    let mut keys: Vec<Key> = (0..before.entries.len())
        .filter(|&i| before.changed[i])
        .map(|i| key(&before.entries[i]))
        .chain(
            (0..after.entries.len())
                .filter(|&i| after.changed[i])
                .map(|i| key(&after.entries[i])),
        )
        .collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let b = before.changed_set(k).unwrap_or(&empty);
        let a = after.changed_set(k).unwrap_or(&empty);
        let (gained, lost) = a.differences(b);
        candidates.union_with(gained);
        candidates.union_with(lost);
    }
    // Entries the same on both sides own a field before and after alike: they matter only
    // to who else owns it, and to a manager that also has a changed entry.
    let unchanged_bits: Mask = (0..after.entries.len())
        .filter(|&i| !after.changed[i])
        .fold(0, |m, i| m | after.bits[i]);
    let mut unchanged_parsed = false;
    let mut kept: Vec<(FieldChange<'a>, Mask, Mask)> = Vec::new();
    let mut failed: Option<String> = None;
    let to_names = |m: Mask| -> Vec<&'a str> {
        (0..names.len())
            .filter(|i| m & (1 << i) != 0)
            .map(|i| names[i])
            .collect()
    };
    candidates.iterate(|p| {
        if failed.is_some() {
            return;
        }
        let cb = before.owners(p, true);
        let ca = after.owners(p, true);
        let moved = (ca ^ cb) & unchanged_bits != 0;
        let one_sided = (ca & !cb == 0) != (cb & !ca == 0);
        let u = if moved || one_sided {
            if !unchanged_parsed {
                unchanged_parsed = true;
                for i in 0..after.entries.len() {
                    if !after.changed[i] {
                        match parse(&after.entries[i]) {
                            Ok(s) => after.sets[i] = Some(s),
                            Err(e) => {
                                failed = Some(e);
                                return;
                            }
                        }
                    }
                }
            }
            after.owners(p, false)
        } else {
            0
        };
        let (was, is) = (cb | u, ca | u);
        let (gained, lost) = (is & !was, was & !is);
        let (change, from, to, by, side) = match (lost != 0, gained != 0) {
            (true, true) => (Change::TakenOver, lost, gained, gained, &after),
            (false, true) if was != 0 => (Change::Shared, 0, gained, gained, &after),
            (true, false) => (Change::Released, lost, is, lost, &before),
            _ => return,
        };
        // A change its recorded ancestor already says.
        let covered = kept.iter().any(|(k, f, t)| {
            (k.change, *f, *t) == (change, from, to)
                && k.path.len() < p.len()
                && p[..k.path.len()]
                    .iter()
                    .zip(k.path.elements())
                    .all(|(a, b)| a.equals(b))
        });
        if covered {
            return;
        }
        let by = by & by.wrapping_neg();
        let entry = side.entry(by, p);
        let latest = new
            .entries
            .iter()
            .filter(|o| bit(o.manager) == by)
            .max_by_key(|o| o.time);
        kept.push((
            FieldChange {
                path: Path(p.to_vec()),
                change,
                from: to_names(from),
                to: to_names(to),
                operation: entry.map_or("", |o| o.operation),
                subresource: entry.map_or("", |o| o.subresource),
                time: latest.and_then(|o| o.time).or(entry.and_then(|o| o.time)),
                old_value: old.object.and_then(|v| value_at(v, p)),
                new_value: new.object.and_then(|v| value_at(v, p)),
                fields: 0,
            },
            from,
            to,
        ));
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(kept.into_iter().map(|k| k.0).collect())
}

/// Everything each manager owned, lost with the object.
fn removed<'a>(old: &ObjectState<'a>) -> Result<Vec<FieldChange<'a>>, String> {
    let mut out: Vec<FieldChange<'a>> = Vec::new();
    for o in &old.entries {
        let fields = parse(o)?.size();
        if let Some(prev) = out.iter_mut().find(|c| c.from[0] == o.manager) {
            prev.fields += fields;
            continue;
        }
        out.push(FieldChange {
            path: Path::new(),
            change: Change::Removed,
            from: vec![o.manager],
            to: vec![],
            operation: o.operation,
            subresource: o.subresource,
            time: o.time,
            old_value: None,
            new_value: None,
            fields,
        });
    }
    out.sort_by(|a, b| a.from.cmp(&b.from));
    Ok(out)
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
