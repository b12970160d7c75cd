//! The list+watch loop of one resource type.
//!
//! list (paginated) → swap the table in whole → watch from the list's resourceVersion with
//! bookmarks → apply events one by one → on a dropped or timed-out stream, watch again from the
//! last resourceVersion seen → on 410 Gone (or an ERROR event saying so), list again.

use super::ClusterCache;
use super::table::{Entry, Table, TableData};
use crate::live::cluster::ServedResource;
use crate::value::{Value, json};
use futures::AsyncBufReadExt;
use futures::StreamExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

fn base(r: &ServedResource, namespace: Option<&str>) -> String {
    let root = if r.api_version.contains('/') {
        format!("/apis/{}", r.api_version)
    } else {
        format!("/api/{}", r.api_version)
    };
    match namespace.filter(|_| r.namespaced) {
        Some(ns) => format!("{root}/namespaces/{ns}/{}", r.plural),
        None => format!("{root}/{}", r.plural),
    }
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

/// Lists every object (page by page) and swaps the table; returns the list's resourceVersion.
async fn list(cache: &ClusterCache, table: &Table, base: &str) -> Result<String, String> {
    let accept = if table.full {
        "application/json"
    } else {
        METADATA_LIST
    };
    let mut entries = Vec::new();
    let mut cont = String::new();
    let rv = loop {
        let mut url = format!("{base}?limit=500");
        if !cont.is_empty() {
            url.push_str("&continue=");
            url.push_str(&cont);
        }
        let page = cache
            .api
            .get_with_accept(&url, accept)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{base}: not found"))?;
        let Value::Map(mut m) = page else {
            return Err(format!("{base}: list is not an object"));
        };
        let items = match m.remove("items") {
            Some(Value::List(items)) => items,
            _ => Vec::new(),
        };
        for item in items {
            match Entry::decode(item, table.full, &cache.interner) {
                Ok(e) => entries.push(e),
                Err(_) => {
                    cache.stats.skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let meta = m.get("metadata");
        let s = |k: &str| meta.and_then(|x| x.str_at(&[k])).unwrap_or("").to_string();
        cont = s("continue");
        if cont.is_empty() {
            break s("resourceVersion");
        }
    };
    table.replace(TableData::from_entries(entries));
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

pub fn apply_event_to(
    interner: &super::Interner,
    stats: &super::Stats,
    table: &Table,
    line: &[u8],
) -> Applied {
    let Ok(Value::Map(mut ev)) = json::parse(line) else {
        stats.skipped.fetch_add(1, Ordering::Relaxed);
        return Applied::Skipped;
    };
    let kind = ev
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(obj) = ev.remove("object") else {
        stats.skipped.fetch_add(1, Ordering::Relaxed);
        return Applied::Skipped;
    };
    let rv = obj
        .str_at(&["metadata", "resourceVersion"])
        .unwrap_or("")
        .to_string();
    match kind.as_str() {
        "BOOKMARK" => Applied::Version(rv),
        "ERROR" => {
            let code = match obj.get_path(&["code"]) {
                Some(Value::Int(c)) => *c,
                _ => 0,
            };
            if code == 410 {
                Applied::Gone
            } else {
                Applied::Skipped
            }
        }
        "ADDED" | "MODIFIED" | "DELETED" => {
            let ns = obj
                .str_at(&["metadata", "namespace"])
                .unwrap_or("")
                .to_string();
            let name = obj.str_at(&["metadata", "name"]).unwrap_or("").to_string();
            if kind == "DELETED" {
                table.write().remove(&ns, &name);
            } else {
                match Entry::decode(obj, table.full, interner) {
                    Ok(e) => table.write().upsert(e),
                    Err(_) => {
                        stats.skipped.fetch_add(1, Ordering::Relaxed);
                        // Still advance: the event was received.
                    }
                }
            }
            if table.kind == "CustomResourceDefinition" {
                Applied::CrdChanged(rv)
            } else {
                Applied::Version(rv)
            }
        }
        _ => {
            stats.skipped.fetch_add(1, Ordering::Relaxed);
            Applied::Skipped
        }
    }
}
