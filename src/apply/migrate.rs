//! Moving a release's objects from client-side to server-side apply: the fields legacy managers
//! own through `Update` entries move into the new `Apply` entry (see
//! [`managedfields::upgrade`](crate::managedfields::upgrade)), so that fields later dropped from
//! the manifest are really removed. Previewed first (what moves, from whom), then written with a
//! JSON patch that carries the resourceVersion the preview used (optimistic locking).

use crate::fieldpath::{PathElement, Set};
use crate::managedfields::{ManagedFieldsEntry, entries_from_value, entries_to_value, upgrade};
use crate::value::{Map, Value};

/// Managers client-side tools write with (the tools' binary names and the apiserver's own).
const LEGACY: &[&str] = &[
    "kubectl-client-side-apply",
    "before-first-apply",
    "helm",
    "kubectl",
    "kubectl.exe",
    "helm.exe",
];

/// One object's migration.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// Managers fields move from, with how many fields each gives up.
    pub from: Vec<(String, usize)>,
    #[serde(skip)]
    pub entries: Vec<ManagedFieldsEntry>,
    pub resource_version: String,
}

fn last_applied_path() -> Vec<PathElement> {
    ["metadata", "annotations", super::client_side::LAST_APPLIED]
        .iter()
        .map(|f| PathElement::field(f))
        .collect()
}

/// The legacy managers of `entries`: `named` ones, the well-known client-side managers, the
/// SSA manager's own `Update` entries, and any `Update` manager owning the last-applied
/// annotation.
pub fn legacy_managers(
    entries: &[ManagedFieldsEntry],
    ssa_manager: &str,
    named: &[String],
) -> Vec<String> {
    let la = last_applied_path();
    let mut out: Vec<String> = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.operation == "Update" && e.subresource.is_empty())
    {
        let owns_annotation = e
            .fields_v1
            .as_deref()
            .and_then(|f| Set::from_fields_v1(f.as_bytes()).ok())
            .is_some_and(|s| s.has(&la));
        if named.iter().any(|n| n == &e.manager)
            || LEGACY.contains(&e.manager.as_str())
            || e.manager == ssa_manager
            || owns_annotation
        {
            out.push(e.manager.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

fn leaf_count(e: &ManagedFieldsEntry) -> usize {
    e.fields_v1
        .as_deref()
        .and_then(|f| Set::from_fields_v1(f.as_bytes()).ok())
        .map_or(0, |s| s.leaves().size())
}

/// Plans the migration of `live` to `ssa_manager` (None: nothing to move).
pub fn plan(
    live: &Value,
    ssa_manager: &str,
    named: &[String],
) -> Result<Option<Migration>, String> {
    let entries = entries_from_value(
        live.get_path(&["metadata", "managedFields"])
            .unwrap_or(&Value::Null),
    )?;
    let legacy = legacy_managers(&entries, ssa_manager, named);
    if legacy.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = legacy.iter().map(String::as_str).collect();
    let upgraded = upgrade::upgrade(&entries, &names, ssa_manager, "")?;
    if upgraded == entries {
        return Ok(None);
    }
    let from = legacy
        .iter()
        .map(|m| {
            let n = entries
                .iter()
                .filter(|e| &e.manager == m && e.operation == "Update" && e.subresource.is_empty())
                .map(leaf_count)
                .sum();
            (m.clone(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    Ok(Some(Migration {
        from,
        entries: upgraded,
        resource_version: live
            .str_at(&["metadata", "resourceVersion"])
            .unwrap_or("")
            .to_string(),
    }))
}

/// The JSON patch (RFC 6902) that writes the migration, refused by the apiserver if the object
/// changed since the preview.
pub fn json_patch(m: &Migration) -> Value {
    let op = |op: &str, path: &str, value: Value| {
        let mut o = Map::new();
        o.insert("op", Value::from(op));
        o.insert("path", Value::from(path));
        o.insert("value", value);
        Value::Map(o)
    };
    Value::List(vec![
        op(
            "test",
            "/metadata/resourceVersion",
            Value::from(m.resource_version.as_str()),
        ),
        op(
            "replace",
            "/metadata/managedFields",
            entries_to_value(&m.entries, |_| false),
        ),
        op(
            "replace",
            "/metadata/resourceVersion",
            Value::from(m.resource_version.as_str()),
        ),
    ])
}

/// `live` with the migrated managed fields (what the prediction runs against).
pub fn migrated(live: &Value, m: &Migration) -> Value {
    let mut out = live.clone();
    if let Some(meta) = out
        .as_map_mut()
        .and_then(|o| o.get_mut("metadata"))
        .and_then(Value::as_map_mut)
    {
        meta.insert("managedFields", entries_to_value(&m.entries, |_| false));
    }
    out
}
