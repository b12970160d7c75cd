//! `metav1.ManagedFieldsEntry` and its conversion to and from managed field sets, with
//! kube-apiserver's identity rules and encoding order.

use super::FieldsCache;
use crate::fieldpath::Set;
use crate::merge::{ManagedFields, VersionedSet};
use crate::value::gofmt::{Escape, write_json_string};
use crate::value::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Seconds since the Unix epoch (managed-fields times have second precision).
pub type Time = i64;

/// `Apply` or `Update`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One entry of `metadata.managedFields`, as it appears on the wire.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ManagedFieldsEntry {
    pub manager: String,
    /// `Apply` or `Update` (kept as text: bad input must be reportable).
    pub operation: String,
    pub api_version: String,
    pub time: Option<Time>,
    pub fields_type: String,
    /// The encoded FieldsV1 JSON object (`None` when absent).
    pub fields_v1: Option<String>,
    pub subresource: String,
}

/// Decoded managed fields: sets by identity, plus each identity's time.
#[derive(Clone, Debug, Default)]
pub struct Managed {
    pub fields: ManagedFields,
    pub times: BTreeMap<String, Option<Time>>,
}

/// A manager identity, the key kube-apiserver uses for an entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub subresource: String,
}

/// kube-apiserver's `BuildManagerIdentifier`: the JSON of the entry without its fields and time,
/// and without the apiVersion for `Apply` entries.
pub fn identity(manager: &str, op: Operation, api_version: &str, subresource: &str) -> String {
    let mut s = String::with_capacity(64);
    s.push('{');
    let mut first = true;
    let mut field = |s: &mut String, k: &str, v: &str| {
        if v.is_empty() {
            return;
        }
        if !first {
            s.push(',');
        }
        first = false;
        s.push('"');
        s.push_str(k);
        s.push_str("\":");
        write_json_string(s, v, Escape::Html);
    };
    field(&mut s, "manager", manager);
    field(&mut s, "operation", op.as_str());
    if op == Operation::Update {
        field(&mut s, "apiVersion", api_version);
    }
    field(&mut s, "subresource", subresource);
    s.push('}');
    s
}

/// Parses an identity built by [`identity`].
pub fn parse_identity(key: &str) -> Option<Identity> {
    parse_plain_identity(key).or_else(|| parse_json_identity(key))
}

/// [`parse_identity`] by the JSON parser (any key the fast reading declines).
fn parse_json_identity(key: &str) -> Option<Identity> {
    let v = crate::value::json::parse_str(key).ok()?;
    let m = v.as_map()?;
    let get = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some(Identity {
        manager: get("manager"),
        operation: get("operation"),
        api_version: get("apiVersion"),
        subresource: get("subresource"),
    })
}

/// [`parse_identity`] of the usual key: an object of string members without escapes or spaces
/// (`None` for anything else, which the JSON parser then reads).
fn parse_plain_identity(key: &str) -> Option<Identity> {
    let mut rest = key.strip_prefix('{')?.strip_suffix('}')?;
    let mut id = Identity::default();
    // Reads `"text"` at the start of `rest`: text without escapes or control characters.
    fn quoted<'k>(rest: &mut &'k str) -> Option<&'k str> {
        let body = rest.strip_prefix('"')?;
        let end = body
            .bytes()
            .position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
        if body.as_bytes()[end] != b'"' {
            return None;
        }
        *rest = &body[end + 1..];
        Some(&body[..end])
    }
    while !rest.is_empty() {
        let name = quoted(&mut rest)?;
        rest = rest.strip_prefix(':')?;
        let value = quoted(&mut rest)?.to_string();
        match name {
            "manager" => id.manager = value,
            "operation" => id.operation = value,
            "apiVersion" => id.api_version = value,
            "subresource" => id.subresource = value,
            _ => {}
        }
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
            if rest.is_empty() {
                return None;
            }
        } else if !rest.is_empty() {
            return None;
        }
    }
    Some(id)
}

/// kube-apiserver's `DecodeManagedFields`.
pub fn decode(entries: &[ManagedFieldsEntry]) -> Result<Managed, String> {
    decode_with(entries, None)
}

/// [`decode`], each FieldsV1 text through `cache` when there is one.
pub fn decode_with(
    entries: &[ManagedFieldsEntry],
    cache: Option<&FieldsCache>,
) -> Result<Managed, String> {
    decode_each(
        entries
            .iter()
            .map(|e| (e, e.fields_v1.as_deref().map(Fields::Text))),
        cache,
    )
}

/// [`decode`] of entries as [`read_entries`] gives them, each FieldsV1 read as parsed instead
/// of written out as text and parsed again.
pub fn decode_read(entries: &[(ManagedFieldsEntry, Option<&Value>)]) -> Result<Managed, String> {
    decode_each(
        entries.iter().map(|(e, raw)| {
            let fields = raw.map(|raw| match raw {
                Value::String(s) => Fields::Text(s),
                v => Fields::Parsed(v),
            });
            (e, fields)
        }),
        None,
    )
}

/// An entry's FieldsV1: its text, or the object parsed with the rest.
enum Fields<'a> {
    Text(&'a str),
    Parsed(&'a Value),
}

fn decode_each<'a>(
    entries: impl Iterator<Item = (&'a ManagedFieldsEntry, Option<Fields<'a>>)>,
    cache: Option<&FieldsCache>,
) -> Result<Managed, String> {
    let mut m = Managed::default();
    for (i, (e, fields)) in entries.enumerate() {
        let op = match e.operation.as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        if e.api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match e.fields_type.as_str() {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ));
            }
        }
        let key = identity(&e.manager, op, &e.api_version, &e.subresource);
        let set = match (fields, cache) {
            (None | Some(Fields::Text("null" | "")), _) => Ok(Arc::new(Set::new())),
            (Some(Fields::Text(raw)), Some(cache)) => cache.decode(raw),
            (Some(Fields::Text(raw)), None) => Set::from_fields_v1(raw.as_bytes()).map(Arc::new),
            (Some(Fields::Parsed(v)), _) => Set::from_fields_v1_value(v).map(Arc::new),
        }
        .map_err(|err| {
            format!("error decoding versioned set for {key}: error decoding set: {err}")
        })?;
        m.fields.insert(
            key.clone(),
            VersionedSet {
                set,
                api_version: e.api_version.clone(),
                applied: op == Operation::Apply,
            },
        );
        m.times.insert(key, e.time);
    }
    Ok(m)
}

/// kube-apiserver's `encodeManagedFields` with its sort order
/// (operation, time, manager, apiVersion, subresource).
pub fn encode(m: &Managed) -> Vec<ManagedFieldsEntry> {
    encode_with(m, None)
}

/// [`encode`], each set through `cache` when there is one.
pub fn encode_with(m: &Managed, cache: Option<&FieldsCache>) -> Vec<ManagedFieldsEntry> {
    let mut out: Vec<ManagedFieldsEntry> = m
        .fields
        .iter()
        .map(|(key, vs)| {
            let id = parse_identity(key).unwrap_or_default();
            ManagedFieldsEntry {
                manager: id.manager,
                operation: if vs.applied {
                    "Apply".into()
                } else {
                    id.operation
                },
                api_version: vs.api_version.clone(),
                time: m.times.get(key).copied().flatten(),
                fields_type: "FieldsV1".into(),
                fields_v1: Some(match cache {
                    Some(cache) => cache.encode(&vs.set),
                    None => vs.set.to_fields_v1(),
                }),
                subresource: id.subresource,
            }
        })
        .collect();
    out.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then(p.time.unwrap_or(0).cmp(&q.time.unwrap_or(0)))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    out
}

/// Parses an RFC 3339 time to Unix seconds (fractions truncated, like the apiserver).
pub fn parse_time(s: &str) -> Result<Time, String> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("bad time {s:?}: {e}"))?;
    Ok(t.unix_timestamp())
}

/// Formats Unix seconds as RFC 3339 in UTC (`2024-01-02T03:04:05Z`).
pub fn format_time(t: Time) -> String {
    match time::OffsetDateTime::from_unix_timestamp(t) {
        Ok(d) if (0..=9999).contains(&d.year()) => {
            // `format!` of the same costs more than the rest of writing an entry.
            let mut out = String::with_capacity(20);
            let mut digits = |n: u32, width: u32, after: char| {
                for p in (0..width).rev() {
                    out.push(char::from(b'0' + (n / 10u32.pow(p) % 10) as u8));
                }
                out.push(after);
            };
            digits(d.year() as u32, 4, '-');
            digits(u8::from(d.month()).into(), 2, '-');
            digits(d.day().into(), 2, 'T');
            digits(d.hour().into(), 2, ':');
            digits(d.minute().into(), 2, ':');
            digits(d.second().into(), 2, 'Z');
            out
        }
        Ok(d) => format_time_by_fmt(d),
        Err(_) => t.to_string(),
    }
}

/// RFC 3339 in UTC through `format!`: what `format_time` writes by hand for years 0–9999, and
/// itself for the years outside them.
fn format_time_by_fmt(d: time::OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        d.year(),
        u8::from(d.month()),
        d.day(),
        d.hour(),
        d.minute(),
        d.second()
    )
}

/// Reads a `managedFields` list (from an object or a case file). `fieldsV1` may be an object
/// or a JSON string. An entry without `fieldsType` gets `FieldsV1` unless it is entirely empty.
pub fn entries_from_value(v: &Value) -> Result<Vec<ManagedFieldsEntry>, String> {
    let entries = read_entries(v)?;
    Ok(entries
        .into_iter()
        .map(|(mut e, raw)| {
            e.fields_v1 = raw.map(|raw| match raw {
                Value::String(s) => s.to_string(),
                other => crate::value::json::to_string(other, crate::value::json::Style::PLAIN),
            });
            e
        })
        .collect())
}

/// The entries of a `managedFields` list, each without its FieldsV1, which comes beside it as
/// found (`None` when absent or null).
pub fn read_entries(v: &Value) -> Result<Vec<(ManagedFieldsEntry, Option<&Value>)>, String> {
    let list = match v {
        Value::Null => return Ok(vec![]),
        Value::List(l) => l,
        _ => return Err("managed fields: expected a list".into()),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let m = item
            .as_map()
            .ok_or_else(|| format!("managed fields: entry {i} is not an object"))?;
        let s = |k: &str| -> Result<String, String> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.to_string()),
                Some(_) => Err(format!("managed fields: entry {i}: {k} must be a string")),
            }
        };
        let time = match s("time")? {
            t if t.is_empty() => None,
            t => Some(parse_time(&t)?),
        };
        let raw = m.get("fieldsV1").filter(|v| !v.is_null());
        let mut e = ManagedFieldsEntry {
            manager: s("manager")?,
            operation: s("operation")?,
            api_version: s("apiVersion")?,
            time,
            fields_type: s("fieldsType")?,
            fields_v1: None,
            subresource: s("subresource")?,
        };
        // Defaulted as kube-apiserver defaults it, FieldsV1 counted as set.
        if e.fields_type.is_empty() && (raw.is_some() || e != ManagedFieldsEntry::default()) {
            e.fields_type = "FieldsV1".into();
        }
        out.push((e, raw));
    }
    Ok(out)
}

/// Writes entries as the `managedFields` list of an object.
pub fn entries_to_value(entries: &[ManagedFieldsEntry], hide_time: impl Fn(Time) -> bool) -> Value {
    Value::List(
        entries
            .iter()
            .map(|e| {
                let mut m = Map::new();
                let put = |m: &mut Map, k: &str, v: &str| {
                    if !v.is_empty() {
                        m.insert(k, Value::from(v));
                    }
                };
                put(&mut m, "manager", &e.manager);
                put(&mut m, "operation", &e.operation);
                put(&mut m, "apiVersion", &e.api_version);
                if let Some(t) = e.time.filter(|t| !hide_time(*t)) {
                    m.insert("time", Value::from(format_time(t).as_str()));
                }
                put(&mut m, "fieldsType", &e.fields_type);
                if let Some(f) = &e.fields_v1 {
                    if let Ok(v) = crate::value::json::parse_str(f) {
                        m.insert("fieldsV1", v);
                    }
                }
                put(&mut m, "subresource", &e.subresource);
                Value::Map(m)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_match_kube_apiserver() {
        assert_eq!(
            identity("bob", Operation::Apply, "apps/v1", ""),
            r#"{"manager":"bob","operation":"Apply"}"#
        );
        assert_eq!(
            identity("hpa", Operation::Update, "apps/v1", "scale"),
            r#"{"manager":"hpa","operation":"Update","apiVersion":"apps/v1","subresource":"scale"}"#
        );
        let id = parse_identity(&identity("a<b", Operation::Update, "v1", "")).unwrap();
        assert_eq!(id.manager, "a<b");
    }

    #[test]
    fn plain_identities_read_as_the_json_parser_reads_them() {
        let by_json = parse_json_identity;
        let mut keys = vec![];
        for manager in ["bob", "", "a<b", "q\"uote", "back\\slash", "ünï", "tab\t"] {
            for op in [Operation::Apply, Operation::Update] {
                for (av, sub) in [("apps/v1", ""), ("v1", "status"), ("", "scale")] {
                    keys.push(identity(manager, op, av, sub));
                }
            }
        }
        keys.extend(
            [
                r#"{}"#,
                r#"{"manager":"a","other":"x","operation":"Apply"}"#,
                r#"{"manager":"a","manager":"b"}"#,
                r#"{"manager":"a",}"#,
                r#"{"manager":"a""operation":"Apply"}"#,
                r#"{"manager": "a"}"#,
                r#"{"manager":1}"#,
                r#"{"manager":"a"#,
                "{\"manager\":\"a\u{1}\"}",
                r#"not json"#,
            ]
            .map(String::from),
        );
        for key in &keys {
            assert_eq!(parse_identity(key), by_json(key), "{key}");
        }
        // The fast reading took the usual keys.
        let usual = identity("bob", Operation::Update, "apps/v1", "scale");
        assert_eq!(parse_plain_identity(&usual), by_json(&usual));
        assert_eq!(parse_plain_identity(r#"{"manager":"a\"b"}"#), None);
    }

    #[test]
    fn times_print_as_formatted() {
        for t in [
            0,
            1,
            59,
            86_399,
            951_782_400,
            1_704_067_201,
            253_402_300_799,
            -1,
            -62_135_596_800,
        ] {
            let d = time::OffsetDateTime::from_unix_timestamp(t).unwrap();
            assert_eq!(format_time(t), format_time_by_fmt(d), "{t}");
        }
        assert_eq!(format_time(i64::MAX), i64::MAX.to_string());
    }

    #[test]
    fn times_round_trip() {
        let t = parse_time("2024-01-01T00:00:01Z").unwrap();
        assert_eq!(format_time(t), "2024-01-01T00:00:01Z");
        assert_eq!(
            format_time(parse_time("2024-01-01T02:00:01.9+02:00").unwrap()),
            "2024-01-01T00:00:01Z"
        );
    }

    #[test]
    fn decode_rejects_bad_entries() {
        let e = ManagedFieldsEntry {
            manager: "a".into(),
            operation: "Patch".into(),
            api_version: "v1".into(),
            fields_type: "FieldsV1".into(),
            ..Default::default()
        };
        assert!(
            decode(std::slice::from_ref(&e))
                .unwrap_err()
                .contains("operation")
        );
        let e2 = ManagedFieldsEntry {
            operation: "Apply".into(),
            fields_type: String::new(),
            ..e
        };
        assert!(decode(&[e2]).unwrap_err().contains("missing fieldsType"));
    }
}
