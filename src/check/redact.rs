//! Secret values never leave a check: the values of a Secret's `data` and `stringData`, and its
//! `kubectl.kubernetes.io/last-applied-configuration` annotation (which holds them too), are
//! replaced before any report is built.

use crate::fieldpath::PathElement;
use crate::live::ObjectRef;
use crate::predict::{FieldConflict, OwnedField};
use crate::value::Value;

/// What a redacted value reads as.
pub const REDACTED: &str = "<redacted>";

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// True for core Secrets.
pub fn is_secret(r: &ObjectRef) -> bool {
    r.group.is_empty() && r.kind == "Secret"
}

/// True if the field at `path` of a Secret holds secret material.
fn sensitive(path: &[PathElement]) -> bool {
    match path {
        [PathElement::Field(f), ..] if f == "data" || f == "stringData" => true,
        [
            PathElement::Field(m),
            PathElement::Field(a),
            PathElement::Field(k),
            ..,
        ] => m == "metadata" && a == "annotations" && k == LAST_APPLIED,
        _ => false,
    }
}

/// The value at `path` with secret material replaced.
pub fn value(path: &[PathElement], v: Value) -> Value {
    if sensitive(path) {
        return Value::from(REDACTED);
    }
    // An ancestor of secret material (the whole object, `.metadata`): scrub inside.
    match v {
        Value::Map(mut m) => {
            let mut child = path.to_vec();
            for (k, x) in m.entries_mut().iter_mut() {
                child.push(PathElement::field(k.as_str()));
                let taken = std::mem::replace(x, Value::Null);
                *x = value(&child, taken);
                child.pop();
            }
            Value::Map(m)
        }
        other => other,
    }
}

pub(super) fn conflict(secret: bool, mut c: FieldConflict) -> FieldConflict {
    if secret {
        c.current = c.current.map(|v| value(&c.path_elements.0, v));
        c.proposed = c.proposed.map(|v| value(&c.path_elements.0, v));
    }
    c
}

pub(super) fn field(secret: bool, mut f: OwnedField) -> OwnedField {
    if secret {
        f.value = f.value.map(|v| value(&f.path_elements.0, v));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    #[test]
    fn secret_material_is_replaced_at_and_below_sensitive_paths() {
        let data = [PathElement::field("data"), PathElement::field("password")];
        assert_eq!(
            value(&data, Value::from("aHVudGVyMg==")),
            Value::from(REDACTED)
        );
        let whole = parse_one(
            "metadata: {name: s, annotations: {kubectl.kubernetes.io/last-applied-configuration: '{\"data\":{}}', team: a}}\nstringData: {token: abc}\ntype: Opaque",
        )
        .unwrap();
        let out = value(&[], whole);
        let text = crate::value::json::to_string(&out, crate::value::json::Style::PLAIN);
        assert!(
            !text.contains("abc") && !text.contains("\\\"data"),
            "{text}"
        );
        assert!(
            text.contains("\"team\":\"a\"") && text.contains("Opaque"),
            "{text}"
        );
    }
}
