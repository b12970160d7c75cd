//! A relist (the first list of a kind, or a list again after 410 Gone or a failed watch)
//! applied to its table in place, object by object, then whatever the list no longer holds
//! removed. The table never holds two copies of a kind, so a relist costs little more memory
//! than the cache at rest; a reader meanwhile sees each object at its old version or its new
//! one. A list that fails part way leaves the objects read so far updated (each at a version the
//! apiserver served) and removes nothing; the kind stays out of sync until a list completes.

use super::record;
use super::table::{Entry, HashSet, Table, key};
use crate::history::History;
use std::sync::Arc;

/// One relist in progress: the keys the list has held so far.
pub struct Relist<'h> {
    seen: HashSet<Arc<str>>,
    /// Where changes found by the list are recorded (`None` for a first list: it is not
    /// history).
    history: Option<&'h History>,
}

impl<'h> Relist<'h> {
    pub fn new(history: Option<&'h History>) -> Relist<'h> {
        Relist {
            seen: HashSet::default(),
            history,
        }
    }

    /// An object of the list.
    pub fn upsert(&mut self, table: &Table, e: Entry) {
        let mut data = table.write();
        // Recorded under the table's lock: whoever sees the new version finds its history.
        if let Some(h) = self.history {
            let old = data.objects.get(&*e.key()).cloned();
            record::change(h, table, old.as_deref(), Some(&e));
        }
        let (k, _) = data.upsert_keyed(e);
        drop(data);
        self.seen.insert(k);
    }

    /// An object of the list that could not be read.
    pub fn unreadable(&mut self, table: &Table, namespace: &str, name: &str, why: &str) {
        table.write().unreadable(namespace, name, why);
        self.seen.insert(Arc::from(key(namespace, name)));
    }

    /// The list is complete: what it did not hold is gone.
    pub fn finish(self, table: &Table) {
        let gone: Vec<Arc<str>> = table
            .read()
            .objects
            .keys()
            .filter(|k| !self.seen.contains(*k))
            .cloned()
            .collect();
        let mut data = table.write();
        for k in gone {
            if let (Some(h), Some(old)) = (self.history, data.objects.get(&k)) {
                record::change(h, table, Some(old), None);
            }
            data.remove_key(&k);
        }
        data.undecodable.retain(|k, _| self.seen.contains(&**k));
        drop(data);
        table.touch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Interner;

    fn pod(name: &str, rv: u32, manager: &str) -> Entry {
        let text = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","managedFields":[{{"manager":"{manager}","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{"f:containers":{{"k:{{\"name\":\"{name}\"}}":{{}}}}}}}}}}]}}}}"#
        );
        Entry::decode_raw(&text, &Interner::default()).unwrap()
    }

    fn state(t: &Table) -> Vec<(String, String, String)> {
        let d = t.read();
        let mut v: Vec<_> = d
            .objects
            .values()
            .map(|e| {
                let m = &e.managed[0];
                (
                    e.name.to_string(),
                    e.resource_version.to_string(),
                    m.head.manager.to_string(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// A relist updates in place, removes what the list no longer holds (and only when the
    /// list completes), keeps the manager index right, and forgets objects once unreadable.
    #[test]
    fn a_relist_updates_in_place_and_removes_what_is_gone_when_complete() {
        let t = Table::new("v1", "Pod", false);
        let mut first = Relist::new(None);
        for (n, rv) in [("a", 1), ("b", 2), ("c", 3)] {
            first.upsert(&t, pod(n, rv, "kubelet"));
        }
        first.unreadable(&t, "ns", "d", "bad time");
        first.finish(&t);
        assert_eq!(t.read().objects.len(), 3);
        assert!(t.read().undecodable.contains_key("ns/d"));

        // A list that stops part way: what it read is updated, nothing is removed.
        let mut broken = Relist::new(None);
        broken.upsert(&t, pod("a", 10, "helm"));
        drop(broken);
        assert_eq!(
            state(&t),
            [
                ("a".into(), "10".into(), "helm".into()),
                ("b".into(), "2".into(), "kubelet".into()),
                ("c".into(), "3".into(), "kubelet".into())
            ]
        );
        assert!(t.read().undecodable.contains_key("ns/d"));

        // A complete one: b changed, c and d gone, e new.
        let mut again = Relist::new(None);
        again.upsert(&t, pod("a", 10, "helm"));
        again.upsert(&t, pod("b", 11, "helm"));
        again.upsert(&t, pod("e", 12, "kubelet"));
        again.finish(&t);
        assert_eq!(
            state(&t),
            [
                ("a".into(), "10".into(), "helm".into()),
                ("b".into(), "11".into(), "helm".into()),
                ("e".into(), "12".into(), "kubelet".into())
            ]
        );
        let d = t.read();
        assert!(d.undecodable.is_empty());
        let helm: Vec<&str> = {
            let mut v: Vec<&str> = d.by_manager["helm"].iter().map(|k| &**k).collect();
            v.sort();
            v
        };
        assert_eq!(helm, ["ns/a", "ns/b"]);
        assert_eq!(d.by_manager["kubelet"].len(), 1);
    }
}
