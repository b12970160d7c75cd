//! One resource type's cached objects: compact entries (managedFields kept as interned FieldsV1
//! text, cut into a shared shape and per-object keys, decoded only when a query needs them) and
//! an index from manager to objects. Relists update a table in place (`relist.rs`).

use super::fields::Fields;
use super::intern::Interner;
use super::skim::{Managed, Meta};
use crate::live::ObjectRef;
use crate::managedfields::parse_time;
use crate::value::{Map, Value, json};
use std::sync::{Arc, RwLock};

/// The tables' hasher: seeded per map, and fast on the long keys of a cache.
pub type Hasher = foldhash::quality::RandomState;
pub type HashMap<K, V> = std::collections::HashMap<K, V, Hasher>;
pub type HashSet<K> = std::collections::HashSet<K, Hasher>;

/// Who wrote one managedFields entry (shared by every object with the same entry head).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct EntryHead {
    pub manager: Box<str>,
    pub operation: Box<str>,
    pub api_version: Box<str>,
    pub subresource: Box<str>,
}

/// One managedFields entry.
#[derive(Clone, Debug)]
pub struct ManagedEntry {
    pub head: Arc<EntryHead>,
    /// The FieldsV1 JSON, interned: same-shaped objects share its shape.
    pub fields: Fields,
    pub time: Option<i64>,
}

/// A cached object.
#[derive(Debug)]
pub struct Entry {
    pub name: Box<str>,
    pub namespace: Arc<str>,
    pub resource_version: Box<str>,
    /// The labels as JSON text, interned (`None` when there are none).
    pub labels: Option<Arc<str>>,
    pub managed: Box<[ManagedEntry]>,
    /// The whole object, for kinds watched in full.
    pub full: Option<Arc<Value>>,
}

/// The parts of an object's metadata the cache keeps, borrowed from the event's text.
#[derive(serde::Deserialize)]
pub(super) struct RawObject<'a> {
    #[serde(borrow)]
    pub(super) metadata: RawMeta<'a>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawMeta<'a> {
    #[serde(borrow, default)]
    pub(super) name: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) namespace: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) resource_version: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    labels: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    managed_fields: Option<Vec<RawManaged<'a>>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManaged<'a> {
    #[serde(borrow, default)]
    manager: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    operation: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    api_version: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    subresource: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    time: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "fieldsV1")]
    fields_v1: Option<&'a serde_json::value::RawValue>,
}

/// What serde read, as the skim reads it (item keys not looked for).
impl<'a> From<RawMeta<'a>> for Meta<'a> {
    fn from(m: RawMeta<'a>) -> Meta<'a> {
        let managed = m.managed_fields.unwrap_or_default().into_iter();
        Meta {
            name: m.name,
            namespace: m.namespace,
            resource_version: m.resource_version,
            labels: m.labels.map(|r| r.get()).filter(|l| *l != "null"),
            managed: managed
                .map(|e| Managed {
                    manager: e.manager,
                    operation: e.operation,
                    api_version: e.api_version,
                    subresource: e.subresource,
                    time: e.time,
                    fields_v1: e.fields_v1.map(|r| r.get()).filter(|f| *f != "null"),
                    cuts: None,
                })
                .collect(),
            cuts: Vec::new(),
        }
    }
}

impl Entry {
    /// Reads an object's metadata straight from its JSON text (no tree is built: FieldsV1
    /// and labels are interned as the apiserver wrote them). For metadata-only watches.
    pub fn decode_raw(text: &str, interner: &Interner) -> Result<Entry, String> {
        if let Some(meta) = super::skim::object(text) {
            return Entry::from_raw(meta, interner);
        }
        let o: RawObject = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Entry::from_raw(o.metadata.into(), interner)
    }

    /// An entry from metadata read straight from an object's text.
    pub(super) fn from_raw(m: Meta<'_>, interner: &Interner) -> Result<Entry, String> {
        if m.name.is_empty() {
            return Err("no metadata.name".into());
        }
        let mut managed = Vec::with_capacity(m.managed.len());
        for (i, e) in m.managed.into_iter().enumerate() {
            let time = match e.time.as_deref() {
                None | Some("") => None,
                Some(t) => {
                    Some(parse_time(t).map_err(|err| format!("managedFields[{i}].time: {err}"))?)
                }
            };
            let fields = match (e.fields_v1, e.cuts) {
                (Some(text), Some(cuts)) => Fields::intern_cut(text, &m.cuts[cuts], interner),
                (Some(text), None) => Fields::intern(text, interner),
                (None, _) => Fields::intern("{}", interner),
            };
            managed.push(ManagedEntry {
                head: interner.head(EntryHead {
                    manager: e.manager.into(),
                    operation: e.operation.into(),
                    api_version: e.api_version.into(),
                    subresource: e.subresource.into(),
                }),
                fields,
                time,
            });
        }
        let labels = m.labels.filter(|l| *l != "{}").map(|l| interner.text(l));
        Ok(Entry {
            name: m.name.into(),
            namespace: interner.text(&m.namespace),
            resource_version: m.resource_version.into(),
            labels,
            managed: managed.into_boxed_slice(),
            full: None,
        })
    }

    /// Reads an object (full or `PartialObjectMetadata`); `keep_full` keeps its content.
    pub fn decode(obj: Value, keep_full: bool, interner: &Interner) -> Result<Entry, String> {
        let meta = obj
            .get_path(&["metadata"])
            .and_then(Value::as_map)
            .ok_or("no metadata")?;
        let s = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
        let name = s("name");
        if name.is_empty() {
            return Err("no metadata.name".into());
        }
        let mut managed = Vec::new();
        let list: &[Value] = match meta.get("managedFields") {
            None | Some(Value::Null) => &[],
            Some(Value::List(l)) => l,
            Some(_) => return Err("metadata.managedFields is not a list".into()),
        };
        {
            for (i, e) in list.iter().enumerate() {
                let m = e
                    .as_map()
                    .ok_or_else(|| format!("managedFields[{i}] is not an object"))?;
                let g = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
                let fields = match m.get("fieldsV1") {
                    None | Some(Value::Null) => "{}".to_string(),
                    Some(Value::String(t)) => t.to_string(),
                    Some(v) => json::to_string(v, json::Style::PLAIN),
                };
                let time = match g("time") {
                    "" => None,
                    t => Some(parse_time(t).map_err(|e| format!("managedFields[{i}].time: {e}"))?),
                };
                managed.push(ManagedEntry {
                    head: interner.head(EntryHead {
                        manager: g("manager").into(),
                        operation: g("operation").into(),
                        api_version: g("apiVersion").into(),
                        subresource: g("subresource").into(),
                    }),
                    fields: Fields::intern(&fields, interner),
                    time,
                });
            }
        }
        let labels = match meta.get("labels") {
            Some(l @ Value::Map(m)) if !m.is_empty() => {
                Some(interner.text(&json::to_string(l, json::Style::PLAIN)))
            }
            _ => None,
        };
        let entry = Entry {
            name: name.into(),
            namespace: interner.text(s("namespace")),
            resource_version: s("resourceVersion").into(),
            labels,
            managed: managed.into_boxed_slice(),
            full: None,
        };
        Ok(if keep_full {
            Entry {
                full: Some(Arc::new(obj)),
                ..entry
            }
        } else {
            entry
        })
    }

    /// The key in its table.
    pub fn key(&self) -> Box<str> {
        key(&self.namespace, &self.name)
    }

    /// The object as stored (full if kept, else its metadata with managedFields).
    pub fn to_value(&self, api_version: &str, kind: &str) -> Value {
        if let Some(f) = &self.full {
            return (**f).clone();
        }
        let mut meta = Map::new();
        meta.insert("name", Value::from(&*self.name));
        if !self.namespace.is_empty() {
            meta.insert("namespace", Value::from(&*self.namespace));
        }
        meta.insert("resourceVersion", Value::from(&*self.resource_version));
        if let Some(l) = &self.labels
            && let Ok(v) = json::parse_str(l)
        {
            meta.insert("labels", v);
        }
        let entries: Vec<Value> = self
            .managed
            .iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager", Value::from(&*e.head.manager));
                m.insert("operation", Value::from(&*e.head.operation));
                m.insert("apiVersion", Value::from(&*e.head.api_version));
                if let Some(t) = e.time {
                    m.insert(
                        "time",
                        Value::from(crate::managedfields::format_time(t).as_str()),
                    );
                }
                m.insert("fieldsType", Value::from("FieldsV1"));
                m.insert("fieldsV1", Value::from(&*e.fields.text()));
                if !e.head.subresource.is_empty() {
                    m.insert("subresource", Value::from(&*e.head.subresource));
                }
                Value::Map(m)
            })
            .collect();
        meta.insert("managedFields", Value::List(entries));
        let mut root = Map::new();
        root.insert("apiVersion", Value::from(api_version));
        root.insert("kind", Value::from(kind));
        root.insert("metadata", Value::Map(meta));
        Value::Map(root)
    }
}

pub fn key(namespace: &str, name: &str) -> Box<str> {
    if namespace.is_empty() {
        name.into()
    } else {
        format!("{namespace}/{name}").into()
    }
}

/// A table's content: objects and the manager index.
#[derive(Debug, Default)]
pub struct TableData {
    pub objects: HashMap<Arc<str>, Arc<Entry>>,
    /// Manager name → keys of the objects it has entries on (keys shared with `objects`).
    pub by_manager: HashMap<Box<str>, HashSet<Arc<str>>>,
    /// Objects the apiserver has but the cache could not read (key → why): a prediction for
    /// one says the live state is unavailable instead of predicting a creation.
    pub undecodable: HashMap<Box<str>, Box<str>>,
}

impl TableData {
    fn index(&mut self, k: &Arc<str>, e: &Entry, add: bool) {
        for m in e.managed.iter() {
            let name = &m.head.manager;
            if add {
                if let Some(set) = self.by_manager.get_mut(name) {
                    set.insert(k.clone());
                } else {
                    self.by_manager
                        .insert(name.clone(), std::iter::once(k.clone()).collect());
                }
            } else if let Some(set) = self.by_manager.get_mut(name) {
                set.remove(&**k);
                if set.is_empty() {
                    self.by_manager.remove(name);
                }
            }
        }
    }

    /// Adds or replaces an object; returns the entry it replaced.
    pub fn upsert(&mut self, e: Entry) -> Option<Arc<Entry>> {
        self.upsert_keyed(e).1
    }

    /// [`TableData::upsert`], also returning the object's key as the table holds it.
    pub fn upsert_keyed(&mut self, e: Entry) -> (Arc<str>, Option<Arc<Entry>>) {
        let e = Arc::new(e);
        let fresh = e.key();
        if !self.undecodable.is_empty() {
            self.undecodable.remove(&*fresh);
        }
        let (k, old) = match self.objects.remove_entry(&*fresh) {
            Some((old_k, old)) => {
                self.index(&old_k, &old, false);
                (old_k, Some(old))
            }
            None => (Arc::from(fresh), None),
        };
        self.index(&k, &e, true);
        self.objects.insert(k.clone(), e);
        (k, old)
    }

    /// Removes an object; returns its entry.
    pub fn remove(&mut self, namespace: &str, name: &str) -> Option<Arc<Entry>> {
        self.remove_key(&key(namespace, name))
    }

    /// Removes the object of this key; returns its entry.
    pub fn remove_key(&mut self, k: &str) -> Option<Arc<Entry>> {
        let old = self.objects.remove_entry(k).map(|(old_k, old)| {
            self.index(&old_k, &old, false);
            old
        });
        self.undecodable.remove(k);
        old
    }

    /// Records an object that exists but could not be read (its previous entry, now stale,
    /// goes).
    pub fn unreadable(&mut self, namespace: &str, name: &str, why: &str) {
        let k = key(namespace, name);
        if let Some((old_k, old)) = self.objects.remove_entry(&*k) {
            self.index(&old_k, &old, false);
        }
        self.undecodable.insert(k, why.into());
    }
}

/// One resource type's cache.
#[derive(Debug)]
pub struct Table {
    pub api_version: String,
    pub kind: String,
    pub group: String,
    pub full: bool,
    pub data: RwLock<TableData>,
    /// When the table last heard from the apiserver (a list, a watch event or a bookmark), in
    /// milliseconds since the epoch (the watch-lag metric).
    pub last_seen_ms: std::sync::atomic::AtomicU64,
    /// The first list completed.
    pub listed: std::sync::atomic::AtomicBool,
    /// Listed and watching: false from a failed list or watch (an error, a silent
    /// connection) until a list or a watch succeeds again.
    pub in_sync: std::sync::atomic::AtomicBool,
    /// Set by a test: the watch task panics at its next event (feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    pub poisoned: std::sync::atomic::AtomicBool,
}

impl Table {
    pub fn new(api_version: &str, kind: &str, full: bool) -> Table {
        Table {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            group: api_version
                .rsplit_once('/')
                .map_or("", |(g, _)| g)
                .to_string(),
            full,
            data: RwLock::new(TableData::default()),
            last_seen_ms: Default::default(),
            listed: Default::default(),
            in_sync: Default::default(),
            #[cfg(feature = "fault-injection")]
            poisoned: Default::default(),
        }
    }

    pub fn set_in_sync(&self, v: bool) {
        self.in_sync.store(v, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_in_sync(&self) -> bool {
        self.in_sync.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records that the apiserver was heard from now.
    pub fn touch(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.last_seen_ms
            .store(now, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, TableData> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, TableData> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn object_ref(&self, e: &Entry) -> ObjectRef {
        ObjectRef {
            group: self.group.clone(),
            kind: self.kind.clone(),
            namespace: e.namespace.to_string(),
            name: e.name.to_string(),
        }
    }
}

/// Every object of these tables (in one namespace, with the cluster-scoped ones), rebuilt as
/// values, in reference order.
pub fn list(tables: &[Arc<Table>], namespace: Option<&str>) -> Vec<(ObjectRef, Arc<Value>)> {
    let mut out = Vec::new();
    for t in tables {
        let data = t.read();
        for e in data.objects.values() {
            if namespace.is_some_and(|n| !e.namespace.is_empty() && *e.namespace != *n) {
                continue;
            }
            out.push((
                t.object_ref(e),
                Arc::new(e.to_value(&t.api_version, &t.kind)),
            ));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The objects of these tables a manager has entries on, rebuilt as values, in reference
/// order.
pub fn managed_by(tables: &[Arc<Table>], manager: &str) -> Vec<(ObjectRef, Arc<Value>)> {
    let mut out = Vec::new();
    for t in tables {
        let data = t.read();
        let Some(keys) = data.by_manager.get(manager) else {
            continue;
        };
        for k in keys {
            if let Some(e) = data.objects.get(k) {
                out.push((
                    t.object_ref(e),
                    Arc::new(e.to_value(&t.api_version, &t.kind)),
                ));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
