//! `--idle-exit`: the daemon stops by itself once nobody has used it for a while, that is with
//! no connection open and no session live for the whole time. A daemon started for attaching
//! commands thus goes when they are done, instead of staying for the rest of the login.

use crate::broker::Broker;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Who is using the daemon, and since when nobody is.
#[derive(Debug, Clone, Copy)]
struct State {
    busy: usize,
    since: Instant,
}

/// The idle timer: [`Idle::busy`] for each connection, [`Idle::expired`] for the daemon.
#[derive(Debug)]
pub(crate) struct Idle {
    limit: Option<Duration>,
    state: watch::Sender<State>,
}

/// One use of the daemon (a connection), for as long as it is held.
#[derive(Debug)]
pub(crate) struct Busy {
    idle: Arc<Idle>,
}

impl Idle {
    /// A timer that expires after `limit` of idleness; never, for `None`.
    pub(crate) fn new(limit: Option<Duration>) -> Arc<Idle> {
        let (state, _) = watch::channel(State {
            busy: 0,
            since: Instant::now(),
        });
        Arc::new(Idle { limit, state })
    }

    /// Marks the daemon in use until the guard is dropped.
    pub(crate) fn busy(self: &Arc<Idle>) -> Busy {
        self.state.send_modify(|s| s.busy += 1);
        Busy { idle: self.clone() }
    }

    /// Resolves once nothing has used the daemon for the limit: no [`Busy`] held and no
    /// session of `broker` live. Never, without a limit.
    pub(crate) async fn expired(&self, broker: &Broker) {
        let Some(limit) = self.limit else {
            return std::future::pending().await;
        };
        let mut changes = self.state.subscribe();
        loop {
            let now = *changes.borrow_and_update();
            if now.busy > 0 {
                // The sender lives in `self`: a change is the only way this ends.
                let _ = changes.changed().await;
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep_until(now.since + limit) => {
                    if broker.sessions().is_empty() {
                        return;
                    }
                    // A session without a connection (one a host made in process) is use
                    // too: the wait starts again.
                    self.state.send_modify(|s| s.since = Instant::now());
                }
                _ = changes.changed() => {}
            }
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.idle.state.send_modify(|s| {
            s.busy = s.busy.saturating_sub(1);
            s.since = Instant::now();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, RootEntry};

    fn broker() -> (Broker, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let policy = Policy::new().root(RootEntry::new("demo", dir.path()));
        let (broker, _n) = Broker::builder(policy).build().unwrap();
        (broker, dir)
    }

    /// Whether the timer expires within `wait` (of the paused clock, which jumps to each
    /// timer: no real time passes).
    async fn expires_within(idle: &Idle, b: &Broker, wait: u64) -> bool {
        tokio::time::timeout(Duration::from_secs(wait), idle.expired(b))
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_runs_only_while_nothing_uses_the_daemon() {
        let (b, _d) = broker();
        let idle = Idle::new(Some(Duration::from_secs(10)));
        assert!(!expires_within(&idle, &b, 9).await);
        // A connection held for an hour keeps it, and the wait starts again when it goes.
        let busy = idle.busy();
        assert!(!expires_within(&idle, &b, 3600).await);
        drop(busy);
        assert!(!expires_within(&idle, &b, 9).await);
        assert!(expires_within(&idle, &b, 2).await);
        // So does a live session.
        let session = b.open_session("s1").unwrap();
        assert!(!expires_within(&idle, &b, 3600).await);
        drop(session);
        assert!(expires_within(&idle, &b, 11).await);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_limit_it_never_expires() {
        let (b, _d) = broker();
        let idle = Idle::new(None);
        assert!(!expires_within(&idle, &b, 365 * 86400).await);
    }
}
