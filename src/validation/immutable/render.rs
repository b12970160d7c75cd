//! Bad values as the apiserver prints them in a `field.Error` (apimachinery 1.34+,
//! `field.Error.ErrorBody`): a Go `string` with `%q`; `int32`, `int64`, `bool` plainly; any
//! other value — named string types (`types.UID`, `core.SecretType`), pointers, slices, structs
//! — with `json.Marshal` (HTML-escaped; struct fields in declaration order, map keys sorted, a
//! nil pointer `null`). Internal API types have no JSON tags, so their structs print with Go
//! field names (`{"APIGroup":"…","Kind":"…","Name":"…"}`).

use crate::value::gofmt::{Escape, FloatStyle};
use crate::value::json::{Style, write};
use crate::value::{Map, Value};

/// `json.Marshal` without sorting: the caller builds structs in declaration order and maps
/// sorted ([`sorted`]).
const MARSHAL: Style = Style {
    sort_keys: false,
    escape: Escape::Html,
    floats: FloatStyle::GoJson,
};

/// A Go `string` bad value (`%q`).
pub fn string(s: &str) -> String {
    crate::value::gofmt::quote(s)
}

/// Any other bad value, already shaped as Go marshals it.
pub fn json(v: &Value) -> String {
    let mut out = String::new();
    write(&mut out, v, MARSHAL);
    out
}

/// A named string type or a non-nil `*string` (`"x"`), or a nil pointer (`null`).
pub fn json_str(s: Option<&str>) -> String {
    json(&s.map_or(Value::Null, Value::from))
}

/// A `[]string` (or a slice of a named string type): `["a","b"]`, `null` when nil.
pub fn strings(v: Option<&Value>) -> String {
    match v {
        Some(Value::List(items)) if !items.is_empty() => json(&Value::List(items.clone())),
        Some(Value::List(_)) => "[]".into(),
        _ => "null".into(),
    }
}

/// A `metav1.Time` (or `*metav1.Time`) as `json.Marshal` prints it: RFC 3339 in UTC, whole
/// seconds (`"2026-01-01T00:00:00Z"`); a value that is no time as it is.
pub fn time(v: &Value) -> String {
    time_as(v, false)
}

/// A `metav1.MicroTime`: RFC 3339 in UTC with microseconds (`"2026-01-01T00:00:00.000000Z"`).
pub fn micro_time(v: &Value) -> String {
    time_as(v, true)
}

fn time_as(v: &Value, micro: bool) -> String {
    let Some(t) = v.as_str().and_then(parse_time) else {
        return json(v);
    };
    let mut out = format!(
        "\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    if micro {
        out.push_str(&format!(".{:06}", t.microsecond()));
    }
    out.push_str("Z\"");
    out
}

/// An RFC 3339 time, in UTC.
pub fn parse_time(s: &str) -> Option<::time::OffsetDateTime> {
    ::time::OffsetDateTime::parse(s, &::time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.to_offset(::time::UtcOffset::UTC))
}

/// A map of strings with its keys sorted (Go marshals maps so).
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Map(m) => {
            let mut out = Map::new();
            for (k, x) in m.sorted_entries() {
                out.insert(k.clone(), sorted(x));
            }
            Value::Map(out)
        }
        Value::List(items) => Value::List(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// How a field's value is shaped for printing.
pub type Shape = fn(&Value) -> Value;

/// A struct with JSON tags: the `fields` present (all `omitempty`), in declaration order, each
/// shaped by the given function.
pub fn tagged(v: Option<&Value>, fields: &[(&str, Shape)]) -> Value {
    let Some(Value::Map(m)) = v else {
        return Value::Null;
    };
    let mut out = Map::new();
    for (name, shape) in fields {
        match m.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::List(l)) if l.is_empty() => {}
            Some(Value::Map(x)) if x.is_empty() => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(x) => {
                out.insert(*name, shape(x));
            }
        }
    }
    Value::Map(out)
}

/// `*metav1.LabelSelector` (`{"matchLabels":{…},"matchExpressions":[…]}`, `null` when nil).
pub fn label_selector(v: Option<&Value>) -> String {
    if v.is_none() {
        return "null".into();
    }
    fn requirement(r: &Value) -> Value {
        tagged(
            Some(r),
            &[
                ("key", Value::clone),
                ("operator", Value::clone),
                ("values", Value::clone),
            ],
        )
    }
    fn requirements(v: &Value) -> Value {
        match v {
            Value::List(items) => Value::List(items.iter().map(requirement).collect()),
            other => other.clone(),
        }
    }
    json(&tagged(
        v,
        &[("matchLabels", sorted), ("matchExpressions", requirements)],
    ))
}

/// A core type's value (`v1` type `type_name`, e.g. `PodTemplateSpec`) as its internal type
/// prints it ([`super::internal`]); `None` when the type is not known.
fn core_internal(type_name: &str, v: &Value) -> Option<Value> {
    typed_internal("core", "core.v1", type_name, v)
}

/// A value of the versioned type `io.k8s.api.<versioned>.<type_name>` (`versioned`:
/// `batch.v1`) as the internal type `io.k8s.kubernetes.pkg.apis.<group>.<type_name>` prints
/// it; when the shapes lack the internal type, as one of the versioned type's Go shape would
/// ([`super::internal::render_like`]). `None` when neither is known.
fn typed_internal(group: &str, versioned: &str, type_name: &str, v: &Value) -> Option<Value> {
    let vt = format!("io.k8s.api.{versioned}.{type_name}");
    super::internal::render(
        &format!("io.k8s.kubernetes.pkg.apis.{group}.{type_name}"),
        &vt,
        v,
    )
    .or_else(|| super::internal::render_like(&vt, v))
}

/// A core type's value with `json.Marshal` of its internal type; the versioned value's own
/// JSON when the type is not known.
pub fn internal(type_name: &str, v: &Value) -> String {
    json(&core_internal(type_name, v).unwrap_or_else(|| sorted(v)))
}

/// [`internal`] for a type of another group: `group` the internal package (`batch`),
/// `versioned` the versioned one (`batch.v1`).
pub fn internal_of(group: &str, versioned: &str, type_name: &str, v: &Value) -> String {
    json(&typed_internal(group, versioned, type_name, v).unwrap_or_else(|| sorted(v)))
}

/// A core type's value as its internal type prints it, shaped (`None`: unknown type).
pub fn internal_value(type_name: &str, v: &Value) -> Option<Value> {
    core_internal(type_name, v)
}

/// `diff.Diff` of two values of a core type as their internal type prints them indented.
pub fn internal_diff(type_name: &str, old: &Value, new: &Value) -> String {
    let shaped = |v: &Value| core_internal(type_name, v).unwrap_or(Value::Null);
    diff(&shaped(old), &shaped(new))
}

/// `diff.Diff` of two values already shaped as Go prints them (`json.MarshalIndent`, then
/// go-difflib).
pub fn diff(old: &Value, new: &Value) -> String {
    super::udiff::unified(
        &super::internal::indented(old),
        &super::internal::indented(new),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json::parse_str;

    fn v(s: &str) -> Value {
        parse_str(s).unwrap()
    }

    #[test]
    fn label_selectors_print_in_declaration_order_with_sorted_labels() {
        let sel = v(
            r#"{"matchExpressions":[{"values":["a"],"operator":"In","key":"k"}],"matchLabels":{"z":"1","a":"<2>"}}"#,
        );
        assert_eq!(
            label_selector(Some(&sel)),
            r#"{"matchLabels":{"a":"\u003c2\u003e","z":"1"},"matchExpressions":[{"key":"k","operator":"In","values":["a"]}]}"#
        );
        assert_eq!(label_selector(None), "null");
        assert_eq!(
            label_selector(Some(&v(r#"{"matchLabels":{"app":"b"}}"#))),
            r#"{"matchLabels":{"app":"b"}}"#
        );
    }

    #[test]
    fn strings_and_structs() {
        assert_eq!(string("a\"b"), r#""a\"b""#);
        assert_eq!(json_str(None), "null");
        assert_eq!(json_str(Some("a&b")), r#""a\u0026b""#);
        assert_eq!(strings(Some(&v(r#"["10.0.0.6"]"#))), r#"["10.0.0.6"]"#);
        assert_eq!(strings(None), "null");
    }
}
