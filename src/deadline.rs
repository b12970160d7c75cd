//! Work that must stop when its caller gives up: a point in time and a cancel flag, checked by
//! the loops that can run long on hostile input (reading documents, resolving and predicting
//! objects). Checking costs a clock read; loops check every few hundred steps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// When to stop (`Deadline::default()`: never).
#[derive(Clone, Debug, Default)]
pub struct Deadline {
    at: Option<Instant>,
    cancelled: Option<Arc<AtomicBool>>,
}

/// The work stopped because its deadline passed or it was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("deadline exceeded: the work was stopped")]
pub struct Expired;

impl Deadline {
    /// Stops at `at`.
    pub fn at(at: Instant) -> Deadline {
        Deadline {
            at: Some(at),
            cancelled: None,
        }
    }

    /// Also stops as soon as `flag` is set.
    pub fn or_cancelled(mut self, flag: Arc<AtomicBool>) -> Deadline {
        self.cancelled = Some(flag);
        self
    }

    /// Whether the work should stop now.
    pub fn expired(&self) -> bool {
        self.cancelled
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
            || self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// `Err(Expired)` when the work should stop now.
    pub fn check(&self) -> Result<(), Expired> {
        if self.expired() { Err(Expired) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn expires_at_its_time_or_when_cancelled() {
        assert!(!Deadline::default().expired());
        assert!(Deadline::at(Instant::now()).expired());
        let later = Deadline::at(Instant::now() + Duration::from_secs(3600));
        assert_eq!(later.check(), Ok(()));
        let flag = Arc::new(AtomicBool::new(false));
        let d = later.or_cancelled(flag.clone());
        assert!(!d.expired());
        flag.store(true, Ordering::Relaxed);
        assert_eq!(d.check(), Err(Expired));
    }
}
