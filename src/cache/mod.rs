//! The watch-fed ownership cache of one cluster: API discovery, one list+watch per watchable
//! resource type (filtered by group, kind, namespace), metadata-only by default (metadata
//! carries managedFields) and full objects for configured kinds; indexes from object to
//! managers and manager to objects; schemas per group-version from `/openapi/v3`, refreshed
//! when CRDs change.
//!
//! Consistency: relists (410 Gone, restarts) update the table in place, object by object, and
//! then remove what the list no longer holds; watch events apply one at a time under the
//! table's lock; bookmarks keep resourceVersions fresh.
//! Undecodable objects are skipped and counted. Every object handed out carries its
//! resourceVersion.

mod backoff;
pub mod fields;
pub mod intern;
pub mod inventory;
mod record;
pub mod relist;
mod skim;
pub mod table;
mod watch;

pub use intern::Interner;
pub use watch::{Applied, apply_event_recorded, apply_event_to, list_page};

use crate::catalog::Catalog;
use crate::live::ObjectRef;
use crate::live::api::{Api, ClusterError};
use crate::live::discovery::{ServedResource, Types};
use crate::live::state::{LiveError, LiveState, Stored};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use table::Table;

/// How often discovery runs again without a reason (a safety net: CRD events trigger it).
const REDISCOVER_EVERY: Duration = Duration::from_secs(300);

/// What to cache.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Only these API groups (`""` is core; empty: all).
    pub include_groups: Vec<String>,
    pub exclude_groups: Vec<String>,
    /// Only these kinds (empty: all).
    pub include_kinds: Vec<String>,
    /// Never these kinds (default: `Event`: high churn, no ownership questions).
    pub exclude_kinds: Vec<String>,
    /// Only this namespace (cluster-scoped kinds are still watched).
    pub namespace: Option<String>,
    /// Kinds whose whole objects are kept (others are fetched when a request needs them).
    pub full_kinds: Vec<String>,
    /// First wait before retrying after an error (then doubling, jittered, up to
    /// `max_backoff`).
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// `timeoutSeconds` of each watch request.
    pub watch_timeout_secs: u32,
    /// A watch that hears nothing (no event, no bookmark: the apiserver sends one about every
    /// minute) for this long is restarted.
    pub watch_idle_timeout: Duration,
    /// Remember ownership changes (`None`: no history).
    pub history: Option<crate::history::HistoryConfig>,
    /// Objects per list page (`limit`); the next page is asked for while one is decoded.
    pub page_size: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            include_groups: vec![],
            exclude_groups: vec![],
            include_kinds: vec![],
            exclude_kinds: vec!["Event".into()],
            namespace: None,
            full_kinds: vec![],
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            watch_timeout_secs: 290,
            watch_idle_timeout: Duration::from_secs(150),
            history: None,
            page_size: 500,
        }
    }
}

impl CacheConfig {
    fn wants(&self, r: &ServedResource) -> bool {
        let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        r.watchable
            && (self.include_groups.is_empty() || self.include_groups.iter().any(|g| g == group))
            && !self.exclude_groups.iter().any(|g| g == group)
            && (self.include_kinds.is_empty() || self.include_kinds.contains(&r.kind))
            && !self.exclude_kinds.contains(&r.kind)
    }
}

/// Counters (for tests, metrics and logs).
#[derive(Debug, Default)]
pub struct Stats {
    pub events: AtomicU64,
    pub skipped: AtomicU64,
    pub relists: AtomicU64,
    pub watch_restarts: AtomicU64,
    /// Watch tasks that ended unexpectedly (a panic) and were started again.
    pub task_restarts: AtomicU64,
}

struct Watched {
    resource: ServedResource,
    table: Arc<Table>,
}

/// One cluster's cache.
pub struct ClusterCache {
    pub name: String,
    api: Api,
    config: CacheConfig,
    pub interner: Interner,
    pub stats: Stats,
    watched: RwLock<Vec<Watched>>,
    /// Every resource the last discovery reported (watched or not).
    served: RwLock<Vec<ServedResource>>,
    synced_notify: tokio::sync::Notify,
    /// Discovery and schemas per group-version, forgotten when CRDs change.
    types: Types,
    stop: tokio::sync::watch::Sender<bool>,
    /// Signalled when CRDs change: discovery runs again and new resources get watched.
    rediscover: tokio::sync::Notify,
    /// Ownership changes, when configured.
    pub history: Option<Arc<crate::history::History>>,
    /// Objects prepared for the engine, kept between predictions.
    prepared: Arc<crate::live::prepared::PreparedCache>,
}

impl ClusterCache {
    /// Discovers the cluster's resources and starts watching them (on the current runtime).
    pub async fn start(
        name: &str,
        api: Api,
        config: CacheConfig,
    ) -> Result<Arc<ClusterCache>, ClusterError> {
        let (stop, _) = tokio::sync::watch::channel(false);
        let history = config
            .history
            .as_ref()
            .map(|h| crate::history::History::new(name, h));
        let cache = Arc::new(ClusterCache {
            name: name.to_string(),
            api,
            config,
            interner: Interner::default(),
            stats: Stats::default(),
            watched: RwLock::new(Vec::new()),
            served: RwLock::new(Vec::new()),
            synced_notify: tokio::sync::Notify::new(),
            types: Types::default(),
            stop,
            rediscover: tokio::sync::Notify::new(),
            history,
            prepared: Arc::default(),
        });
        cache.refresh_resources().await?;
        let c = cache.clone();
        let mut stop = cache.stop.subscribe();
        tokio::spawn(async move {
            // Discovery lags a CRD's events (the apiserver publishes a new resource after the
            // CRD is established): while a cached CRD is not served yet, ask again (backoff).
            let mut backoff = backoff::Backoff::new(c.config.backoff, c.config.max_backoff);
            let mut pending = false;
            loop {
                let wait = if pending {
                    backoff.next_wait()
                } else {
                    REDISCOVER_EVERY
                };
                tokio::select! {
                    _ = c.rediscover.notified() => backoff.reset(),
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
                pending = match c.refresh_resources().await {
                    Ok(()) => c.crds_not_served_yet(),
                    Err(e) => {
                        tracing::warn!(cluster = %c.name, error = %e, "discovery failed");
                        true
                    }
                };
            }
        });
        Ok(cache)
    }

    /// Whether a CRD in the cache's CRD table (of a group the cache wants) has no resource in
    /// the last discovery yet.
    fn crds_not_served_yet(&self) -> bool {
        let Some(crds) = self.crd_table() else {
            return false;
        };
        let served = self.served.read().unwrap_or_else(|p| p.into_inner());
        let data = crds.read();
        data.objects.keys().any(|name| {
            let Some((plural, group)) = name.split_once('.') else {
                return false;
            };
            let wanted = (self.config.include_groups.is_empty()
                || self.config.include_groups.iter().any(|g| g == group))
                && !self.config.exclude_groups.iter().any(|g| g == group);
            wanted
                && !served
                    .iter()
                    .any(|r| r.plural == plural && group_of(&r.api_version) == group)
        })
    }

    /// The table of CustomResourceDefinitions, when they are watched.
    fn crd_table(&self) -> Option<Arc<Table>> {
        self.tables()
            .into_iter()
            .find(|t| t.kind == "CustomResourceDefinition" && t.group == "apiextensions.k8s.io")
    }

    /// Watches resources discovery reports that are not watched yet (new CRDs).
    pub async fn refresh_resources(self: &Arc<Self>) -> Result<(), ClusterError> {
        let resources = self.api.resources().await?;
        *self.served.write().unwrap_or_else(|p| p.into_inner()) = resources.clone();
        let mut w = self.watched.write().unwrap_or_else(|p| p.into_inner());
        for r in resources.into_iter().filter(|r| self.config.wants(r)) {
            if w.iter()
                .any(|x| x.resource.api_version == r.api_version && x.resource.plural == r.plural)
            {
                continue;
            }
            let full = self.config.full_kinds.contains(&r.kind);
            let table = Arc::new(Table::new(&r.api_version, &r.kind, full));
            w.push(Watched {
                resource: r.clone(),
                table: table.clone(),
            });
            tokio::spawn(supervise(self.clone(), r, table));
        }
        Ok(())
    }

    /// Makes the watch task of `kind` panic at its next event (tests of the supervision).
    #[cfg(feature = "fault-injection")]
    pub fn inject_panic(&self, kind: &str) {
        for t in self.tables().iter().filter(|t| t.kind == kind) {
            t.poisoned.store(true, Ordering::SeqCst);
        }
    }

    /// Forgets a resource the apiserver no longer serves: its table and memory go.
    fn forget(&self, r: &ServedResource) {
        self.watched
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|w| {
                !(w.resource.api_version == r.api_version && w.resource.plural == r.plural)
            });
        self.synced_notify.notify_waiters();
    }

    /// Whether a resource whose list answered 404 is really gone: its CRD is not in the
    /// cache's CRD table (when CRDs are watched: a starting apiserver answers 404 for CRDs it
    /// has not installed yet) and fresh discovery no longer lists it.
    async fn no_longer_served(&self, r: &ServedResource) -> bool {
        let group = group_of(&r.api_version);
        if let Some(crds) = self.crd_table()
            && crds.listed.load(Ordering::SeqCst)
            && crds
                .read()
                .objects
                .contains_key(format!("{}.{group}", r.plural).as_str())
        {
            return false;
        }
        match self.api.resources().await {
            Ok(served) => !served
                .iter()
                .any(|x| x.api_version == r.api_version && x.plural == r.plural),
            Err(_) => false,
        }
    }

    /// The kinds whose watch is not in sync now (a failed list or watch, a silent connection
    /// being restarted), for readiness.
    pub fn out_of_sync(&self) -> Vec<String> {
        self.tables()
            .iter()
            .filter(|t| !t.is_in_sync())
            .map(|t| format!("{}/{}", t.api_version, t.kind))
            .collect()
    }

    /// Resolves once every watched resource has completed its first list.
    pub async fn wait_synced(&self) {
        loop {
            let notified = self.synced_notify.notified();
            if self.is_synced() {
                return;
            }
            notified.await;
        }
    }

    /// Every watched resource has completed its first list.
    pub fn is_synced(&self) -> bool {
        self.tables()
            .iter()
            .all(|t| t.listed.load(Ordering::SeqCst))
    }

    fn mark_synced(&self) {
        self.synced_notify.notify_waiters();
    }

    /// Forgets cached schemas (a CRD changed).
    fn schemas_changed(&self) {
        self.types.clear();
    }

    /// Stops every watch.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.tables().iter().map(|t| t.read().objects.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The watched tables.
    pub fn tables(&self) -> Vec<Arc<Table>> {
        self.watched
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| w.table.clone())
            .collect()
    }

    /// Every cached object's reference and resourceVersion (to compare with the truth).
    pub fn versions(&self) -> std::collections::BTreeMap<ObjectRef, String> {
        let mut out = std::collections::BTreeMap::new();
        for t in self.tables() {
            for e in t.read().objects.values() {
                out.insert(t.object_ref(e), e.resource_version.to_string());
            }
        }
        out
    }

    fn find_table(&self, group: &str, kind: &str) -> Option<(ServedResource, Arc<Table>)> {
        self.watched
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|w| w.table.group == group && w.table.kind == kind)
            .map(|w| (w.resource.clone(), w.table.clone()))
    }

    fn object_path(r: &ServedResource, namespace: &str, name: &str) -> String {
        let ns = if r.namespaced { namespace } else { "" };
        crate::live::api::resource_path(&r.api_version, &r.plural, ns, Some(name))
    }
}

#[async_trait::async_trait]
impl LiveState for ClusterCache {
    fn prepared(&self) -> Option<Arc<crate::live::prepared::PreparedCache>> {
        Some(self.prepared.clone())
    }
    fn history(&self) -> Option<Arc<crate::history::History>> {
        self.history.clone()
    }

    async fn catalog(&self, api_versions: &BTreeSet<String>) -> Result<Catalog, LiveError> {
        Ok(self.types.catalog(&self.api, api_versions).await?)
    }

    async fn get(&self, r: &ObjectRef) -> Result<Option<Stored>, LiveError> {
        let unavailable = |why: String| LiveError::Unavailable(vec![(r.clone(), why)]);
        let Some((res, table)) = self.find_table(&r.group, &r.kind) else {
            return Ok(None);
        };
        let entry = {
            let data = table.read();
            let k = table::key(&r.namespace, &r.name);
            if let Some(why) = data.undecodable.get(&*k) {
                // A Secret's decoding error could quote its content.
                let why = if r.kind == "Secret" {
                    "it could not be decoded"
                } else {
                    why
                };
                return Err(unavailable(format!(
                    "the watch delivered an object the cache cannot read: {why}"
                )));
            }
            match data.objects.get(&*k) {
                Some(e) => e.clone(),
                None => return Ok(None),
            }
        };
        if let Some(full) = &entry.full {
            return Ok(Some(full.clone()));
        }
        // Metadata-only kinds: the object's content comes from the apiserver. Without it the
        // values are unknown: no prediction (never a guess from the metadata alone).
        let path = Self::object_path(&res, &r.namespace, &r.name);
        self.api
            .get_json(&path)
            .await
            .map(|v| v.map(Arc::new))
            .map_err(|e| unavailable(format!("the live object could not be read: {e}")))
    }

    async fn fetch_fresh(
        &self,
        refs: &[(ObjectRef, String)],
    ) -> Result<Vec<Option<Stored>>, LiveError> {
        let mut out = Vec::with_capacity(refs.len());
        for (r, api_version) in refs {
            let Some((mut res, _)) = self.find_table(&r.group, &r.kind) else {
                out.push(None);
                continue;
            };
            res.api_version = api_version.clone();
            let path = Self::object_path(&res, &r.namespace, &r.name);
            out.push(self.api.get_json(&path).await?.map(Arc::new));
        }
        Ok(out)
    }

    async fn find(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        let served = self
            .served
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|r| r.matches(kind))
            .cloned();
        let Some(res) = served else {
            return Err(LiveError::UnknownKind(kind.to_string()));
        };
        let r = ObjectRef {
            group: res.group().to_string(),
            kind: res.kind.clone(),
            namespace: if res.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        };
        Ok(self.get(&r).await?.map(|o| (r, o)).into_iter().collect())
    }

    async fn list(&self, namespace: Option<&str>) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        // Every object rebuilt: work for the blocking pool, not the runtime's workers.
        let tables = self.tables();
        let namespace = namespace.map(str::to_string);
        tokio::task::spawn_blocking(move || table::list(&tables, namespace.as_deref()))
            .await
            .map_err(|e| LiveError::Internal(format!("listing the cache failed: {e}")))
    }

    fn describe(&self) -> String {
        format!("cluster {} ({})", self.name, self.api.url())
    }

    fn in_sync(&self) -> Result<(), String> {
        let behind = self.out_of_sync();
        if behind.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "cluster {}: not in sync: {}",
                self.name,
                behind.join(", ")
            ))
        }
    }

    fn api(&self) -> Option<Api> {
        Some(self.api.clone())
    }

    fn resource_of(&self, r: &ObjectRef) -> Option<String> {
        let watched = self
            .watched
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|w| w.resource.serves(r))
            .map(|w| w.resource.plural.clone());
        // Kinds not watched (excluded, filtered) are still served: discovery knows them.
        watched.or_else(|| {
            self.served
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .find(|x| x.serves(r))
                .map(|x| x.plural.clone())
        })
    }

    async fn inventory(
        &self,
        keep: Option<crate::live::state::Keep>,
    ) -> Result<Option<crate::ownership::inventory::Inventory>, LiveError> {
        let tables = self.tables();
        tokio::task::spawn_blocking(move || Some(inventory::inventory(&tables, keep.as_ref())))
            .await
            .map_err(|e| LiveError::Internal(format!("reading the cache failed: {e}")))
    }

    async fn managed_by(&self, manager: &str) -> Result<Vec<(ObjectRef, Stored)>, LiveError> {
        let tables = self.tables();
        let manager = manager.to_string();
        tokio::task::spawn_blocking(move || table::managed_by(&tables, &manager))
            .await
            .map_err(|e| LiveError::Internal(format!("listing the cache failed: {e}")))
    }
}

/// Runs a resource's watch task and starts it again if it ends unexpectedly (a panic): a
/// dead task would leave its kind silently stale. Counted (`task_restarts`), and the kind is
/// out of sync until the new task has listed.
async fn supervise(cache: Arc<ClusterCache>, r: ServedResource, table: Arc<Table>) {
    let mut backoff = backoff::Backoff::new(cache.config.backoff, cache.config.max_backoff);
    loop {
        let task = tokio::spawn(watch::run(
            cache.clone(),
            r.clone(),
            table.clone(),
            cache.stop.subscribe(),
        ));
        match task.await {
            Ok(watch::Exit::Stopped) => return,
            Ok(watch::Exit::Removed) => {
                cache.forget(&r);
                return;
            }
            Err(e) => {
                table.set_in_sync(false);
                cache.stats.task_restarts.fetch_add(1, Ordering::Relaxed);
                tracing::error!(cluster = %cache.name, kind = %r.kind, error = %e, "watch task died: restarting it");
                let mut stop = cache.stop.subscribe();
                if *stop.borrow() {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_wait()) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}
