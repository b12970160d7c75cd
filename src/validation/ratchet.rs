//! Validation ratcheting (CRDValidationRatcheting, on by default since Kubernetes 1.30) of the
//! structural schema's constraints on an update, as apiextensions-apiserver runs it
//! (`pkg/apiserver/validation/ratcheting.go`): the new object is validated node by node while
//! each node is kept correlated with its old value (`CorrelatedObject` in
//! `k8s.io/apiserver/pkg/cel/common/equality.go`), and the errors a node's validation finds —
//! its own and those of its children that were not dropped already — are dropped when the node
//! is correlated and [`unchanged`].
//!
//! Correlation: a property with its old value (when the old object has the property and the
//! schema describes it); an item of a `list-type: map` list with the first old item having the
//! same keys; items of other lists never (only their whole list is compared). The root is never
//! unchanged (its `apiVersion`, `kind` and `metadata` have no schema), so errors at the root
//! are never dropped.

use super::{Structural, Validation, Walk};
use crate::value::Value;
use crate::value::gofmt::quote;

/// The structural schema's errors of storing `new` over `old` (whole objects), ratcheted.
/// Same as [`super::validate`] on a create.
pub(super) fn validate_update(new: &Value, old: &Value, schema: &Structural) -> Validation {
    let mut v = Validation::default();
    if let Value::Map(m) = new {
        // The root's own constraints: never ratcheted.
        Walk { out: &mut v }.object_limits(m, schema, "");
        let old = old.as_map();
        for (k, child) in m.iter() {
            // ObjectMeta and TypeMeta are validated by Go code, and `apiVersion`/`kind`
            // never ratchet.
            if k == "metadata" || k == "apiVersion" || k == "kind" {
                continue;
            }
            if let Some(s) = schema.property(k) {
                node(&mut v, child, old.and_then(|o| o.get(k)), s, k);
            }
        }
    }
    v
}

/// Validates `new` (at `path`, correlated with `old` when `Some`) and below, unless the node
/// is correlated and unchanged: then nothing it or its children find is an error.
fn node(out: &mut Validation, new: &Value, old: Option<&Value>, s: &Structural, path: &str) {
    if old.is_some_and(|o| unchanged(new, o, s)) {
        return;
    }
    // The node's own constraints: the schema without its children.
    Walk { out: &mut *out }.value(new, &shallow(s), path);
    // Its children, where the validator descends (not past a null or a wrong type).
    if new.is_null() {
        return;
    }
    let mut scratch = Validation::default();
    if !(Walk { out: &mut scratch }).type_ok(new, s, path) {
        return;
    }
    match new {
        Value::Map(m) => {
            let old = old.and_then(Value::as_map);
            for (k, child) in m.iter() {
                if let Some(cs) = s.property(k) {
                    let p = format!("{path}.{k}");
                    node(out, child, old.and_then(|o| o.get(k)), cs, &p);
                }
            }
        }
        Value::List(items) => {
            if let Some(is) = s.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    node(out, item, correlate_item(s, old, item), is, &p);
                }
            }
        }
        _ => {}
    }
}

/// `s` without its children's schemas (its own constraints only).
fn shallow(s: &Structural) -> Structural {
    // No `..`: a new field of `Structural` must be considered here.
    Structural {
        ty: s.ty.clone(),
        nullable: s.nullable,
        int_or_string: s.int_or_string,
        properties: Vec::new(),
        additional: None,
        items: None,
        required: s.required.clone(),
        enumeration: s.enumeration.clone(),
        minimum: s.minimum,
        maximum: s.maximum,
        exclusive_minimum: s.exclusive_minimum,
        exclusive_maximum: s.exclusive_maximum,
        multiple_of: s.multiple_of,
        min_length: s.min_length,
        max_length: s.max_length,
        pattern: s.pattern.clone(),
        min_items: s.min_items,
        max_items: s.max_items,
        min_properties: s.min_properties,
        max_properties: s.max_properties,
        format: s.format.clone(),
        rules: Vec::new(),
        list_map_keys: s.list_map_keys.clone(),
        list_type: s.list_type.clone(),
        preserve_unknown: s.preserve_unknown,
        embedded: s.embedded,
        junctors: s.junctors,
        default: None,
        defaults_below: false,
        no_rules_below: false,
    }
}

/// The old item correlated with `item` of the list `s` (`correlateOldValueForChildAtNewIndex`):
/// for a `list-type: map` list, the first old item with the same keys (`MakeMapList(...).Get`);
/// for any other list, none.
pub(super) fn correlate_item<'a>(
    s: &Structural,
    old: Option<&'a Value>,
    item: &Value,
) -> Option<&'a Value> {
    if s.list_type.as_deref() != Some("map") || s.ty.as_deref() != Some("array") {
        return None;
    }
    let keys = s.list_map_keys.as_deref().filter(|k| !k.is_empty())?;
    let want = list_key(item, keys)?;
    old?.as_list()?
        .iter()
        .find(|o| list_key(o, keys).as_ref() == Some(&want))
}

/// A map-list item's key: the value of the one key (`singleKeyStrategy`), or the values of
/// all keys joined as `multiKeyStrategy` prints them; scalars only, all keys present.
#[derive(PartialEq)]
enum ListKey {
    One(Value),
    Joined(String),
}

fn list_key(item: &Value, keys: &[String]) -> Option<ListKey> {
    let m = item.as_map()?;
    let scalar = |k: &String| {
        m.get(k).filter(|v| {
            matches!(
                v,
                Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::String(_)
            )
        })
    };
    if let [k] = keys {
        return scalar(k).cloned().map(ListKey::One);
    }
    let mut joined = String::new();
    for k in keys {
        joined.push('\0');
        match scalar(k)? {
            Value::Bool(b) => joined.push_str(&b.to_string()),
            Value::Float(f) => joined.push_str(&format!("{f:.6}")),
            Value::Int(i) => joined.push_str(&i.to_string()),
            Value::String(s) => joined.push_str(&quote(s)),
            _ => return None,
        }
    }
    Some(ListKey::Joined(joined))
}

/// Whether a correlated value is unchanged, as the server decides it
/// (`CorrelatedObject.CachedDeepEqual`): an object is unchanged when it has the same keys, each
/// described by the schema (a property or `additionalProperties`) and unchanged — a key without
/// a schema (kept by `x-kubernetes-preserve-unknown-fields`) makes it changed; a `list-type: map`
/// list when it has as many items, each correlated by its keys and unchanged; any other list,
/// and a scalar, when deeply equal (an integer and a float differ).
pub(super) fn unchanged(new: &Value, old: &Value, s: &Structural) -> bool {
    match (new, old) {
        (Value::Map(n), Value::Map(o)) => {
            n.len() == o.len()
                && n.iter().all(|(k, nv)| match (o.get(k), s.property(k)) {
                    (Some(ov), Some(cs)) => unchanged(nv, ov, cs),
                    _ => false,
                })
        }
        (Value::List(n), Value::List(o)) => {
            if n.len() != o.len() {
                return false;
            }
            if n.is_empty() {
                return true;
            }
            if s.list_type.as_deref() != Some("map") {
                return new.strict_eq(old);
            }
            let Some(is) = s.items.as_deref() else {
                return false;
            };
            n.iter().all(|item| {
                correlate_item(s, Some(old), item).is_some_and(|oi| unchanged(item, oi, is))
            })
        }
        (Value::Map(_) | Value::List(_), _) | (_, Value::Map(_) | Value::List(_)) => false,
        _ => new.strict_eq(old),
    }
}

#[cfg(test)]
mod tests {
    //! The expected answers are the validation oracle's (apiextensions-apiserver 1.36.5).
    use super::super::{Structural, custom_resource};
    use crate::value::Value;
    use crate::value::yaml::parse_one;

    /// The errors of updating `old` to `new` (`spec` objects, flow YAML) under `spec`'s schema.
    fn update(spec_schema: &str, old: &str, new: &str) -> Vec<String> {
        let s = format!("{{type: object, properties: {{spec: {spec_schema}}}}}");
        let s = Structural::from_value(&parse_one(&s).unwrap(), None);
        let obj = |spec: &str| -> Value {
            parse_one(&format!(
                "{{apiVersion: example.com/v1, kind: Widget, metadata: {{name: w1}}, spec: {spec}}}"
            ))
            .unwrap()
        };
        let d = custom_resource(&obj(new), Some(&obj(old)), &s, Vec::new());
        d.errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_property_named_with_a_dot_ratchets() {
        let s = "{type: object, properties: {x.y: {type: integer, maximum: 2}}}";
        assert!(update(s, "{x.y: 10}", "{x.y: 10}").is_empty());
        assert_eq!(
            update(s, "{x.y: 10}", "{x.y: 11}"),
            ["spec.x.y: Invalid value: 11: spec.x.y in body should be less than or equal to 2"]
        );
    }

    #[test]
    fn a_required_field_named_with_a_dot_ratchets_with_its_object() {
        let s = "{type: object, required: [x.y]}";
        assert!(update(s, "{}", "{}").is_empty());
        assert_eq!(update(s, "{}", "{a: 1}"), ["spec.x.y: Required value"]);
    }

    const MAP_LIST: &str = "{type: object, properties: {tags: {type: array, \
        x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name], items: {type: object, \
        required: [name], properties: {name: {type: string}, tags: {type: string, maxLength: 1}}}}}}";

    #[test]
    fn map_list_items_correlate_by_their_keys() {
        assert!(
            update(
                MAP_LIST,
                "{tags: [{name: cb, tags: Abc}]}",
                "{tags: [{name: cb, tags: Abc}]}"
            )
            .is_empty()
        );
        // Moved, and another item added: still correlated by key.
        assert!(
            update(
                MAP_LIST,
                "{tags: [{name: cb, tags: Abc}]}",
                "{tags: [{name: a}, {name: cb, tags: Abc}]}"
            )
            .is_empty()
        );
        assert_eq!(
            update(
                MAP_LIST,
                "{tags: [{name: cb, tags: Abc}]}",
                "{tags: [{name: cc, tags: Abc}]}"
            ),
            ["spec.tags[0].tags: Too long: may not be more than 1 byte"]
        );
    }

    #[test]
    fn a_map_list_item_without_its_key_is_not_correlated() {
        let s = "{type: object, properties: {mode: {type: array, x-kubernetes-list-type: map, \
            x-kubernetes-list-map-keys: [name], items: {type: object, required: [name], \
            properties: {name: {type: string}}}}}}";
        let l = "{mode: [{}, {name: Abc}]}";
        assert_eq!(update(s, l, l), ["spec.mode[0].name: Required value"]);
    }

    #[test]
    fn items_of_other_lists_ratchet_only_with_their_whole_list() {
        let s =
            "{type: object, properties: {l: {type: array, items: {type: string, maxLength: 1}}}}";
        assert!(update(s, "{l: [ab, c]}", "{l: [ab, c]}").is_empty());
        assert_eq!(
            update(s, "{l: [ab, c]}", "{l: [ab, d]}"),
            ["spec.l[0]: Too long: may not be more than 1 byte"]
        );
    }

    #[test]
    fn other_lists_compare_deeply_whatever_their_schema() {
        let s = "{type: object, properties: {l: {type: array, items: {type: object, \
            maxProperties: 1, x-kubernetes-preserve-unknown-fields: true}}, v: {type: string}}}";
        assert!(update(s, "{l: [{a: 1, b: 2}], v: p}", "{l: [{a: 1, b: 2}], v: q}").is_empty());
    }

    #[test]
    fn an_integer_and_a_float_differ() {
        let s = "{type: object, properties: {spec: {type: object, properties: \
            {v: {type: string}}}}}";
        let s = Structural::from_value(&parse_one(s).unwrap(), None);
        let obj = |v: &str| {
            crate::value::json::parse_str(&format!(
                r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"w1"}},"spec":{{"v":{v}}}}}"#
            ))
            .unwrap()
        };
        let errors = |old: &str, new: &str| -> Vec<String> {
            let d = custom_resource(&obj(new), Some(&obj(old)), &s, Vec::new());
            d.errors.iter().map(ToString::to_string).collect()
        };
        assert!(errors("2", "2").is_empty());
        assert_eq!(
            errors("2", "2.0"),
            [r#"spec.v: Invalid value: "number": spec.v in body must be of type string: "number""#]
        );
    }

    #[test]
    fn a_key_without_a_schema_makes_an_object_changed() {
        let s = "{type: object, maxProperties: 1, properties: {mode: \
            {x-kubernetes-preserve-unknown-fields: true}, name: {type: string}}}";
        let o = "{mode: {int: x-1}, name: b}";
        assert_eq!(
            update(s, o, o),
            ["spec: Too many: 2: must have at most 1 item"]
        );
        // Without such a key, the unchanged object ratchets.
        let o = "{mode: 1, name: b}";
        assert!(update(s, o, o).is_empty());
    }

    #[test]
    fn rules_ratchet_with_the_same_equality() {
        let s = "{type: object, properties: {a: {type: object, properties: {tags: {type: object, \
            x-kubernetes-preserve-unknown-fields: true}}, x-kubernetes-validations: \
            [{rule: '!has(self.tags)', reason: FieldValueForbidden}]}}}";
        let o = "{a: {tags: {free: ab}}}";
        assert_eq!(
            update(s, o, o),
            ["spec.a: Forbidden: failed rule: !has(self.tags)"]
        );
        let o = "{a: {tags: {}}}";
        assert!(update(s, o, o).is_empty());
    }

    #[test]
    fn root_rules_never_ratchet() {
        let s = Structural::from_value(
            &parse_one("{type: object, x-kubernetes-validations: [{rule: 'size(self.metadata.name) < 2'}]}")
                .unwrap(),
            None,
        );
        let o =
            parse_one("{apiVersion: example.com/v1, kind: Widget, metadata: {name: w1}}").unwrap();
        let d = custom_resource(&o, Some(&o), &s, Vec::new());
        let got: Vec<String> = d.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            ["<nil>: Invalid value: failed rule: size(self.metadata.name) < 2"]
        );
    }
}
