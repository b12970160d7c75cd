//! FieldsV1 decoding: a byte scanner specialised for the format. Field keys without escapes
//! (nearly all keys) are classified in place; each node's members and children are collected on
//! two stacks shared by the whole document and moved into exactly sized vectors when the node
//! closes, so a node costs at most two allocations and no regrowth. Keys arriving in canonical
//! order (the usual case) are appended after one comparison; anything else is inserted or
//! replaced like `Set::insert` would. `decode_reference.rs` holds the previous decoder, which
//! tests hold this one to.

use super::element::PathElement;
use super::serialize::{FieldsV1Error, MAX_DEPTH, PeError, parse_pe, unescape_simple};
use super::set::Set;
use crate::value::{Str, Value, tail};
use std::cell::RefCell;
use std::cmp::Ordering;

/// Stack entries (and scratch bytes) kept between documents; stacks grown past this (a huge
/// document) are dropped after use instead.
const KEEP_STACK_ENTRIES: usize = 4096;

/// The stacks a decoder works on, kept per thread so that a document does not grow them anew.
#[derive(Default)]
struct Stacks {
    /// Reused buffer for keys with escapes (every `k:` key has some).
    scratch: String,
    /// Members of the nodes being read, innermost node last.
    members: Vec<PathElement>,
    /// Children of the nodes being read, innermost node last.
    children: Vec<(PathElement, Set)>,
}

thread_local! {
    static STACKS: RefCell<Stacks> = RefCell::new(Stacks::default());
}

/// Decodes FieldsV1 JSON bytes.
pub(super) fn decode(input: &[u8]) -> Result<Set, FieldsV1Error> {
    let text = std::str::from_utf8(input).map_err(|e| FieldsV1Error {
        offset: e.valid_up_to(),
        message: "invalid UTF-8".into(),
    })?;
    STACKS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut st) => {
            let result = decode_on(text, &mut st);
            // An error leaves entries behind; a huge document, stacks too large to keep.
            st.members.clear();
            st.children.clear();
            if st.members.capacity() > KEEP_STACK_ENTRIES
                || st.children.capacity() > KEEP_STACK_ENTRIES
                || st.scratch.capacity() > KEEP_STACK_ENTRIES
            {
                *st = Stacks::default();
            }
            result
        }
        // Not reentrant today; stay correct if that changes.
        Err(_) => decode_on(text, &mut Stacks::default()),
    })
}

fn decode_on(text: &str, st: &mut Stacks) -> Result<Set, FieldsV1Error> {
    let mut d = Decoder {
        s: text,
        b: text.as_bytes(),
        i: 0,
        st,
    };
    d.ws();
    let (children, _) = d.object(0)?;
    Ok(children.unwrap_or_default())
}

struct Decoder<'a, 'st> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    st: &'st mut Stacks,
}

/// A key as read: borrowed from the input, or unescaped into the decoder's scratch buffer.
enum KeyText<'a> {
    Borrowed(&'a str),
    Scratch,
}

/// What a key means.
enum Key {
    /// `"."`: the node itself is a member.
    Itself,
    Element(PathElement),
    /// A prefix this version does not know: the entry is skipped.
    Unknown,
    /// Not a path element; reported once the `:` after it has been read.
    Invalid(String),
}

impl<'a> Decoder<'a, '_> {
    /// Reads an object (or `null`): returns its children and whether the node is a member.
    fn object(&mut self, depth: usize) -> Result<(Option<Set>, bool), FieldsV1Error> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        match self.peek() {
            Some(b'n') => {
                self.expect_lit(b"null")?;
                return Ok((None, true));
            }
            Some(b'{') => self.i += 1,
            Some(c) => return self.err(format!("expected {{ or null, found {:?}", c as char)),
            None => return self.err("unexpected end of input"),
        }
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok((None, true));
        }
        // This node's members and children are the stacks' tails from here.
        let (m0, c0) = (self.st.members.len(), self.st.children.len());
        let mut has_children = false;
        let mut is_member = false;
        loop {
            // The common shapes in compact JSON, `"f:name":{}` (a leaf field member) and
            // `".":{}`, read without classifying a key or looking for a nested object.
            if let Some((name, next)) = leaf_field(self.b, self.i) {
                has_children = true;
                let pe = PathElement::Field(Str::from(&self.s[name]));
                self.add_member(m0, pe);
                self.i = next;
                if self.another()? {
                    continue;
                }
                break;
            }
            if self.b[self.i..].starts_with(b"\".\":{}") {
                is_member = true;
                self.i += 6;
                if self.another()? {
                    continue;
                }
                break;
            }
            self.ws();
            let key = self.key()?;
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            self.ws();
            match key {
                Key::Itself => {
                    is_member = true;
                    self.skip_value(depth)?;
                }
                Key::Unknown => self.skip_value(depth)?,
                Key::Invalid(m) => return self.err(format!("parsing key as path element: {m}")),
                Key::Element(pe) => {
                    // Most values are `{}` (a leaf member): no need to recurse for those.
                    let (grand, child_member) = if self.b[self.i..].starts_with(b"{}") {
                        self.i += 2;
                        (None, true)
                    } else {
                        self.object(depth + 1)?
                    };
                    has_children = true;
                    match (child_member, grand) {
                        (true, Some(g)) => {
                            self.add_member(m0, pe.clone());
                            self.put_child(c0, pe, g);
                        }
                        (true, None) => self.add_member(m0, pe),
                        (false, Some(g)) => self.put_child(c0, pe, g),
                        (false, None) => {}
                    }
                }
            }
            if !self.another()? {
                break;
            }
        }
        if !has_children {
            return Ok((None, true));
        }
        let node = Set::from_sorted_parts(
            tail(&mut self.st.members, m0),
            tail(&mut self.st.children, c0),
        );
        Ok((Some(node), is_member))
    }

    /// After an object's entry: true past a `,`, false past the closing `}`.
    #[inline]
    fn another(&mut self) -> Result<bool, FieldsV1Error> {
        let c = match self.peek() {
            Some(c @ (b',' | b'}')) => c,
            _ => {
                self.ws();
                match self.peek() {
                    Some(c @ (b',' | b'}')) => c,
                    _ => return self.err("expected ',' or '}'"),
                }
            }
        };
        self.i += 1;
        Ok(c == b',')
    }

    #[inline]
    fn add_member(&mut self, base: usize, pe: PathElement) {
        add_member(&mut self.st.members, base, pe);
    }

    #[inline]
    fn put_child(&mut self, base: usize, pe: PathElement, set: Set) {
        put_child(&mut self.st.children, base, pe, set);
    }

    /// Reads a key and classifies it. Keys without escapes are read in place, and `f:` ones
    /// become fields directly; the rest go through the general string reader and `parse_pe`.
    #[inline]
    fn key(&mut self) -> Result<Key, FieldsV1Error> {
        if self.peek() == Some(b'"') {
            let start = self.i + 1;
            match quote_or_backslash(self.b, start) {
                Some(j) if self.b[j] == b'"' => {
                    self.i = j + 1;
                    return Ok(classify(&self.s[start..j]));
                }
                // Escapes or no end: the general reader (and its errors).
                _ => {}
            }
        }
        let text = self.string()?;
        Ok(classify(self.key_str(&text)))
    }

    fn err<T>(&self, msg: impl Into<String>) -> Result<T, FieldsV1Error> {
        Err(FieldsV1Error {
            offset: self.i,
            message: msg.into(),
        })
    }

    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn expect_lit(&mut self, lit: &[u8]) -> Result<(), FieldsV1Error> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            self.err(format!("expected {}", String::from_utf8_lossy(lit)))
        }
    }

    fn key_str<'k>(&'k self, k: &KeyText<'a>) -> &'k str {
        match k {
            KeyText::Borrowed(s) => s,
            KeyText::Scratch => &self.st.scratch,
        }
    }

    /// Reads a string literal; escapes are resolved into the scratch buffer.
    fn string(&mut self) -> Result<KeyText<'a>, FieldsV1Error> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string key");
        }
        let start = self.i + 1;
        let Some(off) = memchr::memchr2(b'"', b'\\', &self.b[start..]) else {
            self.i = self.b.len();
            return self.err("unterminated string");
        };
        let end = start + off;
        if self.b[end] == b'"' {
            self.i = end + 1;
            return Ok(KeyText::Borrowed(&self.s[start..end]));
        }
        // Escapes (every `k:` key has them): the common ones (`\\"`, `\\\\`, `\\/`) are
        // resolved in one pass; anything else goes to serde_json below.
        self.st.scratch.clear();
        self.st.scratch.push_str(&self.s[start..end]);
        let mut j = end;
        let mut simple = true;
        while j < self.b.len() {
            match self.b[j] {
                b'"' => break,
                b'\\' => match self.b.get(j + 1) {
                    Some(&c @ (b'"' | b'\\' | b'/')) => {
                        self.st.scratch.push(c as char);
                        j += 2;
                    }
                    _ => {
                        simple = false;
                        break;
                    }
                },
                _ => {
                    // Copy the run up to the next quote or backslash.
                    let from = j;
                    while j < self.b.len() && !matches!(self.b[j], b'"' | b'\\') {
                        j += 1;
                    }
                    self.st.scratch.push_str(&self.s[from..j]);
                }
            }
        }
        if simple && j < self.b.len() {
            self.i = j + 1;
            return Ok(KeyText::Scratch);
        }
        let lit_start = start - 1;
        let mut j = end;
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &self.b[j..]) else {
                self.i = self.b.len();
                return self.err("unterminated string");
            };
            j += off;
            if self.b[j] == b'\\' {
                j += 2;
                if j > self.b.len() {
                    self.i = self.b.len();
                    return self.err("unterminated string");
                }
                continue;
            }
            break;
        }
        let lit = &self.s[lit_start..=j];
        self.st.scratch.clear();
        if !unescape_simple(&lit[1..lit.len() - 1], &mut self.st.scratch) {
            let owned: String = serde_json::from_str(lit).map_err(|e| FieldsV1Error {
                offset: lit_start,
                message: e.to_string(),
            })?;
            self.st.scratch = owned;
        }
        self.i = j + 1;
        Ok(KeyText::Scratch)
    }

    fn skip_value(&mut self, depth: usize) -> Result<(), FieldsV1Error> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return self.err("expected ':'");
                    }
                    self.i += 1;
                    self.ws();
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return self.err("expected ',' or '}'"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return self.err("expected ',' or ']'"),
                    }
                }
            }
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.expect_lit(b"true"),
            Some(b'f') => self.expect_lit(b"false"),
            Some(b'n') => self.expect_lit(b"null"),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                while let Some(c) = self.peek() {
                    if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                Ok(())
            }
            Some(c) => self.err(format!("unexpected {:?}", c as char)),
            None => self.err("unexpected end of input"),
        }
    }
}

/// Adds a member to the node whose members start at `base` (kept sorted, first one kept).
#[inline]
fn add_member(members: &mut Vec<PathElement>, base: usize, pe: PathElement) {
    let node = &members[base..];
    match node.last() {
        Some(last) if last.compare(&pe) != Ordering::Less => {
            if let Err(i) = node.binary_search_by(|m| m.compare(&pe)) {
                members.insert(base + i, pe);
            }
        }
        _ => members.push(pe),
    }
}

/// Adds a child to the node whose children start at `base` (a repeated key replaces the
/// earlier subtree).
#[inline]
fn put_child(children: &mut Vec<(PathElement, Set)>, base: usize, pe: PathElement, set: Set) {
    let node = &children[base..];
    match node.last() {
        Some((last, _)) if last.compare(&pe) != Ordering::Less => {
            match node.binary_search_by(|(c, _)| c.compare(&pe)) {
                Ok(i) => children[base + i].1 = set,
                Err(i) => children.insert(base + i, (pe, set)),
            }
        }
        _ => children.push((pe, set)),
    }
}

/// FieldsV1 already parsed (as part of a larger document), read as [`decode`] reads its text
/// (`vjson::to_string`): the same set, or `None` when the text would not decode cleanly, which
/// the caller then decodes to say why.
pub(super) fn decode_value(v: &Value) -> Option<Set> {
    let (children, _) = value_object(v, 0)?;
    Some(children.unwrap_or_default())
}

/// [`Decoder::object`] over a parsed value.
fn value_object(v: &Value, depth: usize) -> Option<(Option<Set>, bool)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let m = match v {
        Value::Null => return Some((None, true)),
        Value::Map(m) if m.is_empty() => return Some((None, true)),
        Value::Map(m) => m,
        _ => return None,
    };
    let (mut members, mut children) = (Vec::new(), Vec::new());
    let (mut has_children, mut is_member) = (false, false);
    for (k, val) in m.iter() {
        match classify(k) {
            Key::Itself => {
                is_member = true;
                within_depth(val, depth)?;
            }
            Key::Unknown => within_depth(val, depth)?,
            Key::Invalid(_) => return None,
            Key::Element(pe) => {
                // `{}` is read without a look at the depth, as the text's is.
                let (grand, child_member) = match val {
                    Value::Map(c) if c.is_empty() => (None, true),
                    _ => value_object(val, depth + 1)?,
                };
                has_children = true;
                match (child_member, grand) {
                    (true, Some(g)) => {
                        add_member(&mut members, 0, pe.clone());
                        put_child(&mut children, 0, pe, g);
                    }
                    (true, None) => add_member(&mut members, 0, pe),
                    (false, Some(g)) => put_child(&mut children, 0, pe, g),
                    (false, None) => {}
                }
            }
        }
    }
    if !has_children {
        return Some((None, true));
    }
    Some((Some(Set::from_sorted_parts(members, children)), is_member))
}

/// [`Decoder::skip_value`]'s depth check over a parsed value.
fn within_depth(v: &Value, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    match v {
        Value::Map(m) => m.iter().try_for_each(|(_, c)| within_depth(c, depth + 1)),
        Value::List(l) => l.iter().try_for_each(|c| within_depth(c, depth + 1)),
        _ => Some(()),
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Position of the first `"` or `\\` at or after `from`, eight bytes at a time (keys are short,
/// so this beats a call into memchr).
#[inline]
fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    let mut j = from;
    while let Some(chunk) = b.get(j..j + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let (q, s) = (x ^ (u64::from(b'"') * LO), x ^ (u64::from(b'\\') * LO));
        // The lowest flagged byte is exactly the first zero byte of `q` or `s`.
        let hit = (q.wrapping_sub(LO) & !q | s.wrapping_sub(LO) & !s) & HI;
        if hit != 0 {
            return Some(j + hit.trailing_zeros() as usize / 8);
        }
        j += 8;
    }
    (j..b.len()).find(|&k| matches!(b[k], b'"' | b'\\'))
}

/// `"f:NAME":{}` at `i` with NAME free of escapes and not empty: NAME's range and where the
/// text after `{}` starts.
#[inline]
fn leaf_field(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    if b.get(i..i + 3)? != b"\"f:" {
        return None;
    }
    let j = quote_or_backslash(b, i + 3)?;
    if j == i + 3 || b[j] != b'"' || b.get(j + 1..j + 4)? != b":{}" {
        return None;
    }
    Some((i + 3..j, j + 4))
}

/// What a key means (`parse_pe`, with the `.` marker and `f:` keys decided first).
#[inline]
fn classify(k: &str) -> Key {
    let b = k.as_bytes();
    if b.len() > 2 && b[0] == b'f' && b[1] == b':' {
        return Key::Element(PathElement::Field(Str::from(&k[2..])));
    }
    if k == "." {
        return Key::Itself;
    }
    match parse_pe(k) {
        Ok(pe) => Key::Element(pe),
        Err(PeError::Unknown) => Key::Unknown,
        Err(PeError::Invalid(m)) => Key::Invalid(m),
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A FieldsV1-like tree: known and unknown keys, `.` markers, leaves, nulls, and now and
    /// then something the format refuses (a scalar under a path element, a bad key).
    fn tree(rng: &mut StdRng, depth: usize) -> crate::value::Value {
        use crate::value::{Map, Value};
        const KEYS: &[&str] = &[
            "f:a",
            "f:b",
            "f:c",
            "k:{\"name\":\"n\"}",
            "k:{\"port\":80,\"protocol\":\"TCP\"}",
            "v:\"x\"",
            "v:3",
            "i:0",
            "i:2",
            ".",
            "z:unknown",
            "k:oops",
            "i:x",
            "f:",
        ];
        let mut m = Map::new();
        for _ in 0..rng.gen_range(0..5) {
            let key = KEYS[rng.gen_range(0..KEYS.len())];
            let value = match rng.gen_range(0..20) {
                0 => Value::Null,
                1 => Value::Int(7),
                2 => Value::List(vec![Value::Bool(true), Value::Map(Map::new())]),
                3..=8 => Value::Map(Map::new()),
                _ if depth < 5 => tree(rng, depth + 1),
                _ => Value::Map(Map::new()),
            };
            m.insert(key, value);
        }
        Value::Map(m)
    }

    /// A parsed FieldsV1 reads as its text does: the same set, and nothing the text refuses.
    #[test]
    fn a_parsed_fields_v1_reads_as_its_text() {
        use crate::value::json::{Style, to_string};
        use crate::value::{Map, Value};
        let mut rng = StdRng::seed_from_u64(11);
        let (mut read, mut refused) = (0, 0);
        let mut cases: Vec<Value> = (0..5_000).map(|_| tree(&mut rng, 0)).collect();
        // Nesting at and past the limit.
        for depth in [super::MAX_DEPTH - 1, super::MAX_DEPTH, super::MAX_DEPTH + 2] {
            let mut v = Value::Map(Map::new());
            for _ in 0..depth {
                let mut m = Map::new();
                m.insert("f:a", v);
                v = Value::Map(m);
            }
            cases.push(v);
        }
        for v in &cases {
            let text = to_string(v, Style::PLAIN);
            match (super::decode_value(v), super::decode(text.as_bytes())) {
                (Some(a), Ok(b)) => {
                    assert!(a.equals(&b), "{text}");
                    read += 1;
                }
                (None, Err(_)) => refused += 1,
                (a, b) => panic!("{text}: parsed {a:?}, text {b:?}"),
            }
        }
        assert!(
            read > 1_000 && refused > 1_000,
            "{read} read, {refused} refused"
        );
    }

    #[test]
    fn word_scan_finds_the_first_quote_or_backslash() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..40);
            let b: Vec<u8> = (0..len)
                .map(|_| match rng.gen_range(0..12) {
                    0 => b'"',
                    1 => b'\\',
                    2 => rng.r#gen(),
                    _ => rng.gen_range(b'a'..=b'z'),
                })
                .collect();
            let from = rng.gen_range(0..=b.len());
            let want = (from..b.len()).find(|&k| b[k] == b'"' || b[k] == b'\\');
            assert_eq!(
                super::quote_or_backslash(&b, from),
                want,
                "{b:?} from {from}"
            );
        }
    }
}
