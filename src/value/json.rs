//! JSON in and out with Kubernetes' (Go's) conventions: integers that fit `i64` stay integers,
//! duplicate object keys keep the last value, nesting is bounded, and output can follow Go's
//! encoders byte for byte (sorted keys, float format, escaping).

use super::gofmt::{Escape, FloatStyle, format_float_json, write_json_string};
use super::{Map, Seen, Str, Value};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use std::fmt;

/// A JSON syntax error with its position.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} (line {line}, column {column})")]
pub struct JsonError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl From<serde_json::Error> for JsonError {
    fn from(e: serde_json::Error) -> Self {
        // serde_json appends " at line L column C"; keep the message clean.
        let msg = e.to_string();
        let message = match msg.rfind(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        JsonError {
            message,
            line: e.line(),
            column: e.column(),
        }
    }
}

/// Parses a document of at most `max_bytes` (Kubernetes objects: [`super::MAX_DOCUMENT_BYTES`]).
/// Larger input is rejected before any parsing.
pub fn parse_limited(input: &[u8], max_bytes: usize) -> Result<Value, JsonError> {
    if input.len() > max_bytes {
        return Err(JsonError {
            message: format!(
                "document is {} bytes, more than the limit of {max_bytes}",
                input.len()
            ),
            line: 1,
            column: 1,
        });
    }
    parse(input)
}

/// Parses one JSON document (trailing non-whitespace is an error). Nesting is limited to 128 levels.
pub fn parse(input: &[u8]) -> Result<Value, JsonError> {
    // Valid UTF-8 (nearly always): validated once here instead of string by string.
    let Ok(text) = std::str::from_utf8(input) else {
        let mut de = serde_json::Deserializer::from_slice(input);
        let v = Value::deserialize_value(&mut de)?;
        de.end()?;
        return Ok(v);
    };
    if let Some(v) = super::direct::read(text) {
        #[cfg(debug_assertions)]
        same_as_serde(&v, serde_lenient(text));
        return Ok(v);
    }
    serde_lenient(text)
}

/// [`parse`] of a string by serde_json alone (which explains problems).
pub(super) fn serde_lenient(text: &str) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Value::deserialize_value(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Debug builds: what the direct reader gave is what serde_json gives, exactly (the order of
/// keys and integers against floats included).
#[cfg(debug_assertions)]
fn same_as_serde(direct: &Value, serde: Result<Value, JsonError>) {
    match serde {
        Ok(v) => assert_eq!(
            format!("{direct:?}"),
            format!("{v:?}"),
            "direct JSON reader"
        ),
        Err(e) => panic!("the direct JSON reader read what serde_json refuses: {e}"),
    }
}

/// Parses a JSON document from a string.
pub fn parse_str(input: &str) -> Result<Value, JsonError> {
    parse(input.as_bytes())
}

/// Like [`parse`], but a repeated object key is an error (as for manifests users write).
pub fn parse_strict(input: &[u8]) -> Result<Value, JsonError> {
    if let Some(v) = std::str::from_utf8(input)
        .ok()
        .and_then(super::direct::read)
    {
        #[cfg(debug_assertions)]
        same_as_serde(&v, serde_strict(input));
        return Ok(v);
    }
    serde_strict(input)
}

/// [`parse_strict`] by serde_json alone, without the direct reader: what every document went
/// through before it (benchmarks compare the two).
#[doc(hidden)]
pub fn parse_strict_by_serde(input: &[u8]) -> Result<Value, JsonError> {
    serde_strict(input)
}

/// [`parse_strict`] by serde_json alone (which explains problems).
pub(super) fn serde_strict(input: &[u8]) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_slice(input);
    let v = de::DeserializeSeed::deserialize(Strict, &mut de)?;
    de.end()?;
    Ok(v)
}

/// Parses a JSON object of at most [`MAX_KEPT_OBJECT_KEYS`] members whose member `key` is kept
/// as its exact text instead of being built (callers that may already know that text skip
/// building it). `None` for anything else: callers then [`parse`] it whole, for the value or the
/// located error. The kept text is checked as JSON, but not for nesting depth.
pub fn parse_object_keeping<'a>(input: &'a [u8], key: &str) -> Option<(Map, Option<&'a str>)> {
    let text = std::str::from_utf8(input).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let out = de.deserialize_map(Keeping(key)).ok()?;
    de.end().ok()?;
    Some(out)
}

/// Members [`parse_object_keeping`] reads before it gives up (the object is then parsed whole,
/// whose maps index their keys; this one looks each key up in turn).
pub const MAX_KEPT_OBJECT_KEYS: usize = 32;

/// The top-level visitor of [`parse_object_keeping`]: repeated keys keep the last value, as
/// [`parse`] does.
struct Keeping<'k>(&'k str);

impl<'de> Visitor<'de> for Keeping<'_> {
    type Value = (Map, Option<&'de str>);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut m = Map::with_capacity(access.size_hint().unwrap_or(8));
        let mut kept = None;
        while let Some(k) = access.next_key::<KeyStr>()? {
            if k.0 == self.0 {
                let raw: &'de serde_json::value::RawValue = access.next_value()?;
                kept = Some(raw.get());
            } else {
                m.insert(k.0, access.next_value::<Value>()?);
            }
            if m.len() >= MAX_KEPT_OBJECT_KEYS {
                return Err(de::Error::custom("too many members"));
            }
        }
        Ok((m, kept))
    }
}

impl Value {
    fn deserialize_value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor::<false>)
    }
}

impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor::<false>)
    }
}

/// A value whose objects must not repeat keys.
#[derive(Clone, Copy)]
struct Strict;

impl<'de> de::DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor::<true>)
    }
}

/// Builds values; `STRICT`: repeated keys are errors (else the last value wins).
struct ValueVisitor<const STRICT: bool>;

impl<const STRICT: bool> ValueVisitor<STRICT> {
    fn element<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<Option<Value>, A::Error> {
        if STRICT {
            seq.next_element_seed(Strict)
        } else {
            seq.next_element::<Value>()
        }
    }
    fn value<'de, A: MapAccess<'de>>(access: &mut A) -> Result<Value, A::Error> {
        if STRICT {
            access.next_value_seed(Strict)
        } else {
            access.next_value::<Value>()
        }
    }
}

impl<'de, const STRICT: bool> Visitor<'de> for ValueVisitor<STRICT> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Float(v as f64),
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(Str::from(v)))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(Str::from(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        // No guess at the size: an empty list (and map, below) then allocates nothing, and a
        // list that has elements grows from four as if it had been given four.
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = Self::element(&mut seq)? {
            out.push(v);
        }
        Ok(Value::List(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut m = Map::with_capacity(access.size_hint().unwrap_or(0));
        let mut seen = Seen::default();
        while let Some(k) = access.next_key::<KeyStr>()? {
            let v = Self::value(&mut access)?;
            match seen.find(&m, &k.0) {
                Some(_) if STRICT => {
                    let key = super::gofmt::quote(&k.0);
                    return Err(de::Error::custom(format!("duplicate key {key}")));
                }
                Some(pos) => m.entries_mut()[pos].1 = v,
                None => {
                    m.push_unique(k.0, v);
                    seen.pushed(&m);
                }
            }
        }
        Ok(Value::Map(m))
    }
}

struct KeyStr(Str);

impl<'de> serde::Deserialize<'de> for KeyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyStr, E> {
                Ok(KeyStr(Str::from(v)))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<KeyStr, E> {
                Ok(KeyStr(Str::from(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Output options for [`write`].
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// Sort map keys bytewise (Go encodes maps this way); otherwise keep insertion order.
    pub sort_keys: bool,
    pub escape: Escape,
    pub floats: FloatStyle,
}

impl Style {
    /// `json.Marshal` of an unstructured object.
    pub const GO: Style = Style {
        sort_keys: true,
        escape: Escape::Html,
        floats: FloatStyle::GoJson,
    };
    /// A `json.Encoder` with `SetEscapeHTML(false)`.
    pub const GO_NO_HTML: Style = Style {
        sort_keys: true,
        escape: Escape::NoHtml,
        floats: FloatStyle::GoJson,
    };
    /// Values inside FieldsV1 keys (json-iterator, standard-library compatible).
    pub const JSONITER: Style = Style {
        sort_keys: true,
        escape: Escape::Html,
        floats: FloatStyle::Jsoniter,
    };
    /// Human-facing compact JSON: document order, no HTML escaping.
    pub const PLAIN: Style = Style {
        sort_keys: false,
        escape: Escape::NoHtml,
        floats: FloatStyle::GoJson,
    };
}

/// Appends the compact JSON of `v`.
pub fn write(out: &mut String, v: &Value, style: Style) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            out.push_str(itoa::Buffer::new().format(*i));
        }
        Value::Float(f) => {
            // Integral values below 2^53 print like integers in every Go style.
            if f.fract() == 0.0
                && f.abs() < 9.007_199_254_740_992e15
                && !(*f == 0.0 && f.is_sign_negative())
            {
                out.push_str(itoa::Buffer::new().format(*f as i64));
            } else {
                out.push_str(&format_float_json(*f, style.floats));
            }
        }
        Value::String(s) => write_json_string(out, s, style.escape),
        Value::List(l) => {
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, e, style);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            // Most maps are already in key order (they were read from JSON written that way):
            // only the others are sorted, into a vector of their entries.
            if style.sort_keys && !m.is_sorted_by_key() {
                write_entries(out, m.sorted_copy().into_iter(), style);
            } else {
                write_entries(out, m.iter(), style);
            }
            out.push('}');
        }
    }
}

/// A map's entries, in the order given, separated by commas.
fn write_entries<'v>(
    out: &mut String,
    entries: impl Iterator<Item = (&'v Str, &'v Value)>,
    style: Style,
) {
    for (i, (k, e)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json_string(out, k, style.escape);
        out.push(':');
        write(out, e, style);
    }
}

/// The compact JSON of `v`.
pub fn to_string(v: &Value, style: Style) -> String {
    let mut s = String::new();
    write(&mut s, v, style);
    s
}

impl serde::Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            // Go prints integral floats without a fraction; keep that for readers.
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => {
                s.serialize_i64(*f as i64)
            }
            Value::Float(f) => s.serialize_f64(*f),
            Value::String(v) => s.serialize_str(v),
            Value::List(l) => {
                let mut seq = s.serialize_seq(Some(l.len()))?;
                for e in l {
                    seq.serialize_element(e)?;
                }
                seq.end()
            }
            Value::Map(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m.iter() {
                    map.serialize_entry(k.as_str(), v)?;
                }
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Maps past the size where lookups go through a hash index: repeated keys are still
    /// found (strict) or replaced in place (last wins), and the order is kept.
    #[test]
    fn large_maps_find_repeated_keys() {
        let mut text = String::from("{");
        for i in 0..100 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        text.push_str("\"k50\":\"again\"}");
        let e = parse_strict(text.as_bytes()).unwrap_err();
        assert!(e.message.contains("duplicate key \"k50\""), "{e}");
        let v = parse(text.as_bytes()).unwrap();
        let m = v.as_map().unwrap();
        assert_eq!(m.len(), 100);
        assert_eq!(m.get("k50"), Some(&Value::from("again")));
        assert_eq!(m.keys().nth(50).map(|k| k.as_str()), Some("k50"));
        assert_eq!(m.keys().last().map(|k| k.as_str()), Some("k99"));
    }

    #[test]
    fn numbers_follow_go_unstructured_decoding() {
        let v = parse(br#"{"a":1,"b":1.0,"c":1e3,"d":18446744073709551615}"#).unwrap();
        let m = v.as_map().unwrap();
        assert!(matches!(m.get("a"), Some(Value::Int(1))));
        assert!(matches!(m.get("b"), Some(Value::Float(f)) if *f == 1.0));
        assert!(matches!(m.get("c"), Some(Value::Float(f)) if *f == 1000.0));
        assert!(matches!(m.get("d"), Some(Value::Float(_))));
    }

    #[test]
    fn duplicate_keys_keep_last_value() {
        let v = parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(to_string(&v, Style::PLAIN), r#"{"a":3,"b":2}"#);
        // Keys alike in length and last byte are still told apart; repeats are found.
        let v = parse(br#"{"ab":1,"cb":2,"ab":3,"":4,"cb":5,"":6,"abcdefghb":7}"#).unwrap();
        assert_eq!(
            to_string(&v, Style::PLAIN),
            r#"{"ab":3,"cb":5,"":6,"abcdefghb":7}"#
        );
    }

    #[test]
    fn strict_parsing_rejects_repeated_keys_with_their_position() {
        let e = parse_strict(b"{\"a\": {\"b\": 1,\n \"b\": 2}}").unwrap_err();
        assert!(e.message.contains("duplicate key \"b\""), "{e}");
        assert_eq!(e.line, 2);
        assert!(parse_strict(br#"{"a":[{"b":1},{"b":2}]}"#).is_ok());
    }

    #[test]
    fn go_output_sorts_keys_and_formats_floats() {
        let v = parse(br#"{"z":2.0,"a":"<x>","m":[1e-7,1e21]}"#).unwrap();
        assert_eq!(
            to_string(&v, Style::GO),
            r#"{"a":"\u003cx\u003e","m":[1e-7,1e+21],"z":2}"#
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        let err = parse(deep.as_bytes()).unwrap_err();
        assert!(err.message.contains("recursion limit"), "{err}");
    }

    #[test]
    fn enormous_documents_are_rejected_before_parsing() {
        let big = vec![b' '; 4 * 1024 * 1024];
        let err = parse_limited(&big, crate::value::MAX_DOCUMENT_BYTES).unwrap_err();
        assert!(err.message.contains("more than the limit"), "{err}");
    }

    #[test]
    fn trailing_data_is_rejected_with_position() {
        let err = parse(b"{\"a\":1}\n x").unwrap_err();
        assert_eq!(err.line, 2);
    }
}
