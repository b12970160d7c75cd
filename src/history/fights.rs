//! Fields that fight: the same field of the same object changing hands back and forth between
//! two or more managers at least `flips` times within `window` (defaults: 3 in 10 minutes).
//! A takeover is a flip. The tracker keeps, per field, the flips of the last window (at most
//! `flips` × 4 of them) and, once a field fights, the fight: its managers, how often it
//! flipped, when first and last, and the values seen (at most a few, for kinds cached in
//! full). A fight is active while its last flip is within the window; fields that stopped
//! flipping are forgotten after the window, fights after `forget_after`; at most
//! `max_fields` fields are tracked (the stalest go first).

use super::Transition;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// When flips make a fight.
#[derive(Clone, Debug)]
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
    /// Flip times within the window, oldest first.
    flips: VecDeque<i64>,
    /// Who took it and the value it got, per flip in `flips`.
    takers: VecDeque<(Vec<String>, Option<String>)>,
    fight: Option<Fight>,
    last: i64,
}

/// A field: apiVersion, kind, namespace, name, path.
type Key = (String, String, String, String, String);

/// Tracks flips per field.
#[derive(Default)]
pub struct Tracker {
    cfg: FightConfig,
    fields: HashMap<Key, Field>,
}

impl Tracker {
    pub fn new(cfg: FightConfig) -> Tracker {
        Tracker {
            cfg,
            fields: HashMap::new(),
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
        let cfg = self.cfg.clone();
        let k = (
            t.api_version.clone(),
            t.kind.clone(),
            t.namespace.clone(),
            t.name.clone(),
            t.path.clone(),
        );
        let f = self.fields.entry(k).or_default();
        f.last = now;
        f.flips.push_back(now);
        f.takers.push_back((t.to.clone(), t.new_value.clone()));
        while f.flips.front().is_some_and(|&x| now - x > cfg.window)
            || f.flips.len() > cfg.flips * 4
        {
            f.flips.pop_front();
            f.takers.pop_front();
        }
        let value = t.new_value.clone();
        match &mut f.fight {
            Some(fight) if now - fight.last_seen <= cfg.window => {
                fight.flips += 1;
                fight.last_seen = now;
                for m in t.from.iter().chain(&t.to) {
                    if !fight.managers.contains(m) {
                        fight.managers.push(m.clone());
                        fight.managers.sort();
                    }
                }
                if let Some(v) = value
                    && fight.values.len() < MAX_VALUES
                    && !fight.values.contains(&v)
                {
                    fight.values.push(v);
                }
            }
            _ => {
                // Two or more managers among the takers of the window's flips.
                let managers: BTreeSet<&String> =
                    f.takers.iter().flat_map(|x| &x.0).chain(&t.from).collect();
                if f.flips.len() < cfg.flips || managers.len() < 2 {
                    return None;
                }
                f.fight = Some(Fight {
                    cluster: t.cluster.clone(),
                    api_version: t.api_version.clone(),
                    kind: t.kind.clone(),
                    namespace: t.namespace.clone(),
                    name: t.name.clone(),
                    path: t.path.clone(),
                    managers: managers.into_iter().cloned().collect(),
                    flips: f.flips.len() as u64,
                    first_seen: *f.flips.front().unwrap_or(&now),
                    last_seen: now,
                    values: f.takers.iter().filter_map(|x| x.1.clone()).fold(
                        Vec::new(),
                        |mut vs, v| {
                            if vs.len() < MAX_VALUES && !vs.contains(&v) {
                                vs.push(v);
                            }
                            vs
                        },
                    ),
                });
            }
        }
        f.fight.as_ref()
    }

    /// Forgets fields that stopped flipping and old fights; the stalest fields go when the
    /// bound is still reached.
    fn evict(&mut self, now: i64) {
        let cfg = &self.cfg;
        self.fields.retain(|_, f| match &f.fight {
            Some(fight) => now - fight.last_seen <= cfg.forget_after,
            None => now - f.last <= cfg.window,
        });
        if self.fields.len() >= cfg.max_fields {
            // Down to half the bound, the stalest first (by count: ties are common).
            let mut by_age: Vec<(i64, Key)> = self
                .fields
                .iter()
                .map(|(k, f)| (f.last, k.clone()))
                .collect();
            by_age.sort_unstable_by_key(|x| x.0);
            let drop = by_age.len() - cfg.max_fields / 2;
            for (_, k) in by_age.into_iter().take(drop) {
                self.fields.remove(&k);
            }
        }
    }

    /// The fights known, the most recent first.
    pub fn fights(&self) -> Vec<Fight> {
        let mut out: Vec<Fight> = self
            .fields
            .values()
            .filter_map(|f| f.fight.clone())
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
            from: vec![from.into()],
            to: vec![to.into()],
            operation: "Update".into(),
            subresource: String::new(),
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
            f.name = format!("web-{i}");
            t.observe(&f, i);
            assert!(t.fields.len() <= 10);
        }
        // All at the same time (ties): still bounded, by count.
        for i in 0..100 {
            let mut f = flip("a", "b", "1", 1000);
            f.name = format!("tie-{i}");
            t.observe(&f, 1000);
            assert!(t.fields.len() <= 10);
        }
    }
}
