//! The fan-out: a task that collects raw events for the coalescing window, maps them to the
//! watches that may see them, and sends each session its `notifications/files/changed`
//! through a [`Sink`], the broker's outbound stream seen from below.

use super::{Delivery, RAW_CAPACITY, RawEvent, Watch, WatchHub};
use crate::access::Access;
use crate::path::MountPath;
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

/// The method of change notifications.
pub const CHANGED: &str = "notifications/files/changed";

/// Where the fan-out sends its notifications: the watches it serves and the outbound stream.
/// The broker's shared state implements it; the watcher never names the broker.
pub(crate) trait Sink: Send + Sync + 'static {
    /// The watches.
    fn hub(&self) -> &WatchHub;

    /// Sends a notification to a session. With a slot semaphore, the notification needs a
    /// free slot and returns false when there is none; without, it is always sent.
    fn notify(
        &self,
        server_id: &str,
        method: &str,
        params: Option<Value>,
        slots: Option<&Arc<Semaphore>>,
    ) -> bool;

    /// Delivers one change notification, paying any `overflow` the watch owes first.
    fn deliver(&self, d: &Delivery) {
        let Some(session) = d.watch.session.upgrade() else {
            return;
        };
        let sid = session.server_id();
        let slots = Some(&session.notify_slots);
        if d.watch.take_owed_overflow()
            && !self.notify(sid, CHANGED, Some(d.watch.overflow_params()), slots)
        {
            d.watch.owe_overflow();
            return;
        }
        if !self.notify(sid, CHANGED, Some(d.params.clone()), slots) {
            d.watch.owe_overflow();
        }
    }

    /// Sends every owed `overflow` that a slot can be found for.
    fn pay_overflows(&self) {
        for w in self.hub().all() {
            let Some(session) = w.session.upgrade() else {
                continue;
            };
            if w.take_owed_overflow()
                && !self.notify(
                    session.server_id(),
                    CHANGED,
                    Some(w.overflow_params()),
                    Some(&session.notify_slots),
                )
            {
                w.owe_overflow();
            }
        }
    }

    /// Ends a watch and tells its server why.
    fn end_watch(&self, id: &str, reason: &str) {
        if let Some(w) = self.hub().remove(id)
            && let Some(session) = w.session.upgrade()
        {
            let params = json!({"watchId": w.id, "path": w.path.to_string(), "event": "unwatched",
                "reason": reason, "timestamp": super::now()});
            self.notify(session.server_id(), CHANGED, Some(params), None);
        }
    }
}

/// Starts the task that turns raw events into notifications; returns its input. The task
/// holds the sink weakly, so it ends when the broker goes.
pub(crate) fn start<S: Sink>(sink: Weak<S>, window: Duration) -> mpsc::Sender<RawEvent> {
    let (tx, rx) = mpsc::channel(RAW_CAPACITY);
    // The watch is added from the blocking pool; the task belongs to the broker's runtime.
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn(run(sink, rx, window));
        }
        Err(_) => tracing::error!("no runtime for the watch dispatcher"),
    }
    tx
}

async fn run<S: Sink>(sink: Weak<S>, mut rx: mpsc::Receiver<RawEvent>, window: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let first = tokio::select! {
            ev = rx.recv() => match ev { Some(e) => Some(e), None => return },
            _ = tick.tick() => None,
        };
        let mut batch: Vec<RawEvent> = first.into_iter().collect();
        if !batch.is_empty() {
            let until = tokio::time::Instant::now() + window;
            while let Ok(Some(ev)) = tokio::time::timeout_at(until, rx.recv()).await {
                if batch.len() < RAW_CAPACITY {
                    batch.push(ev);
                } else if let Some(s) = sink.upgrade() {
                    // Dropped here means lost: the watches owe their servers a rescan.
                    s.hub().mark_lost();
                }
            }
        }
        let Some(sink) = sink.upgrade() else {
            return;
        };
        let mapped = tokio::task::spawn_blocking(move || {
            let hub = sink.hub();
            let lost = hub.take_lost();
            let deliveries = hub.map(&batch, lost, visible);
            for d in &deliveries {
                sink.deliver(d);
            }
            // Watches whose directory left its place end, and their servers are told.
            for id in hub.take_moved_out() {
                sink.end_watch(&id, "moved_out");
            }
            // Overflows owed while slots were taken are paid as soon as slots free up.
            sink.pay_overflows();
        })
        .await;
        if mapped.is_err() {
            tracing::warn!("watch dispatch failed");
        }
    }
}

/// Whether a change at `path` may be shown to the watch's session: the session is alive and a
/// grant covers the path. That the change's directory is still the one watched, at its place,
/// was checked by the hub before.
fn visible(w: &Watch, path: &MountPath) -> bool {
    let Some(session) = w.session.upgrade() else {
        return false;
    };
    session.grants().check(path, Access::Read).is_ok()
}
