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

use std::collections::HashSet;
use std::hash::BuildHasher;

/// Nesting a skim follows, counted from the document's root (the parse allows 128).
pub const DEPTH: usize = 100;

/// Longest number a skim reads (any shorter one without exponent is a finite `f64`).
pub const MAX_DIGITS: usize = 300;

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
        b: text.as_bytes(),
        at: 0,
        keys: Vec::new(),
        unescaped: Vec::new(),
    };
    let skim = scan.document(0, true)?;
    scan.space();
    (scan.at == scan.b.len()).then_some(skim)
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

/// A string's place: its content (between the quotes), and whether it holds an escape.
struct Text {
    start: usize,
    end: usize,
    escaped: bool,
}

struct Scan<'a> {
    text: &'a str,
    b: &'a [u8],
    at: usize,
    /// The keys of the maps being read, as hashes: one run per open map, innermost last.
    keys: Vec<u64>,
    /// An escaped key, unescaped (FieldsV1 keys hold JSON: `k:{\"name\":\"app\"}`).
    unescaped: Vec<u8>,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.space();
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// Any value, checked.
    fn value(&mut self, depth: usize) -> Option<()> {
        self.space();
        match self.peek()? {
            // `{}`, the leaf of every FieldsV1 set, read at once.
            b'{' if depth < DEPTH && self.b.get(self.at + 1) == Some(&b'}') => {
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

    fn word(&mut self, w: &[u8]) -> Option<()> {
        let end = self.at + w.len();
        (self.b.get(self.at..end)? == w).then(|| self.at = end)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most [`MAX_DIGITS`] digits.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = |s: &mut Self| {
            let from = s.at;
            while let Some(b'0'..=b'9') = s.peek() {
                s.at += 1;
            }
            s.at - from
        };
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) || self.at - start > MAX_DIGITS {
            return None;
        }
        Some(())
    }

    /// A string (at its opening quote).
    #[inline]
    fn string(&mut self) -> Option<Text> {
        let b = self.b;
        let start = self.at + 1;
        let mut at = start;
        let mut escaped = false;
        loop {
            // Eight bytes at a time while none is a quote, a backslash or a control character;
            // then straight to the first one that is.
            at = plain_run(b, at);
            match *b.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(Text {
                        start,
                        end: at,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    self.at = at;
                    self.escape()?;
                    at = self.at;
                }
                0..=0x1f => return None,
                _ => at += 1,
            }
        }
    }

    /// An escape (at its backslash); `\u` of a surrogate is refused.
    fn escape(&mut self) -> Option<()> {
        match *self.b.get(self.at + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
            b'u' => {
                let hex = self.b.get(self.at + 2..self.at + 6)?;
                let hex = std::str::from_utf8(hex).ok()?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                let code = u16::from_str_radix(hex, 16).ok()?;
                if (0xd800..=0xdfff).contains(&code) {
                    return None;
                }
                self.at += 6;
            }
            _ => return None,
        }
        Some(())
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

    /// Opens an array or a map (at its bracket) at `depth`: whether it is empty (its `close`
    /// read); refused past [`DEPTH`].
    fn open(&mut self, depth: usize, close: u8) -> Option<bool> {
        if depth >= DEPTH {
            return None;
        }
        self.at += 1;
        self.space();
        let empty = self.peek()? == close;
        if empty {
            self.at += 1;
        }
        Some(empty)
    }

    /// After an element or entry: whether another follows (`,`) or `close` ends them.
    fn next(&mut self, close: u8) -> Option<bool> {
        self.space();
        let c = self.peek()?;
        self.at += 1;
        match c {
            b',' => Some(true),
            c if c == close => Some(false),
            _ => None,
        }
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
                unescape(&self.b[key.start..key.end], &mut self.unescaped);
                &self.unescaped[..]
            } else {
                &self.b[key.start..key.end]
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

/// The bytes a string's content (checked by [`Scan::string`]: every escape valid, no `\u` of a
/// surrogate) stands for, into `out`.
pub(super) fn unescape(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let c = match raw.get(i + 1) {
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let code = raw
                    .get(i + 2..i + 6)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32)
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                let mut buf = [0u8; 4];
                out.extend_from_slice(code.encode_utf8(&mut buf).as_bytes());
                i += 6;
                continue;
            }
            Some(&other) => other,
            None => break,
        };
        out.push(c);
        i += 2;
    }
}

/// Which of the eight bytes of `w` (little-endian) is a quote, a backslash or below 0x20: zero
/// if none is, else a mask whose lowest set bit is the high bit of the first such byte (bytes
/// above it may be flagged wrongly, by borrows: only the lowest bit is exact).
fn special(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64)) | below
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

/// Where the run of bytes from `at` that are neither a quote, a backslash nor a control
/// character ends: at the first such byte, or within the last seven bytes of `b` (which the
/// caller reads one at a time).
#[inline]
pub(super) fn plain_run(b: &[u8], mut at: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = b.get(at..at + 16) {
        let m = special16(chunk.try_into().unwrap_or(&[0; 16]));
        if m != 0 {
            return at + m.trailing_zeros() as usize;
        }
        at += 16;
    }
    while let Some(chunk) = b.get(at..at + 8) {
        let m = special(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at
}

/// Which of sixteen bytes is a quote, a backslash or below 0x20: bit i set for byte i.
#[cfg(target_arch = "x86_64")]
#[inline]
fn special16(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of every x86_64 target; the load is unaligned and reads the
    // sixteen bytes of `chunk`.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `v <= 0x1f`: the larger of `v` and 0x1f is 0x1f.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
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

    /// `special`'s lowest set bit is the first quote, backslash or control byte of the word, for
    /// words mixing those with their neighbours (0x1f/0x20, 0x21/0x23, 0x5b/0x5d, 0x7f, 0x80,
    /// 0xff), where a borrow could flag a wrong byte.
    #[test]
    fn special_finds_the_first_special_byte() {
        const BYTES: [u8; 14] = [
            0x00, 0x01, 0x1f, 0x20, 0x21, b'"', 0x23, b'[', b'\\', b']', b'a', 0x7f, 0x80, 0xff,
        ];
        let is_special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bytes: [u8; 8] =
                std::array::from_fn(|i| BYTES[((state >> (i * 4)) & 0xf) as usize % BYTES.len()]);
            let want = bytes.iter().position(|&b| is_special(b));
            let m = special(u64::from_le_bytes(bytes));
            let got = (m != 0).then(|| (m.trailing_zeros() / 8) as usize);
            assert_eq!(got, want, "{bytes:02x?}");
        }
    }

    #[test]
    fn plain_run_stops_at_the_first_special_byte_or_near_the_end() {
        let is_special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..50_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 40) as usize;
            let at = ((state >> 8) % 4) as usize;
            // Mostly plain bytes (UTF-8 ones included), now and then a special one.
            let bytes: Vec<u8> = (0..len)
                .map(|i| match (state >> (i % 60)) as u8 % 23 {
                    0 => b'"',
                    1 => b'\\',
                    2 => 0x1f,
                    3 => 0x80,
                    4 => 0xff,
                    5 => 0x20,
                    n => b'a' + n,
                })
                .collect();
            let at = at.min(len);
            let end = plain_run(&bytes, at);
            let first = bytes[at..]
                .iter()
                .position(|&b| is_special(b))
                .map(|i| at + i);
            match first {
                Some(f) if f < len.saturating_sub(7) || end == f => {
                    assert_eq!(end, f, "{bytes:02x?}")
                }
                _ => {
                    assert!(end >= at && end <= first.unwrap_or(len), "{bytes:02x?}");
                    assert!(len - end < 8, "{bytes:02x?}");
                }
            }
            assert!(
                bytes[at..end].iter().all(|&b| !is_special(b)),
                "{bytes:02x?}"
            );
        }
    }

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
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

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
            let mut t = text.clone();
            for _ in 0..1 + rng.below(3) {
                let mut at = rng.below(t.len());
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                match rng.below(3) {
                    0 => t.insert_str(at, pieces[rng.below(pieces.len())]),
                    1 => {
                        let mut end = (at + 1 + rng.below(8)).min(t.len());
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
