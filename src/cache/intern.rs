//! Interning: same-shaped objects (the Pods of a ReplicaSet) share one copy of each repeated
//! string — FieldsV1 texts, label sets, namespaces, managedFields entry heads.
//!
//! Unused copies are dropped by a sweep: after every relist, and whenever the interner has
//! doubled since the last sweep (steady churn — objects replaced, managers renamed — never
//! relists). The cost is amortized O(1) per interned string, and the interner stays within
//! about twice what live objects use.

use super::table::{EntryHead, Hasher};
use dashmap::DashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Below this many strings no sweep is started by growth.
const SWEEP_FLOOR: usize = 4096;

#[derive(Debug)]
pub struct Interner {
    texts: DashSet<Arc<str>, Hasher>,
    heads: DashSet<Arc<EntryHead>, Hasher>,
    /// Strings held now (approximately: counted at insertion, set exactly by a sweep).
    held: AtomicUsize,
    /// A sweep starts when `held` reaches this.
    sweep_at: AtomicUsize,
    /// Sweep on growth (off only to measure what it saves).
    auto_sweep: bool,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            texts: DashSet::default(),
            heads: DashSet::default(),
            held: AtomicUsize::new(0),
            sweep_at: AtomicUsize::new(SWEEP_FLOOR),
            auto_sweep: true,
        }
    }
}

impl Interner {
    /// An interner swept only when asked (the benchmark's comparison).
    pub fn without_auto_sweep() -> Interner {
        Interner {
            auto_sweep: false,
            ..Interner::default()
        }
    }

    /// Counts one new string; sweeps if the interner doubled since the last sweep.
    fn added(&self) {
        let held = self.held.fetch_add(1, Ordering::Relaxed) + 1;
        if self.auto_sweep && held >= self.sweep_at.load(Ordering::Relaxed) {
            self.sweep();
        }
    }

    /// The shared copy of `s`.
    pub fn text(&self, s: &str) -> Arc<str> {
        if let Some(found) = self.texts.get(s) {
            return found.clone();
        }
        let a: Arc<str> = Arc::from(s);
        if self.texts.insert(a.clone()) {
            self.added();
        }
        a
    }

    /// The shared copy of an entry head.
    pub fn head(&self, h: EntryHead) -> Arc<EntryHead> {
        if let Some(found) = self.heads.get(&h) {
            return found.clone();
        }
        let a = Arc::new(h);
        if self.heads.insert(a.clone()) {
            self.added();
        }
        a
    }

    /// Drops what no cached object uses any more.
    pub fn sweep(&self) {
        self.texts.retain(|a| Arc::strong_count(a) > 1);
        self.heads.retain(|a| Arc::strong_count(a) > 1);
        let held = self.texts.len() + self.heads.len();
        self.held.store(held, Ordering::Relaxed);
        self.sweep_at
            .store((held * 2).max(SWEEP_FLOOR), Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.texts.len() + self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steady churn (every string replaced, nothing relisted) keeps the interner within about
    /// twice what is in use; with the sweep on growth off, it keeps everything.
    #[test]
    fn churn_is_swept_without_a_relist() {
        let on = Interner::default();
        let off = Interner::without_auto_sweep();
        for interner in [&on, &off] {
            let mut live: Vec<Arc<str>> = Vec::new();
            for i in 0..100_000 {
                let s = interner.text(&format!("fields-{i}"));
                if live.len() < 1000 {
                    live.push(s);
                } else {
                    live[i % 1000] = s;
                }
            }
        }
        assert!(on.len() <= 2 * 1000 + SWEEP_FLOOR, "{}", on.len());
        assert_eq!(off.len(), 100_000);
        // What is in use is never dropped.
        let kept = on.text("kept");
        on.sweep();
        assert!(Arc::ptr_eq(&kept, &on.text("kept")));
    }
}
