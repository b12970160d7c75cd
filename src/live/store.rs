//! Live state as the service reads it: a snapshot loaded once ([`SnapshotStore`]), or a
//! cluster's watch-fed cache (`crate::cache::ClusterCache`), behind one trait, so every API
//! behaves the same over both. It lives here, beside the sources, not in the service.

use crate::catalog::Catalog;
use crate::live::ObjectRef;
use crate::live::snapshot::Snapshot;
use crate::value::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A stored object and the resourceVersion it had when read.
pub type Stored = Arc<Value>;

/// Live state for the service.
pub trait Store: Send + Sync + 'static {
    /// The types known for these apiVersions (built-ins, CRDs, the cluster's schemas).
    fn catalog(&self, api_versions: &BTreeSet<String>) -> Result<Catalog, String>;
    /// One object (with managedFields) as the cache holds it; `Ok(None)`: it does not exist.
    /// An error when the object exists but cannot be read now (the reason): a prediction
    /// without it would be a guess.
    fn get(&self, r: &ObjectRef) -> Result<Option<Stored>, String>;
    /// The objects, read from the source now (a cluster GETs them; a snapshot has them).
    fn fetch_fresh(&self, refs: &[(ObjectRef, String)]) -> Result<Vec<Option<Stored>>, String>;
    /// Every object (ownership queries), in reference order.
    fn all(&self) -> Vec<(ObjectRef, Stored)>;
    /// `snapshot examples/cluster`, `cluster https://…`.
    fn describe(&self) -> String;
    /// The resource (plural) objects of this kind are served as, if known.
    fn resource_of(&self, _r: &ObjectRef) -> Option<String> {
        None
    }
    /// Whether the store is in sync with its source now (Err: what is not, for readiness).
    fn in_sync(&self) -> Result<(), String> {
        Ok(())
    }
    /// The cluster's API, for writes (None: a snapshot).
    fn api(&self) -> Option<crate::live::cluster::Api> {
        None
    }
    /// The objects a manager has entries on (an index where the store keeps one).
    fn managed_by(&self, manager: &str) -> Vec<(ObjectRef, Stored)> {
        self.all()
            .into_iter()
            .filter(|(_, o)| {
                o.get_path(&["metadata", "managedFields"])
                    .and_then(Value::as_list)
                    .is_some_and(|l| l.iter().any(|e| e.str_at(&["manager"]) == Some(manager)))
            })
            .collect()
    }
}

/// A snapshot served as it is.
pub struct SnapshotStore {
    source: String,
    catalog: Catalog,
    /// The snapshot's objects, in reference order (the snapshot itself is not kept).
    objects: Vec<(ObjectRef, Stored)>,
}

impl SnapshotStore {
    pub fn new(snapshot: Snapshot, catalog: Catalog) -> SnapshotStore {
        use crate::live::LiveObjects;
        let source = snapshot.describe();
        let objects = snapshot
            .into_objects()
            .map(|(r, d)| (r, Arc::new(d.object)))
            .collect();
        SnapshotStore {
            source,
            catalog,
            objects,
        }
    }
}

impl Store for SnapshotStore {
    fn catalog(&self, _: &BTreeSet<String>) -> Result<Catalog, String> {
        Ok(self.catalog.clone())
    }
    fn get(&self, r: &ObjectRef) -> Result<Option<Stored>, String> {
        Ok(self
            .objects
            .binary_search_by(|(k, _)| k.cmp(r))
            .ok()
            .map(|i| self.objects[i].1.clone()))
    }
    fn fetch_fresh(&self, refs: &[(ObjectRef, String)]) -> Result<Vec<Option<Stored>>, String> {
        refs.iter().map(|(r, _)| self.get(r)).collect()
    }
    fn all(&self) -> Vec<(ObjectRef, Stored)> {
        self.objects.clone()
    }
    fn describe(&self) -> String {
        self.source.clone()
    }
}
