//! Live state: the objects a check compares manifests with, wherever they come from — a
//! snapshot of files ([`snapshot`]), a cluster read on demand ([`cluster`]), a cluster's watch
//! cache (`crate::cache`) — behind one async trait ([`state::LiveState`]) that the command line
//! and the service both stand on. Underneath: the apiserver's API ([`api`]), what it serves
//! ([`discovery`]), and the one resolver of kinds as people write them ([`resolve`]).

pub mod aggregated;
pub mod answers;
pub mod api;
pub mod cluster;
pub mod discovery;
pub mod prepared;
pub mod resolve;
pub mod snapshot;
pub mod source;
pub mod state;

use crate::value::Value;
use foldhash::HashMap;
use std::fmt;

/// Identifies an object across API versions: group, kind, namespace (empty when cluster-scoped)
/// and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    /// The reference of an object as stored (`apiVersion`, `kind`, `metadata.namespace`,
    /// `metadata.name`).
    pub fn of(v: &Value) -> ObjectRef {
        let at = |keys: &[&str]| v.str_at(keys).unwrap_or("");
        ObjectRef::new(
            at(&["apiVersion"]),
            at(&["kind"]),
            at(&["metadata", "namespace"]),
            at(&["metadata", "name"]),
        )
    }

    /// The reference of an object named so (the group taken from `api_version`).
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectRef {
        ObjectRef {
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// [`ObjectRef::new`], taking the strings (the group is cut from `api_version` in place).
    pub fn from_owned(api_version: String, kind: String, namespace: String, name: String) -> Self {
        let mut group = api_version;
        group.truncate(group_of(&group).len());
        ObjectRef {
            group,
            kind,
            namespace,
            name,
        }
    }
}

/// An apiVersion's group: its part before the last `/` (none for the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

impl ObjectRef {}

impl fmt::Display for ObjectRef {
    /// `Deployment.apps shop/web`, `Namespace shop`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if self.namespace.is_empty() {
            write!(f, " {}", self.name)
        } else {
            write!(f, " {}/{}", self.namespace, self.name)
        }
    }
}

/// The live objects a prediction is made against, already read (the engine's input: it
/// never reads a source itself).
#[derive(Debug, Default)]
pub struct Fetched {
    pub objects: HashMap<ObjectRef, state::Stored>,
    /// Where objects were read from, when that is a file (a snapshot's).
    pub origins: HashMap<ObjectRef, crate::manifest::Origin>,
    /// `snapshot examples/cluster`, `cluster https://…`.
    pub source: String,
    /// Where prepared live objects are kept between predictions (the source's), if anywhere.
    pub prepared: Option<std::sync::Arc<prepared::PreparedCache>>,
}

impl Fetched {
    /// The stored object, or `None` if it does not exist.
    pub fn get(&self, r: &ObjectRef) -> Option<&Value> {
        self.objects.get(r).map(|v| &**v)
    }

    /// The stored object `r` prepared for the engine as type `tr` of `schema` (read in
    /// `api_version`), from the source's cache when it has one; `None` if it does not exist.
    pub fn prepare(
        &self,
        r: &ObjectRef,
        schema: &std::sync::Arc<crate::schema::Schema>,
        tr: &crate::schema::TypeRef,
        api_version: &str,
    ) -> Option<
        Result<std::sync::Arc<crate::managedfields::Prepared>, crate::managedfields::ManagerError>,
    > {
        let object = self.objects.get(r)?;
        Some(match &self.prepared {
            Some(cache) => cache.prepare(r, object, schema, tr, api_version),
            None => {
                crate::managedfields::Prepared::new(schema, tr, object).map(std::sync::Arc::new)
            }
        })
    }
}
