//! JSON straight into values, for the documents [`super::json::parse`] and
//! [`super::json::parse_strict`] read most: objects as Kubernetes writes them (integers, strings,
//! maps of distinct keys). The same grammar and checks as serde_json, without serde's
//! machinery between the bytes and the values.
//!
//! It reads a document only where it gives exactly the value the serde path gives; otherwise it
//! declines (`None`) and the caller parses the document with serde_json, which explains any
//! problem. It declines, besides anything wrong: numbers with a fraction or an exponent (serde
//! json's float conversion is its own), integers outside `i64` and `-0` (which serde_json reads
//! as floats), `\u` escapes of surrogates, nesting deeper than [`DEPTH`], and repeated keys
//! (an error for a strict parse, the last value for the other: both left to serde). Debug
//! builds check every document it reads against the serde path.

use super::skim::{plain_run, unescape};
use super::{Map, Str, Value};
use std::collections::HashSet;

/// Nesting read, counted from the document's root (the serde path allows 128).
pub const DEPTH: usize = 100;

/// Maps with more keys than this find repeated keys with a hash set rather than a scan.
const SCAN_KEYS: usize = 32;

/// The document in `text`, when it is plain (see the module's documentation); `None` otherwise.
pub fn read(text: &str) -> Option<Value> {
    let mut r = Reader {
        b: text.as_bytes(),
        at: 0,
        scratch: Vec::new(),
    };
    let v = r.value(0)?;
    r.space();
    (r.at == r.b.len()).then_some(v)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    /// An escaped string, unescaped.
    scratch: Vec<u8>,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        self.space();
        match self.peek()? {
            b'{' => self.map(depth).map(Value::Map),
            b'[' => self.list(depth).map(Value::List),
            b'"' => self.string().map(Value::String),
            b't' => self.word(b"true", Value::Bool(true)),
            b'f' => self.word(b"false", Value::Bool(false)),
            b'n' => self.word(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.integer().map(Value::Int),
            _ => None,
        }
    }

    fn word(&mut self, w: &[u8], v: Value) -> Option<Value> {
        let end = self.at + w.len();
        (self.b.get(self.at..end)? == w).then(|| {
            self.at = end;
            v
        })
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
        let b = self.b;
        let start = self.at + 1;
        let mut at = start;
        let mut escaped = false;
        loop {
            at = plain_run(b, at);
            match *b.get(at)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    at = escape_end(b, at)?;
                }
                0..=0x1f => return None,
                _ => at += 1,
            }
        }
        self.at = at + 1;
        let raw = &b[start..at];
        if !escaped {
            // Between quotes of a `str`, ending before a quote: whole characters.
            return Some(Str::from(std::str::from_utf8(raw).ok()?));
        }
        unescape(raw, &mut self.scratch);
        Some(Str::from(std::str::from_utf8(&self.scratch).ok()?))
    }

    /// Opens an array or a map (at its bracket): whether it is empty (its `close` read);
    /// refused past [`DEPTH`].
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

    fn list(&mut self, depth: usize) -> Option<Vec<Value>> {
        let mut out = Vec::new();
        if self.open(depth, b']')? {
            return Some(out);
        }
        loop {
            out.push(self.value(depth + 1)?);
            if !self.next(b']')? {
                return Some(out);
            }
        }
    }

    /// A map of distinct keys (a repeated one declines).
    fn map(&mut self, depth: usize) -> Option<Map> {
        let mut m = Map::new();
        if self.open(depth, b'}')? {
            return Some(m);
        }
        // Keys seen, by a cheap signature (length and last byte): a key whose signature is new
        // cannot repeat an earlier one, so only the rest are looked for. Large maps get a hash
        // set instead, so that reading one stays linear in its keys.
        let mut seen = 0u64;
        let mut large: Option<HashSet<Str, foldhash::fast::FixedState>> = None;
        loop {
            self.space();
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            self.space();
            if self.peek()? != b':' {
                return None;
            }
            self.at += 1;
            let repeated = match &mut large {
                Some(set) => !set.insert(key.clone()),
                None => {
                    let b = key.as_bytes();
                    let sig = 1u64
                        << ((b.len() as u64 & 7) << 3
                            | (b.last().copied().unwrap_or(0) as u64 & 7));
                    let repeated = seen & sig != 0 && m.contains_key(&key);
                    seen |= sig;
                    repeated
                }
            };
            if repeated {
                return None;
            }
            let v = self.value(depth + 1)?;
            m.push_unique(key, v);
            if large.is_none() && m.len() > SCAN_KEYS {
                large = Some(m.keys().cloned().collect());
            }
            if !self.next(b'}')? {
                return Some(m);
            }
        }
    }
}

/// Where an escape (at its backslash) ends; `None` for an unknown one or a `\u` of a surrogate.
fn escape_end(b: &[u8], at: usize) -> Option<usize> {
    match *b.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' => {
            let hex = b.get(at + 2..at + 6)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let code = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            (!(0xd800..=0xdfff).contains(&code)).then_some(at + 6)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
