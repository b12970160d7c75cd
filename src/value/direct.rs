//! JSON straight into values, for the documents [`super::json::parse`] and
//! [`super::json::parse_strict`] read most: objects as Kubernetes writes them (integers, strings,
//! maps of distinct keys). The same grammar and checks as serde_json, without serde's
//! machinery between the bytes and the values.
//!
//! It reads a document only where it gives exactly the value the serde path gives; otherwise it
//! declines (`None`) and the caller parses the document with serde_json, which explains any
//! problem. It declines, besides anything wrong: numbers with a fraction or an exponent
//! (serde_json converts them its own way), integers outside `i64` and `-0` (which serde_json
//! reads as floats), `\u` escapes of surrogates, nesting deeper than 100 levels, and repeated
//! keys (an error for a strict parse, the last value for the other: both left to serde). Debug
//! builds check every document it reads against the serde path.

use super::cursor::{Cursor, unescape};
use super::{Map, Seen, Str, Value, tail};

/// The document in `text`, when it is plain (see the module's documentation); `None` otherwise.
pub fn read(text: &str) -> Option<Value> {
    let mut r = Reader {
        text,
        c: Cursor::new(text),
        scratch: Vec::new(),
        items: Vec::new(),
        entries: Vec::new(),
    };
    let v = r.value(0)?;
    r.at_end().then_some(v)
}

/// A [`Cursor`] that builds what it reads.
struct Reader<'a> {
    /// The document (the cursor's bytes, as checked UTF-8).
    text: &'a str,
    c: Cursor<'a>,
    /// An escaped string, unescaped.
    scratch: Vec<u8>,
    /// The items of the lists being read, innermost last: a list is allocated once, at its
    /// end, at its size (growing each list as it is read allocated and copied it up to four
    /// times for a list of ten, and left it up to half empty).
    items: Vec<Value>,
    /// The same for the entries of maps.
    entries: Vec<(Str, Value)>,
}

impl<'a> std::ops::Deref for Reader<'a> {
    type Target = Cursor<'a>;
    fn deref(&self) -> &Cursor<'a> {
        &self.c
    }
}

impl std::ops::DerefMut for Reader<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.c
    }
}

impl Reader<'_> {
    fn value(&mut self, depth: usize) -> Option<Value> {
        self.space();
        match self.peek()? {
            b'{' => self.map(depth).map(Value::Map),
            b'[' => self.list(depth).map(Value::List),
            b'"' => self.string().map(Value::String),
            b't' => self.word(b"true").map(|()| Value::Bool(true)),
            b'f' => self.word(b"false").map(|()| Value::Bool(false)),
            b'n' => self.word(b"null").map(|()| Value::Null),
            b'-' | b'0'..=b'9' => self.integer().map(Value::Int),
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)` within `i64`, not `-0`, and not followed by a fraction or an
    /// exponent.
    fn integer(&mut self) -> Option<i64> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let first = self.peek()?;
        if !first.is_ascii_digit() {
            return None;
        }
        let mut n: u64 = 0;
        let start = self.at;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.at += 1;
        }
        // One `0` alone; then no fraction or exponent.
        if (first == b'0' && self.at - start > 1) || matches!(self.peek(), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        if negative {
            if n == 0 || n > 1 << 63 {
                return None;
            }
            Some((n as i64).wrapping_neg())
        } else {
            i64::try_from(n).ok()
        }
    }

    /// A string (at its opening quote), unescaped.
    fn string(&mut self) -> Option<Str> {
        let t = self.c.string()?;
        if !t.escaped {
            // Between quotes of a `str`: whole characters, already checked.
            return Some(Str::from(self.text.get(t.start..t.end)?));
        }
        unescape(&self.c.b[t.start..t.end], &mut self.scratch);
        Some(Str::from(std::str::from_utf8(&self.scratch).ok()?))
    }

    fn list(&mut self, depth: usize) -> Option<Vec<Value>> {
        if self.open(depth, b']')? {
            return Some(Vec::new());
        }
        let start = self.items.len();
        loop {
            let v = self.value(depth + 1)?;
            self.items.push(v);
            if !self.next(b']')? {
                return Some(tail(&mut self.items, start));
            }
        }
    }

    /// A map of distinct keys (a repeated one declines).
    fn map(&mut self, depth: usize) -> Option<Map> {
        if self.open(depth, b'}')? {
            return Some(Map::new());
        }
        let start = self.entries.len();
        let mut seen = Seen::default();
        loop {
            self.space();
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            self.eat(b':')?;
            if seen.find_in(&self.entries[start..], &key).is_some() {
                return None;
            }
            let v = self.value(depth + 1)?;
            self.entries.push((key, v));
            seen.pushed_in(&self.entries[start..]);
            if !self.next(b'}')? {
                return Some(Map::from_unique(tail(&mut self.entries, start)));
            }
        }
    }
}

#[cfg(test)]
mod tests;
