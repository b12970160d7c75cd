//! Feeding the ownership history from the cache: each watch event's object before and after
//! (a relist: every object of the old table against the new one, so a gap in the watch still
//! yields each change once).

use super::table::{Entry, Table, TableData};
use crate::history::{History, ObjectState, Owned};

fn state(e: &Entry) -> ObjectState<'_> {
    ObjectState {
        entries: e
            .managed
            .iter()
            .map(|m| Owned {
                manager: &m.head.manager,
                operation: &m.head.operation,
                subresource: &m.head.subresource,
                fields: &m.fields,
                time: m.time,
            })
            .collect(),
        object: e.full.as_deref(),
    }
}

/// Records one object's change (`None`: absent on that side).
pub(super) fn change(h: &History, table: &Table, old: Option<&Entry>, new: Option<&Entry>) {
    // Cheap when nothing of managedFields changed: the interned texts are the same.
    if let (Some(o), Some(n)) = (old, new)
        && o.managed.len() == n.managed.len()
        && o.managed.iter().zip(n.managed.iter()).all(|(a, b)| {
            std::sync::Arc::ptr_eq(&a.head, &b.head) && std::sync::Arc::ptr_eq(&a.fields, &b.fields)
        })
    {
        return;
    }
    let Some(any) = new.or(old) else {
        return;
    };
    let rv = new.map_or(&*any.resource_version, |n| &*n.resource_version);
    let subject = crate::history::Subject {
        api_version: &table.api_version,
        kind: &table.kind,
        namespace: &any.namespace,
        name: &any.name,
        resource_version: rv,
    };
    h.observe(&subject, old.map(state).as_ref(), new.map(state).as_ref());
}

/// Records what a relist changed: every object of `old` against `new`.
pub(super) fn relist(h: &History, table: &Table, old: &TableData, new: &TableData) {
    for (k, n) in &new.objects {
        change(h, table, old.objects.get(k).map(|o| &**o), Some(n));
    }
    for (k, o) in &old.objects {
        if !new.objects.contains_key(k) && !new.undecodable.contains_key(&**k) {
            change(h, table, Some(o), None);
        }
    }
}
