//! The FieldsV1 wire format of `metadata.managedFields[].fieldsV1`: a JSON object whose keys are
//! serialized path elements (`f:name`, `k:{json}`, `v:json`, `i:n`, and `.` for "this node is a
//! member too"). Encoding is byte-identical to structured-merge-diff's; decoding accepts everything
//! the apiserver accepts (unknown prefixes are dropped, trailing data in `k:`/`v:` is ignored).

use super::element::{KeyField, PathElement};
use super::set::Set;
use crate::value::gofmt::{Escape, write_json_string};
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
pub(super) const MAX_DEPTH: usize = 512;

impl Set {
    /// Encodes the set as FieldsV1 JSON, exactly as structured-merge-diff does.
    pub fn to_fields_v1(&self) -> String {
        super::encode::encode(self)
    }

    /// Decodes FieldsV1 JSON bytes.
    pub fn from_fields_v1(input: &[u8]) -> Result<Set, FieldsV1Error> {
        super::decode::decode(input)
    }

    /// Decodes FieldsV1 that was already parsed as part of a larger JSON or YAML document.
    /// The same set (or error) as decoding its JSON text; only a problem is written out as
    /// text, to be located in it.
    pub fn from_fields_v1_value(v: &Value) -> Result<Set, FieldsV1Error> {
        match super::decode::decode_value(v) {
            Some(set) => Ok(set),
            None => Set::from_fields_v1(vjson::to_string(v, Style::PLAIN).as_bytes()),
        }
    }
}

/// Serializes a path element the way smd writes FieldsV1 keys (`f:`, `k:`, `v:`, `i:`).
pub fn serialize_path_element(pe: &PathElement) -> String {
    let mut s = String::new();
    pe_text(&mut s, pe);
    s
}

pub(super) fn pe_text(s: &mut String, pe: &PathElement) {
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

/// Why a key could not be turned into a path element.
pub(super) enum PeError {
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

pub(super) fn parse_pe(s: &str) -> Result<PathElement, PeError> {
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
pub(super) fn unescape_simple(body: &str, out: &mut String) -> bool {
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
