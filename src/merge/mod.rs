//! The apply and update algorithms over managed field sets (structured-merge-diff `merge`):
//! who owns what after a write, which fields conflict, and what an apply removes.

mod conflict;
mod dangling;
mod prune;
mod updater;

pub use conflict::{Conflict, Conflicts};
pub use prune::PlainSets;
pub use updater::{Applied, UpdateError, Updater};

use crate::fieldpath::Set;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A manager's field set with the API version it was recorded in. The set is shared
/// copy-on-write: managed fields are cloned per request, but an apply changes few of them.
#[derive(Clone, Debug)]
pub struct VersionedSet {
    pub set: Arc<Set>,
    pub api_version: String,
    /// True for `Apply` entries.
    pub applied: bool,
}

/// How an applier's field set changed in an apply.
#[derive(Clone, Debug, Default)]
pub struct SetChange {
    /// New minus previous.
    pub gained: Set,
    /// Previous minus new.
    pub dropped: Set,
}

/// Managed fields keyed by manager identity (see [`crate::managedfields::identity`]).
pub type ManagedFields = BTreeMap<String, VersionedSet>;
