//! Ownership views over stored objects: [`blame`] (each line of an object with the managers
//! that own it) and [`inventory`] (every manager across many objects, with the usual strays
//! flagged).

pub mod blame;
pub mod inventory;

use crate::managedfields::{Managed, decode, entries_from_value, format_time, parse_identity};
use crate::predict::Owner;
use crate::value::Value;

/// The decoded managedFields of a stored object.
pub fn managed_of(obj: &Value) -> Result<Managed, String> {
    let entries = entries_from_value(
        obj.get_path(&["metadata", "managedFields"])
            .unwrap_or(&Value::Null),
    )?;
    decode(&entries)
}

/// The owner an identity key of `m` stands for.
pub fn owner_of(key: &str, m: &Managed) -> Owner {
    let id = parse_identity(key).unwrap_or_default();
    Owner {
        manager: id.manager,
        operation: id.operation,
        api_version: m
            .fields
            .get(key)
            .map(|v| v.api_version.clone())
            .unwrap_or(id.api_version),
        subresource: id.subresource,
        time: m.times.get(key).copied().flatten().map(format_time),
    }
}
