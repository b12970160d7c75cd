//! An object's identity: apiVersion, kind, metadata.name (and metadata.namespace when set) must
//! be strings the apiserver can store, or the object cannot be applied.

use super::{Document, Loaded, ManifestError, lines};
use crate::value::Value;

/// Checks an object's identity and adds it, or adds its problems instead.
pub(super) fn push_checked(d: Document, out: &mut Loaded) {
    if !out.check_identity {
        out.documents.push(d);
        return;
    }
    let problems = identity_errors(&d);
    if problems.is_empty() {
        out.documents.push(d);
    } else {
        out.errors.extend(problems);
    }
}

/// Problems with an object's identity: apiVersion, kind and metadata.name must be non-empty
/// strings (`generateName` cannot be applied); metadata.namespace is optional, but a string when
/// set.
pub fn identity_errors(d: &Document) -> Vec<ManifestError> {
    let mut problems = Vec::new();
    for keys in [&["apiVersion"][..], &["kind"], &["metadata", "name"]] {
        let what = keys.join(".");
        let mut message = match d.object.get_path(keys) {
            None | Some(Value::Null) => format!("{what} is missing"),
            Some(Value::String(s)) if s.is_empty() => format!("{what} is empty"),
            Some(Value::String(_)) => continue,
            Some(other) => not_a_string(&what, other),
        };
        if what == "metadata.name" && generated(&d.object) {
            message = "metadata.generateName cannot be applied: server-side apply needs \
                       metadata.name"
                .into();
        }
        problems.push(located(d, keys, message));
    }
    // `namespace: no` is the boolean false to Kubernetes' YAML reader (YAML 1.1), which the
    // apiserver cannot store as a namespace.
    let keys = &["metadata", "namespace"][..];
    match d.object.get_path(keys) {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => problems.push(located(d, keys, not_a_string("metadata.namespace", other))),
    }
    problems
}

fn generated(object: &Value) -> bool {
    matches!(
        object.get_path(&["metadata", "generateName"]),
        Some(Value::String(s)) if !s.is_empty()
    )
}

fn not_a_string(what: &str, found: &Value) -> String {
    let hint = match found {
        Value::Bool(_) => {
            " (y, n, yes, no, on and off are booleans to Kubernetes' YAML reader: quote the value)"
        }
        _ => "",
    };
    format!("{what} must be a string, found {}{hint}", found.type_name())
}

/// An error at the field `keys` of a document, on its line when the document's lines are known.
fn located(d: &Document, keys: &[&str], message: String) -> ManifestError {
    let line = match &d.lines {
        Some(l) => lines::line_of_keys(&d.object, l, keys),
        None => d.origin.line,
    };
    ManifestError {
        line: Some(line),
        path: Some(format!(".{}", keys.join("."))),
        ..d.origin.error(message)
    }
}
