//! Moving field ownership from client-side-apply managers to a server-side apply manager
//! (client-go's `csaupgrade`): after a release switches from client-side to server-side apply,
//! the fields the old tool owned through `Update` entries must belong to the new `Apply` entry,
//! otherwise fields later dropped from the manifest are never removed (the old `Update` owner
//! keeps them alive).

use super::entry::ManagedFieldsEntry;
use crate::fieldpath::{PathElement, Set};

fn is_csa(e: &ManagedFieldsEntry, name: &str, subresource: &str) -> bool {
    e.manager == name && e.operation == "Update" && e.subresource == subresource
}

fn set_of(e: &ManagedFieldsEntry) -> Result<Set, String> {
    match &e.fields_v1 {
        None => Ok(Set::new()),
        Some(f) => Set::from_fields_v1(f.as_bytes())
            .map_err(|err| format!("failed to convert fields to set: {err}")),
    }
}

/// Upgrades `entries` so that everything the `csa_managers` owned through `Update` entries (of
/// `subresource`) belongs to the `Apply` entry of `ssa_manager`: the most recent CSA entry becomes
/// the Apply entry if there is none, the CSA entry of the same apiVersion is merged into it, and
/// every other CSA entry of those names is dropped. The result does not depend on the order of
/// `csa_managers`.
pub fn upgrade(
    entries: &[ManagedFieldsEntry],
    csa_managers: &[&str],
    ssa_manager: &str,
    subresource: &str,
) -> Result<Vec<ManagedFieldsEntry>, String> {
    let mut names: Vec<&str> = csa_managers.to_vec();
    names.sort();
    names.dedup();
    let mut out = entries.to_vec();
    for name in names {
        out = upgrade_one(out, name, ssa_manager, subresource)?;
    }
    Ok(out)
}

fn upgrade_one(
    mut entries: Vec<ManagedFieldsEntry>,
    csa: &str,
    ssa: &str,
    subresource: &str,
) -> Result<Vec<ManagedFieldsEntry>, String> {
    let target = match entries
        .iter()
        .position(|e| e.manager == ssa && e.operation == "Apply" && e.subresource == subresource)
    {
        Some(i) => i,
        None => {
            // Entries are kept most recent first: the first CSA entry is the newest.
            let Some(i) = entries.iter().position(|e| is_csa(e, csa, subresource)) else {
                return Ok(entries);
            };
            entries[i].operation = "Apply".into();
            entries[i].manager = ssa.into();
            i
        }
    };
    let api_version = entries[target].api_version.clone();
    let mut combined = set_of(&entries[target])?;
    if let Some(csa_entry) = entries
        .iter()
        .find(|e| is_csa(e, csa, subresource) && e.api_version == api_version)
    {
        combined = combined.union(&set_of(csa_entry)?);
    }
    entries[target].fields_v1 = Some(combined.to_fields_v1());
    entries.retain(|e| !is_csa(e, csa, subresource));
    Ok(entries)
}

/// The managers (with `operation`) whose field set holds every one of `fields`
/// (client-go's `FindFieldsOwners`).
pub fn owners_of<'e>(
    entries: &'e [ManagedFieldsEntry],
    operation: &str,
    fields: &[Vec<PathElement>],
) -> Result<Vec<&'e ManagedFieldsEntry>, String> {
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| e.operation == operation) {
        let set = set_of(e)?;
        if fields.iter().all(|p| set.has(p)) {
            out.push(e);
        }
    }
    Ok(out)
}
