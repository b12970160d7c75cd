//! Go's text formatting rules that show up in Kubernetes wire data and messages: float formatting
//! (`encoding/json`, json-iterator and `fmt`'s `%v`), string quoting (`%q`) and JSON string escaping.

use std::fmt::Write;

/// Which Go encoder's float rules to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatStyle {
    /// `encoding/json`: `%f` in [1e-6, 1e21), else `%e` with a single-digit negative exponent (`1e-7`).
    GoJson,
    /// json-iterator (used by structured-merge-diff for FieldsV1): like `GoJson` but `1e-07`.
    Jsoniter,
}

/// How to escape strings inside JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escape {
    /// `encoding/json` default: also `<`, `>`, `&` and U+2028/U+2029.
    Html,
    /// `encoding/json` with `SetEscapeHTML(false)`: U+2028/U+2029 still escaped.
    NoHtml,
    /// json-iterator object keys: only quotes, backslashes and control characters.
    Minimal,
}

/// Shortest round-trip decimal digits of a finite, non-negative float and the position of the
/// decimal point (`0.0123` → ("123", -1)).
fn shortest_digits(f: f64) -> (String, i32) {
    if f == 0.0 {
        return ("0".to_string(), 1);
    }
    let s = format!("{:e}", f);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    (digits, exp + 1)
}

fn fmt_f(digits: &str, dp: i32, out: &mut String) {
    let nd = digits.len() as i32;
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(digits);
    } else if dp >= nd {
        out.push_str(digits);
        for _ in 0..(dp - nd) {
            out.push('0');
        }
    } else {
        out.push_str(&digits[..dp as usize]);
        out.push('.');
        out.push_str(&digits[dp as usize..]);
    }
}

fn fmt_e(digits: &str, dp: i32, out: &mut String) {
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    let exp = if digits == "0" { 0 } else { dp - 1 };
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let a = exp.unsigned_abs();
    if a < 10 {
        out.push('0');
    }
    let _ = write!(out, "{a}");
}

/// Formats a float the way the chosen Go JSON encoder does.
pub fn format_float_json(f: f64, style: FloatStyle) -> String {
    let mut out = String::new();
    if f.is_sign_negative() {
        out.push('-');
    }
    let a = f.abs();
    let (digits, dp) = shortest_digits(a);
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let start = out.len();
        fmt_e(&digits, dp, &mut out);
        if style == FloatStyle::GoJson {
            // encoding/json turns e-07 into e-7
            let tail = &out[start..];
            if let Some(pos) = tail.find("e-0") {
                let abs_pos = start + pos + 2;
                out.remove(abs_pos);
            }
        }
    } else {
        fmt_f(&digits, dp, &mut out);
    }
    out
}

/// Formats a float like Go's `fmt` `%v` (shortest `%g`, exponent form from 1e-4 / 1e+06 on).
pub fn format_float_v(f: f64) -> String {
    let mut out = String::new();
    if f.is_sign_negative() {
        out.push('-');
    }
    let a = f.abs();
    let (digits, dp) = shortest_digits(a);
    let exp = if a == 0.0 { 0 } else { dp - 1 };
    if !(-4..6).contains(&exp) {
        fmt_e(&digits, dp, &mut out);
    } else {
        fmt_f(&digits, dp, &mut out);
    }
    out
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
pub fn is_go_printable(c: char) -> bool {
    use unicode_general_category::{GeneralCategory::*, get_general_category};
    if c == ' ' {
        return true;
    }
    matches!(
        get_general_category(c),
        UppercaseLetter
            | LowercaseLetter
            | TitlecaseLetter
            | ModifierLetter
            | OtherLetter
            | NonspacingMark
            | SpacingMark
            | EnclosingMark
            | DecimalNumber
            | LetterNumber
            | OtherNumber
            | ConnectorPunctuation
            | DashPunctuation
            | OpenPunctuation
            | ClosePunctuation
            | InitialPunctuation
            | FinalPunctuation
            | OtherPunctuation
            | MathSymbol
            | CurrencySymbol
            | ModifierSymbol
            | OtherSymbol
    )
}

/// [`quote`] of at most the first `max_chars` characters of a name a caller sent (to echo it
/// in an error): past that, `…` and the whole length in bytes follow the closing quote.
pub fn quote_bounded(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => quote(s),
        Some((at, _)) => format!("{}… ({} bytes)", quote(&s[..at]), s.len()),
    }
}

/// Go's `%q` (`strconv.Quote`).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_go_printable(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes each style escapes besides control characters (`\xE2`: the lead byte of
/// U+2028 and U+2029, escaped when one of those follows).
const HTML_SPECIAL: &[u8] = b"\"\\<>&\xE2";
const NO_HTML_SPECIAL: &[u8] = b"\"\\\xE2";
const MINIMAL_SPECIAL: &[u8] = b"\"\\";

/// Per byte: 0 = copy as is, 1 = escape, 2 = maybe U+2028/U+2029 (lead byte 0xE2): control
/// characters and `special`.
const fn table(special: &[u8]) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = 1;
        i += 1;
    }
    let mut j = 0;
    while j < special.len() {
        t[special[j] as usize] = if special[j] == 0xE2 { 2 } else { 1 };
        j += 1;
    }
    t
}

static HTML: [u8; 256] = table(HTML_SPECIAL);
static NO_HTML: [u8; 256] = table(NO_HTML_SPECIAL);
static MINIMAL: [u8; 256] = table(MINIMAL_SPECIAL);

/// True if no byte of `s` is a control character or one of `extra`; `table` marks exactly
/// those bytes (nonzero). Strings of sixteen bytes or more are checked sixteen at a time (the
/// last sixteen overlapping the chunk before); shorter ones, the usual object key or value,
/// through the table without a branch per byte.
#[inline]
fn none_of(s: &str, extra: &[u8], table: &[u8; 256]) -> bool {
    let b = s.as_bytes();
    #[cfg(target_arch = "x86_64")]
    if b.len() >= 16 {
        let mut at = 0;
        while at + 16 < b.len() {
            if any16(&b[at..at + 16], extra) {
                return false;
            }
            at += 16;
        }
        return !any16(&b[b.len() - 16..], extra);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = extra;
    b.iter().fold(0, |acc, &c| acc | table[c as usize]) == 0
}

/// True if one of sixteen bytes is a control character or one of `extra`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn any16(chunk: &[u8], extra: &[u8]) -> bool {
    mask16(chunk, extra) != 0
}

/// Which of sixteen bytes is a control character or one of `extra`: bit i set for byte i.
#[cfg(target_arch = "x86_64")]
#[inline]
fn mask16(chunk: &[u8], extra: &[u8]) -> u32 {
    use std::arch::x86_64::*;
    let chunk: &[u8; 16] = chunk.try_into().unwrap_or(&[0; 16]);
    // SAFETY: SSE2 is part of every x86_64 target; the load is unaligned and reads the
    // sixteen bytes of `chunk`.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        // Unsigned `v <= 0x1f`: the larger of `v` and 0x1f is 0x1f.
        let mut m = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        for &e in extra {
            m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(e as i8)));
        }
        _mm_movemask_epi8(m) as u32
    }
}

/// True if JSON writes `s` verbatim with minimal escaping (no control byte, `"` or `\\`).
#[inline]
pub fn json_plain(s: &str) -> bool {
    none_of(s, MINIMAL_SPECIAL, &MINIMAL)
}

/// True if every escaping style writes `s` verbatim (also no `<`, `>`, `&` or the lead byte
/// of U+2028/U+2029).
#[inline]
pub fn json_plain_everywhere(s: &str) -> bool {
    none_of(s, HTML_SPECIAL, &HTML)
}

/// Appends `s` as a JSON string literal with the given escaping rules.
#[inline]
pub fn write_json_string(out: &mut String, s: &str, esc: Escape) {
    out.push('"');
    write_json_string_body(out, s, esc);
    out.push('"');
}

/// Appends the escaped contents of a JSON string literal (without the quotes). Inlined: most
/// strings need no escaping, and for those this is a check and a copy.
#[inline]
pub fn write_json_string_body(out: &mut String, s: &str, esc: Escape) {
    let verbatim = match esc {
        Escape::Minimal => json_plain(s),
        _ => json_plain_everywhere(s),
    };
    if verbatim {
        out.push_str(s);
    } else {
        write_escaped(out, s, esc);
    }
}

/// [`write_json_string_body`] for a string with something to escape.
#[inline(never)]
fn write_escaped(out: &mut String, s: &str, esc: Escape) {
    let (t, special) = match esc {
        Escape::Html => (&HTML, HTML_SPECIAL),
        Escape::NoHtml => (&NO_HTML, NO_HTML_SPECIAL),
        Escape::Minimal => (&MINIMAL, MINIMAL_SPECIAL),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = special;
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Runs without anything to escape: sixteen bytes at a time.
        #[cfg(target_arch = "x86_64")]
        if let Some(chunk) = bytes.get(i..i + 16) {
            let m = mask16(chunk, special);
            if m == 0 {
                i += 16;
                continue;
            }
            i += m.trailing_zeros() as usize;
        }
        let b = bytes[i];
        match t[b as usize] {
            0 => {
                i += 1;
                continue;
            }
            2 => {
                if i + 2 < bytes.len()
                    && bytes[i + 1] == 0x80
                    && (bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9)
                {
                    out.push_str(&s[start..i]);
                    out.push_str(if bytes[i + 2] == 0xA8 {
                        "\\u2028"
                    } else {
                        "\\u2029"
                    });
                    i += 3;
                    start = i;
                } else {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        out.push_str(&s[start..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b => {
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xF) as usize] as char);
            }
        }
        i += 1;
        start = i;
    }
    out.push_str(&s[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_checks_agree_with_byte_by_byte_checks() {
        let alphabet = [
            "a", "Z", "0", "\"", "\\", "\n", "\u{1f}", " ", "<", ">", "&", "é", "\u{2028}", "~",
            "\u{7f}",
        ];
        let mut seed = 7u64;
        for _ in 0..5000 {
            let mut s = String::new();
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (seed >> 58) as usize;
            for k in 0..len {
                let r = seed.rotate_left(k as u32 * 7) as usize;
                s.push_str(alphabet[r % alphabet.len()]);
            }
            let minimal = !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\');
            let everywhere = minimal && !s.bytes().any(|b| matches!(b, b'<' | b'>' | b'&' | 0xE2));
            assert_eq!(json_plain(&s), minimal, "{s:?}");
            assert_eq!(json_plain_everywhere(&s), everywhere, "{s:?}");
        }
    }

    /// Escaping long and short strings (the sixteen-byte skip over plain runs included) agrees
    /// with escaping one character at a time, in every mode.
    #[test]
    fn escaping_agrees_with_char_by_char_escaping() {
        let alphabet = [
            "a",
            "Z",
            "0",
            "\"",
            "\\",
            "\n",
            "\u{1f}",
            " ",
            "<",
            ">",
            "&",
            "é",
            "\u{2028}",
            "\u{2029}",
            "\u{2027}",
            "~",
            "\u{7f}",
            "abcdefghijklmnopq",
        ];
        let reference = |s: &str, esc: Escape| {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    '<' | '>' | '&' if esc == Escape::Html => {
                        out.push_str(&format!("\\u{:04x}", c as u32))
                    }
                    '\u{2028}' | '\u{2029}' if esc != Escape::Minimal => {
                        out.push_str(&format!("\\u{:04x}", c as u32))
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        let mut rng = crate::value::skim::Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..3000 {
            let mut s = String::new();
            for _ in 0..rng.below(64) {
                let r = rng.below(3 * alphabet.len());
                // Mostly plain text, so that runs of sixteen and more occur.
                let pick = if r % 3 == 0 {
                    r / 3 % alphabet.len()
                } else {
                    r % 3
                };
                s.push_str(alphabet[pick]);
            }
            for esc in [Escape::Html, Escape::NoHtml, Escape::Minimal] {
                let mut got = String::new();
                write_json_string(&mut got, &s, esc);
                assert_eq!(got, reference(&s, esc), "{s:?} {esc:?}");
            }
        }
    }

    // Expected strings were printed by Go 1.19 (encoding/json, json-iterator, fmt %v).
    #[test]
    fn floats_like_go() {
        let cases: &[(f64, &str, &str, &str)] = &[
            (1e6, "1000000", "1000000", "1e+06"),
            (100000.0, "100000", "100000", "100000"),
            (123456789.0, "123456789", "123456789", "1.23456789e+08"),
            (1e-5, "0.00001", "0.00001", "1e-05"),
            (0.0001, "0.0001", "0.0001", "0.0001"),
            (2.5, "2.5", "2.5", "2.5"),
            (
                1e20,
                "100000000000000000000",
                "100000000000000000000",
                "1e+20",
            ),
            (1e21, "1e+21", "1e+21", "1e+21"),
            (1e-7, "1e-7", "1e-07", "1e-07"),
            (1e-6, "0.000001", "0.000001", "1e-06"),
            (0.0, "0", "0", "0"),
            (-2.0, "-2", "-2", "-2"),
            (1.5e300, "1.5e+300", "1.5e+300", "1.5e+300"),
        ];
        for (f, json, jsoniter, v) in cases {
            assert_eq!(format_float_json(*f, FloatStyle::GoJson), *json, "json {f}");
            assert_eq!(
                format_float_json(*f, FloatStyle::Jsoniter),
                *jsoniter,
                "jsoniter {f}"
            );
            assert_eq!(format_float_v(*f), *v, "%v {f}");
        }
    }

    #[test]
    fn quote_like_go() {
        assert_eq!(quote("app"), "\"app\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(
            quote("<>&\u{2028}\u{1}\u{7f}é"),
            "\"<>&\\u2028\\x01\\x7fé\""
        );
        assert_eq!(quote("\n\t"), "\"\\n\\t\"");
    }

    #[test]
    fn json_escaping_modes() {
        let s = "q\"b\\s\u{1}\n\t\u{2028}é\u{7f}<&";
        let mut a = String::new();
        write_json_string(&mut a, s, Escape::Minimal);
        assert_eq!(a, "\"q\\\"b\\\\s\\u0001\\n\\t\u{2028}é\u{7f}<&\"");
        let mut b = String::new();
        write_json_string(&mut b, s, Escape::Html);
        assert_eq!(
            b,
            "\"q\\\"b\\\\s\\u0001\\n\\t\\u2028é\u{7f}\\u003c\\u0026\""
        );
        let mut c = String::new();
        write_json_string(&mut c, s, Escape::NoHtml);
        assert_eq!(c, "\"q\\\"b\\\\s\\u0001\\n\\t\\u2028é\u{7f}<&\"");
    }
}
