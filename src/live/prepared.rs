//! Live objects prepared for the engine ([`Prepared`]: managed fields decoded and reconciled,
//! the object validated, its lists indexed), kept between predictions. A service answers many
//! predictions against the same live version of an object; preparing it is a large share of
//! each one (about a third of the engine's work for a Deployment), and the result depends only
//! on the stored object and its type.
//!
//! An entry is used only for the very same stored object: the same shared value (the snapshot's
//! and the watch cache's objects are shared while unchanged), or one structurally equal to it
//! (an object read from the server again) — and only with the same schema and apiVersion.
//! Bounded by entries; the least recently used quarter goes when it is full.

use super::ObjectRef;
use super::state::Stored;
use crate::managedfields::{ManagerError, Prepared};
use crate::schema::{Schema, TypeRef};
use foldhash::HashMap;
use std::sync::{Arc, Mutex};

/// Entries kept by default: a release's worth of objects.
pub const DEFAULT_ENTRIES: usize = 1024;

/// Prepared live objects by reference, bounded.
pub struct PreparedCache {
    slots: Mutex<Slots>,
    capacity: usize,
}

#[derive(Default)]
struct Slots {
    map: HashMap<ObjectRef, Slot>,
    /// Use counter: a slot's `used` is the counter when it was last used.
    clock: u64,
    hits: u64,
    misses: u64,
}

struct Slot {
    object: Stored,
    schema: Arc<Schema>,
    api_version: String,
    prepared: Arc<Prepared>,
    used: u64,
}

impl Slot {
    fn holds(&self, object: &Stored, schema: &Arc<Schema>, api_version: &str) -> bool {
        Arc::ptr_eq(&self.schema, schema)
            && self.api_version == api_version
            && (Arc::ptr_eq(&self.object, object) || self.object.strict_eq(object))
    }
}

impl std::fmt::Debug for PreparedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (entries, hits, misses) = self.stats();
        write!(
            f,
            "PreparedCache({entries} of {}, {hits} hits, {misses} misses)",
            self.capacity
        )
    }
}

impl Default for PreparedCache {
    fn default() -> Self {
        PreparedCache::new(DEFAULT_ENTRIES)
    }
}

impl PreparedCache {
    /// At most `capacity` objects (at least 1).
    pub fn new(capacity: usize) -> PreparedCache {
        PreparedCache {
            slots: Mutex::new(Slots::default()),
            capacity: capacity.max(1),
        }
    }

    /// `object` (stored as `r`, read in `api_version` of type `tr` in `schema`) prepared: from
    /// the cache when it holds this very object, else prepared now and kept. Errors are not
    /// kept (a live object that cannot be read is rare, and its error is reported each time).
    pub fn prepare(
        &self,
        r: &ObjectRef,
        object: &Stored,
        schema: &Arc<Schema>,
        tr: &TypeRef,
        api_version: &str,
    ) -> Result<Arc<Prepared>, ManagerError> {
        {
            let mut s = self.lock();
            s.clock += 1;
            let now = s.clock;
            if let Some(slot) = s.map.get_mut(r)
                && slot.holds(object, schema, api_version)
            {
                slot.used = now;
                let p = slot.prepared.clone();
                s.hits += 1;
                return Ok(p);
            }
            s.misses += 1;
        }
        // Prepared outside the lock: other requests go on meanwhile.
        let prepared = Arc::new(Prepared::new(schema, tr, object)?);
        let mut s = self.lock();
        if s.map.len() >= self.capacity && !s.map.contains_key(r) {
            evict(&mut s.map, self.capacity - self.capacity / 4);
        }
        s.clock += 1;
        let used = s.clock;
        s.map.insert(
            r.clone(),
            Slot {
                object: object.clone(),
                schema: schema.clone(),
                api_version: api_version.to_string(),
                prepared: prepared.clone(),
                used,
            },
        );
        Ok(prepared)
    }

    /// (entries, hits, misses) so far.
    pub fn stats(&self) -> (usize, u64, u64) {
        let s = self.lock();
        (s.map.len(), s.hits, s.misses)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        // A panic elsewhere while holding the lock leaves only a cache behind: use it.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Keeps the `keep` most recently used slots.
fn evict(map: &mut HashMap<ObjectRef, Slot>, keep: usize) {
    if map.len() <= keep {
        return;
    }
    let mut uses: Vec<u64> = map.values().map(|s| s.used).collect();
    let cut = uses.len() - keep;
    let (_, threshold, _) = uses.select_nth_unstable(cut - 1);
    let threshold = *threshold;
    map.retain(|_, s| s.used > threshold);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, DEFAULT_KUBERNETES};
    use crate::value::json;

    fn config_map(name: &str, data: &str) -> Stored {
        Arc::new(
            json::parse_str(&format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","managedFields":[{{"manager":"a","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{"f:k":{{}}}}}}}}]}},"data":{{"k":"{data}"}}}}"#
            ))
            .unwrap(),
        )
    }

    fn reference(name: &str) -> ObjectRef {
        ObjectRef {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_same_object_is_prepared_once_and_a_changed_one_again() {
        let catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        let info = catalog.lookup("v1", "ConfigMap").unwrap();
        let cache = PreparedCache::new(8);
        let (r, a) = (reference("one"), config_map("one", "1"));
        let prep = |o: &Stored| {
            cache
                .prepare(&r, o, &info.schema, &info.type_ref, "v1")
                .unwrap()
        };
        let first = prep(&a);
        assert!(Arc::ptr_eq(&first, &prep(&a)), "the same shared object");
        // Read again from the server: another value, equal to the first.
        assert!(Arc::ptr_eq(&first, &prep(&config_map("one", "1"))));
        // A new version of the object is prepared anew, and its content is the new one.
        let changed = prep(&config_map("one", "2"));
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed.object().str_at(&["data", "k"]), Some("2"));
        // Another apiVersion is not the same entry.
        let other = cache
            .prepare(&r, &a, &info.schema, &info.type_ref, "v2")
            .unwrap();
        assert!(!Arc::ptr_eq(&changed, &other));
        assert_eq!(cache.stats(), (1, 2, 3));
    }

    #[test]
    fn the_least_recently_used_go_first_and_the_bound_holds() {
        let catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        let info = catalog.lookup("v1", "ConfigMap").unwrap();
        let cache = PreparedCache::new(8);
        let objects: Vec<(ObjectRef, Stored)> = (0..20)
            .map(|i| {
                (
                    reference(&format!("cm{i}")),
                    config_map(&format!("cm{i}"), "x"),
                )
            })
            .collect();
        let prep = |(r, o): &(ObjectRef, Stored)| {
            cache
                .prepare(r, o, &info.schema, &info.type_ref, "v1")
                .unwrap()
        };
        let kept = prep(&objects[0]);
        for o in &objects[1..] {
            prep(o);
            // cm0 is used after every other object: it is never the least recently used.
            assert!(Arc::ptr_eq(&kept, &prep(&objects[0])));
            assert!(cache.stats().0 <= 8);
        }
        let (_, hits_before, misses_before) = cache.stats();
        prep(&objects[19]);
        prep(&objects[1]);
        let (_, hits, misses) = cache.stats();
        assert_eq!((hits - hits_before, misses - misses_before), (1, 1));
    }
}
