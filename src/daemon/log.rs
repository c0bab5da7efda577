//! `fsbroker log`: the daemon's audit stream. The daemon keeps its most recent audit events in
//! a ring, so that `log` can show what happened before it was asked; `log --follow` gets the
//! ring's events and then each new one, as it comes, until the client goes.
//!
//! A follower never makes the daemon buffer without bound: it reads from a queue of
//! [`FOLLOW_QUEUE`] events, and one that falls further behind misses the oldest and is told
//! how many (`{"missed": N}`), as the ring itself is when the broker's stream outruns it.
//!
//! - `{"op": "log", "server": ID?}` → `{"ok": true, "events": [...]}`, oldest first;
//! - `{"op": "log", "server": ID?, "follow": true}` → `{"ok": true, "following": true,
//!   "events": [...]}`, then one line per event, `{"event": {...}}`, or `{"missed": N}`.

use crate::audit::AuditEvent;
use crate::broker::Broker;
use crate::framing::{Frame, next_frame};
use crate::locks::lock;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::broadcast;

/// Events the ring keeps.
pub(crate) const RECENT: usize = 1000;

/// Events a follower may fall behind before it misses the oldest.
pub(crate) const FOLLOW_QUEUE: usize = 1024;

/// What a follower reads: an event, or how many it (or the ring) missed.
#[derive(Debug, Clone)]
enum Item {
    Event(Arc<Numbered>),
    Missed(u64),
}

/// The most recent audit events, and the queue that hands new ones to followers.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    inner: Arc<Mutex<Inner>>,
}

/// An event with its number in the ring: two events alike in every field (two refusals in
/// one millisecond) are still two, and a reader that sees one twice (a page that reconnects
/// and is sent the recent ones again) can tell.
#[derive(Debug)]
pub(crate) struct Numbered {
    seq: u64,
    event: AuditEvent,
}

impl std::ops::Deref for Numbered {
    type Target = AuditEvent;
    fn deref(&self) -> &AuditEvent {
        &self.event
    }
}

#[derive(Debug)]
struct Inner {
    recent: VecDeque<Arc<Numbered>>,
    /// The number the next event gets.
    next: u64,
    keep: usize,
    // Sent to while the ring's lock is held, so that a follower that copies the ring and
    // subscribes under the same lock sees every event once: no gap, no repeat.
    followers: broadcast::Sender<Item>,
}

impl Ring {
    /// A ring of the `RECENT` newest events of `broker`, filled by a task that runs as long as
    /// the broker does. Must run on a tokio runtime.
    pub(crate) fn start(broker: &Broker) -> Ring {
        let ring = Ring::new(RECENT, FOLLOW_QUEUE);
        let mut events = broker.audit_events();
        let filler = ring.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(e) => filler.push(e),
                    Err(broadcast::error::RecvError::Lagged(n)) => filler.missed(n),
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        ring
    }

    /// An empty ring that keeps `keep` events and lets followers fall `queue` behind.
    pub(crate) fn new(keep: usize, queue: usize) -> Ring {
        let (followers, _) = broadcast::channel(queue.max(1));
        Ring {
            inner: Arc::new(Mutex::new(Inner {
                recent: VecDeque::with_capacity(keep.min(RECENT)),
                next: 1,
                keep,
                followers,
            })),
        }
    }

    /// Adds an event, the oldest going when the ring is full.
    pub(crate) fn push(&self, event: AuditEvent) {
        let mut inner = lock(&self.inner);
        let seq = inner.next;
        inner.next += 1;
        let event = Arc::new(Numbered { seq, event });
        if inner.recent.len() >= inner.keep {
            inner.recent.pop_front();
        }
        if inner.keep > 0 {
            inner.recent.push_back(event.clone());
        }
        // No follower is no error.
        let _ = inner.followers.send(Item::Event(event));
    }

    /// Tells the followers that the ring missed `n` events of the broker's.
    fn missed(&self, n: u64) {
        tracing::warn!(missed = n, "the daemon's audit ring fell behind the broker");
        let inner = lock(&self.inner);
        let _ = inner.followers.send(Item::Missed(n));
    }

    /// The events kept, oldest first, of `server` only when given, as JSON.
    fn recent(&self, server: Option<&str>) -> Vec<Value> {
        let inner = lock(&self.inner);
        inner
            .recent
            .iter()
            .filter(|e| server.is_none_or(|s| e.server_id == s))
            .map(|e| event_json(e))
            .collect()
    }

    /// The answer to a `log` request: its first (or only) line, and for `follow` what streams
    /// the rest.
    pub(crate) fn answer(&self, request: super::protocol::Log) -> (Value, Option<Follow>) {
        if !request.follow {
            let events = self.recent(request.server.as_deref());
            return (json!({"ok": true, "events": events}), None);
        }
        let (events, follow) = self.follow(request.server);
        (
            json!({"ok": true, "following": true, "events": events}),
            Some(follow),
        )
    }

    /// The events kept (of `server` only, when given), oldest first, and the stream of those
    /// that come after them: no gap, no repeat.
    pub(crate) fn follow(&self, server: Option<String>) -> (Vec<Value>, Follow) {
        // The copy and the subscription under one lock: see `Inner::followers`.
        let inner = lock(&self.inner);
        let events: Vec<Value> = inner
            .recent
            .iter()
            .filter(|e| server.as_deref().is_none_or(|s| e.server_id == s))
            .map(|e| event_json(e))
            .collect();
        let follow = Follow {
            server,
            items: inner.followers.subscribe(),
        };
        (events, follow)
    }
}

/// What a follower gets next.
#[derive(Debug)]
pub(crate) enum Next {
    /// An event, as `log --json` prints it.
    Event(Value),
    /// How many events it (or the ring) missed.
    Missed(u64),
}

/// A follower's stream of new events.
#[derive(Debug)]
pub(crate) struct Follow {
    server: Option<String>,
    items: broadcast::Receiver<Item>,
}

impl Follow {
    /// Sends each new event (of the server asked for) as a line on `write` until the client
    /// closes its end (`read` ends), a write fails, or the ring goes. Lines the client sends
    /// meanwhile are read and ignored: a follower asks nothing more.
    pub(crate) async fn run(
        mut self,
        read: &mut (impl AsyncBufRead + Unpin),
        write: &mut (impl AsyncWrite + Unpin),
    ) {
        loop {
            let line = tokio::select! {
                frame = next_frame(read, super::line::MAX_LINE) => match frame {
                    Ok(Frame::Line(_) | Frame::TooLong(_)) => continue,
                    Ok(Frame::Eof) | Err(_) => return,
                },
                next = self.next() => match next {
                    Some(Next::Event(e)) => json!({"event": e}),
                    Some(Next::Missed(n)) => json!({"missed": n}),
                    None => return,
                },
            };
            if super::line::send(write, &line).await.is_err() {
                return;
            }
        }
    }

    /// The next event of the server asked for, or how many were missed; `None` once the
    /// ring is gone.
    pub(crate) async fn next(&mut self) -> Option<Next> {
        loop {
            return Some(match self.items.recv().await {
                Ok(Item::Event(e)) => {
                    if self.server.as_deref().is_some_and(|s| e.server_id != s) {
                        continue;
                    }
                    Next::Event(event_json(&e))
                }
                Ok(Item::Missed(n)) | Err(broadcast::error::RecvError::Lagged(n)) => {
                    Next::Missed(n)
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            });
        }
    }
}

/// One event as `log --json` prints it: the keys of an audit log line, with `outside` (how
/// many consent paths lay outside every root) for the outside paths the line hashes.
pub(crate) fn event_json(e: &Numbered) -> Value {
    let mut v = json!({
        "seq": e.seq,
        "time": rfc3339(e.time),
        "server": e.server_id,
        "method": e.method,
        "path": e.path,
        "outcome": e.outcome,
        "bytes": e.bytes,
        "durationMs": (e.duration.as_secs_f64() * 1e6).round() / 1e3,
    });
    if let Value::Object(m) = &mut v {
        if let Some(r) = e.reason {
            m.insert("reason".into(), json!(r.as_str()));
        }
        if let Some(i) = &e.identity {
            m.insert("identity".into(), json!(i));
        }
        if let Some(c) = &e.consent {
            m.insert("access".into(), json!(c.access.map(|a| a.as_str())));
            m.insert("approved".into(), json!(c.approved));
            m.insert("denied".into(), json!(c.denied));
            m.insert("outside".into(), json!(c.outside));
            m.insert(
                "decidedBy".into(),
                serde_json::to_value(&c.decided_by).unwrap_or(Value::Null),
            );
        }
    }
    v
}

/// A time in RFC 3339, UTC, to the millisecond.
fn rfc3339(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(t);
    let t = t.replace_millisecond(t.millisecond()).unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
