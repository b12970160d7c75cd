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

/// Text shared between transitions (names, managers: interned per history).
pub type Text = Arc<str>;

/// One field changing hands, as recorded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// Its number in the cluster's history (increasing; resumable).
    pub seq: u64,
    pub cluster: Text,
    pub api_version: Text,
    pub kind: Text,
    #[serde(default = "no_text", skip_serializing_if = "is_empty")]
    pub namespace: Text,
    pub name: Text,
    /// As kube-apiserver prints paths (`.spec.replicas`); empty for the whole object.
    #[serde(default = "no_text")]
    pub path: Text,
    pub change: Change,
    /// Managers that lost the field.
    #[serde(default, skip_serializing_if = "no_managers")]
    pub from: Arc<[Text]>,
    /// Managers that gained it (taken over, shared) or still own it (released).
    #[serde(default, skip_serializing_if = "no_managers")]
    pub to: Arc<[Text]>,
    /// `Apply` or `Update`: the entry that gained the field (lost it, for releases).
    pub operation: Text,
    #[serde(default = "no_text", skip_serializing_if = "is_empty")]
    pub subresource: Text,
    /// The object's resourceVersion after the change.
    pub resource_version: Text,
    /// The entry's time (unix seconds), as the apiserver stamped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<i64>,
    /// When fieldguard saw it (unix seconds).
    pub observed: i64,
    /// The field's value before and after (JSON), for kinds cached in full; Secrets' values
    /// are redacted, values over 1 KiB are not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_value: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_value: Option<Text>,
    /// For `removed`: how many fields the manager owned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fields: usize,
}

fn no_text() -> Text {
    Arc::from("")
}

fn is_empty(t: &Text) -> bool {
    t.is_empty()
}

fn no_managers(m: &Arc<[Text]>) -> bool {
    m.is_empty()
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
    state: Mutex<State>,
    tx: tokio::sync::broadcast::Sender<Arc<Transition>>,
    sink: Option<Arc<sink::Sink>>,
    /// Transitions recorded since start, and those the watch could not compute (unreadable
    /// managedFields).
    pub recorded: std::sync::atomic::AtomicU64,
    pub failed: std::sync::atomic::AtomicU64,
}

/// What recording changes, under one lock.
struct State {
    ring: ring::Ring,
    fights: fights::Tracker,
    names: Names,
}

/// Names shared by the transitions that carry them: kinds, namespaces, managers, operations.
/// Bounded: past [`MAX_NAMES`], a name is simply not shared.
#[derive(Default)]
struct Names(std::collections::HashSet<Text, rustc_hash::FxBuildHasher>);

const MAX_NAMES: usize = 10_000;

impl Names {
    fn get(&mut self, s: &str) -> Text {
        if let Some(t) = self.0.get(s) {
            return t.clone();
        }
        let t: Text = Arc::from(s);
        if self.0.len() < MAX_NAMES {
            self.0.insert(t.clone());
        }
        t
    }

    /// `t` with its names shared.
    fn share(&mut self, t: Transition) -> Transition {
        let many = |names: &mut Names, m: &[Text]| m.iter().map(|m| names.get(m)).collect();
        Transition {
            cluster: self.get(&t.cluster),
            api_version: self.get(&t.api_version),
            kind: self.get(&t.kind),
            namespace: self.get(&t.namespace),
            from: many(self, &t.from),
            to: many(self, &t.to),
            operation: self.get(&t.operation),
            subresource: self.get(&t.subresource),
            ..t
        }
    }
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
        let mut tracker = fights::Tracker::new(cfg.fights);
        let mut names = Names::default();
        if let Some((_, path)) = &cfg.sink {
            let (earlier, bad) = sink::load(path, cluster, cfg.max_entries);
            if bad > 0 {
                tracing::warn!(cluster, path = %path.display(), lines = bad, "history sink: unreadable lines skipped");
            }
            for t in earlier {
                let t = names.share(t);
                tracker.observe(&t, t.observed);
                let size = approx_size(&t);
                ring.push(t, size);
            }
        }
        let (tx, _) = tokio::sync::broadcast::channel(SUBSCRIBER_QUEUE);
        let h = Arc::new(History {
            cluster: cluster.to_string(),
            state: Mutex::new(State {
                ring,
                fights: tracker,
                names,
            }),
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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in one object's change from `old` to `new` (`None`: absent on that side).
    pub fn observe(
        &self,
        object: &Subject<'_>,
        old: Option<&ObjectState<'_>>,
        new: Option<&ObjectState<'_>>,
    ) {
        let changes = match transition::diff(old, new) {
            Ok(c) => c,
            Err(e) => {
                self.failed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::debug!(cluster = %self.cluster, kind = object.kind, namespace = object.namespace, name = object.name, error = %e, "history: managedFields unreadable");
                return;
            }
        };
        if changes.is_empty() {
            return;
        }
        let secret = object.kind == "Secret" && object.api_version == "v1";
        let shown = |v: Option<&crate::value::Value>| -> Option<Text> {
            let v = v?;
            if secret {
                return Some(Arc::from(format!("\"{}\"", crate::check::REDACTED)));
            }
            let text = crate::value::json::to_string(v, crate::value::json::Style::PLAIN);
            Some(Arc::from(if text.len() > MAX_VALUE {
                format!("\"<{} bytes, not kept>\"", text.len())
            } else {
                text
            }))
        };
        let observed = now_secs();
        let mut takeovers = 0;
        let recorded: Vec<Arc<Transition>> = {
            let mut st = self.state();
            let State {
                ring,
                fights,
                names,
            } = &mut *st;
            let cluster = names.get(&self.cluster);
            let (api_version, kind, namespace) = (
                names.get(object.api_version),
                names.get(object.kind),
                names.get(object.namespace),
            );
            let name: Text = Arc::from(object.name);
            let resource_version: Text = Arc::from(object.resource_version);
            changes
                .into_iter()
                .map(|c| {
                    let t = Transition {
                        seq: 0,
                        cluster: cluster.clone(),
                        api_version: api_version.clone(),
                        kind: kind.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                        path: Arc::from(c.path.to_string()),
                        change: c.change,
                        from: c.from.iter().map(|m| names.get(m)).collect(),
                        to: c.to.iter().map(|m| names.get(m)).collect(),
                        operation: names.get(c.operation),
                        subresource: names.get(c.subresource),
                        resource_version: resource_version.clone(),
                        time: c.time,
                        observed,
                        old_value: shown(c.old_value),
                        new_value: shown(c.new_value),
                        fields: c.fields,
                    };
                    takeovers += u64::from(t.change == Change::TakenOver);
                    fights.observe(&t, observed);
                    let size = approx_size(&t);
                    ring.push(t, size)
                })
                .collect()
        };
        if takeovers > 0 {
            crate::telemetry::metrics::global()
                .ownership_transfers
                .get_or_create(&crate::telemetry::metrics::KindLabels {
                    cluster: self.cluster.clone(),
                    kind: object.kind.to_string(),
                })
                .inc_by(takeovers);
        }
        self.recorded
            .fetch_add(recorded.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for t in recorded {
            if let Some(s) = &self.sink {
                s.write(&t);
            }
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
        self.state().ring.query(f, after, limit)
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
        let st = self.state();
        let t = &st.fights;
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
        self.state().ring.oldest()
    }

    /// (transitions kept, their approximate bytes, transitions evicted by the bounds).
    pub fn usage(&self) -> (usize, usize, u64) {
        let st = self.state();
        let r = &st.ring;
        (r.len(), r.bytes(), r.evicted)
    }
}

/// About what a transition holds in memory. Interned names (cluster, kind, namespace,
/// managers, operation) are shared and bounded apart; the object's name and resourceVersion
/// are counted in full although the transitions of one event share them.
fn approx_size(t: &Transition) -> usize {
    const ARC: usize = 16; // an Arc allocation's counts
    std::mem::size_of::<Transition>()
        + 2 * ARC
        + t.name.len()
        + t.resource_version.len()
        + ARC
        + t.path.len()
        + 2 * ARC
        + (t.from.len() + t.to.len()) * std::mem::size_of::<Text>()
        + t.old_value.as_ref().map_or(0, |v| v.len() + ARC)
        + t.new_value.as_ref().map_or(0, |v| v.len() + ARC)
}
