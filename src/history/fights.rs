//! Fields that fight: the same field of the same object changing hands back and forth between
//! two or more managers at least `flips` times within `window` (defaults: 3 in 10 minutes).
//! A takeover is a flip. The tracker keeps, per field, the flips of the last window (at most
//! `flips` × 4 of them) and, once a field fights, the fight: its managers, how often it
//! flipped, when first and last, and the values seen (at most a few, for kinds cached in
//! full). A fight is active while its last flip is within the window; fields that stopped
//! flipping are forgotten after the window, fights after `forget_after`; at most
//! `max_fields` fields are tracked (fights and fields with more flips are kept first, then the
//! most recent).

use super::{Text, Transition};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// When flips make a fight.
#[derive(Clone, Copy, Debug)]
pub struct FightConfig {
    pub flips: usize,
    /// Seconds.
    pub window: i64,
    /// Seconds after its last flip a fight is forgotten.
    pub forget_after: i64,
    pub max_fields: usize,
}

impl Default for FightConfig {
    fn default() -> Self {
        FightConfig {
            flips: 3,
            window: 600,
            forget_after: 24 * 3600,
            max_fields: 100_000,
        }
    }
}

/// At most this many distinct values are kept per fight.
const MAX_VALUES: usize = 8;

/// A field that fights.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fight {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
    /// Every manager that took the field in the fight (sorted).
    pub managers: Vec<String>,
    /// Flips since the fight started.
    pub flips: u64,
    /// Unix seconds of its first and last flip.
    pub first_seen: i64,
    pub last_seen: i64,
    /// The values it was set to (JSON, for kinds cached in full; redacted for Secrets).
    pub values: Vec<String>,
}

impl Fight {
    /// Active: flipped within the last window.
    pub fn active(&self, now: i64, cfg: &FightConfig) -> bool {
        now - self.last_seen <= cfg.window
    }
}

#[derive(Default)]
struct Field {
    /// The flips within the window, oldest first: when, who took it, the value it got.
    flips: VecDeque<(i64, Arc<[Text]>, Option<Text>)>,
    fight: Option<Box<Fight>>,
    last: i64,
    /// When it last flipped, in the order of flips.
    tick: u64,
}

/// A field: apiVersion, kind, namespace, name and path, joined by NUL (which none holds).
type Key = Box<str>;

fn write_key(buf: &mut String, t: &Transition) {
    buf.clear();
    for part in [&t.api_version, &t.kind, &t.namespace, &t.name, &t.path] {
        buf.push_str(part);
        buf.push('\0');
    }
}

/// Tracks flips per field.
#[derive(Default)]
pub struct Tracker {
    cfg: FightConfig,
    fields: HashMap<Key, Field, rustc_hash::FxBuildHasher>,
    /// Flips taken in so far.
    ticks: u64,
    /// The key being looked up.
    key: String,
}

impl Tracker {
    pub fn new(cfg: FightConfig) -> Tracker {
        Tracker {
            cfg,
            fields: HashMap::default(),
            ticks: 0,
            key: String::new(),
        }
    }

    pub fn config(&self) -> &FightConfig {
        &self.cfg
    }

    /// Takes one transition in (at `now`, unix seconds); returns the fight when it makes or
    /// continues one.
    pub fn observe(&mut self, t: &Transition, now: i64) -> Option<&Fight> {
        if t.change != super::Change::TakenOver {
            return None;
        }
        if self.fields.len() >= self.cfg.max_fields {
            self.evict(now);
        }
        let cfg = self.cfg;
        write_key(&mut self.key, t);
        if !self.fields.contains_key(self.key.as_str()) {
            self.fields
                .insert(self.key.as_str().into(), Field::default());
        }
        let f = self.fields.get_mut(self.key.as_str())?;
        f.last = now;
        self.ticks += 1;
        f.tick = self.ticks;
        f.flips.push_back((now, t.to.clone(), t.new_value.clone()));
        while f.flips.front().is_some_and(|x| now - x.0 > cfg.window)
            || f.flips.len() > cfg.flips * 4
        {
            f.flips.pop_front();
        }
        let value = t.new_value.clone();
        match &mut f.fight {
            Some(fight) if now - fight.last_seen <= cfg.window => {
                fight.flips += 1;
                fight.last_seen = now;
                for m in t.from.iter().chain(t.to.iter()) {
                    if !fight.managers.iter().any(|x| **x == **m) {
                        fight.managers.push(m.to_string());
                        fight.managers.sort();
                    }
                }
                if let Some(v) = value
                    && fight.values.len() < MAX_VALUES
                    && !fight.values.iter().any(|x| **x == *v)
                {
                    fight.values.push(v.to_string());
                }
            }
            _ => {
                // Two or more managers among the takers of the window's flips.
                let managers: BTreeSet<&str> = f
                    .flips
                    .iter()
                    .flat_map(|x| x.1.iter())
                    .chain(t.from.iter())
                    .map(|m| &**m)
                    .collect();
                if f.flips.len() < cfg.flips || managers.len() < 2 {
                    return None;
                }
                f.fight = Some(Box::new(Fight {
                    cluster: t.cluster.to_string(),
                    api_version: t.api_version.to_string(),
                    kind: t.kind.to_string(),
                    namespace: t.namespace.to_string(),
                    name: t.name.to_string(),
                    path: t.path.to_string(),
                    managers: managers.into_iter().map(str::to_string).collect(),
                    flips: f.flips.len() as u64,
                    first_seen: f.flips.front().map_or(now, |x| x.0),
                    last_seen: now,
                    values: f.flips.iter().filter_map(|x| x.2.as_deref()).fold(
                        Vec::new(),
                        |mut vs: Vec<String>, v| {
                            if vs.len() < MAX_VALUES && !vs.iter().any(|x| x == v) {
                                vs.push(v.to_string());
                            }
                            vs
                        },
                    ),
                }));
            }
        }
        f.fight.as_deref()
    }

    /// Forgets fields that stopped flipping and old fights; when that frees less than a
    /// quarter of the bound, the fields least likely to fight go, down to half of it (so each
    /// pass frees room for many more flips: amortized constant work per flip).
    fn evict(&mut self, now: i64) {
        let cfg = &self.cfg;
        self.fields.retain(|_, f| match &f.fight {
            Some(fight) => now - fight.last_seen <= cfg.forget_after,
            None => now - f.last <= cfg.window,
        });
        let len = self.fields.len();
        if len > 0 && (len >= cfg.max_fields || len > cfg.max_fields - cfg.max_fields / 4) {
            // Kept first: fields that fight, then those with more flips in the window, then
            // the most recently flipped (by the order of flips: times tie). Unrelated churn
            // then cannot push out a fight in the making.
            let rank = |f: &Field| (f.fight.is_some(), f.flips.len(), f.tick);
            let drop = len - cfg.max_fields / 2;
            let mut order: Vec<(bool, usize, u64)> = self.fields.values().map(rank).collect();
            let (_, &mut cut, _) = order.select_nth_unstable(drop - 1);
            self.fields.retain(|_, f| rank(f) > cut);
        }
    }

    /// The fights known, the most recent first.
    pub fn fights(&self) -> Vec<Fight> {
        let mut out: Vec<Fight> = self
            .fields
            .values()
            .filter_map(|f| f.fight.as_deref().cloned())
            .collect();
        out.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(a.path.cmp(&b.path)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Change, Transition};

    fn flip(from: &str, to: &str, value: &str, at: i64) -> Transition {
        Transition {
            seq: 0,
            cluster: "prod".into(),
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "shop".into(),
            name: "web".into(),
            path: ".spec.replicas".into(),
            change: Change::TakenOver,
            from: Arc::from([Text::from(from)]),
            to: Arc::from([Text::from(to)]),
            operation: "Update".into(),
            subresource: "".into(),
            resource_version: "1".into(),
            time: Some(at),
            observed: at,
            old_value: None,
            new_value: Some(value.into()),
            fields: 0,
        }
    }

    #[test]
    fn three_flips_in_the_window_make_a_fight_that_goes_on() {
        let mut t = Tracker::new(FightConfig::default());
        assert!(t.observe(&flip("helm", "hpa", "5", 0), 0).is_none());
        assert!(t.observe(&flip("hpa", "helm", "3", 60), 60).is_none());
        let f = t
            .observe(&flip("helm", "hpa", "5", 120), 120)
            .unwrap()
            .clone();
        assert_eq!(f.managers, ["helm", "hpa"]);
        assert_eq!((f.flips, f.first_seen, f.last_seen), (3, 0, 120));
        assert_eq!(f.values, ["5", "3"]);
        let f = t
            .observe(&flip("hpa", "helm", "3", 180), 180)
            .unwrap()
            .clone();
        assert_eq!((f.flips, f.values.len()), (4, 2));
        assert!(f.active(180 + 600, t.config()));
        assert!(!f.active(180 + 601, t.config()));
        assert_eq!(t.fights().len(), 1);
    }

    #[test]
    fn slow_changes_and_other_changes_are_no_fight() {
        let mut t = Tracker::new(FightConfig::default());
        for i in 0..10 {
            // One flip every 6 minutes: never three within 10 minutes.
            let (a, b) = if i % 2 == 0 {
                ("helm", "hpa")
            } else {
                ("hpa", "helm")
            };
            assert!(t.observe(&flip(a, b, "1", i * 360), i * 360).is_none());
        }
        let mut shared = flip("helm", "ci", "1", 0);
        shared.change = Change::Shared;
        for i in 0..5 {
            assert!(t.observe(&shared, i).is_none());
        }
        assert!(t.fights().is_empty());
    }

    #[test]
    fn the_tracker_is_bounded() {
        let mut t = Tracker::new(FightConfig {
            max_fields: 10,
            ..FightConfig::default()
        });
        for i in 0..100 {
            let mut f = flip("a", "b", "1", i);
            f.name = format!("web-{i}").into();
            t.observe(&f, i);
            assert!(t.fields.len() <= 10);
        }
        // All at the same time (ties): still bounded, by count.
        for i in 0..100 {
            let mut f = flip("a", "b", "1", 1000);
            f.name = format!("tie-{i}").into();
            t.observe(&f, 1000);
            assert!(t.fields.len() <= 10);
            // The field just flipped is kept, whatever the ties.
            assert!(t.fields.keys().any(|k| k.contains(&*f.name)));
        }
        // A fight outlives a churn of newer fields that flip once.
        let mut t = Tracker::new(FightConfig {
            max_fields: 8,
            ..FightConfig::default()
        });
        for i in 0..3 {
            let (a, b) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
            t.observe(&flip(a, b, "1", 2000 + i), 2000 + i);
        }
        for i in 0..20 {
            let mut f = flip("a", "b", "1", 2010);
            f.name = format!("churn-{i}").into();
            t.observe(&f, 2010);
        }
        let f = t.observe(&flip("b", "a", "1", 2020), 2020).unwrap();
        assert_eq!((f.flips, f.first_seen), (4, 2000));
        // A bound of one.
        let mut small = Tracker::new(FightConfig {
            max_fields: 1,
            ..FightConfig::default()
        });
        for i in 0..5 {
            let mut f = flip("a", "b", "1", i);
            f.name = format!("one-{i}").into();
            small.observe(&f, i);
            assert_eq!(small.fields.len(), 1);
        }
    }
}
