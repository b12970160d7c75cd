//! Untyped values (the `unstructured` JSON tree) with structured-merge-diff's equality and order.
//!
//! Numbers keep the distinction Kubernetes' JSON decoder makes: integers that fit `i64` are `Int`,
//! everything else is `Float`. Maps keep insertion order (for display); equality ignores it.

mod compare;
pub(crate) mod cursor;
mod direct;
pub mod gofmt;
pub mod json;
pub mod member;
pub mod skim;
pub mod yaml;

pub use compare::{compare, compare_bytes, equals};

use compact_str::CompactString;
use foldhash::HashMap;

/// Largest object document accepted (kube-apiserver's request limit is about 3 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 3 * 1024 * 1024;
/// Deepest nesting accepted in documents (the JSON and YAML parsers enforce it).
pub const MAX_DEPTH: usize = 128;

/// Owned, cheaply cloned string (short strings live inline).
pub type Str = CompactString;

/// A JSON-like value.
#[derive(Clone, Debug, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(Str),
    List(Vec<Value>),
    Map(Map),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::String(_)
        )
    }
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_map_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// `self[k1][k2]...` through maps.
    pub fn get_path(&self, keys: &[&str]) -> Option<&Value> {
        let mut cur = self;
        for k in keys {
            cur = cur.as_map()?.get(k)?;
        }
        Some(cur)
    }
    /// String at a map path, if it is a string.
    pub fn str_at(&self, keys: &[&str]) -> Option<&str> {
        self.get_path(keys).and_then(Value::as_str)
    }
    /// Short name of the JSON type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
        }
    }
    /// Exact structural equality, like Go's `reflect.DeepEqual` on unstructured objects:
    /// `2` and `2.0` differ, map order is irrelevant, list order matters.
    pub fn strict_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.strict_eq(y))
            }
            (Value::Map(a), Value::Map(b)) => a == b,
            _ => false,
        }
    }
    /// Nesting depth (a scalar is 1).
    pub fn depth(&self) -> usize {
        match self {
            Value::List(l) => 1 + l.iter().map(Value::depth).max().unwrap_or(0),
            Value::Map(m) => 1 + m.values().map(Value::depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

impl PartialEq for Value {
    /// Strict equality ([`Value::strict_eq`]); use [`equals`] for smd's numeric equality.
    fn eq(&self, other: &Value) -> bool {
        self.strict_eq(other)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(Str::from(s))
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Map(m)
    }
}

impl PartialEq for Map {
    /// Strict equality of the entries, ignoring their order (see [`Value::strict_eq`]).
    fn eq(&self, other: &Map) -> bool {
        if self.len() != other.len() {
            return false;
        }
        // Hashed when large: a scan per key made comparing maps of n keys cost n² key
        // comparisons.
        let keys = other.lookup();
        self.iter()
            .enumerate()
            .all(|(i, (k, v))| keys.get_at(k, i).is_some_and(|w| v.strict_eq(w)))
    }
}

/// Maps with this many entries or more get a hash index for lookups during zips.
const INDEX_THRESHOLD: usize = 24;

/// An insertion-ordered string-keyed map. Small maps (the common case) use linear search.
#[derive(Clone, Debug, Default)]
pub struct Map {
    entries: Vec<(Str, Value)>,
}

impl Map {
    pub fn new() -> Self {
        Map::default()
    }
    pub fn with_capacity(n: usize) -> Self {
        Map {
            entries: Vec::with_capacity(n),
        }
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    /// Sets `key` (keeping its position if present). Returns the previous value.
    pub fn insert(&mut self, key: impl Into<Str>, value: Value) -> Option<Value> {
        let key = key.into();
        if let Some(slot) = self.get_mut(&key) {
            return Some(std::mem::replace(slot, value));
        }
        self.entries.push((key, value));
        None
    }
    /// A map of `entries`, whose keys the caller has found distinct.
    pub(crate) fn from_unique(entries: Vec<(Str, Value)>) -> Map {
        Map { entries }
    }
    /// Appends without checking for an existing key (caller guarantees uniqueness).
    pub fn push_unique(&mut self, key: Str, value: Value) {
        self.entries.push((key, value));
    }
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(pos).1)
    }
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Str, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
    pub fn keys(&self) -> impl Iterator<Item = &Str> {
        self.entries.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(_, v)| v)
    }
    pub fn into_entries(self) -> Vec<(Str, Value)> {
        self.entries
    }
    /// The entries, in their order.
    pub fn entries(&self) -> &[(Str, Value)] {
        &self.entries
    }
    pub fn entries_mut(&mut self) -> &mut Vec<(Str, Value)> {
        &mut self.entries
    }
    /// A lookup helper that indexes large maps once.
    pub fn lookup(&self) -> MapLookup<'_> {
        if self.entries.len() >= INDEX_THRESHOLD {
            let idx = self
                .entries
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.as_str(), i))
                .collect();
            MapLookup {
                map: self,
                index: Some(idx),
            }
        } else {
            MapLookup {
                map: self,
                index: None,
            }
        }
    }
    /// Entries sorted by key (Go's JSON encoder order).
    pub fn sorted_entries(&self) -> Vec<(&Str, &Value)> {
        if self.is_sorted_by_key() {
            self.iter().collect()
        } else {
            self.sorted_copy()
        }
    }

    /// The entries, sorted by key into a new vector (for a map known to be out of order).
    fn sorted_copy(&self) -> Vec<(&Str, &Value)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        v
    }

    /// True if the entries are in key order already (keys are distinct).
    pub fn is_sorted_by_key(&self) -> bool {
        self.entries
            .is_sorted_by(|a, b| a.0.as_bytes() <= b.0.as_bytes())
    }
}

impl FromIterator<(Str, Value)> for Map {
    fn from_iter<T: IntoIterator<Item = (Str, Value)>>(iter: T) -> Self {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

/// The keys of a map being read, to find a key read again: a cheap signature of each (its
/// length and last byte) first — a key whose signature is new cannot repeat an earlier one, so
/// only the rest are looked for — and past [`Seen::SCAN`] keys a hash index, so that reading a
/// map stays linear in its keys.
#[derive(Default)]
pub(crate) struct Seen {
    signatures: u64,
    index: Option<HashMap<Str, usize>>,
}

impl Seen {
    /// Keys looked for by a scan, before the index.
    const SCAN: usize = 32;

    fn signature(key: &str) -> u64 {
        let b = key.as_bytes();
        1u64 << ((b.len() as u64 & 7) << 3 | (b.last().copied().unwrap_or(0) as u64 & 7))
    }

    /// Where `key` is in `m` (whose keys are those noted so far).
    pub fn find(&self, m: &Map, key: &str) -> Option<usize> {
        self.find_in(&m.entries, key)
    }

    /// Notes the key `m` ends with, just pushed.
    pub fn pushed(&mut self, m: &Map) {
        self.pushed_in(&m.entries)
    }

    /// Where `key` is in `entries` (whose keys are those noted so far).
    pub fn find_in(&self, entries: &[(Str, Value)], key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None if self.signatures & Self::signature(key) == 0 => None,
            None => entries.iter().position(|(k, _)| k == key),
        }
    }

    /// Notes the key `entries` end with, just pushed.
    pub fn pushed_in(&mut self, entries: &[(Str, Value)]) {
        let Some((key, _)) = entries.last() else {
            return;
        };
        match &mut self.index {
            Some(index) => {
                index.insert(key.clone(), entries.len() - 1);
            }
            None => {
                self.signatures |= Self::signature(key);
                if entries.len() >= Self::SCAN {
                    let keys = entries.iter().enumerate();
                    self.index = Some(keys.map(|(i, (k, _))| (k.clone(), i)).collect());
                }
            }
        }
    }
}

/// Key lookup over a map, hashed when the map is large.
pub struct MapLookup<'a> {
    map: &'a Map,
    index: Option<HashMap<&'a str, usize>>,
}

impl<'a> MapLookup<'a> {
    /// Like [`MapLookup::get`], trying position `hint` first (maps being compared or merged
    /// usually list their keys in the same order).
    pub fn get_at(&self, key: &str, hint: usize) -> Option<&'a Value> {
        if let Some((k, v)) = self.map.entries.get(hint) {
            if k == key {
                return Some(v);
            }
        }
        self.get(key)
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        match &self.index {
            Some(idx) => idx.get(key).map(|&i| &self.map.entries[i].1),
            None => self.map.get(key),
        }
    }
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// Builds a map from `(key, value)` pairs; handy in tests.
#[macro_export]
macro_rules! vmap {
    ($($k:expr => $v:expr),* $(,)?) => {{
        let mut m = $crate::value::Map::new();
        $( m.insert($k, $crate::value::Value::from($v)); )*
        $crate::value::Value::Map(m)
    }};
}

/// The items of `stack` from `start` on, moved out in one copy into a vector of their exact
/// size (readers keep the items of the node being read on a stack shared by the document).
pub(crate) fn tail<T>(stack: &mut Vec<T>, start: usize) -> Vec<T> {
    if start == 0 {
        // `split_off(0)` would hand over the stack itself, spare capacity included, and give
        // the stack a new buffer as large.
        let mut out = Vec::with_capacity(stack.len());
        out.append(stack);
        return out;
    }
    stack.split_off(start)
}
