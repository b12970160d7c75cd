//! A snapshot's objects as read: each kept where it was put (no copy, no sort when loading),
//! found by reference through a hash table of positions, and put in reference order only for
//! those who list them.

use super::super::ObjectRef;
use crate::manifest::{JsonText, ManifestError, Origin};
use crate::value::Value;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

/// An object of a snapshot: parsed when read (YAML, CustomResourceDefinitions), or kept as its
/// JSON text and parsed when first read.
#[derive(Clone, Debug)]
pub struct Entry {
    pub origin: Origin,
    /// The text, for an object kept as text.
    text: Option<JsonText>,
    /// The object, once parsed (shared by every reader after the first).
    value: OnceLock<Arc<Value>>,
}

impl Entry {
    /// An object parsed as it was read.
    pub fn parsed(origin: Origin, v: Value) -> Entry {
        Entry {
            origin,
            text: None,
            value: OnceLock::from(Arc::new(v)),
        }
    }

    /// An object kept as its text (a skim found that a strict parse accepts it).
    pub fn text(origin: Origin, text: JsonText) -> Entry {
        Entry {
            origin,
            text: Some(text),
            value: OnceLock::new(),
        }
    }

    /// The object, parsed on first read and kept (two readers at once may both parse; the
    /// first stored is kept). An error, located, only if the text has changed under a check
    /// that accepted it.
    pub fn shared(&self) -> Result<Arc<Value>, ManifestError> {
        if let Some(v) = self.value.get() {
            return Ok(v.clone());
        }
        let v = self.parse()?;
        Ok(self.value.get_or_init(|| Arc::new(v)).clone())
    }

    /// The object, a copy of its own (a text is parsed again for it, not kept).
    pub fn value(&self) -> Result<Value, ManifestError> {
        match self.value.get() {
            Some(v) => Ok((**v).clone()),
            None => self.parse(),
        }
    }

    /// The object, if parsed already (those parsed as read are).
    pub fn parsed_value(&self) -> Option<&Value> {
        self.value.get().map(|v| &**v)
    }

    /// Whether the object was kept as text.
    pub fn kept_as_text(&self) -> bool {
        self.text.is_some()
    }

    /// Whether the object's text is read from its file when wanted.
    pub fn left_on_disk(&self) -> bool {
        self.text.as_ref().is_some_and(JsonText::on_disk)
    }

    fn parse(&self) -> Result<Value, ManifestError> {
        let text = self.text.as_ref().ok_or_else(|| {
            self.origin
                .error("the snapshot kept neither the object nor its text".into())
        })?;
        text.parse().map_err(|e| self.origin.error(e))
    }
}

/// The objects of a snapshot in the order read, each reference once.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    list: Vec<(ObjectRef, Entry)>,
    index: RefIndex,
    /// Positions in reference order, made on first need.
    order: OnceLock<Vec<usize>>,
    /// Documents that could not be read (nested deeper than the parsers go): any object not
    /// found may be one of them.
    unreadable: Vec<ManifestError>,
}

impl Objects {
    /// The objects, in the order read; an object whose reference came before is left out and
    /// reported at its place, naming the first, in the order read.
    pub(super) fn new(read: Vec<(ObjectRef, Entry)>, errors: &mut Vec<ManifestError>) -> Objects {
        let mut index = RefIndex::default();
        // An empty table: nothing to hash again while it grows.
        index.table.reserve(read.len(), |_| 0);
        // Each object stays where it was read; the few repeated ones, if any, are taken out
        // after.
        let mut repeated = Vec::new();
        for (i, (r, entry)) in read.iter().enumerate() {
            match index.find(&read, r) {
                Some(first) => {
                    let message = format!(
                        "{r} appears twice in the snapshot (first at {})",
                        read[first].1.origin
                    );
                    errors.push(entry.origin.error(message));
                    repeated.push(i);
                }
                None => index.insert(&read, i),
            }
        }
        let mut list = read;
        if !repeated.is_empty() {
            // Only a snapshot that is refused has repeats: copying it once more costs nothing.
            list = list
                .into_iter()
                .enumerate()
                .filter(|(i, _)| repeated.binary_search(i).is_err())
                .map(|(_, o)| o)
                .collect();
            index = RefIndex::default();
            for i in 0..list.len() {
                index.insert(&list, i);
            }
        }
        Objects {
            list,
            index,
            order: OnceLock::new(),
            unreadable: Vec::new(),
        }
    }

    /// Records documents of the snapshot that could not be read.
    pub(super) fn set_unreadable(&mut self, unreadable: Vec<ManifestError>) {
        self.unreadable = unreadable;
    }

    /// Documents of the snapshot that could not be read.
    pub fn unreadable(&self) -> &[ManifestError] {
        &self.unreadable
    }

    /// Why an object not found might still be in the snapshot (`None`: every document was
    /// read, so it is not).
    pub fn absence_unknown(&self) -> Option<String> {
        let first = self.unreadable.first()?;
        Some(format!(
            "not found, but the snapshot has {} document(s) fieldguard could not read, which may hold it ({first}{})",
            self.unreadable.len(),
            if self.unreadable.len() > 1 {
                ", ..."
            } else {
                ""
            }
        ))
    }

    /// The object `r`.
    pub fn get(&self, r: &ObjectRef) -> Option<&Entry> {
        self.position(r).map(|i| &self.list[i].1)
    }

    /// Where the object `r` is, for [`Objects::at`].
    pub fn position(&self, r: &ObjectRef) -> Option<usize> {
        self.index.find(&self.list, r)
    }

    /// The object at a position [`Objects::position`] gave.
    pub fn at(&self, i: usize) -> &Entry {
        &self.list[i].1
    }

    /// Every object, in reference order.
    pub fn in_order(&self) -> impl Iterator<Item = (&ObjectRef, &Entry)> {
        let order = self.order.get_or_init(|| {
            let mut order: Vec<usize> = (0..self.list.len()).collect();
            order.sort_unstable_by(|&a, &b| self.list[a].0.cmp(&self.list[b].0));
            order
        });
        order.iter().map(|&i| {
            let (r, e) = &self.list[i];
            (r, e)
        })
    }

    /// Every object, in the order read.
    pub fn as_read(&self) -> impl Iterator<Item = (&ObjectRef, &Entry)> {
        self.list.iter().map(|(r, e)| (r, e))
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Positions in a list of objects, by reference: a hash table of positions, so no reference is
/// copied and none sorted to find one (seeded per process: names are input).
#[derive(Clone, Default)]
struct RefIndex {
    table: hashbrown::HashTable<usize>,
    hasher: foldhash::fast::RandomState,
}

impl RefIndex {
    fn find(&self, list: &[(ObjectRef, Entry)], r: &ObjectRef) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(r), |&i| list[i].0 == *r)
            .copied()
    }

    /// Adds the object at `at` in `list`, whose reference is not there yet.
    fn insert(&mut self, list: &[(ObjectRef, Entry)], at: usize) {
        let hasher = &self.hasher;
        self.table
            .insert_unique(hasher.hash_one(&list[at].0), at, |&i| {
                hasher.hash_one(&list[i].0)
            });
    }
}

impl std::fmt::Debug for RefIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RefIndex({} objects)", self.table.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn origin(line: u32) -> Origin {
        Origin {
            file: Arc::from("f.yaml"),
            doc: 1,
            item: None,
            line,
        }
    }

    /// Objects with repeated references, some three times, in a scrambled order: each found
    /// where it was first read, listed in reference order, and every later copy reported at
    /// its own place, naming the first, in the order read.
    #[test]
    fn finds_lists_and_reports_repeats_as_a_sort_would() {
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let read: Vec<(ObjectRef, Entry)> = (0..2_000u32)
            .map(|line| {
                let r = ObjectRef::new(
                    ["v1", "apps/v1", "example.com/v1"][next(3) as usize],
                    ["ConfigMap", "Deployment"][next(2) as usize],
                    &format!("ns{}", next(5)),
                    &format!("o{}", next(150)),
                );
                (r, Entry::parsed(origin(line + 1), Value::Null))
            })
            .collect();
        // The reference: the first line each reference was read at.
        let mut first: BTreeMap<ObjectRef, u32> = BTreeMap::new();
        let mut expected_errors = Vec::new();
        for (r, e) in &read {
            match first.get(r) {
                Some(line) => expected_errors.push((e.origin.line, *line)),
                None => {
                    first.insert(r.clone(), e.origin.line);
                }
            }
        }
        assert!(expected_errors.len() > 100, "the case has repeats");

        let mut errors = Vec::new();
        let objects = Objects::new(read.clone(), &mut errors);
        // "… (first at f.yaml:LINE: document 1)", located at the repeat's own line.
        let got: Vec<(u32, u32)> = errors
            .iter()
            .map(|e| {
                let (_, at) = e.message.split_once("(first at f.yaml:").unwrap();
                let (line, _) = at.split_once(':').unwrap();
                (e.line.unwrap(), line.parse().unwrap())
            })
            .collect();
        assert_eq!(got, expected_errors);
        assert_eq!(objects.len(), first.len());
        let listed: Vec<(&ObjectRef, u32)> = objects
            .in_order()
            .map(|(r, e)| (r, e.origin.line))
            .collect();
        let want: Vec<(&ObjectRef, u32)> = first.iter().map(|(r, l)| (r, *l)).collect();
        assert_eq!(listed, want);
        for (r, line) in &first {
            assert_eq!(objects.get(r).map(|e| e.origin.line), Some(*line));
        }
        let absent = ObjectRef::new("v1", "ConfigMap", "ns9", "o1");
        assert!(objects.get(&absent).is_none());
        // Without repeats nothing moves: the objects are where they were read.
        let unique: Vec<(ObjectRef, Entry)> = objects
            .as_read()
            .map(|(r, e)| (r.clone(), e.clone()))
            .collect();
        let mut none = Vec::new();
        let again = Objects::new(unique.clone(), &mut none);
        assert!(none.is_empty());
        let order: Vec<u32> = again.as_read().map(|(_, e)| e.origin.line).collect();
        assert_eq!(
            order,
            unique
                .iter()
                .map(|(_, e)| e.origin.line)
                .collect::<Vec<_>>()
        );
    }

    /// A text is parsed on first read, once, and shared after; a copy is a value of its own.
    #[test]
    fn a_text_is_parsed_once_and_shared() {
        let text = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#;
        let json = crate::manifest::JsonText::for_tests(text);
        let e = Entry::text(origin(3), json);
        assert!(e.kept_as_text() && e.parsed_value().is_none());
        let copy = e.value().unwrap();
        assert!(e.parsed_value().is_none(), "a copy is not kept");
        let a = e.shared().unwrap();
        let b = e.shared().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, copy);
        assert_eq!(e.parsed_value(), Some(&copy));
    }
}
