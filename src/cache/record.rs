//! Feeding the ownership history from the cache: each watch event's object before and after
//! (a relist: each listed object against the one it replaces, then the objects it no longer
//! holds, so a gap in the watch still yields each change once).

use super::table::{Entry, Table};
use crate::history::{History, ObjectState, Owned};
use std::borrow::Cow;

/// Each entry's FieldsV1 text.
fn texts(e: &Entry) -> Vec<Cow<'_, str>> {
    e.managed.iter().map(|m| m.fields.text()).collect()
}

fn state<'a>(e: &'a Entry, texts: &'a [Cow<'a, str>]) -> ObjectState<'a> {
    ObjectState {
        entries: e
            .managed
            .iter()
            .zip(texts)
            .map(|(m, fields)| Owned {
                manager: &m.head.manager,
                operation: &m.head.operation,
                subresource: &m.head.subresource,
                fields,
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
        && o.managed
            .iter()
            .zip(n.managed.iter())
            .all(|(a, b)| std::sync::Arc::ptr_eq(&a.head, &b.head) && a.fields.same(&b.fields))
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
    let (old_texts, new_texts) = (old.map(texts), new.map(texts));
    let old = old.zip(old_texts.as_deref()).map(|(e, t)| state(e, t));
    let new = new.zip(new_texts.as_deref()).map(|(e, t)| state(e, t));
    h.observe(&subject, old.as_ref(), new.as_ref());
}
