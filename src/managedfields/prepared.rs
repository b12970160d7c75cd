//! A live object prepared once for many requests (what a watch cache or the service keeps).

use super::entry::Managed;
use super::manager::{ManagerError, without_managed_fields};
use crate::merge::{PlainSets, Updater};
use crate::schema::{Schema, TypeRef};
use crate::typed::{self, ListIndexes};
use crate::value::Value;
use std::collections::BTreeMap;

/// A live object prepared once for many requests: managed fields decoded and reconciled with
/// the schema, the object validated, its lists indexed. What a watch cache keeps (shared, as
/// `Arc<Prepared>`). Immutable: the indexes refer to the object and the sets by address.
#[derive(Debug)]
pub struct Prepared {
    object: Value,
    managed: Managed,
    /// Which of the managers' sets are plain for the type (speeds up applies).
    pub(super) plain: PlainSets,
    /// The object's list indexes (speeds up applies).
    pub(super) lists: ListIndexes,
}

impl Prepared {
    /// The object, without `metadata.managedFields`.
    pub fn object(&self) -> &Value {
        &self.object
    }

    /// Its managed fields, decoded and reconciled with the schema.
    pub fn managed(&self) -> &Managed {
        &self.managed
    }

    /// Prepares `object` (which may carry `metadata.managedFields`) for requests of `tr`.
    pub fn new(schema: &Schema, tr: &TypeRef, object: &Value) -> Result<Prepared, ManagerError> {
        let entries = match object.get_path(&["metadata", "managedFields"]) {
            Some(mf) => super::entry::read_entries(mf).map_err(ManagerError::Failed)?,
            None => vec![],
        };
        let mut managed = super::entry::decode_read(&entries)
            .map_err(|e| ManagerError::Failed(format!("failed to decode managed fields: {e}")))?;
        let object = without_managed_fields(object);
        typed::validate(schema, tr, &object, true).map_err(|e| {
            ManagerError::Failed(format!("failed to convert live object to smd typed: {e}"))
        })?;
        let reset = BTreeMap::new();
        let updater = Updater {
            schema,
            type_ref: tr,
            ignored: &reset,
            known_versions: None,
            reconciled: false,
            plain: None,
            fields: None,
        };
        managed.fields = updater
            .reconcile_all(std::mem::take(&mut managed.fields))
            .map_err(|e| ManagerError::Failed(e.to_string()))?;
        let plain = PlainSets::of(schema, tr, managed.fields.values().map(|vs| &vs.set));
        let lists = ListIndexes::of(schema, tr, &object);
        Ok(Prepared {
            object,
            managed,
            plain,
            lists,
        })
    }
}
