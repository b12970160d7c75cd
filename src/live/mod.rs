//! Live state: the objects a check compares manifests with, wherever they come from — a
//! snapshot of files ([`snapshot`]), a cluster ([`cluster`]) — behind one interface, so every
//! source behaves the same from the check's point of view.

pub mod cluster;
pub mod snapshot;
pub mod store;

use crate::value::Value;
use std::collections::HashMap;
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
        let api_version = v.str_at(&["apiVersion"]).unwrap_or("");
        ObjectRef {
            group: api_version
                .rsplit_once('/')
                .map_or("", |(g, _)| g)
                .to_string(),
            kind: v.str_at(&["kind"]).unwrap_or("").to_string(),
            namespace: v
                .str_at(&["metadata", "namespace"])
                .unwrap_or("")
                .to_string(),
            name: v.str_at(&["metadata", "name"]).unwrap_or("").to_string(),
        }
    }
}

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

/// Objects as they are stored, by reference.
pub trait LiveObjects {
    /// The stored object (with its managedFields), or `None` if it does not exist.
    fn get(&self, r: &ObjectRef) -> Option<&Value>;
    /// A short description of where the objects come from (for reports).
    fn describe(&self) -> String;
    /// Where the object was read from, when that is a file (a snapshot's).
    fn origin(&self, _r: &ObjectRef) -> Option<crate::manifest::Origin> {
        None
    }
}

/// Objects fetched for one check (from a cluster or a service).
#[derive(Debug, Default)]
pub struct Fetched {
    pub objects: HashMap<ObjectRef, Value>,
    pub source: String,
}

impl LiveObjects for Fetched {
    fn get(&self, r: &ObjectRef) -> Option<&Value> {
        self.objects.get(r)
    }
    fn describe(&self) -> String {
        self.source.clone()
    }
}

impl<T: LiveObjects + ?Sized> LiveObjects for &T {
    fn get(&self, r: &ObjectRef) -> Option<&Value> {
        (**self).get(r)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn origin(&self, r: &ObjectRef) -> Option<crate::manifest::Origin> {
        (**self).origin(r)
    }
}
