//! FieldsV1 texts already decoded and sets already encoded, for a caller that reads back the
//! managed fields it just wrote: a replay session's steps each start from the previous step's
//! entries, in which most managers' sets did not change. A text decodes to the set it decoded
//! to before, and a set that came from a text (or was written as one) encodes to that text, so
//! results are those of decoding and encoding every time. Bounded: past
//! [`MAX_CACHED_SETS`] sets it starts again empty.

use crate::fieldpath::{FieldsV1Error, Set};
use crate::schema::{Schema, TypeRef};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

type Hasher = foldhash::fast::RandomState;

/// A type name the set needs no reconciling with, and the set (kept alive).
type Reconciled = (Box<str>, Arc<Set>);

/// Sets a cache keeps before it starts again.
pub const MAX_CACHED_SETS: usize = 512;

/// See the module documentation. Not shared between threads: one per session. Sets are known
/// as reconciled per schema *address*: every schema it is used with must outlive the cache.
#[derive(Default)]
pub struct FieldsCache {
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Text -> the set it decodes to.
    sets: HashMap<Arc<str>, Arc<Set>, Hasher>,
    /// A kept set's address -> its text. The set is kept alive by `sets`, so its address is
    /// not reused while it is here.
    texts: HashMap<usize, Arc<str>, Hasher>,
    /// (set address, schema address) -> a type of that schema the set needs no reconciling
    /// with, and the set, kept alive.
    reconciled: HashMap<(usize, usize), Reconciled, Hasher>,
}

impl Inner {
    /// Remembers that `text` decodes to `set`, and if `canonical` (the text was written from
    /// the set), that the set encodes to it. A decoded text need not be the set's encoding (its
    /// keys may come in another order).
    fn remember(&mut self, text: Arc<str>, set: &Arc<Set>, canonical: bool) {
        if self.sets.len() >= MAX_CACHED_SETS {
            self.sets.clear();
            self.texts.clear();
        }
        if let Some(old) = self.sets.insert(text.clone(), set.clone()) {
            self.texts.remove(&address(&old));
        }
        if canonical {
            self.texts.insert(address(set), text);
        }
    }
}

/// The name of a reference that is only a name (no element-relationship override).
fn plain_name(tr: &TypeRef) -> Option<&str> {
    tr.element_relationship
        .is_none()
        .then(|| tr.name())
        .flatten()
}

fn address(set: &Arc<Set>) -> usize {
    Arc::as_ptr(set) as usize
}

impl std::fmt::Debug for FieldsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.inner.try_borrow().map(|i| i.sets.len()).unwrap_or(0);
        write!(f, "FieldsCache({n} sets)")
    }
}

impl FieldsCache {
    pub fn new() -> Self {
        FieldsCache::default()
    }

    /// `Set::from_fields_v1` of `text`, shared with earlier calls for the same text.
    pub fn decode(&self, text: &str) -> Result<Arc<Set>, FieldsV1Error> {
        if let Some(set) = self.inner.borrow().sets.get(text) {
            return Ok(set.clone());
        }
        let set = Arc::new(Set::from_fields_v1(text.as_bytes())?);
        self.inner.borrow_mut().remember(text.into(), &set, false);
        Ok(set)
    }

    /// `set.to_fields_v1()`, remembered so that decoding the text gives this set back.
    pub fn encode(&self, set: &Arc<Set>) -> String {
        if let Some(text) = self.inner.borrow().texts.get(&address(set)) {
            return text.to_string();
        }
        let text = set.to_fields_v1();
        self.inner
            .borrow_mut()
            .remember(text.as_str().into(), set, true);
        text
    }

    /// True when `set` is known to need no reconciling with the named type `tr` of `schema`
    /// (see [`FieldsCache::reconciled`]).
    pub fn is_reconciled(&self, set: &Arc<Set>, schema: &Schema, tr: &TypeRef) -> bool {
        let Some(name) = plain_name(tr) else {
            return false;
        };
        let key = (address(set), schema as *const Schema as usize);
        self.inner
            .borrow()
            .reconciled
            .get(&key)
            .is_some_and(|(n, _)| **n == *name)
    }

    /// Remembers that reconciling `set` with the named type `tr` of `schema` changed nothing.
    pub fn reconciled(&self, set: &Arc<Set>, schema: &Schema, tr: &TypeRef) {
        let Some(name) = plain_name(tr) else {
            return;
        };
        let key = (address(set), schema as *const Schema as usize);
        let mut inner = self.inner.borrow_mut();
        if inner.reconciled.len() >= MAX_CACHED_SETS {
            inner.reconciled.clear();
        }
        inner.reconciled.insert(key, (name.into(), set.clone()));
    }

    /// Sets kept now (for the tests of the bound).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.borrow().sets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_decodes_and_a_set_encodes_as_without_the_cache() {
        let c = FieldsCache::new();
        let text = r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{}}}"#;
        let a = c.decode(text).unwrap();
        assert_eq!(a.to_fields_v1(), text);
        // The same text gives the same set, shared.
        assert!(Arc::ptr_eq(&a, &c.decode(text).unwrap()));
        assert_eq!(c.encode(&a), a.to_fields_v1());
        // A set written once decodes back to itself.
        let b = Arc::new(Set::from_fields_v1(br#"{"f:data":{"f:x":{}}}"#).unwrap());
        let b_text = c.encode(&b);
        assert_eq!(b_text, b.to_fields_v1());
        assert!(Arc::ptr_eq(&b, &c.decode(&b_text).unwrap()));
        // A text in another order decodes to the same set, which still encodes canonically.
        let reordered = r#"{"f:spec":{"f:replicas":{}},"f:metadata":{"f:labels":{"f:app":{}}}}"#;
        let r = c.decode(reordered).unwrap();
        assert_eq!(c.encode(&r), text);
        assert_eq!(c.encode(&r), text);
        // Errors are not remembered, and are the decoder's.
        let bad = r#"{"f:a":"#;
        assert_eq!(
            c.decode(bad).unwrap_err().to_string(),
            Set::from_fields_v1(bad.as_bytes()).unwrap_err().to_string()
        );
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn reconciled_sets_are_known_per_set_schema_and_type() {
        let c = FieldsCache::new();
        let (s1, s2) = (Schema::deduced(), Schema::deduced());
        let set = c.decode(r#"{"f:a":{}}"#).unwrap();
        let other = Arc::new(Set::from_fields_v1(br#"{"f:a":{}}"#).unwrap());
        let (t, u) = (TypeRef::named("t"), TypeRef::named("u"));
        assert!(!c.is_reconciled(&set, &s1, &t));
        c.reconciled(&set, &s1, &t);
        assert!(c.is_reconciled(&set, &s1, &t));
        // Another set (even an equal one), schema or type is not known.
        assert!(!c.is_reconciled(&other, &s1, &t));
        assert!(!c.is_reconciled(&set, &s2, &t));
        assert!(!c.is_reconciled(&set, &s1, &u));
        // A reference with an element-relationship override is never known.
        let mut atomic = TypeRef::named("t");
        atomic.element_relationship = Some(crate::schema::ElementRelationship::Atomic);
        c.reconciled(&set, &s1, &atomic);
        assert!(!c.is_reconciled(&set, &s1, &atomic));
    }

    #[test]
    fn it_starts_again_when_full() {
        let c = FieldsCache::new();
        let mut first = None;
        for i in 0..MAX_CACHED_SETS + 3 {
            let text = format!(r#"{{"f:n{i}":{{}}}}"#);
            let s = c.decode(&text).unwrap();
            first.get_or_insert(s);
            assert!(c.len() <= MAX_CACHED_SETS);
        }
        assert_eq!(c.len(), 3);
        // The first text was forgotten: it decodes to a new set.
        let first = first.unwrap();
        assert!(!Arc::ptr_eq(&first, &c.decode(r#"{"f:n0":{}}"#).unwrap()));
    }
}
