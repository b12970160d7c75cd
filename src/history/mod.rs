//! Ownership over time: every change of a cached object's managedFields, turned into field
//! transitions (who took which field from whom: [`transition`]), remembered per cluster in a
//! bounded ring ([`ring`]) and optionally appended to a JSON-lines file ([`sink`]), streamed to
//! subscribers, and watched for fields that fight ([`fights`]).
//!
//! The cache feeds it ([`History::observe`]) from its watch events and relists; queries read
//! it. Nothing here waits on the network or the disk.

pub mod fights;
pub mod ring;
pub mod sink;
pub mod transition;

pub use fights::{Fight, FightConfig};
pub use ring::Filter;
pub use transition::{Change, FieldChange, ObjectState, Owned};

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One field changing hands, as recorded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// Its number in the cluster's history (increasing; resumable).
    pub seq: u64,
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    /// As kube-apiserver prints paths (`.spec.replicas`); empty for the whole object.
    #[serde(default)]
    pub path: String,
    pub change: Change,
    /// Managers that lost the field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// Managers that gained it (taken over, shared) or still own it (released).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// `Apply` or `Update`: the entry that gained the field (lost it, for releases).
    pub operation: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// The object's resourceVersion after the change.
    pub resource_version: String,
    /// The entry's time (unix seconds), as the apiserver stamped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<i64>,
    /// When fieldguard saw it (unix seconds).
    pub observed: i64,
    /// The field's value before and after (JSON), for kinds cached in full; Secrets' values
    /// are redacted, values over 1 KiB are not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_value: Option<String>,
    /// For `removed`: how many fields the manager owned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fields: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The object a change is about, at the resourceVersion after it.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub resource_version: &'a str,
}

/// Values longer than this are not kept.
const MAX_VALUE: usize = 1024;

/// How much to remember.
#[derive(Clone)]
pub struct HistoryConfig {
    /// Transitions kept in memory per cluster.
    pub max_entries: usize,
    /// Their approximate size in memory per cluster.
    pub max_bytes: usize,
    /// Where transitions are appended (shared by every cluster), and its path to read back.
    pub sink: Option<(Arc<sink::Sink>, PathBuf)>,
    pub fights: FightConfig,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            max_entries: 100_000,
            max_bytes: 64 << 20,
            sink: None,
            fights: FightConfig::default(),
        }
    }
}

impl std::fmt::Debug for HistoryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryConfig")
            .field("max_entries", &self.max_entries)
            .field("max_bytes", &self.max_bytes)
            .field("sink", &self.sink.as_ref().map(|s| &s.1))
            .field("fights", &self.fights)
            .finish()
    }
}

/// One cluster's history.
pub struct History {
    pub cluster: String,
    ring: Mutex<ring::Ring>,
    fights: Mutex<fights::Tracker>,
    tx: tokio::sync::broadcast::Sender<Arc<Transition>>,
    sink: Option<Arc<sink::Sink>>,
    /// Transitions recorded since start, and those the watch could not compute (unreadable
    /// managedFields).
    pub recorded: std::sync::atomic::AtomicU64,
    pub failed: std::sync::atomic::AtomicU64,
}

/// Subscribers that fall this far behind lose transitions (and are told how many).
const SUBSCRIBER_QUEUE: usize = 4096;

fn now_secs() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

impl History {
    /// A history for `cluster`, with what its sink kept from earlier runs read back.
    pub fn new(cluster: &str, cfg: &HistoryConfig) -> Arc<History> {
        let mut ring = ring::Ring::new(cfg.max_entries, cfg.max_bytes);
        let mut tracker = fights::Tracker::new(cfg.fights.clone());
        if let Some((_, path)) = &cfg.sink {
            let (earlier, bad) = sink::load(path, cluster, cfg.max_entries);
            if bad > 0 {
                tracing::warn!(cluster, path = %path.display(), lines = bad, "history sink: unreadable lines skipped");
            }
            for t in earlier {
                tracker.observe(&t, t.observed);
                let size = approx_size(&t);
                ring.push(t, size);
            }
        }
        let (tx, _) = tokio::sync::broadcast::channel(SUBSCRIBER_QUEUE);
        let h = Arc::new(History {
            cluster: cluster.to_string(),
            ring: Mutex::new(ring),
            fights: Mutex::new(tracker),
            tx,
            sink: cfg.sink.as_ref().map(|s| s.0.clone()),
            recorded: Default::default(),
            failed: Default::default(),
        });
        // Fights decay with time: the gauge is worked out when scraped.
        let weak = Arc::downgrade(&h);
        crate::telemetry::metrics::global().on_scrape(Box::new(move |m| {
            let Some(h) = weak.upgrade() else {
                return;
            };
            let mut per_kind: std::collections::BTreeMap<String, i64> = Default::default();
            for (f, active) in h.fights() {
                *per_kind.entry(f.kind).or_default() += i64::from(active);
            }
            for (kind, n) in per_kind {
                m.active_fights
                    .get_or_create(&crate::telemetry::metrics::KindLabels {
                        cluster: h.cluster.clone(),
                        kind,
                    })
                    .set(n);
            }
        }));
        h
    }

    /// Takes in one object's change from `old` to `new` (`None`: absent on that side).
    pub fn observe(
        &self,
        object: &Subject<'_>,
        old: Option<&ObjectState<'_>>,
        new: Option<&ObjectState<'_>>,
    ) {
        let Subject {
            api_version,
            kind,
            namespace,
            name,
            resource_version,
        } = *object;
        let changes = match transition::diff(old, new) {
            Ok(c) => c,
            Err(e) => {
                self.failed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::debug!(cluster = %self.cluster, kind, namespace, name, error = %e, "history: managedFields unreadable");
                return;
            }
        };
        if changes.is_empty() {
            return;
        }
        let secret = kind == "Secret" && api_version == "v1";
        let observed = now_secs();
        let shown = |v: Option<crate::value::Value>| -> Option<String> {
            let v = v?;
            if secret {
                return Some(format!("\"{}\"", crate::check::REDACTED));
            }
            let text = crate::value::json::to_string(&v, crate::value::json::Style::PLAIN);
            Some(if text.len() > MAX_VALUE {
                format!("\"<{} bytes, not kept>\"", text.len())
            } else {
                text
            })
        };
        let metrics = crate::telemetry::metrics::global();
        for c in changes {
            let t = Transition {
                seq: 0,
                cluster: self.cluster.clone(),
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                path: c.path.to_string(),
                change: c.change,
                from: c.from,
                to: c.to,
                operation: c.operation,
                subresource: c.subresource,
                resource_version: resource_version.to_string(),
                time: c.time,
                observed,
                old_value: shown(c.old_value),
                new_value: shown(c.new_value),
                fields: c.fields,
            };
            if t.change == Change::TakenOver {
                metrics
                    .ownership_transfers
                    .get_or_create(&crate::telemetry::metrics::KindLabels {
                        cluster: self.cluster.clone(),
                        kind: kind.to_string(),
                    })
                    .inc();
            }
            self.fights
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .observe(&t, observed);
            let size = approx_size(&t);
            let t = self
                .ring
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(t, size);
            if let Some(s) = &self.sink {
                s.write(&t);
            }
            self.recorded
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = self.tx.send(t);
        }
    }

    /// A page of transitions (see [`ring::Ring::query`]).
    pub fn query(
        &self,
        f: &Filter,
        after: u64,
        limit: usize,
    ) -> (Vec<Arc<Transition>>, Option<u64>) {
        self.ring
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .query(f, after, limit)
    }

    /// Transitions as they are recorded.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<Transition>> {
        self.tx.subscribe()
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// The fights known, most recent first, each with whether it is active now.
    pub fn fights(&self) -> Vec<(Fight, bool)> {
        let t = self.fights.lock().unwrap_or_else(|p| p.into_inner());
        let now = now_secs();
        t.fights()
            .into_iter()
            .map(|f| {
                let active = f.active(now, t.config());
                (f, active)
            })
            .collect()
    }

    /// The oldest sequence number kept (0: none).
    pub fn oldest(&self) -> u64 {
        self.ring.lock().unwrap_or_else(|p| p.into_inner()).oldest()
    }

    /// (transitions kept, their approximate bytes, transitions evicted by the bounds).
    pub fn usage(&self) -> (usize, usize, u64) {
        let r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        (r.len(), r.bytes(), r.evicted)
    }
}

/// About what a transition holds in memory.
fn approx_size(t: &Transition) -> usize {
    std::mem::size_of::<Transition>()
        + t.cluster.len()
        + t.api_version.len()
        + t.kind.len()
        + t.namespace.len()
        + t.name.len()
        + t.path.len()
        + t.from
            .iter()
            .chain(&t.to)
            .map(|m| m.len() + 24)
            .sum::<usize>()
        + t.operation.len()
        + t.subresource.len()
        + t.resource_version.len()
        + t.old_value.as_ref().map_or(0, String::len)
        + t.new_value.as_ref().map_or(0, String::len)
}
