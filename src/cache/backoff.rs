//! Waits between retries of a failing list or watch: exponential from a base, capped, with
//! jitter (each wait drawn from half to all of the exponential step), reset after a success —
//! so that after an apiserver restart the watches of every kind and every replica do not
//! reconnect in lockstep.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
    /// Jitter source (seeded per backoff from the process's random hasher keys).
    state: u64,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Backoff {
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Backoff {
            base,
            max: max.max(base),
            failures: 0,
            state: seed | 1,
        }
    }

    /// A number in [0, 1) from xorshift.
    fn unit(&mut self) -> f64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The wait before the next retry (and one more failure counted).
    pub fn next_wait(&mut self) -> Duration {
        let step = self
            .base
            .saturating_mul(1u32 << self.failures.min(20))
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        step.mul_f64(0.5 + 0.5 * self.unit())
    }

    /// A success: the next failure waits the base again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_are_capped_jittered_and_reset() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(5);
        let mut b = Backoff::new(base, max);
        let waits: Vec<Duration> = (0..12).map(|_| b.next_wait()).collect();
        for (i, w) in waits.iter().enumerate() {
            let step = base.saturating_mul(1 << i.min(20)).min(max);
            assert!(
                *w >= step / 2 && *w <= step,
                "wait {i}: {w:?} outside [{:?}, {step:?}]",
                step / 2
            );
        }
        assert!(waits[11] <= max);
        b.reset();
        assert!(b.next_wait() <= base);
        // Two backoffs (two watches) do not wait alike.
        let mut a = Backoff::new(base, max);
        let mut c = Backoff::new(base, max);
        let xs: Vec<Duration> = (0..8).map(|_| a.next_wait()).collect();
        let ys: Vec<Duration> = (0..8).map(|_| c.next_wait()).collect();
        assert_ne!(xs, ys);
    }
}
