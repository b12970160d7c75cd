//! CustomResourceDefinitions themselves (`ValidateCustomResourceDefinitionUpdate`,
//! apiextensions-apiserver `pkg/apis/apiextensions/validation/validation.go`): the names a
//! CRD's resources are stored under may not change, its stored versions must stay served by
//! its spec, and `spec.preserveUnknownFields` may not become true. Only these update checks
//! are here: the spec's own validation (schemas, names, conversion) and the API approval of
//! protected groups are not.

use super::{FIELD_IMMUTABLE, Rule, Update, invalid, render};
use crate::validation::FieldError;
use crate::value::Value;

pub static RULES: [Rule; 1] = [Rule {
    group: "apiextensions.k8s.io",
    kinds: &["CustomResourceDefinition"],
    versions: &[],
    source: "ValidateCustomResourceDefinitionUpdate, validateCustomResourceDefinitionSpecUpdate, ValidateCustomResourceDefinitionStoredVersions, validatePreserveUnknownFields (apiextensions-apiserver pkg/apis/apiextensions/validation)",
    refuses: "spec.group or spec.names.plural changed; spec.scope or spec.names.kind changed once the CRD is Established; a version of status.storedVersions missing from spec.versions; spec.preserveUnknownFields set to true",
    check: crd,
}];

fn crd(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // validateCustomResourceDefinitionSpecUpdate: scope and kind once the CRD is Established
    // (requireImmutableNames), group and plural always.
    let established = u
        .old_at(&["status", "conditions"])
        .and_then(Value::as_list)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.str_at(&["type"]) == Some("Established") && c.str_at(&["status"]) == Some("True")
            })
        });
    let mut immutable = |path: &[&str], field: &str| {
        let new = u.new_str(path);
        if u.old_str(path) != new {
            errs.push(invalid(field, &render::string(new), FIELD_IMMUTABLE));
        }
    };
    if established {
        immutable(&["spec", "scope"], "spec.scope");
        immutable(&["spec", "names", "kind"], "spec.names.kind");
    }
    immutable(&["spec", "group"], "spec.group");
    immutable(&["spec", "names", "plural"], "spec.names.plural");
    errs.extend(stored_versions(u));
    // validatePreserveUnknownFields: true stays true, false may not become true.
    let preserve = |v: &Value| {
        matches!(
            super::at(v, &["spec", "preserveUnknownFields"]),
            Some(Value::Bool(true))
        )
    };
    if !preserve(u.old) && preserve(u.new) {
        errs.push(invalid(
            "spec.preserveUnknownFields",
            "true",
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinitionStoredVersions` on the new CRD as the strategy prepares
/// it: the old status, with the (first) storage version of the new spec added to
/// `storedVersions` when it is not there.
fn stored_versions(u: &Update) -> Vec<FieldError> {
    let names = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_list)
            .into_iter()
            .flatten()
            .map(|x| x.as_str().unwrap_or("").to_string())
            .collect()
    };
    let mut stored = names(u.old_at(&["status", "storedVersions"]));
    let versions: Vec<(String, bool)> = u
        .new_at(&["spec", "versions"])
        .and_then(Value::as_list)
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v.str_at(&["name"]).unwrap_or("").to_string(),
                matches!(v.get_path(&["storage"]), Some(Value::Bool(true))),
            )
        })
        .collect();
    if let Some((name, _)) = versions.iter().find(|(_, storage)| *storage)
        && !stored.contains(name)
    {
        stored.push(name.clone());
    }
    let path = "status.storedVersions";
    if stored.is_empty() {
        return vec![invalid(
            path,
            "null",
            "must have at least one stored version",
        )];
    }
    let shown = render::json(&Value::List(
        stored.iter().map(|s| Value::from(s.as_str())).collect(),
    ));
    let mut errs = Vec::new();
    // Each stored version by its (last) index.
    let mut left: Vec<(String, usize)> = Vec::new();
    for (i, v) in stored.iter().enumerate() {
        left.retain(|(x, _)| x != v);
        left.push((v.clone(), i));
    }
    for (name, storage) in &versions {
        let known = left.iter().any(|(x, _)| x == name);
        if *storage && !known {
            errs.push(invalid(
                path,
                &shown,
                &format!("must have the storage version {name}"),
            ));
        }
        if known {
            left.retain(|(x, _)| x != name);
        }
    }
    for (v, i) in left {
        errs.push(invalid(
            &format!("{path}[{i}]"),
            &render::string(&v),
            &format!(
                "missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"
            ),
        ));
    }
    errs
}
