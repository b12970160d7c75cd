//! The FieldsV1 wire format of `metadata.managedFields[].fieldsV1`: a JSON object whose keys are
//! serialized path elements (`f:name`, `k:{json}`, `v:json`, `i:n`, and `.` for "this node is a
//! member too"). Encoding is byte-identical to structured-merge-diff's; decoding accepts everything
//! the apiserver accepts (unknown prefixes are dropped, trailing data in `k:`/`v:` is ignored).

use super::element::{KeyField, PathElement};
use super::set::Set;
use crate::value::gofmt::{Escape, json_plain, json_plain_everywhere, write_json_string};
use crate::value::json::{self as vjson, Style};
use crate::value::{Map, Str, Value};
use std::fmt::Write;

/// Why a FieldsV1 document could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid FieldsV1 at byte {offset}: {message}")]
pub struct FieldsV1Error {
    pub offset: usize,
    pub message: String,
}

/// Deepest FieldsV1 nesting accepted (objects are at most 128 deep, plus list items).
const MAX_DEPTH: usize = 512;

impl Set {
    /// Encodes the set as FieldsV1 JSON, exactly as structured-merge-diff does.
    pub fn to_fields_v1(&self) -> String {
        let mut out = String::with_capacity(256);
        let mut key = String::new();
        out.push('{');
        self.emit(false, &mut out, &mut key);
        out.push('}');
        out
    }

    fn emit(&self, include_self: bool, out: &mut String, key: &mut String) {
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !first {
                out.push(',');
            }
            first = false;
        };
        if include_self && !(self.members().is_empty() && self.children().is_empty()) {
            sep(out);
            out.push_str("\".\":{}");
        }
        let (members, children) = (self.members(), self.children());
        let (mut mi, mut ci) = (0, 0);
        while mi < members.len() || ci < children.len() {
            let ord = match (members.get(mi), children.get(ci)) {
                (Some(m), Some((c, _))) => m.compare(c),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            sep(out);
            match ord {
                std::cmp::Ordering::Less => {
                    write_key(out, key, &members[mi]);
                    out.push_str(":{}");
                    mi += 1;
                }
                std::cmp::Ordering::Greater => {
                    let (pe, sub) = &children[ci];
                    write_key(out, key, pe);
                    out.push_str(":{");
                    sub.emit(false, out, key);
                    out.push('}');
                    ci += 1;
                }
                std::cmp::Ordering::Equal => {
                    let (pe, sub) = &children[ci];
                    write_key(out, key, pe);
                    out.push_str(":{");
                    sub.emit(true, out, key);
                    out.push('}');
                    mi += 1;
                    ci += 1;
                }
            }
        }
    }

    /// Decodes FieldsV1 JSON bytes.
    pub fn from_fields_v1(input: &[u8]) -> Result<Set, FieldsV1Error> {
        let text = std::str::from_utf8(input).map_err(|e| FieldsV1Error {
            offset: e.valid_up_to(),
            message: "invalid UTF-8".into(),
        })?;
        let mut d = Decoder {
            s: text,
            b: input,
            i: 0,
            scratch: String::new(),
        };
        d.ws();
        let (children, _) = d.object(0)?;
        Ok(children.unwrap_or_default())
    }

    /// Decodes FieldsV1 that was already parsed as part of a larger JSON or YAML document.
    pub fn from_fields_v1_value(v: &Value) -> Result<Set, FieldsV1Error> {
        let text = vjson::to_string(v, Style::PLAIN);
        Set::from_fields_v1(text.as_bytes())
    }
}

/// Serializes a path element the way smd writes FieldsV1 keys (`f:`, `k:`, `v:`, `i:`).
pub fn serialize_path_element(pe: &PathElement) -> String {
    let mut s = String::new();
    pe_text(&mut s, pe);
    s
}

fn pe_text(s: &mut String, pe: &PathElement) {
    match pe {
        PathElement::Field(n) => {
            s.push_str("f:");
            s.push_str(n);
        }
        PathElement::Key(fields) => {
            s.push_str("k:{");
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                write_json_string(s, &f.name, Escape::Minimal);
                s.push(':');
                vjson::write(s, &f.value, Style::JSONITER);
            }
            s.push('}');
        }
        PathElement::Value(v) => {
            s.push_str("v:");
            vjson::write(s, v, Style::JSONITER);
        }
        PathElement::Index(i) => {
            let _ = write!(s, "i:{i}");
        }
    }
}

/// Writes a key value embedded in a JSON string when that needs no escaping at either level
/// (json-iterator encodes the value HTML-safe, then the key is itself a JSON string): plain
/// strings and non-string scalars. False otherwise (the caller discards what was written).
fn write_value_embedded(out: &mut String, v: &Value) -> bool {
    match v {
        Value::String(s) if json_plain_everywhere(s) => {
            out.push_str("\\\"");
            out.push_str(s);
            out.push_str("\\\"");
            true
        }
        Value::String(_) | Value::List(_) | Value::Map(_) => false,
        // Numbers and literals print without characters JSON escapes.
        scalar => {
            vjson::write(out, scalar, Style::JSONITER);
            true
        }
    }
}

fn write_key(out: &mut String, buf: &mut String, pe: &PathElement) {
    let mark = out.len();
    let direct = match pe {
        PathElement::Field(n) if json_plain(n) => {
            out.push_str("\"f:");
            out.push_str(n);
            true
        }
        PathElement::Key(fields) => {
            out.push_str("\"k:{");
            let mut ok = true;
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !json_plain_everywhere(&f.name) {
                    ok = false;
                    break;
                }
                out.push_str("\\\"");
                out.push_str(&f.name);
                out.push_str("\\\":");
                if !write_value_embedded(out, &f.value) {
                    ok = false;
                    break;
                }
            }
            out.push('}');
            ok
        }
        PathElement::Value(v) => {
            out.push_str("\"v:");
            write_value_embedded(out, v)
        }
        _ => false,
    };
    if direct {
        out.push('"');
        return;
    }
    // Anything needing escapes: the key's text, escaped as a whole.
    out.truncate(mark);
    buf.clear();
    pe_text(buf, pe);
    write_json_string(out, buf, Escape::Minimal);
}

/// Why a key could not be turned into a path element.
enum PeError {
    /// A prefix this version does not know: dropped, like the apiserver does.
    Unknown,
    Invalid(String),
}

/// Parses a FieldsV1 key (smd `DeserializePathElement`).
pub fn deserialize_path_element(s: &str) -> Result<Option<PathElement>, String> {
    match parse_pe(s) {
        Ok(pe) => Ok(Some(pe)),
        Err(PeError::Unknown) => Ok(None),
        Err(PeError::Invalid(m)) => Err(m),
    }
}

fn parse_pe(s: &str) -> Result<PathElement, PeError> {
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err(PeError::Invalid("key must be 2 characters long".into()));
    }
    if b[1] != b':' {
        return Err(PeError::Invalid(format!("missing colon: {s}")));
    }
    let rest = &s[2..];
    match b[0] {
        b'f' => Ok(PathElement::Field(Str::from(rest))),
        b'v' => {
            let v = lenient_value(rest).map_err(PeError::Invalid)?;
            Ok(PathElement::Value(v))
        }
        b'k' => {
            if let Some(fields) = flat_key(rest) {
                return Ok(PathElement::key(fields));
            }
            let v = lenient_value(rest).map_err(PeError::Invalid)?;
            match v {
                Value::Map(m) => Ok(PathElement::key(
                    m.into_entries()
                        .into_iter()
                        .map(|(name, value)| KeyField { name, value })
                        .collect(),
                )),
                Value::Null => Ok(PathElement::Key(std::sync::Arc::from(Vec::new()))),
                other => Err(PeError::Invalid(format!(
                    "key payload must be an object, found {}",
                    other.type_name()
                ))),
            }
        }
        b'i' => go_atoi(rest)
            .map(PathElement::Index)
            .ok_or_else(|| PeError::Invalid(format!("invalid index {rest:?}"))),
        _ => Err(PeError::Unknown),
    }
}

/// Fast path for the usual key payload: a flat object of strings, numbers, booleans and nulls
/// with no escapes in names (`{"containerPort":80,"protocol":"TCP"}`). `None`: use the general
/// parser. Numbers become floats, as json-iterator decodes them.
fn flat_key(s: &str) -> Option<Vec<KeyField>> {
    let b = s.as_bytes();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut out = Vec::with_capacity(2);
    ws(&mut i);
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        ws(&mut i);
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let start = i + 1;
        let end = start + memchr::memchr2(b'"', b'\\', &b[start..])?;
        if b[end] != b'"' {
            return None;
        }
        let name = &s[start..end];
        i = end + 1;
        ws(&mut i);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        ws(&mut i);
        let value = match b.get(i)? {
            b'"' => {
                let vs = i + 1;
                let ve = vs + memchr::memchr2(b'"', b'\\', &b[vs..])?;
                if b[ve] != b'"' {
                    return None;
                }
                i = ve + 1;
                Value::String(Str::from(&s[vs..ve]))
            }
            b't' if s[i..].starts_with("true") => {
                i += 4;
                Value::Bool(true)
            }
            b'f' if s[i..].starts_with("false") => {
                i += 5;
                Value::Bool(false)
            }
            b'n' if s[i..].starts_with("null") => {
                i += 4;
                Value::Null
            }
            c if c.is_ascii_digit() || *c == b'-' => {
                let ns = i;
                while i < b.len()
                    && (b[i].is_ascii_digit() || matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    i += 1;
                }
                Value::Float(s[ns..i].parse::<f64>().ok()?)
            }
            _ => return None,
        };
        out.push(KeyField {
            name: Str::from(name),
            value,
        });
        ws(&mut i);
        match b.get(i)? {
            b',' => i += 1,
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// Reads the first JSON value of `s` (trailing data is ignored, as json-iterator does) with all
/// numbers as floats (json-iterator decodes untyped numbers as `float64`).
fn lenient_value(s: &str) -> Result<Value, String> {
    let mut it = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    match it.next() {
        Some(Ok(v)) => Ok(floats(v)),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("empty value".into()),
    }
}

fn floats(v: Value) -> Value {
    match v {
        Value::Int(i) => Value::Float(i as f64),
        Value::List(l) => Value::List(l.into_iter().map(floats).collect()),
        Value::Map(m) => Value::Map(
            m.into_entries()
                .into_iter()
                .map(|(k, v)| (k, floats(v)))
                .collect::<Map>(),
        ),
        v => v,
    }
}

/// Resolves the escapes `\"`, `\\` and `\/` (all a `k:` key normally has); false if there
/// are others, which the general JSON parser handles.
fn unescape_simple(body: &str, out: &mut String) -> bool {
    let b = body.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &b[i..]) {
        let p = i + off;
        match b.get(p + 1) {
            Some(b'"') | Some(b'\\') | Some(b'/') => {
                out.push_str(&body[start..p]);
                out.push(b[p + 1] as char);
                i = p + 2;
                start = i;
            }
            _ => return false,
        }
    }
    out.push_str(&body[start..]);
    true
}

/// Go's `strconv.Atoi` (64-bit).
fn go_atoi(s: &str) -> Option<i64> {
    let (neg, digits) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let u: u64 = digits.parse().ok()?;
    if neg {
        if u <= i64::MAX as u64 + 1 {
            Some((u as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(u).ok()
    }
}

struct Decoder<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// Reused buffer for keys with escapes (every `k:` key has some).
    scratch: String,
}

/// A key as read: borrowed from the input, or unescaped into the decoder's scratch buffer.
enum KeyText<'a> {
    Borrowed(&'a str),
    Scratch,
}

impl<'a> Decoder<'a> {
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
            KeyText::Scratch => &self.scratch,
        }
    }

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
        let mut children: Option<Set> = None;
        let mut is_member = false;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok((None, true));
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            self.ws();
            let parsed = {
                let k = self.key_str(&key);
                if k == "." { None } else { Some(parse_pe(k)) }
            };
            match parsed {
                None => {
                    is_member = true;
                    self.skip_value(depth)?;
                }
                Some(Err(PeError::Unknown)) => self.skip_value(depth)?,
                Some(Err(PeError::Invalid(m))) => {
                    return self.err(format!("parsing key as path element: {m}"));
                }
                Some(Ok(pe)) => {
                    // Most values are `{}` (a leaf member): no need to recurse for those.
                    let (grand, child_member) = if self.b[self.i..].starts_with(b"{}") {
                        self.i += 2;
                        (None, true)
                    } else {
                        self.object(depth + 1)?
                    };
                    let node = children.get_or_insert_with(Set::new);
                    match (child_member, grand) {
                        (true, Some(g)) => {
                            node.push_member_sorted(pe.clone());
                            node.put_child(pe, g);
                        }
                        (true, None) => node.push_member_sorted(pe),
                        (false, Some(g)) => node.put_child(pe, g),
                        (false, None) => {}
                    }
                }
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
        if children.is_none() {
            is_member = true;
        }
        Ok((children, is_member))
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
        self.scratch.clear();
        self.scratch.push_str(&self.s[start..end]);
        let mut j = end;
        let mut simple = true;
        while j < self.b.len() {
            match self.b[j] {
                b'"' => break,
                b'\\' => match self.b.get(j + 1) {
                    Some(&c @ (b'"' | b'\\' | b'/')) => {
                        self.scratch.push(c as char);
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
                    self.scratch.push_str(&self.s[from..j]);
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
        self.scratch.clear();
        if !unescape_simple(&lit[1..lit.len() - 1], &mut self.scratch) {
            let owned: String = serde_json::from_str(lit).map_err(|e| FieldsV1Error {
                offset: lit_start,
                message: e.to_string(),
            })?;
            self.scratch = owned;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) -> String {
        Set::from_fields_v1(s.as_bytes()).unwrap().to_fields_v1()
    }

    #[test]
    fn round_trips_real_fields() {
        let real = r#"{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}}}}}}"#;
        assert_eq!(rt(real), real);
    }

    // Behaviour pinned against structured-merge-diff v4.6.0 (see the probe in the tests/ notes).
    #[test]
    fn decoder_matches_reference_leniency() {
        assert_eq!(rt(r#"{"f:a":{"v:1}":{}}}"#), r#"{"f:a":{"v:1":{}}}"#);
        assert_eq!(rt(r#"{"f:a":{"v:1 2":{}}}"#), r#"{"f:a":{"v:1":{}}}"#);
        assert_eq!(rt(r#"{"f:a":{"i:+5":{}}}"#), r#"{"f:a":{"i:5":{}}}"#);
        assert_eq!(
            rt(r#"{"f:b": null, "f:c":{"x:y":{}}}"#),
            r#"{"f:b":{},"f:c":{}}"#
        );
        assert_eq!(
            rt(r#"{"f:a":{"k:{\"b\":1,\"a\":2}":{}}}"#),
            r#"{"f:a":{"k:{\"a\":2,\"b\":1}":{}}}"#
        );
        assert_eq!(
            rt(r#"{"f:a":{"f:b":{}},"f:a":{"f:c":{}}}"#),
            r#"{"f:a":{"f:c":{}}}"#
        );
        assert_eq!(
            rt(r#"{"f:a":{"f:b":{}},"f:a":{}}"#),
            r#"{"f:a":{".":{},"f:b":{}}}"#
        );
        assert_eq!(rt(r#"{"f:a":{".":5}}"#), r#"{"f:a":{}}"#);
        assert_eq!(rt(r#"{"f:a":{}} x"#), r#"{"f:a":{}}"#);
        for bad in [
            r#"{"f:a":5}"#,
            r#"{"a":{}}"#,
            r#"{"f:a":{"v:":{}}}"#,
            r#"{"f:a":{"k:[1]":{}}}"#,
            r#"{"f:a":[]}"#,
            r#"{"f:a":"x"}"#,
            r#"{"f:a":{"#,
            "",
        ] {
            assert!(Set::from_fields_v1(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn encoder_escapes_like_the_reference() {
        // Go: fieldpath.NewSet(MakePathOrDie("q\"b\\s\x01\n\t\u2028é\x7f")) and a key with "<".
        let mut s = Set::new();
        s.insert(&[PathElement::field("q\"b\\s\u{1}\n\t\u{2028}é\u{7f}")]);
        s.insert(&[PathElement::field("a<b&c")]);
        s.insert(&[
            PathElement::field("x"),
            PathElement::key(vec![
                KeyField {
                    name: "name".into(),
                    value: "a<>&\u{2028}\u{1}".into(),
                },
                KeyField {
                    name: "n".into(),
                    value: Value::Float(2.5),
                },
            ]),
        ]);
        s.insert(&[
            PathElement::field("y"),
            PathElement::Value(Value::Float(1e-7)),
        ]);
        s.insert(&[
            PathElement::field("y"),
            PathElement::Value(Value::Float(1e21)),
        ]);
        assert_eq!(
            s.to_fields_v1(),
            "{\"f:a<b&c\":{},\"f:q\\\"b\\\\s\\u0001\\n\\t\u{2028}é\u{7f}\":{},\"f:x\":{\"k:{\\\"n\\\":2.5,\\\"name\\\":\\\"a\\\\u003c\\\\u003e\\\\u0026\\\\u2028\\\\u0001\\\"}\":{}},\"f:y\":{\"v:1e-07\":{},\"v:1e+21\":{}}}"
        );
    }

    #[test]
    fn hostile_input_fails_cleanly() {
        let deep = "{\"f:a\":".repeat(10_000);
        assert!(Set::from_fields_v1(deep.as_bytes()).is_err());
    }
}
