//! The list+watch loop of one resource type.
//!
//! list (paginated) → swap the table in whole → watch from the list's resourceVersion with
//! bookmarks → apply events one by one → on a dropped or timed-out stream, watch again from the
//! last resourceVersion seen → on 410 Gone (or an ERROR event saying so), list again.

use super::ClusterCache;
use super::table::{Entry, Table, TableData};
use crate::live::cluster::ServedResource;
use crate::value::json;
use futures::AsyncBufReadExt;
use futures::StreamExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

fn base(r: &ServedResource, namespace: Option<&str>) -> String {
    let ns = namespace.filter(|_| r.namespaced).unwrap_or("");
    crate::live::cluster::resource_path(&r.api_version, &r.plural, ns, None)
}

enum End {
    /// Watch again from this resourceVersion.
    Rewatch(String),
    /// The resourceVersion is gone: list again.
    Relist,
    Stopped,
}

pub(super) async fn run(
    cache: Arc<ClusterCache>,
    res: ServedResource,
    table: Arc<Table>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let base = base(&res, cache.config.namespace.as_deref());
    let mut first = true;
    loop {
        if *stop.borrow() {
            return;
        }
        let rv = match list(&cache, &table, &base).await {
            Ok(rv) => rv,
            Err(e) => {
                tracing::warn!(cluster = %cache.name, resource = %base, error = %e, "list failed");
                if sleep_or_stop(&cache, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        if first {
            first = false;
            cache.mark_synced();
        } else {
            cache.stats.relists.fetch_add(1, Ordering::Relaxed);
        }
        if table.kind == "CustomResourceDefinition" {
            cache.schemas_changed();
        }
        let mut rv = rv;
        loop {
            let end = tokio::select! {
                end = watch_once(&cache, &table, &base, &rv) => end,
                _ = stop.changed() => End::Stopped,
            };
            match end {
                End::Stopped => return,
                End::Relist => break,
                End::Rewatch(next) => {
                    cache.stats.watch_restarts.fetch_add(1, Ordering::Relaxed);
                    rv = next;
                }
            }
        }
    }
}

async fn sleep_or_stop(
    cache: &ClusterCache,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(cache.config.backoff) => false,
        _ = stop.changed() => true,
    }
}

#[derive(serde::Deserialize)]
struct RawList<'a> {
    #[serde(borrow, default)]
    items: Vec<&'a serde_json::value::RawValue>,
    #[serde(default)]
    metadata: ListMeta,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default, rename = "continue")]
    cont: String,
}

/// Decodes one object of a table (metadata straight from the text; full objects as trees).
fn decode(table: &Table, text: &str, interner: &super::Interner) -> Result<Entry, String> {
    if table.full {
        let v = json::parse(text.as_bytes()).map_err(|e| e.to_string())?;
        Entry::decode(v, true, interner)
    } else {
        Entry::decode_raw(text, interner)
    }
}

/// Lists every object (page by page) into a new table, swapped in whole at the end; returns the
/// list's resourceVersion.
#[tracing::instrument(name = "relist", skip_all, fields(cluster = %cache.name, kind = %table.kind))]
async fn list(cache: &ClusterCache, table: &Table, base: &str) -> Result<String, String> {
    let accept = if table.full {
        "application/json"
    } else {
        METADATA_LIST
    };
    let mut data = TableData::default();
    let mut cont = String::new();
    let rv = loop {
        let mut url = format!("{base}?limit=500");
        if !cont.is_empty() {
            url.push_str("&continue=");
            url.push_str(&cont);
        }
        let page = cache
            .api
            .get_text(&url, accept)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{base}: not found"))?;
        let list: RawList = serde_json::from_str(&page).map_err(|e| format!("{base}: {e}"))?;
        for item in list.items {
            match decode(table, item.get(), &cache.interner) {
                Ok(e) => data.upsert(e),
                Err(_) => {
                    cache.stats.skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        cont = list.metadata.cont;
        if cont.is_empty() {
            break list.metadata.resource_version;
        }
    };
    table.replace(data);
    cache.interner.sweep();
    Ok(rv)
}

/// One watch request, until it ends.
async fn watch_once(cache: &Arc<ClusterCache>, table: &Table, base: &str, rv: &str) -> End {
    let url = format!(
        "{base}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={}",
        cache.config.watch_timeout_secs
    );
    let accept = if table.full {
        "application/json"
    } else {
        METADATA
    };
    let stream = match cache.api.stream(&url, accept).await {
        Ok(s) => s,
        Err(e) if e.0.ends_with("(410)") => return End::Relist,
        Err(e) => {
            tracing::warn!(cluster = %cache.name, resource = %base, error = %e, "watch failed");
            tokio::time::sleep(cache.config.backoff).await;
            return End::Rewatch(rv.to_string());
        }
    };
    let mut last = rv.to_string();
    let mut lines = stream.lines();
    while let Some(line) = lines.next().await {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        cache.stats.events.fetch_add(1, Ordering::Relaxed);
        match apply_event(cache, table, line.as_bytes()) {
            Applied::Version(v) => last = v,
            Applied::Gone => return End::Relist,
            Applied::CrdChanged(v) => {
                last = v;
                cache.schemas_changed();
                cache.rediscover.notify_one();
            }
            Applied::Skipped => {}
        }
    }
    End::Rewatch(last)
}

pub enum Applied {
    Version(String),
    CrdChanged(String),
    Gone,
    Skipped,
}

/// Applies one watch event (a JSON line) to a table.
pub(crate) fn apply_event(cache: &ClusterCache, table: &Table, line: &[u8]) -> Applied {
    apply_event_to(&cache.interner, &cache.stats, table, line)
}

#[derive(serde::Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

#[derive(serde::Deserialize)]
struct RawIdentity<'a> {
    #[serde(borrow, default)]
    metadata: RawIdentityMeta<'a>,
    #[serde(default)]
    code: i64,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawIdentityMeta<'a> {
    #[serde(borrow, default)]
    name: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    namespace: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    resource_version: std::borrow::Cow<'a, str>,
}

/// Applies one watch event (a JSON line) to a table: ADDED/MODIFIED upsert, DELETED removes,
/// BOOKMARK only advances the resourceVersion, ERROR 410 asks for a relist. Undecodable
/// objects are skipped and counted.
pub fn apply_event_to(
    interner: &super::Interner,
    stats: &super::Stats,
    table: &Table,
    line: &[u8],
) -> Applied {
    let parsed = std::str::from_utf8(line)
        .ok()
        .and_then(|t| serde_json::from_str::<RawEvent>(t).ok());
    let Some(ev) = parsed else {
        stats.skipped.fetch_add(1, Ordering::Relaxed);
        return Applied::Skipped;
    };
    table.touch();
    let advanced = |rv: String| {
        if table.kind == "CustomResourceDefinition" {
            Applied::CrdChanged(rv)
        } else {
            Applied::Version(rv)
        }
    };
    if matches!(&*ev.kind, "ADDED" | "MODIFIED") {
        // The entry carries its own resourceVersion: the object is read once.
        match decode(table, ev.object.get(), interner) {
            Ok(e) => {
                let rv = e.resource_version.to_string();
                table.write().upsert(e);
                return advanced(rv);
            }
            // Still advance past it: the event was received.
            Err(_) => {
                stats.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let Ok(id) = serde_json::from_str::<RawIdentity>(ev.object.get()) else {
        stats.skipped.fetch_add(1, Ordering::Relaxed);
        return Applied::Skipped;
    };
    let rv = id.metadata.resource_version.to_string();
    match &*ev.kind {
        "BOOKMARK" => Applied::Version(rv),
        "ERROR" if id.code == 410 => Applied::Gone,
        "ERROR" => Applied::Skipped,
        "DELETED" => {
            table
                .write()
                .remove(&id.metadata.namespace, &id.metadata.name);
            advanced(rv)
        }
        "ADDED" | "MODIFIED" => advanced(rv),
        _ => {
            stats.skipped.fetch_add(1, Ordering::Relaxed);
            Applied::Skipped
        }
    }
}
