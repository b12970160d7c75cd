//! Live state behind one async trait, [`LiveState`]: a snapshot of files ([`SnapshotState`]),
//! a cluster read on demand (`live::cluster::Cluster`, the command line's) and a cluster's
//! watch-fed cache (`cache::ClusterCache`, the service's). The command line and the service
//! stand on it alike; neither knows which source it has.

use super::api::{Api, ClusterError};
use super::snapshot::{Entry, Objects, Snapshot};
use super::{Fetched, ObjectRef};
use crate::catalog::Catalog;
use crate::manifest::{ManifestError, Origin};
use crate::value::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A stored object, shared.
pub type Stored = Arc<Value>;

/// Why live state could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The cluster did not answer, or refused (its status code and reason inside).
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// These objects exist but cannot be read now (object, why): a prediction without them
    /// would be a guess.
    #[error("live state unavailable: {}", .0.iter().map(|(r, why)| format!("{r}: {why}")).collect::<Vec<_>>().join("; "))]
    Unavailable(Vec<(ObjectRef, String)>),
    /// A kind, as written, that the cluster does not serve.
    #[error("{0}: the cluster serves no such resource")]
    UnknownKind(String),
    /// The snapshot's files are not valid objects (located problems).
    #[error("the snapshot is invalid")]
    Invalid(Vec<ManifestError>),
    /// The source cannot be opened as asked.
    #[error("{0}")]
    Options(String),
    /// fieldguard's own failure (a task that died).
    #[error("{0}")]
    Internal(String),
}

/// Which objects a query keeps, given each one's reference and labels (`metadata.labels`).
pub type Keep = Box<dyn Fn(&ObjectRef, Option<&Value>) -> bool + Send + Sync>;

/// Live state: the objects (with managedFields) and types a prediction or a query reads.
#[async_trait::async_trait]
pub trait LiveState: Send + Sync + 'static {
    /// `snapshot examples/cluster`, `cluster https://… (v1.36.0)`.
    fn describe(&self) -> String;
    /// The types known for these apiVersions (built-ins, CRDs, the cluster's schemas).
    async fn catalog(&self, api_versions: &BTreeSet<String>) -> Result<Catalog, LiveError>;
    /// One object as the source holds it; `Ok(None)`: it does not exist. An error when the
    /// object exists but cannot be read now.
    async fn get(&self, r: &ObjectRef) -> Result<Option<Stored>, LiveError>;
    /// The objects (reference, apiVersion to read it in), read from the source now: a cluster
    /// GETs them (a type it does not serve has no objects); a snapshot has them.
    async fn fetch_fresh(
        &self,
        refs: &[(ObjectRef, String)],
    ) -> Result<Vec<Option<Stored>>, LiveError>;
    /// Every object (in one namespace, with the cluster-scoped ones), in reference order. A
    /// cluster read on demand lists metadata only (managedFields included).
    async fn list(&self, namespace: Option<&str>) -> Result<Vec<(ObjectRef, Stored)>, LiveError>;
    /// The objects named `name` of a kind as a person writes it (`deploy`, `widgets.example.com`;
    /// see `live::resolve`), in `namespace` for namespaced kinds. Several when the name is
    /// ambiguous; an unknown kind is an error.
    async fn find(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(ObjectRef, Stored)>, LiveError>;
    /// The objects a manager has entries on.
    async fn managed_by(&self, manager: &str) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        Ok(self
            .list(None)
            .await?
            .into_iter()
            .filter(|(_, o)| managed_by(o, manager))
            .collect())
    }
    /// The managers inventory of the objects `keep` selects (all when `None`), built where the
    /// objects are held; `None`: this source has no such way, and the caller lists the objects
    /// and builds it ([`crate::ownership::inventory::inventory`]), which gives the same.
    async fn inventory(
        &self,
        _keep: Option<Keep>,
    ) -> Result<Option<crate::ownership::inventory::Inventory>, LiveError> {
        Ok(None)
    }
    /// The resource (plural) objects of this kind are served as, from discovery; `None` when
    /// unknown (never guessed: authorization needs the real name).
    fn resource_of(&self, _r: &ObjectRef) -> Option<String> {
        None
    }
    /// Where the object was read from, when that is a file (a snapshot's).
    fn origin(&self, _r: &ObjectRef) -> Option<Origin> {
        None
    }
    /// The ownership changes remembered (a watch cache with history on); `None` otherwise.
    fn history(&self) -> Option<Arc<crate::history::History>> {
        None
    }
    /// The namespace objects that name none are in (a kubeconfig context's).
    fn default_namespace(&self) -> Option<String> {
        None
    }
    /// Where live objects prepared for the engine are kept between predictions (a source
    /// that serves many: the service's); `None`: prepared per prediction.
    fn prepared(&self) -> Option<Arc<super::prepared::PreparedCache>> {
        None
    }
    /// Whether the source is in sync now (Err: what is not, for readiness).
    fn in_sync(&self) -> Result<(), String> {
        Ok(())
    }
    /// The cluster's API, for writes (None: a snapshot).
    fn api(&self) -> Option<Api> {
        None
    }
}

/// True if `manager` has an entry in the object's managedFields.
pub fn managed_by(o: &Value, manager: &str) -> bool {
    o.get_path(&["metadata", "managedFields"])
        .and_then(Value::as_list)
        .is_some_and(|l| l.iter().any(|e| e.str_at(&["manager"]) == Some(manager)))
}

/// The live objects of these targets (reference, apiVersion), read fresh or as the source
/// holds them: what a prediction is made against. Objects that exist but cannot be read make
/// the whole answer [`LiveError::Unavailable`], naming each.
pub async fn fetch(
    state: &dyn LiveState,
    refs: &[(ObjectRef, String)],
    fresh: bool,
) -> Result<Fetched, LiveError> {
    let mut live = Fetched {
        source: state.describe(),
        prepared: state.prepared(),
        ..Fetched::default()
    };
    let got = if fresh {
        state.fetch_fresh(refs).await?
    } else {
        let mut got = Vec::with_capacity(refs.len());
        let mut unavailable = Vec::new();
        for (r, _) in refs {
            match state.get(r).await {
                Ok(v) => got.push(v),
                Err(LiveError::Unavailable(mut u)) => {
                    unavailable.append(&mut u);
                    got.push(None);
                }
                Err(e) => return Err(e),
            }
        }
        if !unavailable.is_empty() {
            return Err(LiveError::Unavailable(unavailable));
        }
        got
    };
    for ((r, _), v) in refs.iter().zip(got) {
        if let Some(origin) = state.origin(r) {
            live.origins.insert(r.clone(), origin);
        }
        if let Some(v) = v {
            live.objects.insert(r.clone(), v);
        }
    }
    Ok(live)
}

/// Reads of at least this many objects parse them on every core.
const PARALLEL_READS: usize = 64;

/// A snapshot, served as it is.
pub struct SnapshotState {
    source: String,
    catalog: Catalog,
    /// The snapshot's objects, each parsed on first read (shared with the blocking pool, where
    /// lists are made).
    objects: Arc<Objects>,
    /// Prepared objects kept between predictions (a served snapshot's).
    prepared: Option<Arc<super::prepared::PreparedCache>>,
}

impl SnapshotState {
    /// Keeps up to `entries` objects prepared for the engine between predictions (for a
    /// snapshot that answers many: the service's). A one-shot check has no use for it.
    pub fn keeping_prepared(mut self, entries: usize) -> SnapshotState {
        self.prepared = Some(Arc::new(super::prepared::PreparedCache::new(entries)));
        self
    }

    pub fn new(snapshot: Snapshot, catalog: Catalog) -> SnapshotState {
        let source = snapshot.describe();
        let objects = Arc::new(snapshot.into_objects());
        SnapshotState {
            source,
            catalog,
            objects,
            prepared: None,
        }
    }

    /// The objects whose reference passes `keep` and whose object passes `then`, parsed, on
    /// the blocking pool.
    async fn select(
        &self,
        keep: impl Fn(&ObjectRef) -> bool + Send + 'static,
        then: impl Fn(&Value) -> bool + Send + 'static,
    ) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        let objects = self.objects.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for (r, entry) in objects.in_order().filter(|(r, _)| keep(r)) {
                let v = read(entry)?;
                if then(&v) {
                    out.push((r.clone(), v));
                }
            }
            Ok(out)
        })
        .await
        .map_err(|e| LiveError::Internal(format!("listing the snapshot failed: {e}")))?
    }
}

impl SnapshotState {
    /// `Ok` when the objects `missing` (not found) are known to be absent: every document of
    /// the snapshot was read. Otherwise they are unavailable, never absent.
    fn absent(&self, missing: &[ObjectRef]) -> Result<(), LiveError> {
        match (missing.is_empty(), self.objects.absence_unknown()) {
            (false, Some(why)) => Err(LiveError::Unavailable(
                missing.iter().map(|r| (r.clone(), why.clone())).collect(),
            )),
            _ => Ok(()),
        }
    }

    /// `Ok` when every document of the snapshot was read, so a listing of it is whole.
    fn complete(&self) -> Result<(), LiveError> {
        match self.objects.unreadable() {
            [] => Ok(()),
            some => Err(LiveError::Invalid(some.to_vec())),
        }
    }
}

/// A snapshot's object, parsed on first read.
fn read(entry: &Entry) -> Result<Stored, LiveError> {
    entry.shared().map_err(|e| LiveError::Invalid(vec![e]))
}

#[async_trait::async_trait]
impl LiveState for SnapshotState {
    fn describe(&self) -> String {
        self.source.clone()
    }
    async fn catalog(&self, _: &BTreeSet<String>) -> Result<Catalog, LiveError> {
        Ok(self.catalog.clone())
    }
    async fn get(&self, r: &ObjectRef) -> Result<Option<Stored>, LiveError> {
        match self.objects.get(r) {
            Some(entry) => read(entry).map(Some),
            None => self.absent(std::slice::from_ref(r)).map(|()| None),
        }
    }
    fn prepared(&self) -> Option<Arc<super::prepared::PreparedCache>> {
        self.prepared.clone()
    }
    async fn fetch_fresh(
        &self,
        refs: &[(ObjectRef, String)],
    ) -> Result<Vec<Option<Stored>>, LiveError> {
        let found: Vec<Option<usize>> =
            refs.iter().map(|(r, _)| self.objects.position(r)).collect();
        let missing: Vec<ObjectRef> = refs
            .iter()
            .zip(&found)
            .filter(|(_, i)| i.is_none())
            .map(|((r, _), _)| r.clone())
            .collect();
        self.absent(&missing)?;
        if refs.len() < PARALLEL_READS || crate::cores::cores() < 2 {
            return found
                .iter()
                .map(|i| i.map(|i| read(self.objects.at(i))).transpose())
                .collect();
        }
        // Many objects (a check of a whole release): parsed on every core, off the runtime.
        let objects = self.objects.clone();
        crate::cores::on_pool(move || {
            let len = crate::cores::chunk_len(found.len());
            let mut out = Vec::with_capacity(found.len());
            for run in crate::cores::map_chunks(&found, len, crate::cores::cores(), |run| {
                run.iter()
                    .map(|i| i.map(|i| read(objects.at(i))).transpose())
                    .collect::<Result<Vec<_>, _>>()
            }) {
                let part = run.map_err(|_| {
                    LiveError::Internal("reading the snapshot's objects failed".into())
                })?;
                out.extend(part?);
            }
            Ok(out)
        })
        .await
        .ok_or_else(|| LiveError::Internal("reading the snapshot failed".into()))?
    }
    async fn list(&self, namespace: Option<&str>) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        // As a cluster lists them: a namespace narrows namespaced objects; cluster-scoped ones
        // (CRDs, namespaces) stay. Parsing and copying is work for the blocking pool.
        self.complete()?;
        let namespace = namespace.map(str::to_string);
        let keep = move |r: &ObjectRef| {
            namespace
                .as_deref()
                .is_none_or(|n| r.namespace.is_empty() || r.namespace == n)
        };
        self.select(keep, |_| true).await
    }
    async fn managed_by(&self, manager: &str) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        self.complete()?;
        let manager = manager.to_string();
        self.select(|_| true, move |v| managed_by(v, &manager))
            .await
    }
    async fn find(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        // A snapshot has no discovery: a kind none of its objects has finds nothing.
        let found: Vec<(ObjectRef, Stored)> = self
            .objects
            .in_order()
            .filter(|(r, _)| {
                super::resolve::names(
                    kind,
                    &super::resolve::Names {
                        group: &r.group,
                        kind: &r.kind,
                        plural: None,
                        singular: "",
                        short_names: &[],
                    },
                )
            })
            .filter(|(r, _)| {
                r.name == name
                    && (namespace.is_empty() || r.namespace.is_empty() || r.namespace == namespace)
            })
            .map(|(r, entry)| Ok((r.clone(), read(entry)?)))
            .collect::<Result<_, LiveError>>()?;
        if found.is_empty() {
            self.complete()?;
        }
        Ok(found)
    }
    fn origin(&self, r: &ObjectRef) -> Option<Origin> {
        self.objects.get(r).map(|e| e.origin.clone())
    }
}
