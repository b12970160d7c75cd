//! Reading a JSON document as strictly as [`super::json::parse_strict`] does, without building
//! it: the grammar, strings, numbers and repeated keys are checked at every depth, and only the
//! strings that name an object are kept. A snapshot's objects are read this way, and built only
//! when a prediction needs them.
//!
//! A skim may refuse what a parse accepts, never the reverse: a refusal sends the caller to
//! the parse, which then says exactly what is wrong, if anything. It refuses, besides what is
//! wrong, what it does not take the trouble to read exactly: nesting deeper than [`DEPTH`],
//! numbers with an exponent or of more than [`MAX_DIGITS`] digits, `\u` escapes of surrogates,
//! and two keys of one map, each of eight bytes or more, with the same 64-bit hash.

use super::cursor::{Cursor, unescape};
use std::collections::HashSet;
use std::hash::BuildHasher;

pub use super::cursor::DEPTH;

pub use super::cursor::MAX_DIGITS;

/// Maps with more keys than this find repeated keys with a hash set rather than a scan.
const SCAN_KEYS: usize = 32;

/// What a skim found at one of the paths it keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Found {
    #[default]
    Missing,
    Str(String),
    /// Something other than a string (null, a number, a map, ...).
    Other,
}

impl Found {
    /// The string, when there is one and it is not empty.
    pub fn non_empty(&self) -> Option<&str> {
        match self {
            Found::Str(s) if !s.is_empty() => Some(s),
            _ => None,
        }
    }
    /// The string, when there is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Found::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// What a skim of one document found.
#[derive(Debug, Default)]
pub struct Skim<'a> {
    /// The document is an object (nothing below is filled otherwise).
    pub object: bool,
    pub api_version: Found,
    pub kind: Found,
    pub name: Found,
    pub namespace: Found,
    /// It has an `openapi` or `swagger` key (it may be a schema document).
    pub schema_keys: bool,
    /// Its `items` ([`top`] only), when present.
    pub items: Option<Items<'a>>,
}

/// A document's `items`.
#[derive(Debug)]
pub enum Items<'a> {
    /// An array: each element's text and skim.
    List(Vec<(&'a str, Skim<'a>)>),
    /// Anything else.
    Other { null: bool },
}

/// Skims a document, and the elements of its `items`; `None` if it is refused.
pub fn top(text: &str) -> Option<Skim<'_>> {
    let mut scan = Scan {
        text,
        c: Cursor::new(text),
        keys: Vec::new(),
        unescaped: Vec::new(),
    };
    let skim = scan.document(0, true)?;
    scan.at_end().then_some(skim)
}

/// The keys a skim looks for.
#[derive(Clone, Copy, PartialEq)]
enum Known {
    ApiVersion,
    Kind,
    Metadata,
    Name,
    Namespace,
    Items,
    Schema,
    Other,
}

impl Known {
    fn of(key: &[u8]) -> Known {
        match key {
            b"apiVersion" => Known::ApiVersion,
            b"kind" => Known::Kind,
            b"metadata" => Known::Metadata,
            b"name" => Known::Name,
            b"namespace" => Known::Namespace,
            b"items" => Known::Items,
            b"openapi" | b"swagger" => Known::Schema,
            _ => Known::Other,
        }
    }
}

/// A skim: a [`Cursor`] that also remembers the keys of the maps it is in.
struct Scan<'a> {
    text: &'a str,
    c: Cursor<'a>,
    /// The keys of the maps being read, as hashes: one run per open map, innermost last.
    keys: Vec<u64>,
    /// An escaped key, unescaped (FieldsV1 keys hold JSON: `k:{\"name\":\"app\"}`).
    unescaped: Vec<u8>,
}

impl<'a> std::ops::Deref for Scan<'a> {
    type Target = Cursor<'a>;
    fn deref(&self) -> &Cursor<'a> {
        &self.c
    }
}

impl std::ops::DerefMut for Scan<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.c
    }
}

impl<'a> Scan<'a> {
    /// Any value, checked.
    fn value(&mut self, depth: usize) -> Option<()> {
        self.space();
        match self.peek()? {
            // `{}`, the leaf of every FieldsV1 set, read at once.
            b'{' if depth < DEPTH && self.c.b.get(self.at + 1) == Some(&b'}') => {
                self.at += 2;
                Some(())
            }
            b'{' => self.map::<false>(depth, |s, _, depth| s.value(depth)),
            b'[' => self.array(depth, |s, depth| s.value(depth)),
            b'"' => self.string().map(drop),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// A string's value, kept; anything else checked.
    fn found(&mut self, depth: usize) -> Option<Found> {
        self.space();
        if self.peek()? != b'"' {
            return self.value(depth).map(|()| Found::Other);
        }
        let t = self.string()?;
        let raw = &self.text[t.start - 1..t.end + 1];
        Some(Found::Str(if t.escaped {
            serde_json::from_str(raw).ok()?
        } else {
            raw[1..raw.len() - 1].to_string()
        }))
    }

    /// An array (at `[`), each element read by `element`.
    fn array(
        &mut self,
        depth: usize,
        mut element: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        if self.open(depth, b']')? {
            return Some(());
        }
        loop {
            element(self, depth + 1)?;
            if !self.next(b']')? {
                return Some(());
            }
        }
    }

    /// A map (at `{`), each value read by `entry` (given its key); a repeated key is refused.
    fn map<const KNOWN: bool>(
        &mut self,
        depth: usize,
        mut entry: impl FnMut(&mut Self, Known, usize) -> Option<()>,
    ) -> Option<()> {
        if self.open(depth, b'}')? {
            return Some(());
        }
        let start = self.keys.len();
        let mut large: Option<HashSet<u64, foldhash::fast::FixedState>> = None;
        let result = (|| loop {
            self.space();
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            let key = if key.escaped {
                unescape(&self.c.b[key.start..key.end], &mut self.unescaped);
                &self.unescaped[..]
            } else {
                &self.c.b[key.start..key.end]
            };
            let (hash, known) = (
                fingerprint(key),
                if KNOWN { Known::of(key) } else { Known::Other },
            );
            let repeated = match &mut large {
                Some(set) => !set.insert(hash),
                None => {
                    let repeated = self.keys[start..].contains(&hash);
                    self.keys.push(hash);
                    if self.keys.len() - start > SCAN_KEYS {
                        large = Some(self.keys.drain(start..).collect());
                    }
                    repeated
                }
            };
            if repeated {
                return None;
            }
            self.eat(b':')?;
            entry(self, known, depth + 1)?;
            if !self.next(b'}')? {
                return Some(());
            }
        })();
        self.keys.truncate(start);
        result
    }

    /// A document or an element of its `items`: an object's identity kept (and, at the top,
    /// its items), anything else checked.
    fn document(&mut self, depth: usize, top: bool) -> Option<Skim<'a>> {
        self.space();
        if self.peek()? != b'{' {
            return self.value(depth).map(|()| Skim::default());
        }
        let mut skim = Skim {
            object: true,
            ..Skim::default()
        };
        self.map::<true>(depth, |s, known, depth| {
            match known {
                Known::ApiVersion => skim.api_version = s.found(depth)?,
                Known::Kind => skim.kind = s.found(depth)?,
                Known::Metadata => (skim.name, skim.namespace) = s.metadata(depth)?,
                Known::Items if top => skim.items = Some(s.items(depth)?),
                Known::Schema => {
                    skim.schema_keys = true;
                    s.value(depth)?
                }
                _ => s.value(depth)?,
            }
            Some(())
        })?;
        Some(skim)
    }

    /// `metadata`: its name and namespace kept (none if it is not a map), the rest checked.
    fn metadata(&mut self, depth: usize) -> Option<(Found, Found)> {
        self.space();
        if self.peek()? != b'{' {
            return self.value(depth).map(|()| Default::default());
        }
        let (mut name, mut namespace) = (Found::Missing, Found::Missing);
        self.map::<true>(depth, |s, known, depth| {
            match known {
                Known::Name => name = s.found(depth)?,
                Known::Namespace => namespace = s.found(depth)?,
                _ => s.value(depth)?,
            }
            Some(())
        })?;
        Some((name, namespace))
    }

    /// `items`: an array's elements kept, with their text, each skimmed; anything else checked.
    fn items(&mut self, depth: usize) -> Option<Items<'a>> {
        self.space();
        match self.peek()? {
            b'[' => {
                let mut out = Vec::new();
                self.array(depth, |s, depth| {
                    s.space();
                    let start = s.at;
                    let skim = s.document(depth, false)?;
                    out.push((&s.text[start..s.at], skim));
                    Some(())
                })?;
                Some(Items::List(out))
            }
            b'n' => self.word(b"null").map(|()| Items::Other { null: true }),
            _ => self.value(depth).map(|()| Items::Other { null: false }),
        }
    }
}

/// A key's 64 bits for finding repeated keys: a key of at most seven bytes is itself (with its
/// length), so two such keys are equal exactly when their fingerprints are; a longer key is its
/// hash with the top bit set, so it never equals a short key's.
fn fingerprint(key: &[u8]) -> u64 {
    if key.len() < 8 {
        let mut w = [0u8; 8];
        w[..key.len()].copy_from_slice(key);
        w[7] = key.len() as u8;
        u64::from_le_bytes(w)
    } else {
        foldhash::fast::FixedState::with_seed(0x5eed).hash_one(key) | 1 << 63
    }
}

/// A pseudo-random sequence for tests (xorshift).
#[cfg(test)]
pub(crate) struct Rng(pub u64);

#[cfg(test)]
impl Rng {
    /// The next 64 bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A mutant of `text`, for the tests that hold a reader to serde_json: one to three edits,
/// each inserting one of `pieces`, cutting up to eight bytes or repeating a key of a map;
/// `below(n)` draws a number below `n`.
#[cfg(test)]
pub(crate) fn mutant(text: &str, pieces: &[&str], below: &mut dyn FnMut(usize) -> usize) -> String {
    let mut t = text.to_string();
    for _ in 0..1 + below(3) {
        let mut at = below(t.len());
        while !t.is_char_boundary(at) {
            at -= 1;
        }
        match below(3) {
            0 => t.insert_str(at, pieces[below(pieces.len())]),
            1 => {
                let mut end = (at + 1 + below(8)).min(t.len());
                while !t.is_char_boundary(end) {
                    end += 1;
                }
                t.replace_range(at..end, "");
            }
            _ => {
                // Repeat a key of the map at `at`, if there is one.
                if let Some(q) = t[at..].find("\":") {
                    let start = t[..at + q].rfind('"').unwrap_or(0);
                    let key = t[start..at + q + 2].to_string();
                    if let Some(comma) = t[at + q..].find(',') {
                        t.insert_str(at + q + comma + 1, &format!("{key}0,"));
                    }
                }
            }
        }
    }
    t
}

/// The bundled cluster snapshot as `kubectl get -o json` prints it (for tests).
#[cfg(test)]
pub(crate) fn example() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/cluster/shop.yaml")).unwrap();
    let v = crate::value::yaml::parse_one(&text).unwrap();
    super::json::to_string(&v, super::json::Style::PLAIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    #[test]
    fn short_keys_are_told_apart_exactly() {
        // Repeated short keys are refused; keys that differ only by a trailing NUL (escaped)
        // or by length are not the same key.
        assert!(top(r#"{"a":1,"b":2,"a":3}"#).is_none());
        assert!(top(r#"{"f:name":{},"f:name":{}}"#).is_none());
        assert!(top(r#"{"a":1,"a\u0000":2,"":3,"\u0000":4}"#).is_some());
        assert!(top(r#"{"abcdefg":1,"abcdefgh":2,"abcdefgh":3}"#).is_none());
        assert!(top(r#"{"x":{},"y":{ },"z":{"":{}}}"#).is_some());
    }

    /// What a skim of a whole document says: accepted, and the identity of it or its items.
    fn skim_all(text: &str) -> Option<Vec<[Found; 4]>> {
        let top = top(text)?;
        let id = |s: &Skim| {
            [
                s.api_version.clone(),
                s.kind.clone(),
                s.name.clone(),
                s.namespace.clone(),
            ]
        };
        let mut out = vec![id(&top)];
        if let Some(Items::List(els)) = &top.items {
            out.extend(els.iter().map(|(_, s)| id(s)));
        }
        Some(out)
    }

    /// The same identities, read from the parsed value.
    fn parsed_identity(v: &crate::value::Value) -> Vec<[Found; 4]> {
        let found = |keys: &[&str]| match v_at(v, keys) {
            None => Found::Missing,
            Some(crate::value::Value::String(s)) => Found::Str(s.to_string()),
            Some(_) => Found::Other,
        };
        fn v_at<'a>(v: &'a crate::value::Value, keys: &[&str]) -> Option<&'a crate::value::Value> {
            let mut cur = v;
            for k in keys {
                cur = cur.as_map()?.get(k)?;
            }
            Some(cur)
        }
        let metadata_is_map = v_at(v, &["metadata"]).is_none_or(|m| m.as_map().is_some());
        let mut out = vec![[
            found(&["apiVersion"]),
            found(&["kind"]),
            if metadata_is_map {
                found(&["metadata", "name"])
            } else {
                Found::Missing
            },
            if metadata_is_map {
                found(&["metadata", "namespace"])
            } else {
                Found::Missing
            },
        ]];
        if let Some(items) = v_at(v, &["items"]).and_then(|i| i.as_list()) {
            out.extend(items.iter().map(|i| {
                if i.as_map().is_some() {
                    parsed_identity(i).remove(0)
                } else {
                    Default::default()
                }
            }));
        }
        out
    }

    /// Deterministic pseudo-random numbers (xorshift).
    #[test]
    fn finds_the_identity_of_a_list_and_its_items() {
        let text = example();
        let got = skim_all(&text).unwrap();
        let v = json::parse_strict(text.as_bytes()).unwrap();
        assert_eq!(got, parsed_identity(&v));
        assert_eq!(got[0][1], Found::Str("List".into()));
        assert!(got.len() > 3);
        assert_eq!(got[1][2], Found::Str("shop".into()));
    }

    #[test]
    fn refuses_what_a_strict_parse_refuses() {
        for bad in [
            r#"{"kind":"a","kind":"b"}"#,
            r#"{"metadata":{"name":"a","x":{"y":1,"y":2}}}"#,
            r#"{"items":[{"a":1,"a":1}]}"#,
            r#"{"items":{"a":[1,{"b":1,"b":2}]}}"#,
            r#"{"a":1e999}"#,
            r#"{"a":"\ud800x"}"#,
            r#"{"a":"\q"}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"{"k\u0069nd":"a","kind":"b"}"#,
            r#"{"f:a\"b":{},"f:a\u0022b":{}}"#,
            "{\"a\":\"x\u{1}y\"}",
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"items":[1,2,]}"#,
        ] {
            assert!(json::parse_strict(bad.as_bytes()).is_err(), "{bad}");
            assert!(skim_all(bad).is_none(), "{bad}");
        }
        // A map of many keys, one repeated at the end (the hash-set path).
        let mut many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        many.push("\"k3\":0".into());
        let many = format!("{{\"metadata\":{{{}}}}}", many.join(","));
        assert!(skim_all(&many).is_none());
        assert!(skim_all(&many.replace("\"k3\":0", "\"k100\":0")).is_some());
        // Deeper than a skim follows: refused, for the parse to decide.
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(DEPTH), "]".repeat(DEPTH));
        assert!(json::parse_strict(deep.as_bytes()).is_ok());
        assert!(skim_all(&deep).is_none());
    }

    /// On thousands of mutated documents, a skim accepts exactly what a strict parse accepts,
    /// and finds the identities the parsed value holds.
    #[test]
    fn agrees_with_the_strict_parse_on_mutated_documents() {
        let text = example();
        // Pieces a skim reads exactly, then pieces it may refuse where a parse accepts.
        let exact = [
            "\"",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "-0",
            "01",
            "1.",
            "1.25",
            "-",
            "null",
            "nul",
            "tru",
            "\"name\":",
            "\"kind\":",
            "\"items\":",
            "\"metadata\":",
            "\"namespace\":1,",
            "{\"a\":1}",
            "\"openapi\":\"3\",",
            " ",
            "\t",
            "\n",
            "\u{1}",
            "é",
            "18446744073709551616",
        ];
        let conservative = ["\\", "\\u00e9", "\\ud800", "\\n", "1e5", "1.5e400", "1E-2"];
        let mut rng = Rng(0x9e3779b97f4a7c15);
        let (mut accepted, mut refused) = (0, 0);
        for round in 0..8_000 {
            let pieces: &[&str] = if round % 4 == 3 {
                &conservative
            } else {
                &exact
            };
            let t = mutant(&text, pieces, &mut |n| rng.below(n));
            let parsed = json::parse_strict(t.as_bytes());
            let skimmed = skim_all(&t);
            match (&parsed, &skimmed) {
                (Ok(v), Some(ids)) => {
                    accepted += 1;
                    if v.as_map().is_some() {
                        assert_eq!(ids, &parsed_identity(v), "{t}");
                    }
                }
                (Err(_), None) => refused += 1,
                (Ok(_), None) if pieces == conservative => {}
                _ => panic!(
                    "parse {:?} but skim {:?} on {t}",
                    parsed.as_ref().map(|_| ()),
                    skimmed.is_some()
                ),
            }
        }
        assert!(accepted > 500 && refused > 500, "{accepted} / {refused}");
    }
}
