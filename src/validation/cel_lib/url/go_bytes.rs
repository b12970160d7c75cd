//! Go's string helpers on byte strings, as the URL parsers beside this file use them:
//! `strconv.Quote` (of bytes that need not be UTF-8), `strings.IndexByte` and
//! `LastIndexByte`, and `net/url.unhex`.

use crate::value::gofmt::quote;

/// Go's `strconv.Quote` of bytes: invalid UTF-8 as `\x..`.
pub(super) fn quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        let q = quote(chunk.valid());
        out.push_str(&q[1..q.len() - 1]);
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('"');
    out
}

pub(super) fn find(s: &[u8], c: u8) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

pub(super) fn rfind(s: &[u8], c: u8) -> Option<usize> {
    s.iter().rposition(|&b| b == c)
}

/// `net/url.unhex`, of a hex digit.
pub(super) fn unhex(c: u8) -> u8 {
    9 * (c >> 6) + (c & 15)
}
