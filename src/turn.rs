//! Turns: the rule by which one session's (or one connection's) requests run. A change
//! ([`Method::is_ordered`](crate::Method::is_ordered): consent and the write side) runs
//! alone, after every request that took its turn before it has ended, and nothing that took
//! its turn after it starts before it ends; other requests run concurrently.
//!
//! The broker orders each session's requests with an [`Orderer`] of its own, so a host that
//! calls it concurrently gets this order, and the faces that read lines (`order::Dispatcher`)
//! take their turns in it too. The rmcp adapter keeps one per connection besides, since one
//! connection of its may carry requests of several sessions and must bound what it reads
//! ahead whichever session they go to.

use crate::locks::lock;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The order of one session's (or one connection's) requests: see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Orderer {
    turns: Mutex<Turns>,
    /// Woken whenever a turn ends, so that the turns waiting look again.
    ended: Notify,
}

/// The turns taken and not yet ended, by arrival number.
#[derive(Debug, Default)]
struct Turns {
    next: u64,
    open: BTreeSet<u64>,
    /// Those of `open` that are changes.
    changes: BTreeSet<u64>,
}

impl Orderer {
    /// An orderer with no turns taken.
    pub(crate) fn new() -> Arc<Orderer> {
        Arc::new(Orderer::default())
    }

    /// Takes the next turn, for a change when `ordered`. Call it in the order the requests
    /// arrived; the turn ends when it is dropped, once the request has been answered.
    pub(crate) fn enter(self: &Arc<Self>, ordered: bool) -> Turn {
        let mut turns = lock(&self.turns);
        let number = turns.next;
        turns.next += 1;
        turns.open.insert(number);
        if ordered {
            turns.changes.insert(number);
        }
        Turn {
            orderer: self.clone(),
            number,
            ordered,
        }
    }
}

/// One request's place in its session's order; dropping it ends the turn.
pub(crate) struct Turn {
    orderer: Arc<Orderer>,
    number: u64,
    ordered: bool,
}

impl Turn {
    /// Whether the turn may run now: a change once every earlier turn has ended, anything
    /// else once every earlier change has.
    fn may_run(&self) -> bool {
        let turns = lock(&self.orderer.turns);
        let earlier = if self.ordered {
            &turns.open
        } else {
            &turns.changes
        };
        earlier.range(..self.number).next().is_none()
    }

    /// Waits until the turn may run.
    pub(crate) async fn ready(&self) {
        loop {
            let ended = self.orderer.ended.notified();
            tokio::pin!(ended);
            // Registered before looking, so a turn that ends in between still wakes us.
            ended.as_mut().enable();
            if self.may_run() {
                return;
            }
            ended.await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut turns = lock(&self.orderer.turns);
        turns.open.remove(&self.number);
        turns.changes.remove(&self.number);
        drop(turns);
        self.orderer.ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Whether `turn` may run now, without waiting.
    fn ready_now(turn: &Turn) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(pin!(turn.ready()).poll(&mut cx), Poll::Ready(()))
    }

    #[test]
    fn a_change_waits_for_what_came_before_and_holds_up_what_comes_after() {
        let orderer = Orderer::new();
        let read = orderer.enter(false);
        let change = orderer.enter(true);
        let later = orderer.enter(false);
        let other = orderer.enter(false);
        assert!(ready_now(&read));
        assert!(!ready_now(&change));
        assert!(!ready_now(&later));
        drop(read);
        assert!(ready_now(&change));
        assert!(!ready_now(&later));
        drop(change);
        assert!(ready_now(&later));
        assert!(ready_now(&other));
    }
}
