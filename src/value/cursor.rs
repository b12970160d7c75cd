//! JSON's tokens read from bytes, for the readers that go without serde: the skim (`skim.rs`,
//! which checks a document and keeps what names it), the direct reader (`direct.rs`, which
//! builds its value), the cut of one member (`member.rs`) and the cache's skim of watch events
//! (`cache/skim.rs`). Each reads exactly what serde_json reads, or refuses.

/// Nesting followed, counted from the document's root (serde_json allows 128).
pub const DEPTH: usize = 100;

/// Longest number [`Cursor::number`] reads (any shorter one without exponent is a finite
/// `f64`).
pub const MAX_DIGITS: usize = 300;

/// A place in a JSON text.
pub(crate) struct Cursor<'a> {
    pub b: &'a [u8],
    pub at: usize,
}

/// A string's place: its content (between the quotes), and whether it holds an escape.
pub(crate) struct Text {
    pub start: usize,
    pub end: usize,
    pub escaped: bool,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Cursor<'a> {
        Cursor {
            b: text.as_bytes(),
            at: 0,
        }
    }

    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    pub fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Only spaces are left.
    pub fn at_end(&mut self) -> bool {
        self.space();
        self.at == self.b.len()
    }

    /// `c`, after spaces.
    pub fn eat(&mut self, c: u8) -> Option<()> {
        self.space();
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// `w` (`true`, `false`, `null`).
    pub fn word(&mut self, w: &[u8]) -> Option<()> {
        let end = self.at + w.len();
        (self.b.get(self.at..end)? == w).then(|| self.at = end)
    }

    /// A string (at its opening quote), its escapes checked (`\u` of a surrogate refused).
    #[inline(always)]
    pub fn string(&mut self) -> Option<Text> {
        let b = self.b;
        let start = self.at + 1;
        let mut at = start;
        let mut escaped = false;
        loop {
            // Sixteen or eight bytes at a time while none is a quote, a backslash or a
            // control character; then straight to the first one that is.
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
                    at = escape_end(b, at)?;
                }
                0..=0x1f => return None,
                _ => at += 1,
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most [`MAX_DIGITS`] digits; an exponent is refused.
    pub fn number(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = |c: &mut Self| {
            let from = c.at;
            while let Some(b'0'..=b'9') = c.peek() {
                c.at += 1;
            }
            c.at - from
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

    /// Opens an array or a map (at its bracket) at `depth`: whether it is empty (its `close`
    /// read); refused past [`DEPTH`].
    pub fn open(&mut self, depth: usize, close: u8) -> Option<bool> {
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

    /// Passes over any value at `depth` (after spaces), checking it is JSON; a map's keys are
    /// not compared (repeated ones pass).
    pub fn skip(&mut self, depth: usize) -> Option<()> {
        self.value(depth, &mut |_, _| {})
    }

    /// [`Cursor::skip`] that also hands every string token's content range (keys and values,
    /// in order) to `seen`. Keys with escapes are fine here: none is compared. One loop, not a
    /// call per level: FieldsV1 is many small nested objects.
    pub fn value(&mut self, depth: usize, seen: &mut impl FnMut(usize, usize)) -> Option<()> {
        // The containers open around the current value, innermost in the lowest bit: set for
        // an object, clear for an array (fewer than 128 levels: `DEPTH`).
        let mut open: u128 = 0;
        let mut level = 0;
        'value: loop {
            self.space();
            match self.peek()? {
                b'"' => {
                    let t = self.string()?;
                    seen(t.start, t.end);
                }
                b'{' => {
                    if !self.open(depth + level, b'}')? {
                        (open, level) = (open << 1 | 1, level + 1);
                        self.key(seen)?;
                        continue 'value;
                    }
                }
                b'[' => {
                    if !self.open(depth + level, b']')? {
                        (open, level) = (open << 1, level + 1);
                        continue 'value;
                    }
                }
                b't' => self.word(b"true")?,
                b'f' => self.word(b"false")?,
                b'n' => self.word(b"null")?,
                _ => self.number()?,
            }
            // After a value: close the containers that end here, or go on to the next member
            // or item.
            while level > 0 {
                let object = open & 1 == 1;
                if self.next(if object { b'}' } else { b']' })? {
                    if object {
                        self.key(seen)?;
                    }
                    continue 'value;
                }
                (open, level) = (open >> 1, level - 1);
            }
            return Some(());
        }
    }

    /// An object's key (after spaces; handed to `seen`) and its colon.
    fn key(&mut self, seen: &mut impl FnMut(usize, usize)) -> Option<()> {
        self.space();
        if self.peek()? != b'"' {
            return None;
        }
        let t = self.string()?;
        seen(t.start, t.end);
        self.eat(b':')
    }

    /// After an element or entry: whether another follows (`,`) or `close` ends them.
    pub fn next(&mut self, close: u8) -> Option<bool> {
        self.space();
        let c = self.peek()?;
        self.at += 1;
        match c {
            b',' => Some(true),
            c if c == close => Some(false),
            _ => None,
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

/// The bytes a string's content (checked by [`Cursor::string`]: every escape valid, no `\u` of
/// a surrogate) stands for, into `out`.
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

/// Where the run of bytes from `at` that are neither a quote, a backslash nor a control
/// character ends: at the first such byte, or within the last seven bytes of `b` (which the
/// caller reads one at a time).
#[inline]
fn plain_run(b: &[u8], mut at: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `special`'s lowest set bit is the first quote, backslash or control byte of the word, for
    /// words mixing those with their neighbours (0x1f/0x20, 0x21/0x23, 0x5b/0x5d, 0x7f, 0x80,
    /// 0xff), where a borrow could flag a wrong byte.
    #[test]
    fn special_finds_the_first_special_byte() {
        const BYTES: [u8; 14] = [
            0x00, 0x01, 0x1f, 0x20, 0x21, b'"', 0x23, b'[', b'\\', b']', b'a', 0x7f, 0x80, 0xff,
        ];
        let is_special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        let mut rng = crate::value::skim::Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200_000 {
            let state = rng.next();
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
        let mut rng = crate::value::skim::Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..50_000 {
            let state = rng.next();
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
}
