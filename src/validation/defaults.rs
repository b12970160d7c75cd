//! Defaulting of a custom resource: where the structural schema declares a `default`, the
//! apiserver fills it into the object before validating and storing it (apiextensions-apiserver's
//! structural defaulting, run on the merged object of an apply too). A property that is absent
//! gets its default, and so does one holding `null` that may not (not `nullable`); an item of a
//! list or a value of a map whose schema has a default and may not be `null` likewise. Defaults
//! are filled in before the walk descends, so a defaulted object gets its own fields' defaults.
//!
//! What the real apiserver showed (`tests/real/validation.rs`, and the random histories of
//! `tests/real/differential.rs` with `tests/data/realapi/sprocket-crd.yaml`): an apply that
//! leaves out a required field with a default is accepted; `field: null` where a default exists
//! is stored as the default, where none exists it is refused (the nulls are not pruned on this
//! path); an apply whose merged object differs from the stored one only by what defaulting puts
//! back writes only its ownership; defaulted fields are owned by nobody.

use super::Structural;
use crate::value::Value;

/// Fills the defaults `s` declares into `v`. Whether anything changed.
pub fn apply(v: &mut Value, s: &Structural) -> bool {
    if !s.defaults_below {
        return false;
    }
    let mut changed = false;
    match v {
        Value::Map(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                match m.get_mut(k) {
                    None => {
                        m.insert(k.as_str(), d.clone());
                        changed = true;
                    }
                    Some(slot) if slot.is_null() && !prop.nullable => {
                        *slot = d.clone();
                        changed = true;
                    }
                    Some(_) => {}
                }
            }
            for (k, child) in m.entries_mut() {
                if let Some((_, prop)) = s.properties.iter().find(|(p, _)| p == k) {
                    changed |= apply(child, prop);
                } else if let Some(a) = &s.additional {
                    changed |= null_defaulted(child, a) | apply(child, a);
                }
            }
        }
        Value::List(items) => {
            if let Some(it) = &s.items {
                for item in items {
                    changed |= null_defaulted(item, it) | apply(item, it);
                }
            }
        }
        _ => {}
    }
    changed
}

/// A `null` that `s` does not allow, replaced by its default (when it has one).
fn null_defaulted(v: &mut Value, s: &Structural) -> bool {
    match &s.default {
        Some(d) if v.is_null() && !s.nullable => {
            *v = d.clone();
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    fn schema(text: &str) -> Structural {
        Structural::from_value(&json::parse_str(text).unwrap(), None)
    }

    fn defaulted(s: &Structural, obj: &str) -> (String, bool) {
        let mut v = json::parse_str(obj).unwrap();
        let changed = apply(&mut v, s);
        (json::to_string(&v, json::Style::PLAIN), changed)
    }

    const THING: &str = r#"{"type":"object","properties":{"spec":{"type":"object","properties":{
        "replicas":{"type":"integer","default":1},
        "mode":{"type":"string","default":"fast"},
        "note":{"type":"string","nullable":true,"default":"n"},
        "none":{"type":"string","default":null},
        "nested":{"type":"object","default":{"a":"x"},"properties":{
            "a":{"type":"string"},"b":{"type":"string","default":"bee"}}},
        "ports":{"type":"array","items":{"type":"object","properties":{
            "containerPort":{"type":"integer"},"protocol":{"type":"string","default":"TCP"}}}},
        "weights":{"type":"object","additionalProperties":{"type":"integer","default":5}},
        "plain":{"type":"object","properties":{"x":{"type":"string"}}}}}}}"#;

    /// Absent fields get their defaults, defaulted objects get theirs, items and map values
    /// theirs; a `null` default is none.
    #[test]
    fn absent_fields_get_their_defaults_all_the_way_down() {
        let s = schema(THING);
        let (got, changed) = defaulted(
            &s,
            r#"{"spec":{"ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP"}],"weights":{"a":null,"b":2}}}"#,
        );
        assert!(changed);
        assert_eq!(
            got,
            r#"{"spec":{"ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":53,"protocol":"UDP"}],"weights":{"a":5,"b":2},"replicas":1,"mode":"fast","note":"n","nested":{"a":"x","b":"bee"}}}"#
        );
        // Already defaulted: nothing changes.
        let (again, changed) = defaulted(&s, &got);
        assert!(!changed);
        assert_eq!(again, got);
    }

    /// A null a field may not hold becomes its default; a nullable one stays null; a null
    /// without a default stays (validation refuses it).
    #[test]
    fn nulls_are_defaulted_only_where_they_are_not_allowed() {
        let s = schema(THING);
        let (got, _) = defaulted(
            &s,
            r#"{"spec":{"mode":null,"note":null,"nested":{"a":null,"b":null},"replicas":3}}"#,
        );
        assert_eq!(
            got,
            r#"{"spec":{"mode":"fast","note":null,"nested":{"a":null,"b":"bee"},"replicas":3}}"#
        );
    }

    /// A schema without defaults changes nothing, and is not walked.
    #[test]
    fn no_defaults_no_change() {
        let s = schema(
            r#"{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"}}}}}"#,
        );
        assert!(!s.defaults_below);
        let (got, changed) = defaulted(&s, r#"{"spec":{"b":null}}"#);
        assert!(!changed);
        assert_eq!(got, r#"{"spec":{"b":null}}"#);
        // A top-level `spec` absent, with a default for it: filled in, with what is below.
        let s = schema(
            r#"{"type":"object","properties":{"spec":{"type":"object","default":{},"properties":{"a":{"type":"string","default":"z"}}}}}"#,
        );
        assert_eq!(defaulted(&s, "{}").0, r#"{"spec":{"a":"z"}}"#);
    }
}
