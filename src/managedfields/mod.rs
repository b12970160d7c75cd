//! kube-apiserver's field-manager layer around the merge algorithms: `metadata.managedFields`
//! entries, manager identities, timestamps, `before-first-apply`, the cap of ten update entries,
//! stripped metadata, kubectl's last-applied exemption, and the 409 conflict error.

mod entry;
mod fields_cache;
mod manager;
mod prepared;
mod status;
pub mod upgrade;

pub use entry::{
    Identity, Managed, ManagedFieldsEntry, Operation, Time, decode, decode_with, encode,
    encode_with, entries_from_value, entries_to_value, format_time, identity, parse_identity,
    parse_time,
};
pub use fields_cache::{FieldsCache, MAX_CACHED_SETS};
pub use manager::{
    ApplyOutcome, FieldManager, LAST_APPLIED, MAX_UPDATE_MANAGERS, ManagerError, ManagerOptions,
    Outcome, cap_update_managers, remove_managed_fields,
};
pub use prepared::Prepared;
pub use status::{conflict_message, conflict_status, print_manager};
