//! Fair turns at the CPU-bound work: at most so many jobs run at once, and when they are all
//! taken, callers are served in turn — one job of each waiting caller before a second of any —
//! so a caller who sends many heavy requests waits behind their own, not in front of everyone
//! else's. A caller is who authenticated (the user), or, unauthenticated, their address.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// The gate: `capacity` passes, handed out fairly between callers.
#[derive(Debug)]
pub struct Gate {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Passes held (including ones handed to a waiter that has not woken yet).
    held: usize,
    /// Each waiting caller's waiters, first come first.
    waiting: HashMap<Arc<str>, VecDeque<oneshot::Sender<()>>>,
    /// Callers with waiters, in the order they are served next.
    turns: VecDeque<Arc<str>>,
}

/// A pass through the gate; the next waiter's turn comes when it is dropped.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<Gate>,
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.gate.hand_on();
    }
}

/// A waiter given up on before its turn came gives back a pass it was handed meanwhile.
struct Waiting {
    gate: Arc<Gate>,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.gate.hand_on();
            }
        }
    }
}

impl Gate {
    pub fn new(capacity: usize) -> Arc<Gate> {
        Arc::new(Gate {
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing that can panic runs under the lock: a poisoned one is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for `caller`'s turn.
    pub async fn enter(self: &Arc<Gate>, caller: &str) -> Pass {
        let rx = {
            let mut s = self.state();
            if s.held < self.capacity && s.turns.is_empty() {
                s.held += 1;
                return Pass { gate: self.clone() };
            }
            let (tx, rx) = oneshot::channel();
            let caller: Arc<str> = Arc::from(caller);
            let queue = s.waiting.entry(caller.clone()).or_default();
            queue.push_back(tx);
            if queue.len() == 1 {
                s.turns.push_back(caller);
            }
            rx
        };
        let mut waiting = Waiting {
            gate: self.clone(),
            rx: Some(rx),
        };
        let rx = waiting.rx.as_mut().expect("set above");
        // The sender lives in the queue until it is handed a pass or the gate is dropped
        // (the gate outlives every waiter: each holds it).
        let _ = rx.await;
        waiting.rx = None;
        Pass { gate: self.clone() }
    }

    /// A pass given back: to the next caller in turn (the caller goes to the back of the
    /// line if it has more waiters), or freed.
    fn hand_on(&self) {
        let mut s = self.state();
        while let Some(caller) = s.turns.pop_front() {
            let Some(queue) = s.waiting.get_mut(&caller) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                s.waiting.remove(&caller);
            } else {
                s.turns.push_back(caller);
            }
            // A waiter given up on has closed its end: the pass goes on to the next.
            if let Some(tx) = next
                && tx.send(()).is_ok()
            {
                return;
            }
        }
        s.held = s.held.saturating_sub(1);
    }

    /// Passes held now (for tests and metrics).
    pub fn held(&self) -> usize {
        self.state().held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Records the order in which callers' jobs get their pass.
    async fn order_of(gate: &Arc<Gate>, jobs: &[&'static str]) -> Vec<&'static str> {
        let order = Arc::new(Mutex::new(Vec::new()));
        let blocker = gate.enter("holder").await;
        let mut tasks = Vec::new();
        for &who in jobs {
            let (g, o) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _pass = g.enter(who).await;
                o.lock().unwrap().push(who);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }));
            // Queued in this order.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(blocker);
        for t in tasks {
            t.await.unwrap();
        }
        order.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_caller_with_many_jobs_takes_turns_with_the_others() {
        let gate = Gate::new(1);
        let order = order_of(
            &gate,
            &["heavy", "heavy", "heavy", "heavy", "light", "other"],
        )
        .await;
        assert_eq!(
            order,
            vec!["heavy", "light", "other", "heavy", "heavy", "heavy"]
        );
        assert_eq!(gate.held(), 0);
    }

    #[tokio::test]
    async fn passes_are_free_until_capacity_then_given_back() {
        let gate = Gate::new(2);
        let a = gate.enter("a").await;
        let b = gate.enter("a").await;
        assert_eq!(gate.held(), 2);
        let third = tokio::spawn({
            let g = gate.clone();
            async move {
                let _p = g.enter("b").await;
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!third.is_finished(), "a third pass waits");
        drop(a);
        third.await.unwrap();
        drop(b);
        assert_eq!(gate.held(), 0);
    }

    /// A waiter given up on (its request's deadline passed) neither keeps a pass nor loses one.
    #[tokio::test]
    async fn a_waiter_given_up_on_gives_its_turn_away() {
        let gate = Gate::new(1);
        let held = gate.enter("a").await;
        let gone = tokio::time::timeout(Duration::from_millis(10), gate.enter("b")).await;
        assert!(gone.is_err(), "no pass while one is held");
        let next = tokio::spawn({
            let g = gate.clone();
            async move {
                let _p = g.enter("c").await;
            }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(held);
        next.await.unwrap();
        assert_eq!(gate.held(), 0);
        let _again = gate.enter("d").await;
        assert_eq!(gate.held(), 1);
    }
}
