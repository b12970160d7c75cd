//! Work that must stop when its caller gives up: a point in time and a cancel flag, checked by
//! the loops that can run long on hostile input (reading documents, resolving and predicting
//! objects). Checking costs a clock read; loops check every few hundred steps. Code deep in the
//! engine that cannot be handed one (a custom resource's CEL rules, evaluated one after the
//! other) asks the thread's current deadline, which the caller sets for the work's duration
//! ([`Deadline::enter`]).

use std::cell::RefCell;
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

    /// Makes this the thread's current deadline until the guard is dropped (the one before
    /// it then comes back).
    pub fn enter(&self) -> Entered {
        let before = CURRENT.with(|c| c.replace(Some(self.clone())));
        Entered { before }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Deadline>> = const { RefCell::new(None) };
}

/// Whether the thread's current deadline ([`Deadline::enter`]) has passed; `false` when none
/// was set.
pub fn current_expired() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(Deadline::expired))
}

/// The thread's current deadline while it lives.
#[must_use = "the deadline is the thread's only while the guard lives"]
pub struct Entered {
    before: Option<Deadline>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let before = self.before.take();
        CURRENT.with(|c| *c.borrow_mut() = before);
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

    #[test]
    fn the_threads_current_deadline_lives_as_long_as_its_guard() {
        assert!(!current_expired());
        let later = Deadline::at(Instant::now() + Duration::from_secs(3600));
        let outer = later.enter();
        assert!(!current_expired());
        {
            let _inner = Deadline::at(Instant::now()).enter();
            assert!(current_expired());
            let other = std::thread::spawn(current_expired).join().unwrap();
            assert!(!other, "another thread has its own");
        }
        assert!(!current_expired(), "the outer one is back");
        drop(outer);
        assert!(!current_expired());
    }
}
