//! Interning: same-shaped objects (the Pods of a ReplicaSet) share one copy of each repeated
//! string — FieldsV1 texts, label sets, namespaces, managedFields entry heads.

use super::table::EntryHead;
use dashmap::DashSet;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Interner {
    texts: DashSet<Arc<str>>,
    heads: DashSet<Arc<EntryHead>>,
}

impl Interner {
    /// The shared copy of `s`.
    pub fn text(&self, s: &str) -> Arc<str> {
        if let Some(found) = self.texts.get(s) {
            return found.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.texts.insert(a.clone());
        a
    }

    /// The shared copy of an entry head.
    pub fn head(&self, h: EntryHead) -> Arc<EntryHead> {
        if let Some(found) = self.heads.get(&h) {
            return found.clone();
        }
        let a = Arc::new(h);
        self.heads.insert(a.clone());
        a
    }

    /// Drops what no cached object uses any more.
    pub fn sweep(&self) {
        self.texts.retain(|a| Arc::strong_count(a) > 1);
        self.heads.retain(|a| Arc::strong_count(a) > 1);
    }

    pub fn len(&self) -> usize {
        self.texts.len() + self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
