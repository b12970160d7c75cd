//! The uniqueness of `x-kubernetes-list-type: set` and `map` lists, which the apiserver checks
//! apart from the schema (`ValidateListSetsAndMaps` in apiextensions-apiserver's
//! `pkg/apiserver/schema/listtype/validation.go`): a set item equal to an earlier one, a map
//! item with the keys of an earlier one, is a `Duplicate value` (reported once, at the second
//! occurrence), printing the item (a set) or its key fields (a map); an item of a map list that
//! is neither an object nor null is an `Invalid value` instead (and ends that list's check).
//! Not blocking: the CEL rules still run. On an update they ratchet as a whole: when the stored
//! object has such an error anywhere, none is reported (`customResourceStrategy.ValidateUpdate`).

use super::{FieldError, Structural};
use crate::value::json::{Style, to_string};
use crate::value::{Map, Value};
use std::collections::HashMap;

/// The list-type errors of storing `new` (over `old`, on an update).
pub(super) fn check(new: &Value, old: Option<&Value>, schema: &Structural) -> Vec<FieldError> {
    if old.is_some_and(|o| !errors(o, schema).is_empty()) {
        return Vec::new();
    }
    errors(new, schema)
}

/// `ValidateListSetsAndMaps` of a whole object.
fn errors(obj: &Value, schema: &Structural) -> Vec<FieldError> {
    let mut out = Vec::new();
    if let Value::Map(m) = obj {
        object(&mut out, None, schema, m);
    }
    out
}

/// The fields of an object (`path`: `None` at the root): a property's path is `path.name`, an
/// `additionalProperties` key's `path[name]` (`field.Path.Key`).
fn object(out: &mut Vec<FieldError>, path: Option<&str>, s: &Structural, m: &Map) {
    for (k, v) in m.iter() {
        let (p, cs) = if let Some((_, cs)) = s.properties.iter().find(|(n, _)| n == k) {
            match path {
                Some(p) => (format!("{p}.{k}"), cs),
                None => (k.to_string(), cs),
            }
        } else if let Some(cs) = s.additional.as_deref() {
            (format!("{}[{k}]", path.unwrap_or("")), cs)
        } else {
            continue;
        };
        value(out, &p, cs, v);
    }
}

fn value(out: &mut Vec<FieldError>, path: &str, s: &Structural, v: &Value) {
    match v {
        Value::List(items) => list(out, path, s, items),
        Value::Map(m) => object(out, Some(path), s, m),
        _ => {}
    }
}

fn list(out: &mut Vec<FieldError>, path: &str, s: &Structural, items: &[Value]) {
    match s.list_type.as_deref() {
        Some("set") => {
            for i in repeated(items) {
                duplicate(out, path, i, &items[i]);
            }
        }
        Some("map") => map_list(out, path, s, items),
        _ => {}
    }
    if let Some(is) = s.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            value(out, &format!("{path}[{i}]"), is, item);
        }
    }
}

fn map_list(out: &mut Vec<FieldError>, path: &str, s: &Structural, items: &[Value]) {
    if let Some((i, x)) = items
        .iter()
        .enumerate()
        .find(|(_, x)| !matches!(x, Value::Map(_) | Value::Null))
    {
        out.push(FieldError {
            field: format!("{path}[{i}]"),
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: must be an object for an array of list-type map",
                printed(x)
            ),
            line: None,
        });
        return;
    }
    if items.len() <= 1 {
        return;
    }
    let keys: &[String] = s.list_map_keys.as_deref().unwrap_or(&[]);
    if let [key] = keys {
        // The key's value, or an "unspecified" marker (a null item, or the key absent), which
        // equals only itself and prints as `{}`.
        let values: Vec<Option<&Value>> = items
            .iter()
            .map(|x| x.as_map().and_then(|m| m.get(key)))
            .collect();
        for i in repeated_by(values.iter().copied()) {
            let mut m = Map::new();
            if let Some(v) = values[i] {
                m.insert(key.as_str(), v.clone());
            }
            duplicate(out, path, i, &Value::Map(m));
        }
        return;
    }
    // Several keys (or none): the object of the key fields present.
    let values: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut m = Map::new();
            if let Some(x) = x.as_map() {
                for k in keys {
                    if let Some(v) = x.get(k) {
                        m.insert(k.as_str(), v.clone());
                    }
                }
            }
            Value::Map(m)
        })
        .collect();
    for i in repeated(&values) {
        duplicate(out, path, i, &values[i]);
    }
}

fn duplicate(out: &mut Vec<FieldError>, path: &str, i: usize, v: &Value) {
    out.push(FieldError {
        field: format!("{path}[{i}]"),
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: {}", printed(v)),
        line: None,
    });
}

/// A value as `field.Error` prints it: scalars plainly (strings quoted), others as
/// `encoding/json` marshals them (keys sorted).
fn printed(v: &Value) -> String {
    match v {
        Value::Map(_) | Value::List(_) => to_string(v, Style::GO),
        other => super::printed(other),
    }
}

/// What `validateListSet` compares, as a string: a scalar by Go's `==` on the decoded value
/// (an integer and a float differ), an object or a list by its JSON (where `1` and `1.0` are
/// the same); `None`: the "unspecified" key of a map list, equal only to itself.
fn identity(v: Option<&Value>) -> String {
    match v {
        None => "u".into(),
        Some(Value::Null) => "n".into(),
        Some(Value::Bool(b)) => format!("b{b}"),
        Some(Value::Int(i)) => format!("i{i}"),
        // `-0 == 0`.
        Some(Value::Float(f)) => format!("f{}", (f + 0.0).to_bits()),
        Some(Value::String(s)) => format!("s{s}"),
        Some(other) => format!("j{}", to_string(other, Style::GO)),
    }
}

/// `validateListSet`: the index of the second occurrence of each repeated item.
fn repeated(items: &[Value]) -> Vec<usize> {
    repeated_by(items.iter().map(Some))
}

fn repeated_by<'a>(items: impl Iterator<Item = Option<&'a Value>>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, x) in items.enumerate() {
        let times = seen.entry(identity(x)).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The expected answers are the validation oracle's (apiextensions-apiserver 1.36.5).
    use super::super::Structural;
    use super::check;
    use crate::value::Value;
    use crate::value::json::parse_str;

    fn errors(spec_schema: &str, old: Option<&str>, new: &str) -> Vec<String> {
        let s = format!(r#"{{"type":"object","properties":{{"spec":{spec_schema}}}}}"#);
        let s = Structural::from_value(&parse_str(&s).unwrap(), None);
        let obj = |spec: &str| -> Value {
            parse_str(&format!(
                r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"w1"}},"spec":{spec}}}"#
            ))
            .unwrap()
        };
        let old = old.map(obj);
        check(&obj(new), old.as_ref(), &s)
            .iter()
            .map(|e| format!("{e} | {}", e.reason))
            .collect()
    }

    const KEYED: &str = r#"{"type":"object","properties":{"m":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"],"items":{"type":"object","required":["k"],"properties":{"k":{"type":"string"}}}}}}"#;

    #[test]
    fn map_duplicates_print_their_key_fields() {
        assert_eq!(
            errors(KEYED, None, r#"{"m":[{"k":"x-1"},{"k":"x-1"}]}"#),
            [r#"spec.m[1]: Duplicate value: {"k":"x-1"} | FieldValueDuplicate"#]
        );
        // Null items and items without the key share an unspecified key; a third
        // occurrence is not reported again.
        assert_eq!(
            errors(
                KEYED,
                None,
                r#"{"m":[{"k":"b"},{"k":"b"},null,{},null,{"k":"b"}]}"#
            ),
            [
                r#"spec.m[1]: Duplicate value: {"k":"b"} | FieldValueDuplicate"#,
                "spec.m[3]: Duplicate value: {} | FieldValueDuplicate"
            ]
        );
        let two = r#"{"type":"object","properties":{"m":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k","j"],"items":{"type":"object","required":["k","j"],"properties":{"k":{"type":"string"},"j":{"type":"integer"},"v":{"type":"string"}}}}}}"#;
        assert_eq!(
            errors(
                two,
                None,
                r#"{"m":[{"k":"a","j":1,"v":"x"},{"j":1,"k":"a"},{"v":"q"},{"v":"r"},null]}"#
            ),
            [
                r#"spec.m[1]: Duplicate value: {"j":1,"k":"a"} | FieldValueDuplicate"#,
                "spec.m[3]: Duplicate value: {} | FieldValueDuplicate"
            ]
        );
        assert_eq!(
            errors(two, None, r#"{"m":[{"k":"a","j":1},"s",{"k":"a","j":1}]}"#),
            [
                r#"spec.m[1]: Invalid value: "s": must be an object for an array of list-type map | FieldValueInvalid"#
            ]
        );
    }

    #[test]
    fn set_duplicates_print_the_item() {
        let s = r#"{"type":"object","properties":{"s":{"type":"array","x-kubernetes-list-type":"set","items":{"x-kubernetes-int-or-string":true}},"f":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"number"}},"o":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"object","x-kubernetes-map-type":"atomic","x-kubernetes-preserve-unknown-fields":true}}}}"#;
        let mut got = errors(
            s,
            None,
            r#"{"s":["a",1,"a","a",1],"f":[1,1.0,1.5,1.50,1e6,1000000.0],"o":[{"b":1,"a":"<"},{"a":"<","b":1.0}]}"#,
        );
        got.sort();
        assert_eq!(
            got,
            [
                "spec.f[3]: Duplicate value: 1.5 | FieldValueDuplicate",
                "spec.f[5]: Duplicate value: 1e+06 | FieldValueDuplicate",
                r#"spec.o[1]: Duplicate value: {"a":"\u003c","b":1} | FieldValueDuplicate"#,
                r#"spec.s[2]: Duplicate value: "a" | FieldValueDuplicate"#,
                "spec.s[4]: Duplicate value: 1 | FieldValueDuplicate",
            ]
        );
    }

    #[test]
    fn duplicates_ratchet_when_the_stored_object_has_any() {
        let dup = r#"{"m":[{"k":"b"},{"k":"b"}]}"#;
        assert!(errors(KEYED, Some(r#"{"m":[{"k":"a"},{"k":"a"}]}"#), dup).is_empty());
        assert_eq!(errors(KEYED, Some(r#"{"m":[{"k":"a"}]}"#), dup).len(), 1);
    }
}
